//! Data sources: the rows templates read (`table`), and how a shard hands them out (`feed`).

mod feed;
mod table;

pub use feed::DataUse;
pub(crate) use feed::{ClientData, Draw, Exhausted, Feeders};
pub use table::Format;
