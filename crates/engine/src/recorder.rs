//! Per-thread recording: each runtime thread owns one `GroupRec` per group (no lock, and no
//! allocation per operation — a failing one included, once its reason group exists), plus shared
//! atomics for live snapshots.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::class::ErrorClass;
use crate::counts::Outcomes;
use crate::histo;
use crate::oplog::{OpBuf, OpRecord};
use crate::outcome::{Detail, OpReport, Outcome};
use crate::reason;
use crate::result::{GroupResult, RequestResult, Tick};
use crate::threads::Shared;

/// One group's recording on one thread, over one window (the measurement, or the time since the
/// last `cut`).
pub(crate) struct GroupRec {
    pub res: GroupResult,
    /// Succeeded operations' latency of the current live interval (handed to `Live` once a second).
    pub recent: Histogram<u64>,
    /// This thread's clients of the group: (client index within the shard's group, succeeded).
    pub per_client: Vec<(u64, u64)>,
    pub last_end: Option<Instant>,
    /// Start of the window: series intervals count from here.
    pub origin: Instant,
    interval_s: f64,
    /// Scratch for normalised failure messages.
    key: String,
    /// This thread's records for the operations log (crate::oplog), when there is one.
    log: Option<OpBuf>,
}

/// Where a measured operation's latency counts from.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    /// From the intended start (open loop) or the actual start (closed loop) to the end.
    pub latency: Duration,
    /// Open loop only: from the actual start to the end.
    pub uncorrected: Option<Duration>,
    pub end: Instant,
}

impl Timing {
    /// The timing of an operation that measured its own `latency` from its actual start: an open loop's arrival
    /// keeps its wait for a client before it (the correction for coordinated omission), the uncorrected figure
    /// being the operation's own.
    pub fn own(&self, latency: Duration) -> Timing {
        let wait = self
            .uncorrected
            .map_or(Duration::ZERO, |u| self.latency.saturating_sub(u));
        Timing {
            latency: latency + wait,
            uncorrected: self.uncorrected.map(|_| latency),
            end: self.end,
        }
    }
}

impl GroupRec {
    pub fn new(
        name: &str,
        kind: &str,
        requests: &[String],
        clients: Vec<u64>,
        origin: Instant,
        interval_s: f64,
    ) -> GroupRec {
        let mut res = GroupResult::new(name, kind, 0);
        res.requests = requests.iter().map(|n| RequestResult::new(n)).collect();
        GroupRec {
            res,
            recent: histo::new_histogram(),
            per_client: clients.into_iter().map(|c| (c, 0)).collect(),
            last_end: None,
            origin,
            interval_s,
            key: String::new(),
            log: None,
        }
    }

    /// A thread's recordings of each group of `shared`, `mine` its clients of each: from the group's measured
    /// start, each writing to the operations log when there is one.
    pub fn of_thread(shared: &Shared, mine: &[Vec<u64>]) -> Vec<GroupRec> {
        let interval_s = shared.interval.as_secs_f64();
        let groups = shared.groups.iter().zip(mine).enumerate();
        groups
            .map(|(gi, (g, cs))| {
                let names = g.prep.request_names();
                let start = g.measured_start();
                let rec = GroupRec::new(
                    &g.spec.name,
                    g.spec.client.kind(),
                    &names,
                    cs.clone(),
                    start,
                    interval_s,
                );
                rec.logging(shared.oplog.as_ref().map(|log| OpBuf::new(log.clone(), gi)))
            })
            .collect()
    }

    /// The same recording, writing its operations to `log` too.
    pub fn logging(mut self, log: Option<OpBuf>) -> GroupRec {
        self.log = log;
        self
    }

    /// A fresh recording of the same clients from `origin` on (for `cut`).
    pub fn fresh(&self, origin: Instant) -> GroupRec {
        let clients = self.per_client.iter().map(|(c, _)| *c).collect();
        let names: Vec<String> = self.res.requests.iter().map(|r| r.counts.name.clone()).collect();
        let mut rec = GroupRec::new(
            &self.res.counts.name,
            &self.res.counts.kind,
            &names,
            clients,
            origin,
            self.interval_s,
        );
        rec.res.counts.open_loop = self.res.counts.open_loop;
        rec.logging(self.log.as_ref().map(OpBuf::again))
    }

    /// The series' interval of instant `at`, the series grown to hold it.
    fn tick(&mut self, at: Instant) -> usize {
        let tick = (at.saturating_duration_since(self.origin).as_secs_f64() / self.interval_s) as usize;
        if self.res.series.len() <= tick {
            self.res.series.resize(tick + 1, Tick::default());
        }
        tick
    }

    /// Count an open-loop arrival meant to start at `at` (in the measured window), in its interval.
    pub fn offer(&mut self, at: Instant) {
        self.res.counts.offered += 1;
        let tick = self.tick(at);
        self.res.series[tick].offered += 1;
    }

    /// Count an arrival meant to start at `at` that started late, in the interval of its intended start (`free`: a
    /// client was free for it when it was issued: the load side lagged, not the service).
    pub fn late(&mut self, at: Instant, free: bool) {
        self.res.counts.late += 1;
        self.res.counts.lagged += u64::from(free);
        let tick = self.tick(at);
        self.res.series[tick].late += 1;
        self.res.series[tick].lagged += u64::from(free);
    }

    /// Count an arrival meant to start at `at` that was dropped, in the interval of its intended start.
    pub fn drop_arrival(&mut self, at: Instant) {
        self.res.counts.dropped += 1;
        let tick = self.tick(at);
        self.res.series[tick].dropped += 1;
    }

    /// Record one measured operation of the client in slot `slot` (global number `client`).
    /// Returns whether it succeeded.
    #[inline]
    pub fn record(
        &mut self,
        rep: &OpReport,
        t: &Timing,
        slot: usize,
        client: u64,
        detail: &Detail,
        request: usize,
    ) -> bool {
        if let Some(log) = self.log.as_mut() {
            let from = t.end.checked_sub(t.latency).unwrap_or(t.end);
            let began = t.end.checked_sub(t.uncorrected.unwrap_or(t.latency)).unwrap_or(from);
            let (sent, received) = (rep.bytes.sent, rep.bytes.received);
            let wait = began.saturating_duration_since(from);
            log.add(
                &rep.outcome,
                &OpRecord {
                    from,
                    end: t.end,
                    wait,
                    client,
                    request,
                    sent,
                    received,
                },
            );
        }
        // An operation that says its own latency (a WebSocket listen: its first message) is measured by it.
        let own;
        let t = match rep.latency {
            Some(latency) => {
                own = t.own(latency);
                &own
            }
            None => t,
        };
        if let Some(r) = self.res.requests.get_mut(request) {
            let o = &mut r.counts.outcomes;
            match rep.outcome {
                Outcome::Ok => {
                    o.succeeded += 1;
                    histo::record(&mut r.latency, t.latency);
                }
                Outcome::Fail(class) => {
                    o.failed += 1;
                    r.counts.failures[class.index()] += 1;
                    histo::record(&mut r.failed_latency, t.latency);
                }
                Outcome::Hung => o.hung += 1,
                Outcome::Abandoned => o.abandoned += 1,
            }
        }
        if let Outcome::Abandoned = rep.outcome {
            self.res.counts.outcomes.abandoned += 1;
            return false;
        }
        let tick = self.tick(t.end);
        self.last_end = Some(t.end);
        if let Some(c) = rep.connect {
            histo::record(&mut self.res.connect, c);
        }
        if let Some(h) = rep.handshake {
            histo::record(&mut self.res.tls, h.time);
            self.res.counts.tls_resumed += u64::from(h.resumed);
        }
        if let Some(ttfb) = rep.ttfb {
            histo::record(&mut self.res.ttfb, ttfb);
        }
        // Connect, time to first byte and a worker's named steps are phases every operation that reached
        // them went through; the whole operation's latency is kept apart by outcome (docs/reports.md).
        match &rep.outcome {
            Outcome::Ok => {
                if let Some(u) = t.uncorrected {
                    histo::record(&mut self.res.latency_uncorrected, u);
                }
                let whole = t.uncorrected.unwrap_or(t.latency);
                let opening = rep.connect.unwrap_or_default() + rep.handshake.map_or(Duration::ZERO, |h| h.time);
                histo::record(&mut self.res.processing, whole.saturating_sub(opening));
                histo::record(&mut self.res.latency, t.latency);
                histo::record(&mut self.recent, t.latency);
            }
            Outcome::Fail(..) => histo::record(&mut self.res.failed_latency, t.latency),
            Outcome::Hung | Outcome::Abandoned => {}
        }
        if let Outcome::Ok | Outcome::Fail(..) = &rep.outcome {
            for (name, d) in &rep.steps {
                if let Some(h) = self.res.step(name) {
                    histo::record(h, *d);
                }
            }
            self.res.counts.bytes_sent += rep.bytes.sent;
            self.res.counts.bytes_received += rep.bytes.received;
            self.res.counts.messages_sent += rep.bytes.messages_sent;
            self.res.counts.messages_received += rep.bytes.messages_received;
        }
        let series = &mut self.res.series[tick];
        match rep.outcome {
            Outcome::Ok => {
                self.res.counts.outcomes.succeeded += 1;
                self.res.counts.payload_bytes += rep.bytes.payload;
                series.succeeded += 1;
                series.latency.record(t.latency.as_micros() as u64);
                self.per_client[slot].1 += 1;
                true
            }
            Outcome::Fail(class) => {
                self.res.counts.outcomes.failed += 1;
                series.fail(class);
                self.res.counts.failures[class.index()] += 1;
                reason::normalize(&detail.text, detail.fixed, &mut self.key);
                self.res.reasons.count(class, &self.key, &detail.text);
                false
            }
            Outcome::Hung => {
                self.res.counts.outcomes.hung += 1;
                series.hung += 1;
                // each client once, in order: clients that hung in turn (a, b, a, b …) added one each time
                if let Err(at) = self.res.counts.hung_clients.binary_search(&client) {
                    self.res.counts.hung_clients.insert(at, client);
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
    pub hung: AtomicU64,
    pub abandoned: AtomicU64,
    pub in_flight: AtomicI64,
    /// Open loop: arrivals so far that started late, and of those the ones knee lagged on (`GroupRec::late`).
    pub late: AtomicU64,
    pub lagged: AtomicU64,
    /// Failures so far by class (indexed by `ErrorClass::index`); their sum is the failed count.
    pub failed_by_class: [AtomicU64; ErrorClass::COUNT],
    /// Each thread's latency histogram of its last completed second.
    pub recent: Vec<Mutex<Option<Histogram<u64>>>>,
}

impl LiveGroup {
    pub fn new(threads: usize) -> LiveGroup {
        LiveGroup {
            succeeded: AtomicU64::new(0),
            hung: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            late: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            failed_by_class: std::array::from_fn(|_| AtomicU64::new(0)),
            recent: (0..threads).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The counts so far, and the failures among them by class name (the classes with some only): one
    /// read of each class's counter, so the failed count is their sum.
    pub fn outcomes(&self) -> (Outcomes, BTreeMap<&'static str, u64>) {
        let by_class: BTreeMap<&'static str, u64> = ErrorClass::ALL
            .into_iter()
            .filter_map(|c| {
                let n = self.failed_by_class[c.index()].load(Ordering::Relaxed);
                (n > 0).then(|| (c.as_str(), n))
            })
            .collect();
        let outcomes = Outcomes {
            succeeded: self.succeeded.load(Ordering::Relaxed),
            failed: by_class.values().sum(),
            hung: self.hung.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
        };
        (outcomes, by_class)
    }

    /// Count an arrival that started late (`free`: a client was free for it, knee's own lag).
    pub fn late(&self, free: bool) {
        self.late.fetch_add(1, Ordering::Relaxed);
        if free {
            self.lagged.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn count(&self, outcome: &Outcome) {
        let c = match outcome {
            Outcome::Ok => &self.succeeded,
            Outcome::Fail(class) => &self.failed_by_class[class.index()],
            Outcome::Hung => &self.hung,
            Outcome::Abandoned => &self.abandoned,
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

#[cfg(test)]
mod tests {
    use super::{GroupRec, Timing};
    use crate::outcome::{Detail, OpReport, Outcome};
    use std::time::{Duration, Instant};

    /// Clients that hang in turn are each named once, in order (the list grew by one per hung operation).
    #[test]
    fn hung_clients_are_each_named_once() {
        let t = Timing {
            latency: Duration::from_secs(1),
            uncorrected: None,
            end: Instant::now(),
        };
        let mut g = GroupRec::new("main", "tcp", &[], vec![3, 7, 9], Instant::now(), 1.0);
        for client in [7, 3, 7, 3, 9, 7] {
            g.record(&OpReport::of(Outcome::Hung), &t, 0, client, &Detail::default(), 0);
        }
        assert_eq!(g.res.counts.hung_clients, [3, 7, 9]);
        assert_eq!(g.res.counts.outcomes.hung, 6);
    }

    /// A WebSocket listen's own latency (to its first message) in an open loop keeps the arrival's wait for a
    /// client (it replaced the corrected latency whole, coordinated omission); in a closed loop it is its own.
    #[test]
    fn an_own_latency_keeps_the_open_loops_wait() {
        let ms = Duration::from_millis;
        let open = Timing {
            latency: ms(250),
            uncorrected: Some(ms(200)),
            end: Instant::now(),
        };
        let t = open.own(ms(40));
        assert_eq!((t.latency, t.uncorrected), (ms(90), Some(ms(40))));
        let closed = Timing {
            latency: ms(200),
            uncorrected: None,
            end: Instant::now(),
        };
        assert_eq!(
            (closed.own(ms(40)).latency, closed.own(ms(40)).uncorrected),
            (ms(40), None)
        );
    }
}
