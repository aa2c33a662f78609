//! The crate's integration tests, one module per file, in one test binary: one link instead of one per
//! file (each costs ~20–35 s of thin-LTO linking on 2 cores). A file that needs a process of its own (a
//! global allocator: engine's http_alloc.rs) stays a binary of its own beside this directory.

#[path = "../common/mod.rs"]
mod common;

mod data;
mod edges;
mod exec;
mod http;
mod http2;
mod pacer;
mod resend;
mod result;
mod tcp;
mod tls;
mod tls_client_auth;
