//! Runtime threads: each runs a tokio current-thread runtime with its share of the clients
//! (round-robin over threads) and owns its recorder; nothing is shared on the hot path but a few
//! relaxed atomics for live snapshots.
//!
//! Every client runs the same loop (`client`): ask its `Source` (source.rs) for the next operation (the one
//! stop decision), run it under its timeout, record it. The source is the pacer: closed loop (the
//! client's own previous end plus think time) or open loop (arrivals that one scheduler task per
//! thread and group issues at the thread's share of the rate; idle clients take them in order).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::cancel::{sleep_unless_stopped, Alarm, Alarms, Cancel};
use crate::clients::{prepare_spawns, Client, Host, HostedGroup, Hosts, Prepared, ThreadPart};
use crate::data::{ClientData, Draw, Feeders};
use crate::error::EngineError;
use crate::oplog::OpLog;
use crate::outcome::{OpReport, Outcome};
use crate::pacer::{Closed, Schedule, LATE_AFTER};
use crate::profile::Curve;
use crate::recorder::{GroupRec, LiveGroup, Timing};
use crate::rng::Rng;
use crate::source::{OpenQueue, Running, Source};
use crate::spec::{GroupSpec, PacerSpec, StopRule};

/// One group as every thread sees it.
pub(crate) struct GroupShared {
    pub spec: GroupSpec,
    pub prep: Arc<Prepared>,
    pub live: LiveGroup,
    /// Operations claimed so far (for `StopRule::Total`).
    pub tickets: AtomicU64,
    /// (start of the measurement = start + warm-up, end of a duration stop): set with the start.
    pub clock: OnceLock<(Instant, Option<Instant>)>,
    /// The data source that ran out for the group: its rule `stop` ended the whole group, `stop_client` the
    /// clients that found it empty.
    pub ran_out: OnceLock<String>,
    /// A source with the rule `stop` ran out, or every client of the group has stopped for want of a row (the
    /// rule `stop_client`): no client of the group starts another operation.
    pub data_stop: AtomicBool,
    /// Clients of the group in this shard that have not stopped for want of a row.
    pub clients_left: AtomicU64,
    /// Open loop: the group's arrivals waiting for a client or running, over every thread (`max_in_flight`).
    pub in_flight: AtomicUsize,
    /// Open loop: the group's own stream of Poisson gaps (from the spec's seed and the group's place).
    pub arrival_seed: u64,
    /// A closed loop's clients profile: which of its clients run when (`Closed::turn`).
    pub clients_curve: Option<Curve>,
}

impl GroupShared {
    /// Start of the measurement (start + warm-up).
    pub fn measured_start(&self) -> Instant {
        self.clock.get().expect("the start is set before any client runs").0
    }

    /// End of the group for duration stops.
    pub fn end_at(&self) -> Option<Instant> {
        self.clock.get().expect("the start is set before any client runs").1
    }

    /// Set the clock from the common start instant.
    pub fn set_start(&self, start: Instant) {
        let measured = start + Duration::from_millis(self.spec.warmup_ms);
        let end = match self.spec.stop {
            StopRule::DurationMs(ms) => Some(measured + Duration::from_millis(ms)),
            _ => None,
        };
        let _ = self.clock.set((measured, end));
    }
}

/// Holds the threads between getting ready (worker programs started) and the common start.
#[derive(Default)]
pub(crate) struct Gate {
    open: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    /// Let the threads go (`true`) or send them home (`false`).
    pub fn set(&self, go: bool) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Some(go);
        self.cv.notify_all();
    }

    fn wait(&self) -> bool {
        let guard = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let guard = self
            .cv
            .wait_while(guard, |o| o.is_none())
            .unwrap_or_else(|e| e.into_inner());
        guard.unwrap_or(false)
    }
}

/// Everything the threads share.
pub(crate) struct Shared {
    /// The common start instant, set once every thread is ready.
    pub start: OnceLock<Instant>,
    pub threads: usize,
    pub interval: Duration,
    pub groups: Vec<GroupShared>,
    pub stop_tx: watch::Sender<bool>,
    pub stopped: AtomicBool,
    /// The stop of background groups (`while_others`): sent by `stop()` and when the last
    /// foreground task ends (in a shard with a foreground group).
    pub bg_stop_tx: watch::Sender<bool>,
    pub bg_stopped: AtomicBool,
    /// Foreground tasks still running (closed-loop clients and open-loop schedulers), plus one for
    /// each thread that has not yet counted its own in: starts at the number of threads.
    pub foreground_left: AtomicU64,
    pub has_foreground: bool,
    /// A cut: each new value asks every thread to hand over its recording up to that instant.
    pub cut_tx: watch::Sender<Option<Instant>>,
    /// Where threads hand their cut recordings.
    pub cut_reply: Mutex<Option<mpsc::Sender<ThreadOutput>>>,
    /// The shard's data sources.
    pub feeders: Feeders,
    /// The operations log, when the spec asks for one (crate::oplog).
    pub oplog: Option<Arc<OpLog>>,
    /// What failed in knee itself (a task or thread that panicked), in words (`ShardSpan::lost`).
    pub lost: Mutex<Vec<String>>,
}

impl Shared {
    /// The common start instant.
    pub fn start(&self) -> Instant {
        *self.start.get().expect("the start is set before any client runs")
    }

    /// Note that part of the shard failed in knee itself (`what` ended by a panic, `why`; `uncounted`: what of it the
    /// result lacks): the result says so.
    pub fn lose(&self, what: &str, why: &str, uncounted: &str) {
        let line = format!("{what} (it failed in knee: {why:?}, a defect of knee; {uncounted} not counted)");
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    /// Stop everything (`Engine::stop`).
    pub fn stop_all(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.bg_stopped.store(true, Ordering::Relaxed);
        self.stop_tx.send_replace(true);
        self.bg_stop_tx.send_replace(true);
    }

    /// The stop signal group `g`'s tasks obey, and its flag.
    fn stop_of(&self, g: usize) -> (watch::Receiver<bool>, &AtomicBool) {
        if self.groups[g].spec.stop.is_background() {
            (self.bg_stop_tx.subscribe(), &self.bg_stopped)
        } else {
            (self.stop_tx.subscribe(), &self.stopped)
        }
    }
}

/// Held by a foreground task while it runs; the last one to end stops the background groups.
struct Foreground<'a>(&'a Shared);

impl<'a> Foreground<'a> {
    fn enter(shared: &'a Shared, g: usize) -> Option<Foreground<'a>> {
        (!shared.groups[g].spec.stop.is_background()).then(|| Foreground(shared))
    }
}

impl Drop for Foreground<'_> {
    fn drop(&mut self) {
        if self.0.foreground_left.fetch_sub(1, Ordering::AcqRel) == 1 && self.0.has_foreground {
            self.0.bg_stopped.store(true, Ordering::Relaxed);
            self.0.bg_stop_tx.send_replace(true);
        }
    }
}

/// What one thread hands back for one group.
pub(crate) struct ThreadGroup {
    pub res: crate::result::GroupResult,
    /// (client index, succeeded) of this thread's clients.
    pub per_client: Vec<(u64, u64)>,
    pub last_end: Option<Instant>,
    /// Start of the recording's window.
    pub origin: Instant,
}

/// What one thread hands back, per group.
pub(crate) struct ThreadOutput {
    pub groups: Vec<ThreadGroup>,
}

type Recs = Rc<RefCell<Vec<GroupRec>>>;

fn output(recs: Vec<GroupRec>) -> ThreadOutput {
    ThreadOutput {
        groups: recs
            .into_iter()
            .map(|r| ThreadGroup {
                res: r.res,
                per_client: r.per_client,
                last_end: r.last_end,
                origin: r.origin,
            })
            .collect(),
    }
}

/// Run this thread's clients (`(group, client index)` pairs) to the end: get ready (start the worker
/// programs its clients need), say so on `ready`, wait at the `gate` for the common start, run.
pub(crate) fn run_thread(
    shared: Arc<Shared>,
    thread: usize,
    clients: Vec<(usize, u64)>,
    cuts: watch::Receiver<Option<Instant>>,
    ready: &mpsc::Sender<Result<(), EngineError>>,
    gate: &Gate,
) -> ThreadOutput {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let local = tokio::task::LocalSet::new();
    // Exec clients spawn through this thread's low descriptor slots, taken before any client runs.
    let _slots = shared.groups.iter().any(|g| g.prep.spawns()).then(prepare_spawns);
    // This thread's clients of each group; a client's slot is its place in its group's list.
    let mut mine: Vec<Vec<u64>> = vec![Vec::new(); shared.groups.len()];
    for &(g, c) in &clients {
        mine[g].push(c);
    }
    let hosted: Vec<HostedGroup> = shared
        .groups
        .iter()
        .map(|g| HostedGroup {
            prep: g.prep.clone(),
            name: g.spec.name.clone(),
            client_offset: g.spec.client_offset,
        })
        .collect();
    let part = ThreadPart {
        groups: &hosted,
        mine: &mine,
        thread,
        threads: shared.threads,
    };
    let hosts = local.block_on(&rt, Hosts::start(part));
    let hosts = match hosts {
        Ok(h) => {
            let _ = ready.send(Ok(()));
            h
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return output(Vec::new());
        }
    };
    if !gate.wait() {
        local.block_on(&rt, hosts.close(true));
        return output(Vec::new());
    }
    let rec: Recs = Rc::new(RefCell::new(GroupRec::of_thread(&shared, &mine)));
    local.block_on(&rt, async {
        let ticker = tokio::task::spawn_local(publish_recent(shared.clone(), rec.clone(), thread));
        let cutter = tokio::task::spawn_local(serve_cuts(shared.clone(), rec.clone(), cuts));
        let alarms = Rc::new(Alarms::default());
        let ringers = [
            tokio::task::spawn_local(alarms.clone().ring_on(shared.stop_tx.subscribe(), false)),
            tokio::task::spawn_local(alarms.clone().ring_on(shared.bg_stop_tx.subscribe(), true)),
        ];
        let mut tasks: Vec<_> = Vec::new();
        let mut foreground = 0u64;
        for (g, cs) in mine.iter().enumerate().filter(|(_, cs)| !cs.is_empty()) {
            let counts = u64::from(!shared.groups[g].spec.stop.is_background());
            if matches!(shared.groups[g].spec.pacer, PacerSpec::Rate { .. }) {
                // One scheduler per thread and group feeds this thread's clients of the group.
                foreground += counts;
                let fut = open_group(
                    shared.clone(),
                    rec.clone(),
                    g,
                    cs.clone(),
                    hosts.of(g, cs.len()),
                    alarms.clone(),
                );
                tasks.push((g, None, tokio::task::spawn_local(fut)));
                continue;
            }
            foreground += counts * cs.len() as u64;
            let spec = &shared.groups[g].spec;
            for (slot, &c) in cs.iter().enumerate() {
                // Its number in the whole group, for a clients profile (as pacer.rs numbers an open loop's turns).
                let number = spec.group_clients.map_or(0, |_| spec.client_offset) + c + 1;
                let source = Source::Closed {
                    // its think times from a stream of its own among every load machine's clients
                    pacer: Closed::new(
                        spec,
                        number,
                        Rng::new(shared.groups[g].arrival_seed, spec.client_offset + c),
                    ),
                    prev: None,
                };
                let host = hosts.host(g, slot);
                let alarm = alarms.alarm(spec.stop.is_background());
                tasks.push((
                    g,
                    Some(c),
                    tokio::task::spawn_local(client(shared.clone(), rec.clone(), g, c, slot, source, host, alarm)),
                ));
            }
        }
        // None of them has run yet: count them in, then give up this thread's own place (each
        // task's Foreground guard gives up its place when the task ends).
        shared.foreground_left.fetch_add(foreground, Ordering::AcqRel);
        drop(Foreground(&shared));
        for (g, c, t) in tasks {
            joined(&shared, g, c, t).await;
        }
        ticker.abort();
        cutter.abort();
        ringers.iter().for_each(tokio::task::JoinHandle::abort);
        hosts.close(shared.stopped.load(Ordering::Relaxed)).await;
    });
    drop(local);
    drop(rt);
    let recs = Rc::try_unwrap(rec).map_or_else(|rc| rc.replace(Vec::new()), RefCell::into_inner);
    output(recs)
}

/// Wait for task `t` of group `g`: client `c`, or (None) the group's open-loop scheduler on this thread. One that
/// panicked (a defect of knee) is said in the result, not passed over: the step ran without it from then on.
async fn joined(shared: &Shared, g: usize, c: Option<u64>, t: tokio::task::JoinHandle<()>) {
    if let Some(why) = panicked(t).await {
        let spec = &shared.groups[g].spec;
        let what = match c {
            Some(c) => format!("group {}'s client {}", spec.name, spec.client_offset + c),
            None => format!("group {}'s arrival scheduler", spec.name),
        };
        shared.lose(
            &what,
            &why,
            "its operation then in flight and what it would have run are",
        );
    }
}

/// The panic that ended task `t`, in words (None: it ended, or was aborted).
async fn panicked(t: tokio::task::JoinHandle<()>) -> Option<String> {
    match t.await {
        Err(e) if e.is_panic() => Some(panic_text(&*e.into_panic())),
        _ => None,
    }
}

/// A panic's message (a `&str` or a `String`, as `panic!` makes them).
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// Once a second hand each group's last-second latency histogram to the live view.
async fn publish_recent(shared: Arc<Shared>, rec: Recs, thread: usize) {
    let mut tick = tokio::time::interval_at((shared.start() + Duration::from_secs(1)).into(), Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut recs = rec.borrow_mut();
        for (g, r) in shared.groups.iter().zip(recs.iter_mut()) {
            let h = std::mem::replace(&mut r.recent, crate::histo::new_histogram());
            *g.live.recent[thread].lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
    }
}

/// Answer cuts: hand over this thread's recordings up to the cut instant, go on with fresh ones.
async fn serve_cuts(shared: Arc<Shared>, rec: Recs, mut cuts: watch::Receiver<Option<Instant>>) {
    while cuts.changed().await.is_ok() {
        let Some(at) = *cuts.borrow_and_update() else { continue };
        let old = {
            let mut recs = rec.borrow_mut();
            let fresh: Vec<GroupRec> = recs.iter().map(|r| r.fresh(at.max(r.origin))).collect();
            std::mem::replace(&mut *recs, fresh)
        };
        let reply = shared.cut_reply.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(tx) = reply {
            let _ = tx.send(output(old));
        }
    }
}

/// One operation under its timeout (and the group's end and stop), counted in flight while it runs.
async fn run_one(
    op: &mut Client,
    group: &GroupShared,
    open: Option<&OpenQueue>,
    timeout_at: Instant,
    stop: &mut watch::Receiver<bool>,
    alarm: &Alarm,
) -> (OpReport, Instant) {
    group.live.in_flight.fetch_add(1, Ordering::Relaxed);
    let _running = Running {
        live: &group.live.in_flight,
        slots: &group.in_flight,
        open,
    };
    let mut cancel = Cancel {
        timeout_at,
        end_at: group.end_at(),
        stop,
        alarm,
    };
    let report = op.run(&mut cancel).await;
    (report, Instant::now())
}

/// A client: take the next operation from the source, run it, record it, until the source says stop.
#[allow(clippy::too_many_arguments)]
async fn client(
    shared: Arc<Shared>,
    rec: Recs,
    g: usize,
    client: u64,
    slot: usize,
    mut source: Source,
    host: Option<Host>,
    alarm: Alarm,
) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let global_client = spec.client_offset + client;
    // Closed-loop clients keep a background group running; an open loop's scheduler does that.
    let _foreground = matches!(source, Source::Closed { .. })
        .then(|| Foreground::enter(&shared, g))
        .flatten();
    let (mut stop, stopped) = shared.stop_of(g);
    let timeout = Duration::from_millis(spec.timeout_ms);
    let mut op = Client::new(group.prep.clone(), global_client, host);
    let mut data = ClientData::new(&shared.feeders, global_client);
    let (mut iteration, mut measured) = (0u64, 0u64);
    if !sleep_unless_stopped(shared.start(), &mut stop, stopped).await {
        return;
    }
    while let Some(start) = source.next(group, measured, &mut stop, stopped, &rec, g).await {
        let mut draw = Draw {
            client: global_client,
            index: client,
            clients: spec.clients,
            iteration,
            feeders: &shared.feeders,
            state: &mut data,
        };
        if let Err(out) = op.prepare(&mut draw) {
            // A data source ran out: this operation does not start; the client (or its whole group) stops.
            if out.stop_group {
                let _ = group.ran_out.set(shared.feeders.list[out.feeder].name.clone());
                group.data_stop.store(true, Ordering::Relaxed);
            } else if group.clients_left.fetch_sub(1, Ordering::Relaxed) == 1 {
                group.data_stop.store(true, Ordering::Relaxed);
            }
            if let Source::Open(q) = &source {
                q.clients.set(q.clients.get() - 1);
            }
            match &source {
                Source::Closed { .. } if matches!(spec.stop, StopRule::Total(_)) => {
                    group.tickets.fetch_sub(1, Ordering::Relaxed);
                }
                // The arrival it took goes back to the queue: another client takes it, or it is dropped at the end.
                Source::Open(q) => {
                    let free = start.free && q.a_client_is_free();
                    q.pending.borrow_mut().push_front((start.intended, free));
                }
                Source::Closed { .. } => {}
            }
            break;
        }
        let began = start.began;
        source.begin();
        let open = match &source {
            Source::Open(q) => Some(&**q),
            Source::Closed { .. } => None,
        };
        let (report, end) = run_one(&mut op, group, open, began + timeout, &mut stop, &alarm).await;
        iteration += 1;
        if report.resent {
            rec.borrow_mut()[g].res.counts.resent += 1; // warm-up and cut short too: the server saw it
        }
        if report.unsent {
            // Cut off while connecting: nothing reached the service, so it never started (an open loop's
            // arrival that never started is dropped).
            if start.measured_arrival {
                rec.borrow_mut()[g].drop_arrival(start.intended);
            }
            source.end(group, end, false, false);
            break;
        }
        // Only operations that end inside a duration window count; the rest were cut short.
        let cut_short = matches!(report.outcome, Outcome::Abandoned) || group.end_at().is_some_and(|e| end > e);
        let warmup = warm_up(
            matches!(source, Source::Open(_)),
            start.measured_arrival,
            end,
            group.measured_start(),
        );
        let failed = matches!(report.outcome, Outcome::Fail(..));
        source.end(group, end, failed, warmup);
        if warmup {
            rec.borrow_mut()[g].res.counts.warmup_ops += 1;
            continue;
        }
        let report = if cut_short {
            OpReport::of(Outcome::Abandoned)
        } else {
            report
        };
        group.live.count(&report.outcome);
        let open = matches!(source, Source::Open(_));
        let timing = Timing {
            latency: end - if open { start.intended.min(began) } else { began },
            uncorrected: open.then(|| end - began),
            end,
        };
        {
            let mut r = rec.borrow_mut();
            if start.measured_arrival && !cut_short && began.saturating_duration_since(start.intended) > LATE_AFTER {
                r[g].late(start.intended, start.free);
                group.live.late(start.free);
            }
            r[g].record(&report, &timing, slot, global_client, &op.detail, op.request());
        }
        if cut_short {
            break;
        }
        measured += 1;
        if open {
            // Operations that fail at once must not starve the scheduler.
            tokio::task::coop::consume_budget().await;
        }
    }
}

/// An operation of the warm-up, not of the measurement: in a closed loop one that ended before the measurement
/// began, even if a stop cut it short; in an open loop an arrival due before it began, whenever it ended (its
/// measured arrivals were offered: one due just after the start, begun up to `TIMER_SLACK` early and ended before
/// it, was offered and counted as neither started nor dropped).
fn warm_up(open: bool, measured_arrival: bool, end: Instant, measured_start: Instant) -> bool {
    if open {
        !measured_arrival
    } else {
        end < measured_start
    }
}

/// The timer granularity the open-loop scheduler compensates for.
const TIMER_SLACK: Duration = Duration::from_millis(1);

/// Open loop for this thread's `clients` of group `g`: a scheduler issues arrivals at the thread's
/// share of the group's rate; idle clients take them in order. An arrival that finds more than the
/// cap (`max_in_flight`, split over threads like the rate) waiting or running is dropped; one that
/// waits longer than `timeout_ms` for a client is dropped too. Both are counted, never skipped.
async fn open_group(
    shared: Arc<Shared>,
    rec: Recs,
    g: usize,
    clients: Vec<u64>,
    hosts: Vec<Option<Host>>,
    alarms: Rc<Alarms>,
) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let PacerSpec::Rate { max_in_flight, .. } = spec.pacer else {
        return;
    };
    let Some(mut sched) = Schedule::of_thread(spec, &clients, shared.start(), group.end_at(), group.arrival_seed)
    else {
        return;
    };
    rec.borrow_mut()[g].res.counts.open_loop = true;
    let q = Rc::new(OpenQueue {
        pending: RefCell::new(VecDeque::new()),
        busy: Cell::new(0),
        closed: Cell::new(false),
        clients: Cell::new(clients.len()),
        notify: Notify::new(),
    });
    let client_tasks: Vec<_> = clients
        .iter()
        .zip(hosts)
        .enumerate()
        .map(|(slot, (&c, host))| {
            let source = Source::Open(q.clone());
            let alarm = alarms.alarm(spec.stop.is_background());
            tokio::task::spawn_local(client(shared.clone(), rec.clone(), g, c, slot, source, host, alarm))
        })
        .collect();
    let _foreground = Foreground::enter(&shared, g);
    let (mut stop, stopped) = shared.stop_of(g);
    let per_thread_limit = match spec.stop {
        StopRule::PerClient(n) => Some(n.saturating_mul(clients.len() as u64)),
        _ => None,
    };
    let mut issued = 0u64;
    loop {
        // Behind its schedule the loop issues (or drops at the cap) without a wait: it yields now and then, or this
        // thread's clients would not start, nor end, what it queued until it caught up (at 10 M/s, never).
        tokio::task::coop::consume_budget().await;
        // Stopped, or every client of this thread stopped for want of a row: no arrival could start.
        if stopped.load(Ordering::Relaxed) || group.data_stop.load(Ordering::Relaxed) || q.clients.get() == 0 {
            break;
        }
        if sched.ended(group.end_at()) {
            // No arrival is due any more (a profile that ended at rate 0, or the next arrival past the window): the
            // window still lasts to its end, as planned, so the step is as long as its profile says and a group
            // beside it (a baseload through a spike) is measured to that end.
            if let Some(end) = group.end_at() {
                sleep_unless_stopped(end, &mut stop, stopped).await;
            }
            break;
        }
        let more = match spec.stop {
            StopRule::Total(n) => group.tickets.fetch_add(1, Ordering::Relaxed) < n,
            _ => per_thread_limit.is_none_or(|l| issued < l),
        };
        // Timers tick in whole milliseconds and fire late, which would add up to 1 ms to every
        // corrected latency; aim 1 ms early instead (an early start counts from its actual start).
        let wake = sched.peek().checked_sub(TIMER_SLACK).unwrap_or(shared.start());
        if !more || !sleep_unless_stopped(wake, &mut stop, stopped).await {
            break;
        }
        let at = sched.next_arrival();
        issued += 1;
        let measured = at >= group.measured_start();
        if measured {
            rec.borrow_mut()[g].offer(at);
        }
        // The group's arrivals waiting or running on every thread, against the cap.
        if max_in_flight.is_some_and(|c| group.in_flight.load(Ordering::Relaxed) as u64 >= c) {
            if measured {
                rec.borrow_mut()[g].drop_arrival(at);
            }
            continue;
        }
        group.in_flight.fetch_add(1, Ordering::Relaxed);
        // fewer arrivals waiting than idle clients (one is free for this one), or issued late itself: if it starts
        // late, that is the load side's lag (after a stall the backlog goes out at once, more than clients are idle)
        let free = q.a_client_is_free() || at.elapsed() > LATE_AFTER;
        q.pending.borrow_mut().push_back((at, free));
        q.notify.notify_one();
    }
    q.closed.set(true);
    q.notify.notify_waiters();
    for (&c, t) in clients.iter().zip(client_tasks) {
        joined(&shared, g, Some(c), t).await;
    }
    // Arrivals still waiting for a client when the window ended or the group stopped never started: dropped,
    // so that every measured arrival is started or dropped (offered = started + dropped).
    let left = std::mem::take(&mut *q.pending.borrow_mut());
    group.in_flight.fetch_sub(left.len(), Ordering::Relaxed);
    let mut r = rec.borrow_mut();
    for (at, _) in left.into_iter().filter(|&(at, _)| at >= group.measured_start()) {
        r[g].drop_arrival(at);
    }
}

#[cfg(test)]
mod tests {
    use super::{panicked, warm_up};
    use std::time::{Duration, Instant};

    /// An open loop's arrival due in the measurement is the measurement's, even begun early and ended before it
    /// began; one due before it is the warm-up's, whenever it ended. A closed loop goes by the end.
    #[test]
    fn an_open_loops_measured_arrival_is_never_warm_up() {
        let start = Instant::now() + Duration::from_secs(1);
        let before = start - Duration::from_micros(300);
        assert!(!warm_up(true, true, before, start));
        assert!(warm_up(true, false, start + Duration::from_secs(1), start));
        assert!(warm_up(false, true, before, start) && !warm_up(false, false, start, start));
    }

    /// A client's task that panicked (a defect of knee) is said with its message, not passed over; one that ended
    /// is not.
    #[test]
    fn a_task_that_panicked_is_said_with_its_message() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let boom = tokio::task::spawn_local(async { panic!("index {} out of range", 3) });
            assert_eq!(panicked(boom).await.as_deref(), Some("index 3 out of range"));
            let static_text = tokio::task::spawn_local(async { std::panic::panic_any("static") });
            assert_eq!(panicked(static_text).await.as_deref(), Some("static"));
            assert_eq!(panicked(tokio::task::spawn_local(async {})).await, None);
        });
    }
}
