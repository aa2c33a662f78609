//! The operations log (`operations_log` in the spec, `--operations-log FILE`): every measured operation as one
//! fixed-size record, written as the run goes (docs/engine-spec.md "The operations log").
//!
//! The file is a header line of JSON (the format, the shard's start, the groups and their requests, the classes
//! and outcomes the small numbers stand for), then records of `RECORD` bytes, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | u64: µs from the shard's start to the operation's start (its intended start in an open loop) |
//! | 8..12 | u32: latency, µs (from that start to the end) |
//! | 12..16 | u32: µs it started after its intended start (open loop; 0 in a closed loop) |
//! | 16..20 | u32: the client's number in its group (from 0, over every shard of a distributed run) |
//! | 20..24 | u32: bytes sent |
//! | 24..28 | u32: bytes received |
//! | 28..30 | u16: the request's index in its group's mix (0 without a mix) |
//! | 30 | u8: the group's index |
//! | 31 | u8: outcome: 0 succeeded, 1 failed, 2 hung, 3 abandoned |
//! | 32 | u8: the failure's class (its index in the header's `classes`), 255 for none |
//! | 33..40 | reserved, 0 |
//!
//! Each runtime thread keeps its records in a buffer of its own and appends whole buffers to the file under a
//! lock (when one holds `FLUSH_AT` bytes, at a cut and at the thread's end), so records are never torn apart and
//! the file's order is by thread, not by time: a reader sorts by start. A knee killed mid-run leaves a file of whole
//! records but for the last write, which a reader cuts to a whole number of records.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::class::ErrorClass;
use crate::outcome::Outcome;

/// Bytes of one record.
pub const RECORD: usize = 40;
/// A thread's buffer is appended to the file once it holds this many bytes.
const FLUSH_AT: usize = 64 * 1024;
/// The header's `format` and `version`.
const FORMAT: &str = "knee-operations";
const VERSION: u32 = 1;

/// The log file of a shard, shared by its threads.
pub(crate) struct OpLog {
    file: Mutex<File>,
    start: OnceLock<Instant>,
    /// The first write that failed (the disk filled up): the log stops there, its file ending at the last whole
    /// write (nothing reads this yet: a reader sees fewer rows than the step's operations).
    error: OnceLock<String>,
}

impl OpLog {
    /// Create (or truncate) `path`; its header is written by `begin`.
    pub fn create(path: &str) -> Result<Arc<OpLog>, String> {
        let file = File::create(path).map_err(|e| {
            format!("operations_log {path:?}: cannot create it ({e}); give a file in a directory knee may write")
        })?;
        Ok(Arc::new(OpLog {
            file: Mutex::new(file),
            start: OnceLock::new(),
            error: OnceLock::new(),
        }))
    }

    /// Write the header, at the shard's common start: `groups` are (name, request names) in the spec's order.
    pub fn begin(&self, start: Instant, started_unix: f64, groups: &[(String, Vec<String>)]) {
        let _ = self.start.set(start);
        let header = serde_json::json!({
            "format": FORMAT,
            "version": VERSION,
            "record_bytes": RECORD,
            "started_unix": started_unix,
            "groups": groups.iter().map(|(g, _)| g).collect::<Vec<_>>(),
            "requests": groups.iter().map(|(_, r)| r).collect::<Vec<_>>(),
            "outcomes": ["succeeded", "failed", "hung", "abandoned"],
            "classes": ErrorClass::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        });
        self.write(format!("{header}\n").as_bytes());
    }

    fn write(&self, bytes: &[u8]) {
        if self.error.get().is_some() {
            return;
        }
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(bytes) {
            let _ = self
                .error
                .set(format!("writing the operations log failed: {e}; it ends there"));
        }
    }
}

/// One thread's records of one group, appended to the shared log in whole buffers.
pub(crate) struct OpBuf {
    log: Arc<OpLog>,
    group: u8,
    buf: Vec<u8>,
}

/// What one record says of an operation.
pub(crate) struct OpRecord {
    /// Where its latency counts from, and its end.
    pub from: Instant,
    pub end: Instant,
    /// How long after `from` it actually started.
    pub wait: Duration,
    pub client: u64,
    pub request: usize,
    pub sent: u64,
    pub received: u64,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl OpBuf {
    pub fn new(log: Arc<OpLog>, group: usize) -> OpBuf {
        OpBuf {
            log,
            group: u8::try_from(group).unwrap_or(u8::MAX),
            buf: Vec::with_capacity(FLUSH_AT + RECORD),
        }
    }

    /// The same log, for a fresh recording (a cut).
    pub fn again(&self) -> OpBuf {
        OpBuf::new(self.log.clone(), self.group as usize)
    }

    pub fn add(&mut self, outcome: &Outcome, r: &OpRecord) {
        let Some(&start) = self.log.start.get() else { return };
        let (code, class) = match outcome {
            Outcome::Ok => (0u8, u8::MAX),
            Outcome::Fail(c) => (1, u8::try_from(c.index()).unwrap_or(u8::MAX)),
            Outcome::Hung => (2, u8::MAX),
            Outcome::Abandoned => (3, u8::MAX),
        };
        let at = u64::try_from(r.from.saturating_duration_since(start).as_micros()).unwrap_or(u64::MAX);
        let b = &mut self.buf;
        b.extend_from_slice(&at.to_le_bytes());
        b.extend_from_slice(&micros(r.end.saturating_duration_since(r.from)).to_le_bytes());
        b.extend_from_slice(&micros(r.wait).to_le_bytes());
        b.extend_from_slice(&u32::try_from(r.client).unwrap_or(u32::MAX).to_le_bytes());
        b.extend_from_slice(&u32::try_from(r.sent).unwrap_or(u32::MAX).to_le_bytes());
        b.extend_from_slice(&u32::try_from(r.received).unwrap_or(u32::MAX).to_le_bytes());
        b.extend_from_slice(&u16::try_from(r.request).unwrap_or(u16::MAX).to_le_bytes());
        b.extend_from_slice(&[self.group, code, class, 0, 0, 0, 0, 0, 0, 0]);
        if b.len() >= FLUSH_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.log.write(&self.buf);
            self.buf.clear();
        }
    }
}

impl Drop for OpBuf {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_forty_bytes_and_says_what_happened() {
        let path = std::env::temp_dir().join(format!("knee-oplog-{}.bin", std::process::id()));
        let log = OpLog::create(path.to_str().unwrap()).unwrap();
        let t0 = Instant::now();
        log.begin(t0, 1_700_000_000.5, &[("main".into(), vec!["get".into()])]);
        {
            let mut buf = OpBuf::new(log.clone(), 0);
            let rec = OpRecord {
                from: t0 + Duration::from_micros(1500),
                end: t0 + Duration::from_micros(4000),
                wait: Duration::from_micros(20),
                client: 7,
                request: 0,
                sent: 100,
                received: 2000,
            };
            buf.add(&Outcome::Ok, &rec);
            buf.add(&Outcome::Fail(ErrorClass::ALL[3]), &rec);
        }
        let bytes = std::fs::read(&path).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let header: serde_json::Value = serde_json::from_slice(&bytes[..nl]).unwrap();
        assert_eq!(header["format"], "knee-operations");
        assert_eq!(header["record_bytes"], 40);
        let records = &bytes[nl + 1..];
        assert_eq!(records.len(), 2 * RECORD);
        let r = &records[..RECORD];
        assert_eq!(u64::from_le_bytes(r[0..8].try_into().unwrap()), 1500);
        assert_eq!(u32::from_le_bytes(r[8..12].try_into().unwrap()), 2500);
        assert_eq!(u32::from_le_bytes(r[12..16].try_into().unwrap()), 20);
        assert_eq!(u32::from_le_bytes(r[16..20].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(r[24..28].try_into().unwrap()), 2000);
        assert_eq!((r[30], r[31], r[32]), (0, 0, 255));
        let f = &records[RECORD..];
        assert_eq!((f[31], f[32]), (1, 3));
        let _ = std::fs::remove_file(path);
    }
}
