//! The crate's integration tests, one module per file, in one test binary: one link instead of one per
//! file (each costs ~20–35 s of thin-LTO linking on 2 cores).

#[path = "../common/mod.rs"]
mod common;

mod behaviours;
mod config;
mod curve;
mod limits;
mod login;
mod recovery;
mod tcp;
