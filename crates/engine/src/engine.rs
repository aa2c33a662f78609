//! `Engine`: starts a shard's runtime threads, answers live snapshots, stops, and collects the result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::watch;

use crate::clients::{Prepared, SPAWN_FDS};
use crate::counts::Outcomes;
use crate::data::Feeders;
use crate::error::{EngineError, SpecError};
use crate::limits;
use crate::oplog::OpLog;
use crate::profile::Curve;
use crate::recorder::LiveGroup;
use crate::result::{GroupResult, ShardResult, ShardSpan, Tick};
use crate::spec::Spec;
use crate::threads::{panic_text, run_thread, Gate, GroupShared, Shared, ThreadOutput};

/// How long `cut` waits for every thread to hand over its recording.
const CUT_WAIT: Duration = Duration::from_secs(10);

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
    spec: Spec,
    threads: usize,
    started_unix: f64,
    /// Start of the current window: the start, or the last `cut`.
    window: Arc<Mutex<Instant>>,
}

/// A live view of one group.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupSnapshot {
    pub name: String,
    /// Operations ended so far (flattened: `succeeded`, `failed` … stand beside `name`).
    #[serde(flatten)]
    pub outcomes: Outcomes,
    pub in_flight: i64,
    /// Open loop: arrivals that started late, and of those the ones a client was free for (knee's lag), counted as
    /// their operations end (as the result counts them; those in flight are not yet).
    pub late: u64,
    pub lagged: u64,
    /// Latency percentiles over the last completed second, µs (0 before the first second).
    pub p50_us: u64,
    pub p99_us: u64,
    /// Failures so far by class (the classes with some only), as the result's reasons will group them.
    pub failed_by_class: BTreeMap<&'static str, u64>,
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
    /// Validate, prepare every group (body files, addresses, TLS), and start the runtime threads.
    pub fn start(spec: Spec) -> Result<Engine, EngineError> {
        Engine::start_after(spec, || Ok(()))
    }

    /// As `start`, but once every thread is ready (worker programs started and answering) call
    /// `barrier` and start the clients when it returns: shards on many machines, each ready, released
    /// together. An error from `barrier` ends the threads (their worker programs too) and is returned.
    pub fn start_after(spec: Spec, barrier: impl FnOnce() -> Result<(), EngineError>) -> Result<Engine, EngineError> {
        spec.validate()?;
        let oplog = match &spec.operations_log {
            Some(path) => Some(OpLog::create(path).map_err(SpecError::new)?),
            None => None,
        };
        let feeders = Feeders::new(&spec.data, spec.seed)?;
        let mut preps = Vec::with_capacity(spec.groups.len());
        let mut fds = 64u64;
        for (i, g) in spec.groups.iter().enumerate() {
            let prep = Prepared::new(&g.client, g.clients, &feeders, &format!("groups[{i}].client"))?;
            prep.start_turn_at(g.client_offset);
            fds = fds.saturating_add(prep.fds(g.clients));
            preps.push(prep);
        }
        let total_clients: u64 = spec.groups.iter().map(|g| g.clients).sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = if spec.threads == 0 { cores } else { spec.threads };
        let threads = threads.clamp(1, total_clients.clamp(1, 1024) as usize);
        limits::ensure_open_files(fds.saturating_add(threads as u64 * SPAWN_FDS))?;

        let groups = spec
            .groups
            .iter()
            .zip(preps)
            .enumerate()
            .map(|(gi, (g, prep))| GroupShared {
                spec: g.clone(),
                prep,
                live: LiveGroup::new(threads),
                tickets: AtomicU64::new(0),
                clock: OnceLock::new(),
                ran_out: OnceLock::new(),
                data_stop: AtomicBool::new(false),
                clients_left: AtomicU64::new(g.clients),
                in_flight: AtomicUsize::new(0),
                arrival_seed: crate::rng::splitmix(spec.seed ^ crate::rng::splitmix(gi as u64)),
                clients_curve: match &g.pacer {
                    crate::spec::PacerSpec::Closed { profile: Some(p) } => Some(Curve::new(p)),
                    _ => None,
                },
            })
            .collect();
        // Round-robin every group's clients over the threads; a worker group with fewer processes than
        // threads over as many threads as it has processes (each thread runs its own processes); an HTTP/2
        // group's clients by connection (client c on connection c % C), a connection's on one thread.
        let mut plan: Vec<Vec<(usize, u64)>> = vec![Vec::new(); threads];
        let mut k = 0usize;
        for (gi, g) in spec.groups.iter().enumerate() {
            let connections = match &g.client {
                crate::spec::ClientSpec::Http(h) => h.shared_connections(g.clients),
                _ => None,
            };
            let over = hosting_threads(&g.client, threads).min(connections.unwrap_or(u64::MAX) as usize);
            for c in 0..g.clients {
                let t = match connections {
                    Some(n) => (c % n) as usize % over,
                    None if over < threads => c as usize % over,
                    None => k % threads,
                };
                plan[t].push((gi, c));
                k += 1;
            }
        }
        // Only threads with clients run: one with none (the clients of a shared HTTP/2 connection, or of fewer
        // worker processes than threads, are on one) would end at once and never answer a cut.
        plan.retain(|p| !p.is_empty());
        if plan.is_empty() {
            plan.push(Vec::new());
        }
        let threads = plan.len();
        let (stop_tx, _) = watch::channel(false);
        let (bg_stop_tx, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            start: OnceLock::new(),
            threads,
            interval: Duration::from_millis(spec.interval_ms),
            groups,
            stop_tx,
            stopped: AtomicBool::new(false),
            bg_stop_tx,
            bg_stopped: AtomicBool::new(false),
            foreground_left: AtomicU64::new(threads as u64),
            has_foreground: spec.groups.iter().any(|g| !g.stop.is_background()),
            cut_tx: watch::channel(None).0,
            cut_reply: Mutex::new(None),
            feeders,
            oplog,
            lost: Mutex::default(),
        });
        // The threads get ready (worker programs started and answering), then wait at the gate for the
        // common start, which is set only once every one of them is ready.
        let gate = Arc::new(Gate::default());
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), EngineError>>();
        let mut handles = Vec::with_capacity(threads);
        for (t, clients) in plan.into_iter().enumerate() {
            let (sh, gt, ready) = (shared.clone(), gate.clone(), ready_tx.clone());
            // Subscribed here, before any cut can be sent, so a thread never misses one.
            let cuts = shared.cut_tx.subscribe();
            let h = std::thread::Builder::new()
                .name(format!("knee-engine-{t}"))
                .spawn(move || run_thread(sh, t, clients, cuts, &ready, &gt))
                .map_err(|e| EngineError::Thread(e.to_string()));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    gate.set(false);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        let mut failure = None;
        for _ in 0..threads {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    failure.get_or_insert(e);
                }
                Err(_) => {
                    failure.get_or_insert(EngineError::Thread("a runtime thread ended before it was ready".into()));
                }
            }
        }
        let failure = match failure {
            Some(e) => Some(e),
            None => barrier().err(),
        };
        if let Some(e) = failure {
            gate.set(false);
            for h in handles {
                let _ = h.join();
            }
            return Err(e);
        }
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
        let _ = shared.start.set(start);
        for g in &shared.groups {
            g.set_start(start);
        }
        if let Some(log) = &shared.oplog {
            let names: Vec<_> = shared
                .groups
                .iter()
                .map(|g| (g.spec.name.clone(), g.prep.request_names()))
                .collect();
            log.begin(start, started_unix, &names);
        }
        gate.set(true);
        let done: Arc<(Mutex<Done>, Condvar)> = Arc::default();
        let window = Arc::new(Mutex::new(start));
        let (sh, dn, sp, win) = (shared.clone(), done.clone(), spec.clone(), window.clone());
        let coordinator = std::thread::Builder::new()
            .name("knee-coordinator".into())
            .spawn(move || {
                let mut outputs: Vec<ThreadOutput> = Vec::with_capacity(handles.len());
                for (t, h) in handles.into_iter().enumerate() {
                    match h.join() {
                        Ok(o) => outputs.push(o),
                        Err(p) => sh.lose(
                            &format!("runtime thread {t} with its clients"),
                            &panic_text(&*p),
                            "what they measured and would have run is",
                        ),
                    }
                }
                let from = *win.lock().unwrap_or_else(|e| e.into_inner());
                let result = assemble(&sh, &sp, started_unix, from, None, outputs);
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
            spec,
            threads,
            started_unix,
            window,
        })
    }

    /// The result of the window since the start or the last cut, while the shard keeps running:
    /// operations in flight end in the next window, so the windows add up to the whole run. Only
    /// for a shard of background groups (`while_others` only, which run until `stop()`), such as a
    /// baseload kept running across a sweep's steps.
    pub fn cut(&self) -> Result<ShardResult, EngineError> {
        if self.shared.groups.iter().any(|g| !g.spec.stop.is_background()) {
            return Err(EngineError::Cut(
                "cut() needs a shard whose groups all have the while_others stop".into(),
            ));
        }
        if self.shared.stopped.load(Ordering::Relaxed) {
            return Err(EngineError::Cut(
                "the shard was stopped: take its result() instead".into(),
            ));
        }
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let at = Instant::now().max(self.shared.start());
        let (tx, rx) = mpsc::channel();
        *self.shared.cut_reply.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        self.shared.cut_tx.send_replace(Some(at));
        let mut outputs = Vec::with_capacity(self.threads);
        let deadline = Instant::now() + CUT_WAIT;
        while outputs.len() < self.threads {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(o) => outputs.push(o),
                Err(_) => {
                    return Err(EngineError::Cut(
                        "a runtime thread did not answer the cut within 10 s".into(),
                    ))
                }
            }
        }
        *self.shared.cut_reply.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let result = assemble(&self.shared, &self.spec, self.started_unix, *window, Some(at), outputs);
        *window = at;
        Ok(result)
    }

    /// Live counts per group; cheap (atomics, plus a merge of last-second histograms).
    pub fn snapshot(&self) -> Snapshot {
        let finished = self.done.0.lock().unwrap_or_else(|e| e.into_inner()).finished;
        let elapsed_s = Instant::now()
            .saturating_duration_since(self.shared.start())
            .as_secs_f64();
        let groups = self
            .shared
            .groups
            .iter()
            .map(|g| {
                let (p50_us, p99_us) = g.live.recent_percentiles();
                let (outcomes, failed_by_class) = g.live.outcomes();
                GroupSnapshot {
                    name: g.spec.name.clone(),
                    outcomes,
                    in_flight: g.live.in_flight.load(Ordering::Relaxed),
                    late: g.live.late.load(Ordering::Relaxed),
                    lagged: g.live.lagged.load(Ordering::Relaxed),
                    p50_us,
                    p99_us,
                    failed_by_class,
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

/// Merge the threads' recordings of the window from `from` (the start or the last cut) into a
/// shard result; `cut` = the window ends at a cut, not at the shard's end.
fn assemble(
    shared: &Shared,
    spec: &Spec,
    started_unix: f64,
    from: Instant,
    cut: Option<Instant>,
    outputs: Vec<ThreadOutput>,
) -> ShardResult {
    let mut groups = Vec::with_capacity(spec.groups.len());
    for (gi, g) in shared.groups.iter().enumerate() {
        let mut res = GroupResult::new(&g.spec.name, g.spec.client.kind(), g.spec.clients);
        let mut per_client = vec![0u64; g.spec.clients as usize];
        let mut last_end: Option<Instant> = None;
        let mut origin = g.measured_start().max(from);
        for out in &outputs {
            let part = &out.groups[gi];
            // Threads record with the same kind and bounds, so this cannot fail.
            let _ = res.absorb(&part.res);
            for &(c, n) in &part.per_client {
                per_client[c as usize] = n;
            }
            last_end = last_end.max(part.last_end);
            origin = origin.max(part.origin);
        }
        res.counts.per_client = per_client;
        res.counts.ran_out = g.ran_out.get().cloned();
        res.counts.elapsed_s = match (cut, g.end_at(), last_end) {
            (Some(at), _, _) => at.saturating_duration_since(origin).as_secs_f64(),
            // A duration stop measures its whole window unless stopped early (by `stop()`, or its data running out).
            (None, Some(e), _) if !shared.stopped.load(Ordering::Relaxed) && !g.data_stop.load(Ordering::Relaxed) => {
                e.saturating_duration_since(origin).as_secs_f64()
            }
            (None, _, Some(end)) => end.saturating_duration_since(origin).as_secs_f64(),
            (None, _, None) => 0.0,
        };
        // The series covers every whole interval of the measured time, those in which nothing ended too (a group
        // stalled from a spike to its end): zeros, not missing intervals.
        let whole = (res.counts.elapsed_s * 1000.0 / spec.interval_ms as f64 + 1e-6).floor() as usize;
        if res.series.len() < whole {
            res.series.resize(whole, Tick::default());
        }
        groups.push(res);
    }
    let end = cut.unwrap_or_else(Instant::now);
    let offset = from.saturating_duration_since(shared.start()).as_secs_f64();
    ShardResult {
        span: ShardSpan {
            started_unix: ((started_unix + offset) * 1e6).round() / 1e6,
            elapsed_s: end.saturating_duration_since(from).as_secs_f64(),
            interval_s: spec.interval_ms as f64 / 1000.0,
            stopped: cut.is_none() && shared.stopped.load(Ordering::Relaxed),
            lost: shared.lost.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        },
        groups,
        data: shared.feeders.uses(shared.start()),
    }
}

/// Run a shard to its end (blocking).
pub fn run(spec: Spec) -> Result<ShardResult, EngineError> {
    let engine = Engine::start(spec)?;
    engine.wait(None);
    Ok(engine.result().expect("a finished engine has a result"))
}

/// How many threads a group's clients are spread over: all of them, but a worker group with `processes`
/// set below the thread count over that many (a process belongs to one thread).
pub(crate) fn hosting_threads(client: &crate::spec::ClientSpec, threads: usize) -> usize {
    match client {
        crate::spec::ClientSpec::Worker(w) if w.processes > 0 => (w.processes as usize).min(threads),
        _ => threads,
    }
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
