//! knee's load engine: runs one *shard* — client groups started together — and returns a
//! mergeable [`ShardResult`]. No Python here; `crates/py` binds it.
//!
//! ```no_run
//! use knee_engine::{run, Spec};
//!
//! let spec = Spec::from_json(r#"{"groups": [{"name": "main", "clients": 50, "stop": {"total": 20000},
//!     "client": {"kind": "http", "url": "http://127.0.0.1:8080/"}}]}"#).unwrap();
//! let result = run(spec).unwrap();
//! println!("{}", result.summary_json());
//! ```
//!
//! Design: N runtime threads (`threads`), each a tokio current-thread runtime owning its share of the
//! clients (round-robin) and its own recorder (HdrHistograms, counters, series); the per
//! operation path takes no lock. Live snapshots read relaxed atomics plus each thread's
//! last-second histogram, handed over once a second. At the end the threads' recordings merge.

mod buckets;
mod cancel;
mod class;
mod clients;
mod counts;
mod data;
mod engine;
mod error;
mod histo;
mod limits;
mod oplog;
mod outcome;
mod pacer;
mod profile;
mod reason;
mod recorder;
mod result;
mod rng;
pub mod sockdiag;
mod source;
mod spec;
mod summary;
mod threads;

pub use buckets::Buckets;
pub use class::ErrorClass;
pub use clients::{grpc_compile, grpc_describe, grpc_reflect, GrpcMethod};
pub use counts::{GroupCounts, Outcomes, RequestCounts};
pub use data::{DataUse, Format};
pub use engine::{run, Engine, GroupSnapshot, Snapshot};
pub use error::{DecodeError, EngineError, MergeError, SpecError};
pub use histo::{new_histogram, HIGHEST_US};
pub use reason::{normalize, Reason, Reasons, MAX_REASONS};
pub use result::{GroupResult, Metric, RequestResult, ShardResult, ShardSpan, Tick, FORMAT_VERSION};
pub use spec::{
    ClientSpec, DataSpec, ExecSpec, FileCheck, GroupSpec, GrpcSpec, HttpSpec, MixOrder, OnExhausted, Order, PacerSpec,
    RateProfile, RequestSpec, Scope, Spec, StopRule, TcpSpec, ThinkRandom, TlsSpec, WorkerSpec,
};
pub use summary::{GroupSummary, LatencySummary, ReasonSummary, RequestSummary, SeriesPoint, StepSummary, Summary};
