//! What every connection shares: the config, the in-flight count, the worker pool, the clock of
//! the warm-up and the noise, the counters the server reports at `/admin/stats`, the
//! overload/recovery state machine, and the login sessions.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::config::{Config, RecoveryMode};
use crate::timer::Timer;
use crate::variation::Variation;
use crate::workers::Workers;

/// Monotonic totals (zeroed by `POST /admin/reset`).
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub served: AtomicU64,
    pub rejected_pool: AtomicU64,
    pub timed_out: AtomicU64,
    pub hung: AtomicU64,
    pub aborted: AtomicU64,
    pub not_found: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub connections_refused: AtomicU64,
    pub accept_errors: AtomicU64,
    pub tcp_connections: AtomicU64,
    pub tcp_handshakes: AtomicU64,
    pub tcp_lines: AtomicU64,
    pub times_degraded: AtomicU64,
    /// Successful logins (each also counts in `served`).
    pub logins: AtomicU64,
    /// Logins with a wrong password (403).
    pub logins_refused: AtomicU64,
    /// Requests to a session path without a valid session cookie (401).
    pub unauthorized: AtomicU64,
}

impl Counters {
    fn all(&self) -> [&AtomicU64; 18] {
        [
            &self.requests,
            &self.served,
            &self.rejected_pool,
            &self.timed_out,
            &self.hung,
            &self.aborted,
            &self.not_found,
            &self.bytes_sent,
            &self.connections_accepted,
            &self.connections_refused,
            &self.accept_errors,
            &self.tcp_connections,
            &self.tcp_handshakes,
            &self.tcp_lines,
            &self.times_degraded,
            &self.logins,
            &self.logins_refused,
            &self.unauthorized,
        ]
    }
}

/// The overload/recovery state machine (see `RecoveryMode`).
#[derive(Default)]
struct Overload {
    over_since: Option<Instant>,
    under_since: Option<Instant>,
}

/// Shared by the accept loops, every connection and the stats endpoint.
pub struct Shared {
    pub cfg: Config,
    pub timer: Timer,
    pub started: Instant,
    pub http_addr: SocketAddr,
    pub tcp_addr: SocketAddr,
    pub fd_limit: u64,
    pub counters: Counters,
    /// Requests in the server now, waiting for a worker or being served (admin and hung ones excluded).
    pub in_flight: AtomicUsize,
    /// The queueing worker pool (`workers`).
    pub workers: Workers,
    /// The clock of the warm-up and the noise.
    pub variation: Variation,
    pub max_in_flight: AtomicUsize,
    /// The highest in-flight count since the last recovery tick.
    tick_peak: AtomicUsize,
    /// Hung requests whose connection is still open.
    pub hanging: AtomicUsize,
    pub connections_open: AtomicUsize,
    hang_seq: AtomicU64,
    degraded: AtomicBool,
    overload: Mutex<Overload>,
    pub last_accept_error: Mutex<Option<String>>,
    /// Response bodies are slices of this.
    pub body: Bytes,
    /// Session tokens handed out by the login endpoint and not forgotten by a reset.
    sessions: Mutex<HashSet<u64>>,
    /// Tokens are `token_start + k` for the k-th login (never reused, not even after a reset).
    token_start: u64,
    token_seq: AtomicU64,
}

/// The outcome of admitting a request.
pub enum Admit {
    /// Serve it (once a worker is free); `n` requests are in flight, counting it.
    Serve(usize),
    /// The pool is full.
    Reject,
    /// Never answer it.
    Hang,
}

impl Shared {
    pub fn new(cfg: Config, timer: Timer, http_addr: SocketAddr, tcp_addr: SocketAddr, fd_limit: u64) -> Shared {
        let biggest = cfg
            .paths
            .values()
            .filter_map(|p| p.bytes)
            .chain([cfg.body_bytes])
            .max()
            .unwrap_or(0);
        let (workers, variation) = (Workers::new(cfg.workers), Variation::new(&cfg));
        Shared {
            body: Bytes::from(vec![b'x'; biggest]),
            cfg,
            timer,
            started: Instant::now(),
            http_addr,
            tcp_addr,
            fd_limit,
            counters: Counters::default(),
            in_flight: AtomicUsize::new(0),
            workers,
            variation,
            max_in_flight: AtomicUsize::new(0),
            tick_peak: AtomicUsize::new(0),
            hanging: AtomicUsize::new(0),
            connections_open: AtomicUsize::new(0),
            hang_seq: AtomicU64::new(0),
            degraded: AtomicBool::new(false),
            overload: Mutex::new(Overload::default()),
            last_accept_error: Mutex::new(None),
            sessions: Mutex::new(HashSet::new()),
            token_start: token_start(),
            token_seq: AtomicU64::new(0),
        }
    }

    /// Count a new request in flight and decide its fate. `Serve` must be paired with `leave()`.
    pub fn admit(&self) -> Admit {
        self.variation.touch(Instant::now());
        let n = self.in_flight.fetch_add(1, Relaxed) + 1;
        if self.cfg.pool > 0 && n > self.cfg.pool {
            self.in_flight.fetch_sub(1, Relaxed);
            return Admit::Reject;
        }
        self.max_in_flight.fetch_max(n, Relaxed);
        self.tick_peak.fetch_max(n, Relaxed);
        let f = self.cfg.hang_fraction;
        if f > 0.0 && n > self.cfg.hang_after {
            // Exactly a fraction f of the eligible requests: the k-th hangs when floor((k+1)f) > floor(kf).
            let k = self.hang_seq.fetch_add(1, Relaxed) as f64;
            if ((k + 1.0) * f).floor() > (k * f).floor() {
                self.in_flight.fetch_sub(1, Relaxed);
                return Admit::Hang;
            }
        }
        Admit::Serve(n)
    }

    /// A served request is done.
    pub fn leave(&self) {
        self.in_flight.fetch_sub(1, Relaxed);
    }

    /// Service time of a request of `cost` starting now with `n` being served (counting it),
    /// degradation, warm-up and noise included.
    pub fn service_time(&self, n: usize, cost: f64) -> Duration {
        Duration::from_secs_f64(self.cfg.usl_factor(n) / self.cfg.lambda * cost * self.multiplier(Instant::now()))
    }

    /// The service-time multiplier at `now`: degradation × warm-up × noise.
    pub fn multiplier(&self, now: Instant) -> f64 {
        self.degradation() * self.variation.multiplier(now)
    }

    /// The degradation's multiplier (1 when not degraded).
    fn degradation(&self) -> f64 {
        if self.degraded.load(Relaxed) {
            self.cfg.recovery.factor
        } else {
            1.0
        }
    }

    /// Wait for `d` on the fine-grained timer.
    pub async fn sleep(&self, d: Duration) {
        if !d.is_zero() {
            self.timer.sleep_until(Instant::now() + d).await;
        }
    }

    /// A new session: its token, remembered until `reset`.
    pub fn new_session(&self) -> u64 {
        let token = self.token_start.wrapping_add(self.token_seq.fetch_add(1, Relaxed));
        lock(&self.sessions).insert(token);
        token
    }

    /// Is `token` a session handed out since the last reset?
    pub fn has_session(&self, token: u64) -> bool {
        lock(&self.sessions).contains(&token)
    }

    /// One tick of the recovery state machine (called every few milliseconds when the mode needs it).
    pub fn tick(&self, now: Instant) {
        let rc = &self.cfg.recovery;
        // Overloaded during this tick if in-flight went past the threshold at any point in it
        // (closed-loop clients finishing together make the instantaneous count dip).
        let now_in = self.in_flight.load(Relaxed);
        let over = self.tick_peak.swap(now_in, Relaxed).max(now_in) > rc.threshold;
        let mut ov = self.overload.lock().unwrap_or_else(|e| e.into_inner());
        if over {
            ov.under_since = None;
            let since = *ov.over_since.get_or_insert(now);
            if rc.mode != RecoveryMode::Recover
                && !self.degraded.load(Relaxed)
                && now.duration_since(since).as_secs_f64() >= rc.after_s
            {
                self.degraded.store(true, Relaxed);
                self.counters.times_degraded.fetch_add(1, Relaxed);
            }
        } else {
            ov.over_since = None;
            if rc.mode == RecoveryMode::Slow && self.degraded.load(Relaxed) {
                let since = *ov.under_since.get_or_insert(now);
                if now.duration_since(since).as_secs_f64() >= rc.recover_s {
                    self.degraded.store(false, Relaxed);
                    ov.under_since = None;
                }
            }
        }
    }

    /// `POST /admin/reset`: back to normal, totals zeroed (gauges such as in-flight are kept), the
    /// warm-up's and the noise's clock stopped until the next request starts it again.
    pub fn reset(&self) {
        let mut ov = self.overload.lock().unwrap_or_else(|e| e.into_inner());
        *ov = Overload::default();
        self.degraded.store(false, Relaxed);
        for c in self.counters.all() {
            c.store(0, Relaxed);
        }
        self.max_in_flight.store(self.in_flight.load(Relaxed), Relaxed);
        self.workers.reset();
        self.variation.restart();
        self.hang_seq.store(0, Relaxed);
        *self.last_accept_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        lock(&self.sessions).clear();
    }

    pub fn degraded(&self) -> bool {
        self.degraded.load(Relaxed)
    }

    /// "degraded", "overloaded" (over the recovery threshold) or "normal".
    pub fn state(&self) -> &'static str {
        let t = self.cfg.recovery.threshold;
        if self.degraded() {
            "degraded"
        } else if t > 0 && self.in_flight.load(Relaxed) > t {
            "overloaded"
        } else {
            "normal"
        }
    }

    /// The `/admin/stats` document.
    pub fn stats(&self) -> Value {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Relaxed);
        let mut doc = json!({
            "profile": self.cfg.name,
            "state": self.state(),
            "degraded": self.degraded(),
            "recovery": self.cfg.recovery.mode.as_str(),
            "times_degraded": g(&c.times_degraded),
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "requests": g(&c.requests),
            "served": g(&c.served),
            "failed": {"pool": g(&c.rejected_pool), "timeout": g(&c.timed_out)},
            "admin_not_found": g(&c.not_found),
            "rejected_pool": g(&c.rejected_pool),
            "timed_out": g(&c.timed_out),
            "hung": g(&c.hung),
            "hanging": self.hanging.load(Relaxed),
            "aborted": g(&c.aborted),
            "logins": g(&c.logins),
            "logins_refused": g(&c.logins_refused),
            "unauthorized": g(&c.unauthorized),
            "sessions": lock(&self.sessions).len(),
            "in_flight": self.in_flight.load(Relaxed),
            "max_in_flight": self.max_in_flight.load(Relaxed),
            "bytes_sent": g(&c.bytes_sent),
            "connections_accepted": g(&c.connections_accepted),
            "connections_open": self.connections_open.load(Relaxed),
            "connections_refused": g(&c.connections_refused),
            "accept_errors": g(&c.accept_errors),
            "last_accept_error": self.last_accept_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            "tcp_connections": g(&c.tcp_connections),
            "tcp_handshakes": g(&c.tcp_handshakes),
            "tcp_lines": g(&c.tcp_lines),
            "fd_limit": self.fd_limit,
            "http_addr": self.http_addr.to_string(),
            "tcp_addr": self.tcp_addr.to_string(),
        });
        let (w, v, now) = (&self.workers, &self.variation, Instant::now());
        let more = json!({
            "workers": self.cfg.workers,
            "serving": w.serving.load(Relaxed),
            "queued": w.queued.load(Relaxed),
            "max_queued": w.max_queued.load(Relaxed),
            "queued_total": g(&w.queued_total),
            "queue_timeouts": g(&w.queue_timeouts),
            "service_multiplier": self.multiplier(now),
            "degraded_multiplier": self.degradation(),
            "warming_up": v.warming_up(now),
            "warmup_multiplier": v.warmup_multiplier(now),
            "noise_multiplier": v.noise_multiplier(now),
            "clock_s": v.clock(now),
        });
        if let (Some(doc), Value::Object(more)) = (doc.as_object_mut(), more) {
            doc.extend(more);
        }
        doc
    }

    /// The `/admin/config` document: the config and what its curve predicts.
    pub fn config_doc(&self) -> Value {
        let peak = self.cfg.peak();
        json!({
            "config": self.cfg,
            "model": {
                "n_star": self.cfg.n_star(),
                "peak_clients": peak.map(|p| p.0),
                "peak_rate": peak.map(|p| p.1),
                "plateau_rate": self.cfg.plateau_rate(),
                "single_client_ms": 1000.0 / self.cfg.lambda,
            },
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A random start for this server's session tokens: std's randomly keyed hasher over the time and the pid.
fn token_start() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one((nanos, std::process::id()))
}
