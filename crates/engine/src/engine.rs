//! `Engine`: starts a shard's worker threads, answers live snapshots, stops, and collects the result.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::watch;

use crate::clients::{Prepared, SPAWN_FDS};
use crate::error::EngineError;
use crate::limits;
use crate::recorder::LiveGroup;
use crate::result::{GroupResult, ShardResult};
use crate::spec::{Spec, StopRule};
use crate::worker::{run_thread, GroupShared, Shared, ThreadOutput};

/// Time between `Engine::start` returning and the common start instant (threads get ready).
const LEAD_TIME: Duration = Duration::from_millis(5);

#[derive(Default)]
struct Done {
    finished: bool,
    result: Option<ShardResult>,
}

/// A running shard. `Send + Sync`: snapshot/stop/wait/result may be called from any thread.
pub struct Engine {
    shared: Arc<Shared>,
    done: Arc<(Mutex<Done>, Condvar)>,
    coordinator: Mutex<Option<JoinHandle<()>>>,
}

/// A live view of one group.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupSnapshot {
    pub name: String,
    pub succeeded: u64,
    pub failed: u64,
    pub hung: u64,
    pub in_flight: i64,
    /// Latency percentiles over the last completed second, µs (0 before the first second).
    pub p50_us: u64,
    pub p99_us: u64,
}

/// A live view of the shard (`snapshot()`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Snapshot {
    pub elapsed_s: f64,
    pub finished: bool,
    pub groups: Vec<GroupSnapshot>,
}

impl Snapshot {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot is always serializable")
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Engine {
    /// Validate, prepare every group (body files, addresses, TLS), and start the worker threads.
    pub fn start(spec: Spec) -> Result<Engine, EngineError> {
        spec.validate()?;
        let mut preps = Vec::with_capacity(spec.groups.len());
        let mut fds = 64u64;
        for (i, g) in spec.groups.iter().enumerate() {
            let prep = Prepared::new(&g.client, &format!("groups[{i}].client"))?;
            fds = fds.saturating_add(g.clients.saturating_mul(prep.fds_per_client()));
            preps.push(prep);
        }
        let total_clients: u64 = spec.groups.iter().map(|g| g.clients).sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = if spec.threads == 0 { cores } else { spec.threads };
        let threads = threads.clamp(1, total_clients.clamp(1, 1024) as usize);
        limits::ensure_open_files(fds.saturating_add(threads as u64 * SPAWN_FDS))?;

        let mut delay = LEAD_TIME;
        let now_unix = unix_now();
        if let Some(at) = spec.start_at_unix {
            if at > now_unix + delay.as_secs_f64() {
                delay = Duration::from_secs_f64(at - now_unix);
            }
        }
        let start = Instant::now() + delay;
        // Whole microseconds: a decimal that short parses back to the same f64 (to_bytes is lossless).
        let started_unix = ((now_unix + delay.as_secs_f64()) * 1e6).round() / 1e6;
        let groups = spec
            .groups
            .iter()
            .zip(preps)
            .map(|(g, prep)| {
                let measured_start = start + Duration::from_millis(g.warmup_ms);
                let end_at = match g.stop {
                    StopRule::DurationMs(ms) => Some(measured_start + Duration::from_millis(ms)),
                    _ => None,
                };
                GroupShared {
                    spec: g.clone(),
                    prep,
                    live: LiveGroup::new(threads),
                    tickets: AtomicU64::new(0),
                    measured_start,
                    end_at,
                }
            })
            .collect();
        // Round-robin every group's clients over the threads.
        let mut plan: Vec<Vec<(usize, u64)>> = vec![Vec::new(); threads];
        let mut k = 0usize;
        for (gi, g) in spec.groups.iter().enumerate() {
            for c in 0..g.clients {
                plan[k % threads].push((gi, c));
                k += 1;
            }
        }
        let (stop_tx, _) = watch::channel(false);
        let (bg_stop_tx, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            start,
            interval: Duration::from_millis(spec.interval_ms),
            groups,
            stop_tx,
            stopped: AtomicBool::new(false),
            bg_stop_tx,
            bg_stopped: AtomicBool::new(false),
            foreground_left: AtomicU64::new(threads as u64),
        });
        let mut handles = Vec::with_capacity(threads);
        for (t, clients) in plan.into_iter().enumerate() {
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("knee-worker-{t}"))
                .spawn(move || run_thread(sh, t, clients))
                .map_err(|e| EngineError::Thread(e.to_string()));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.stop_all();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        let done: Arc<(Mutex<Done>, Condvar)> = Arc::default();
        let (sh, dn) = (shared.clone(), done.clone());
        let coordinator = std::thread::Builder::new()
            .name("knee-coordinator".into())
            .spawn(move || {
                let outputs: Vec<ThreadOutput> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
                let result = assemble(&sh, &spec, started_unix, outputs);
                let (lock, cv) = &*dn;
                let mut d = lock.lock().unwrap_or_else(|e| e.into_inner());
                d.result = Some(result);
                d.finished = true;
                cv.notify_all();
            })
            .map_err(|e| EngineError::Thread(e.to_string()))?;
        Ok(Engine {
            shared,
            done,
            coordinator: Mutex::new(Some(coordinator)),
        })
    }

    /// Live counts per group; cheap (atomics, plus a merge of last-second histograms).
    pub fn snapshot(&self) -> Snapshot {
        let finished = self.done.0.lock().unwrap_or_else(|e| e.into_inner()).finished;
        let elapsed_s = Instant::now()
            .saturating_duration_since(self.shared.start)
            .as_secs_f64();
        let groups = self
            .shared
            .groups
            .iter()
            .map(|g| {
                let (p50_us, p99_us) = g.live.recent_percentiles();
                GroupSnapshot {
                    name: g.spec.name.clone(),
                    succeeded: g.live.succeeded.load(Ordering::Relaxed),
                    failed: g.live.failed.load(Ordering::Relaxed),
                    hung: g.live.hung.load(Ordering::Relaxed),
                    in_flight: g.live.in_flight.load(Ordering::Relaxed),
                    p50_us,
                    p99_us,
                }
            })
            .collect();
        Snapshot {
            elapsed_s,
            finished,
            groups,
        }
    }

    /// End the run early: in-flight operations are abandoned, exec process groups killed. Idempotent.
    pub fn stop(&self) {
        self.shared.stop_all();
    }

    /// Wait until the run has finished (None: no time limit). True once finished.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let (lock, cv) = &*self.done;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let guard = match timeout {
            None => cv.wait_while(guard, |d| !d.finished).unwrap_or_else(|e| e.into_inner()),
            Some(t) => {
                cv.wait_timeout_while(guard, t, |d| !d.finished)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        guard.finished
    }

    /// The result, once finished (a clone; may be called again).
    pub fn result(&self) -> Option<ShardResult> {
        self.done.0.lock().unwrap_or_else(|e| e.into_inner()).result.clone()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
        if let Some(h) = self.coordinator.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// Merge the threads' recordings into the shard result.
fn assemble(shared: &Shared, spec: &Spec, started_unix: f64, outputs: Vec<ThreadOutput>) -> ShardResult {
    let mut groups = Vec::with_capacity(spec.groups.len());
    for (gi, g) in shared.groups.iter().enumerate() {
        let mut res = GroupResult::new(&g.spec.name, g.spec.client.kind(), g.spec.clients);
        let mut per_client = vec![0u64; g.spec.clients as usize];
        let mut last_end: Option<Instant> = None;
        for out in &outputs {
            let part = &out.groups[gi];
            // Threads record with the same kind and bounds, so this cannot fail.
            let _ = res.absorb(&part.res);
            for &(c, n) in &part.per_client {
                per_client[c as usize] = n;
            }
            last_end = last_end.max(part.last_end);
        }
        res.per_client = per_client;
        res.elapsed_s = match (g.end_at, last_end) {
            // A duration stop measures its whole window unless stopped early.
            (Some(e), _) if !shared.stopped.load(Ordering::Relaxed) => (e - g.measured_start).as_secs_f64(),
            (_, Some(end)) => end.saturating_duration_since(g.measured_start).as_secs_f64(),
            (_, None) => 0.0,
        };
        groups.push(res);
    }
    ShardResult {
        started_unix,
        elapsed_s: Instant::now().saturating_duration_since(shared.start).as_secs_f64(),
        interval_s: spec.interval_ms as f64 / 1000.0,
        stopped: shared.stopped.load(Ordering::Relaxed),
        groups,
    }
}

/// Run a shard to its end (blocking).
pub fn run(spec: Spec) -> Result<ShardResult, EngineError> {
    let engine = Engine::start(spec)?;
    engine.wait(None);
    Ok(engine.result().expect("a finished engine has a result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Engine>();
    }
}
