//! Worker threads: each runs a tokio current-thread runtime with its share of the clients
//! (round-robin over threads) and owns its recorder; nothing is shared on the hot path but a few
//! relaxed atomics for live snapshots.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::cancel::{sleep_unless_stopped, Cancel};
use crate::clients::{Client, Outcome, Prepared};
use crate::pacer::Pacer;
use crate::recorder::{GroupRec, LiveGroup};
use crate::result::GroupResult;
use crate::spec::{GroupSpec, StopRule};

/// One group as every thread sees it.
pub(crate) struct GroupShared {
    pub spec: GroupSpec,
    pub prep: Arc<Prepared>,
    pub live: LiveGroup,
    /// Operations claimed so far (for `StopRule::Total`).
    pub tickets: AtomicU64,
    /// Start of the measurement (start + warm-up).
    pub measured_start: Instant,
    /// End of the group for duration stops.
    pub end_at: Option<Instant>,
}

/// Everything the threads share.
pub(crate) struct Shared {
    pub start: Instant,
    pub interval: Duration,
    pub groups: Vec<GroupShared>,
    pub stop_tx: watch::Sender<bool>,
    pub stopped: AtomicBool,
}

/// What one thread hands back for one group.
pub(crate) struct ThreadGroup {
    pub res: GroupResult,
    /// (client index, succeeded) of this thread's clients.
    pub per_client: Vec<(u64, u64)>,
    pub last_end: Option<Instant>,
}

/// What one thread hands back, per group.
pub(crate) struct ThreadOutput {
    pub groups: Vec<ThreadGroup>,
}

/// Run this thread's clients (`(group, client index)` pairs) to the end.
pub(crate) fn run_thread(shared: Arc<Shared>, thread: usize, clients: Vec<(usize, u64)>) -> ThreadOutput {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let local = tokio::task::LocalSet::new();
    let rec: Rc<RefCell<Vec<GroupRec>>> = Rc::new(RefCell::new(
        shared
            .groups
            .iter()
            .map(|g| GroupRec::new(&g.spec.name, g.spec.client.kind()))
            .collect(),
    ));
    local.block_on(&rt, async {
        let ticker = tokio::task::spawn_local(publish_recent(shared.clone(), rec.clone(), thread));
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|(g, c)| tokio::task::spawn_local(client_loop(shared.clone(), rec.clone(), g, c)))
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        ticker.abort();
    });
    drop(local);
    drop(rt);
    let recs = Rc::try_unwrap(rec).map_or_else(|rc| rc.replace(Vec::new()), RefCell::into_inner);
    ThreadOutput {
        groups: recs
            .into_iter()
            .map(|r| ThreadGroup {
                res: r.res,
                per_client: r.per_client,
                last_end: r.last_end,
            })
            .collect(),
    }
}

/// Once a second hand each group's last-second latency histogram to the live view.
async fn publish_recent(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, thread: usize) {
    let mut tick = tokio::time::interval_at((shared.start + Duration::from_secs(1)).into(), Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut recs = rec.borrow_mut();
        for (g, r) in shared.groups.iter().zip(recs.iter_mut()) {
            let h = std::mem::replace(&mut r.recent, crate::histo::new_histogram());
            *g.live.recent[thread].lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
    }
}

async fn client_loop(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, g: usize, client: u64) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let global_client = spec.client_offset + client;
    let mut stop = shared.stop_tx.subscribe();
    let timeout = Duration::from_millis(spec.timeout_ms);
    let interval = shared.interval.as_secs_f64();
    let mut pacer = Pacer::new(&spec.pacer, spec.think_ms, spec.clients, client, shared.start);
    let mut op = Client::new(group.prep.clone(), global_client);
    let (mut iteration, mut measured, mut succeeded) = (0u64, 0u64, 0u64);
    let mut prev_end = None;
    if !sleep_unless_stopped(shared.start, &mut stop, &shared.stopped).await {
        rec.borrow_mut()[g].per_client.push((client, 0));
        return;
    }
    loop {
        let proceed = match spec.stop {
            StopRule::PerClient(n) => measured < n,
            StopRule::Total(n) => group.tickets.fetch_add(1, Ordering::Relaxed) < n,
            StopRule::DurationMs(_) => group.end_at.is_some_and(|e| Instant::now() < e),
        };
        if !proceed || shared.stopped.load(Ordering::Relaxed) {
            break;
        }
        // Operations that fail at once (spawn errors, refused connects) must not starve the thread.
        tokio::task::coop::consume_budget().await;
        let intended = pacer.next_start(prev_end, Instant::now());
        let wake = group.end_at.map_or(intended, |e| intended.min(e));
        if !sleep_unless_stopped(wake, &mut stop, &shared.stopped).await {
            break;
        }
        if group.end_at.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        group.live.in_flight.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let mut cancel = Cancel {
            timeout_at: began + timeout,
            end_at: group.end_at,
            stop: &mut stop,
        };
        let report = op.run(iteration, &mut cancel).await;
        let end = Instant::now();
        group.live.in_flight.fetch_sub(1, Ordering::Relaxed);
        prev_end = Some(end);
        iteration += 1;
        // Only operations that end inside a duration window count.
        if matches!(report.outcome, Outcome::Abandoned) || group.end_at.is_some_and(|e| end > e) {
            break;
        }
        if end < group.measured_start {
            rec.borrow_mut()[g].res.warmup_ops += 1;
            if let StopRule::Total(_) = spec.stop {
                group.tickets.fetch_sub(1, Ordering::Relaxed);
            }
            continue;
        }
        group.live.count(&report.outcome);
        let from = if pacer.open() { intended.min(began) } else { began };
        let tick = ((end - group.measured_start).as_secs_f64() / interval) as usize;
        measured += 1;
        if rec.borrow_mut()[g].record(report, end - from, tick, global_client, end) {
            succeeded += 1;
        }
    }
    rec.borrow_mut()[g].per_client.push((client, succeeded));
}
