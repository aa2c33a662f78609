//! Per-thread recording: each worker thread owns one `Recorder` (no lock, no allocation per
//! operation except on the error path), plus shared atomics for live snapshots.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::clients::{OpReport, Outcome};
use crate::histo;
use crate::result::{GroupResult, Tick, MAX_SAMPLES};

/// One group's recording on one thread.
pub(crate) struct GroupRec {
    pub res: GroupResult,
    /// Latency of the current live interval (handed to `Live` once a second).
    pub recent: Histogram<u64>,
    /// (client index within the shard's group, succeeded count), pushed when a client ends.
    pub per_client: Vec<(u64, u64)>,
    pub last_end: Option<Instant>,
}

impl GroupRec {
    pub fn new(name: &str, kind: &str) -> GroupRec {
        GroupRec {
            res: GroupResult::new(name, kind, 0),
            recent: histo::new_histogram(),
            per_client: Vec::new(),
            last_end: None,
        }
    }

    /// Record one measured operation ending in interval `tick`. `latency` counts from the intended
    /// start (open loop) or the actual start (closed loop); `uncorrected` (open loop only) from the
    /// actual start.
    #[inline]
    pub fn record(
        &mut self,
        rep: OpReport,
        latency: Duration,
        uncorrected: Option<Duration>,
        tick: usize,
        client: u64,
        end: Instant,
    ) -> bool {
        if self.res.series.len() <= tick {
            self.res.series.resize(tick + 1, Tick::default());
        }
        self.last_end = Some(end);
        if let Some(c) = rep.connect {
            histo::record(&mut self.res.connect, c);
        }
        if let Some(t) = rep.ttfb {
            histo::record(&mut self.res.ttfb, t);
        }
        if let (Some(u), Outcome::Ok | Outcome::Fail(..)) = (uncorrected, &rep.outcome) {
            histo::record(&mut self.res.latency_uncorrected, u);
        }
        if let Outcome::Ok | Outcome::Fail(..) = &rep.outcome {
            let whole = uncorrected.unwrap_or(latency);
            histo::record(
                &mut self.res.processing,
                whole.saturating_sub(rep.connect.unwrap_or_default()),
            );
        }
        let series = &mut self.res.series[tick];
        match rep.outcome {
            Outcome::Ok => {
                self.res.succeeded += 1;
                series.succeeded += 1;
                histo::record(&mut self.res.latency, latency);
                histo::record(&mut self.recent, latency);
                true
            }
            Outcome::Fail(class, msg) => {
                self.res.failed += 1;
                series.failed += 1;
                histo::record(&mut self.res.latency, latency);
                histo::record(&mut self.recent, latency);
                self.res.failures[class.index()] += 1;
                let samples = &mut self.res.error_samples[class.index()];
                if samples.len() < MAX_SAMPLES {
                    samples.push(msg);
                }
                false
            }
            Outcome::Hung => {
                self.res.hung += 1;
                series.hung += 1;
                if self.res.hung_clients.last() != Some(&client) {
                    self.res.hung_clients.push(client);
                }
                false
            }
            Outcome::Abandoned => false,
        }
    }
}

/// Shared live counters of one group (relaxed atomics; read by `snapshot()`).
pub(crate) struct LiveGroup {
    pub succeeded: AtomicU64,
    pub failed: AtomicU64,
    pub hung: AtomicU64,
    pub in_flight: AtomicI64,
    /// Each thread's latency histogram of its last completed second.
    pub recent: Vec<Mutex<Option<Histogram<u64>>>>,
}

impl LiveGroup {
    pub fn new(threads: usize) -> LiveGroup {
        LiveGroup {
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            hung: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            recent: (0..threads).map(|_| Mutex::new(None)).collect(),
        }
    }

    #[inline]
    pub fn count(&self, outcome: &Outcome) {
        let c = match outcome {
            Outcome::Ok => &self.succeeded,
            Outcome::Fail(..) => &self.failed,
            Outcome::Hung => &self.hung,
            Outcome::Abandoned => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// (p50, p99) in µs over every thread's last second; zeros before the first second.
    pub fn recent_percentiles(&self) -> (u64, u64) {
        let mut all = histo::new_histogram();
        for slot in &self.recent {
            if let Some(h) = slot.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                let _ = all.add(h);
            }
        }
        if all.is_empty() {
            (0, 0)
        } else {
            (all.value_at_quantile(0.5), all.value_at_quantile(0.99))
        }
    }
}
