//! The engine's typed errors. Each `Display` is one sentence a user can act on.

use thiserror::Error;

/// A mistake in the spec: names the key, the value and the fix.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct SpecError(pub String);

impl SpecError {
    pub(crate) fn new(msg: impl Into<String>) -> SpecError {
        SpecError(msg.into())
    }
}

/// Why a shard could not start.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{key}: cannot read body_file {path:?} ({source}); fix the path or the file's permissions")]
    BodyFile {
        key: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{key}: cannot resolve {addr:?} ({reason}); use a reachable host:port")]
    Resolve { key: String, addr: String, reason: String },
    #[error("{key}: cannot build the TLS client ({reason})")]
    Tls { key: String, reason: String },
    #[error(
        "the clients need about {needed} open files but the limit is {limit}; raise it with `ulimit -n {needed}` \
         (or run fewer clients per machine)"
    )]
    FdLimit { needed: u64, limit: u64 },
    #[error("cannot start the engine's runtime threads ({0})")]
    Thread(String),
    #[error("{0}")]
    Cut(String),
    /// A worker program did not start, or did not answer its start message.
    #[error("{0}")]
    Worker(String),
    /// The barrier given to `Engine::start_after` said not to start (a distributed step stopped early).
    #[error("{0}")]
    Barrier(String),
}

/// `ShardResult::from_bytes` could not decode its input.
#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("the result bytes are not valid result JSON ({0})")]
    Json(#[from] serde_json::Error),
    #[error("the result has format version {found}, this engine reads version {expected}")]
    Version { found: u32, expected: u32 },
    #[error("histogram {0:?} in the result is not valid base64 of HdrHistogram V2 ({1})")]
    Histogram(String, String),
    #[error("unknown error class {0:?} in the result")]
    Class(String),
}

/// `ShardResult::merge` met two results that do not belong together.
#[derive(Debug, Error, PartialEq)]
pub enum MergeError {
    #[error(
        "cannot merge results with different intervals ({0} s and {1} s); run both shards with the same interval_ms"
    )]
    Interval(f64, f64),
    #[error("group {name:?} is of kind {a:?} in one result and {b:?} in the other")]
    Kind { name: String, a: String, b: String },
    #[error("cannot add histograms of group {0:?} ({1})")]
    Histogram(String, String),
}
