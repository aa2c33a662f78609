//! Pacing: when operations are meant to start.
//!
//! `Closed` (per client): the next operation starts when the previous one ended (+ think time, and
//! after a failed one the think time on failure too).
//! `Schedule` (open loop, per runtime thread and group): a stream of *intended* start times at a
//! target rate, constant or Poisson (exponential gaps, seeded), independent of how fast the
//! service answers. The thread hands each arrival to an idle client slot; latency is measured
//! from the intended start, so a stall shows up in full (coordinated omission, as wrk2 fixed it).
//!
//! Under a rate profile (`crate::profile`) the schedule works in *count space*: the group's arrival
//! `i` is due where the profile's integral Λ(t) = i, and each thread issues the arrivals of its own
//! clients' turns (arrival `i` is client `i mod clients`'s), so the threads' arrivals together are
//! exactly the group's: the count in any interval is Λ's increase over it, rounded. With `poisson`,
//! a unit-rate Poisson process in count space mapped through Λ⁻¹ (a time change) is a
//! non-homogeneous Poisson process of the profile's intensity.

use std::time::{Duration, Instant};

use crate::profile::{Curve, RateProfile};
use crate::rng::{splitmix, Rng};
use crate::spec::{GroupSpec, PacerSpec, ThinkRandom};

/// An operation that starts more than this after its intended start counts as *late*.
/// Larger than the timer's granularity (1 ms) plus scheduling jitter on a busy machine.
pub const LATE_AFTER: Duration = Duration::from_millis(10);

/// The most arrivals a second an open loop may ask of one engine (one load machine's shard): one every 100 ns. The
/// schedule issues each arrival in about that time even when every one is dropped (on 2 cores, 10 M a second took
/// 1.8 s for a 1 s step, 20 M took 6.6 s): past it a schedule falls behind from the start, and a step lasts until
/// every arrival due before its end was issued (`--rate 1e9 -d 1s` ran 25 s). No operation is that short anyway.
pub const MAX_RATE_HZ: f64 = 10_000_000.0;

/// Closed loop: when a client's next operation starts.
pub(crate) struct Closed {
    /// The think time's mean, and how each is drawn around it (from `rng`, the client's own stream).
    think: Duration,
    random: ThinkRandom,
    rng: Rng,
    /// Added to `think` after a failed operation.
    on_failure: Duration,
    /// The client's number in its group (1-based), which a clients profile runs while it is at least that.
    number: f64,
}

/// How a closed-loop client's previous operation ended, as its pacer needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Previous {
    pub end: Instant,
    pub failed: bool,
}

impl Closed {
    /// `rng`: the client's own stream of think times.
    pub fn new(spec: &GroupSpec, number: u64, rng: Rng) -> Closed {
        Closed::of(spec.think_ms, spec.think_on_failure_ms, spec.think_random, number, rng)
    }

    fn of(think_ms: u64, think_on_failure_ms: u64, random: ThinkRandom, number: u64, rng: Rng) -> Closed {
        Closed {
            think: Duration::from_millis(think_ms),
            random,
            rng,
            on_failure: Duration::from_millis(think_on_failure_ms),
            number: number as f64,
        }
    }

    /// Under a clients profile (`curve`, its time 0 at `origin`): when the operation due at `due` may start, the
    /// first moment from then on that the profile is at least the client's number; None when it never is again.
    pub fn turn(&self, curve: &Curve, origin: Instant, due: Instant) -> Option<Instant> {
        let at = curve.first_at_least(self.number, due.saturating_duration_since(origin).as_secs_f64());
        at.is_finite().then(|| due.max(origin + Duration::from_secs_f64(at)))
    }

    /// When the next operation should start, given how the previous one ended (None: first one).
    pub fn next_start(&mut self, prev: Option<Previous>, now: Instant) -> Instant {
        let Some(p) = prev else { return now };
        let think = match self.random {
            ThinkRandom::Constant => self.think,
            ThinkRandom::Uniform { spread_ms } => {
                let spread = Duration::from_millis(spread_ms);
                self.think - spread + (2 * spread).mul_f64(self.rng.unit())
            }
            // −ln(1 − u), u in [0, 1): an exponential of mean 1, at most about 37
            ThinkRandom::Exponential => self.think.mul_f64(-(1.0 - self.rng.unit()).ln()),
        };
        if p.failed {
            p.end + think + self.on_failure
        } else {
            p.end + think
        }
    }
}

/// Open loop: intended start times at `rate_hz` from `first` on, or following a rate profile.
pub(crate) struct Schedule {
    mean_gap_s: f64,
    poisson: bool,
    /// Seconds from `origin` to the next arrival (f64 sums do not drift like rounded Durations).
    next_s: f64,
    origin: Instant,
    rng: u64,
    /// A rate profile's count space (None: a constant rate).
    shaped: Option<Box<Shaped>>,
}

/// A profile's schedule on one thread: where in count space its next arrival is.
struct Shaped {
    curve: Curve,
    /// This thread's clients' places in the group's turn (ascending), and the group's clients.
    slots: Vec<u64>,
    clients: u64,
    /// The next arrival's turn: `cycle · clients + slots[slot]` (constant spacing).
    cycle: u64,
    slot: usize,
    /// The next arrival's place in count space (Λ of its intended start).
    y: f64,
    /// This thread's share of the group's arrivals (Poisson: its count-space rate).
    share: f64,
    /// Λ at the group's end: arrivals at or past it are not due.
    y_end: f64,
}

impl Schedule {
    /// The schedule of one runtime thread's `clients` (indices in this shard, ascending) of open-loop group `spec`,
    /// from `origin` until `end`; None when the group is not an open loop.
    /// `stream` is the group's stream of random gaps (`GroupShared::arrival_seed`); each thread and shard draws its own.
    pub fn of_thread(
        spec: &GroupSpec,
        clients: &[u64],
        origin: Instant,
        end: Option<Instant>,
        stream: u64,
    ) -> Option<Schedule> {
        let PacerSpec::Rate {
            rate_hz,
            ref profile,
            poisson,
            ..
        } = spec.pacer
        else {
            return None;
        };
        let first = clients[0];
        let seed = stream ^ (spec.client_offset + first);
        match (rate_hz, profile) {
            (Some(rate_hz), _) if !poisson && spec.group_clients.is_some() => {
                // A shard of a group on several machines (its rate is its clients' share of the group's): its
                // arrivals take their clients' turns over the whole group at the group's rate, so the shards'
                // schedules interleave as one machine's threads do, not each from the same instant (4 workers at
                // 1 000/s sent 4 at once every 4 ms).
                let all = spec.group_clients.unwrap_or(spec.clients);
                let flat = RateProfile::Points {
                    points: vec![(0.0, rate_hz * all as f64 / spec.clients as f64)],
                    step: true,
                };
                let slots = clients.iter().map(|c| spec.client_offset + c).collect();
                Some(Schedule::shaped(&flat, false, origin, slots, all, end, seed))
            }
            (Some(rate_hz), _) => {
                // Threads start one group-wide gap apart, so constant schedules interleave evenly.
                let share = clients.len() as f64 / spec.clients as f64;
                let phase = Duration::from_secs_f64(first as f64 / rate_hz);
                Some(Schedule::new(rate_hz * share, poisson, origin, phase, seed))
            }
            (None, Some(p)) => {
                // Turns over the whole group (every shard's clients), this thread's clients numbered in it.
                let (base, all) = spec
                    .group_clients
                    .map_or((0, spec.clients), |n| (spec.client_offset, n));
                let mut slots: Vec<u64> = clients.iter().map(|c| base + c).collect();
                slots.sort_unstable();
                Some(Schedule::shaped(p, poisson, origin, slots, all, end, seed))
            }
            (None, None) => None,
        }
    }

    /// `rate_hz` arrivals per second starting at `origin + phase`; `seed` picks the Poisson stream.
    pub fn new(rate_hz: f64, poisson: bool, origin: Instant, phase: Duration, seed: u64) -> Schedule {
        let mut s = Schedule {
            mean_gap_s: 1.0 / rate_hz,
            poisson,
            next_s: phase.as_secs_f64(),
            origin,
            rng: splitmix(seed),
            shaped: None,
        };
        if poisson {
            // A Poisson stream has no fixed phase: its first arrival is one exponential gap away.
            s.next_s += s.gap();
        }
        s
    }

    /// Arrivals following `profile` from `origin`, for this thread's `slots` (its clients' indices in the group,
    /// ascending) of the group's `clients`, until `end` (None: no end but the profile's own).
    pub fn shaped(
        profile: &RateProfile,
        poisson: bool,
        origin: Instant,
        slots: Vec<u64>,
        clients: u64,
        end: Option<Instant>,
        seed: u64,
    ) -> Schedule {
        let curve = Curve::new(profile);
        // Arrivals are due while Λ is below its value at the end (or the most it ever reaches).
        let y_end = end
            .map_or(f64::INFINITY, |e| {
                curve.integral(e.saturating_duration_since(origin).as_secs_f64())
            })
            .min(curve.supremum());
        let share = slots.len() as f64 / clients as f64;
        let first = slots.first().copied().unwrap_or(0) as f64;
        let mut s = Schedule {
            mean_gap_s: 0.0,
            poisson,
            next_s: 0.0,
            origin,
            rng: splitmix(seed),
            shaped: Some(Box::new(Shaped {
                curve,
                slots,
                clients,
                cycle: 0,
                slot: 0,
                // A Poisson stream has no phase: its first arrival is one exponential gap from the start.
                y: if poisson { 0.0 } else { first },
                share,
                y_end,
            })),
        };
        if poisson {
            let g = s.unit_gap();
            if let Some(sh) = s.shaped.as_mut() {
                sh.y += g / sh.share;
            }
        }
        s.locate();
        s
    }

    fn gap(&mut self) -> f64 {
        if self.poisson {
            -self.mean_gap_s * (1.0 - uniform(&mut self.rng)).ln()
        } else {
            self.mean_gap_s
        }
    }

    /// An exponential gap of mean 1.
    fn unit_gap(&mut self) -> f64 {
        -(1.0 - uniform(&mut self.rng)).ln()
    }

    /// A profile's next arrival time from its place in count space.
    fn locate(&mut self) {
        if let Some(sh) = self.shaped.as_mut() {
            self.next_s = if sh.y >= sh.y_end {
                f64::INFINITY
            } else {
                sh.curve.inverse(sh.y)
            };
        }
    }

    /// No arrival is due before `end` any more (or ever: a profile that ended at rate 0).
    pub fn ended(&self, end: Option<Instant>) -> bool {
        if self.shaped.is_some() {
            return self.next_s.is_infinite();
        }
        end.is_some_and(|e| self.peek() >= e)
    }

    /// The next intended start, without consuming it (not to be asked once `ended`).
    pub fn peek(&self) -> Instant {
        self.origin + Duration::from_secs_f64(self.next_s)
    }

    /// The next intended start; advances the schedule.
    pub fn next_arrival(&mut self) -> Instant {
        let at = self.peek();
        if self.shaped.is_none() {
            self.next_s += self.gap();
            return at;
        }
        let unit = if self.poisson { self.unit_gap() } else { 0.0 };
        if let Some(sh) = self.shaped.as_mut() {
            if self.poisson {
                sh.y += unit / sh.share;
            } else {
                sh.slot += 1;
                if sh.slot == sh.slots.len() {
                    sh.slot = 0;
                    sh.cycle += 1;
                }
                sh.y = (sh.cycle * sh.clients + sh.slots[sh.slot]) as f64;
            }
        }
        self.locate();
        at
    }
}

/// xorshift64*: a uniform number in [0, 1).
fn uniform(state: &mut u64) -> f64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_waits_think_after_the_previous_end_and_more_after_a_failure() {
        let t0 = Instant::now();
        assert_eq!(
            Closed::of(5, 0, ThinkRandom::Constant, 1, Rng::new(0, 0)).next_start(None, t0),
            t0
        );
        let ok = Previous { end: t0, failed: false };
        let failed = Previous { end: t0, failed: true };
        let ms = Duration::from_millis;
        for (think, on_failure, after_ok, after_failure) in [(5, 0, 5, 5), (5, 100, 5, 105), (0, 100, 0, 100)] {
            let mut p = Closed::of(think, on_failure, ThinkRandom::Constant, 1, Rng::new(0, 0));
            assert_eq!(p.next_start(Some(ok), t0), t0 + ms(after_ok));
            assert_eq!(p.next_start(Some(failed), t0), t0 + ms(after_failure));
        }
    }

    /// Think times drawn around their mean of 100 ms: uniform ±40 ms stays within 60–140 ms, its mean and spread
    /// a uniform's (sd 40/√3 = 23.1 ms); exponential has the mean for its standard deviation too. The same seed
    /// and client draw the same times, another client others; a failure's pause is added to the drawn time.
    #[test]
    fn random_think_times_are_uniform_or_exponential_around_their_mean_and_seeded() {
        let t0 = Instant::now();
        let ok = Some(Previous { end: t0, failed: false });
        let draws = |random, client: u64, seed: u64| -> Vec<f64> {
            let mut p = Closed::of(100, 0, random, 1, Rng::new(seed, client));
            (0..20_000)
                .map(|_| (p.next_start(ok, t0) - t0).as_secs_f64() * 1000.0)
                .collect()
        };
        let stats = |v: &[f64]| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
            (mean, var.sqrt())
        };
        let uniform = draws(ThinkRandom::Uniform { spread_ms: 40 }, 3, 9);
        assert!(uniform.iter().all(|&x| (60.0..140.0).contains(&x)));
        let (mean, sd) = stats(&uniform);
        assert!((mean - 100.0).abs() < 1.0 && (sd - 23.09).abs() < 0.5, "{mean} {sd}");
        let exponential = draws(ThinkRandom::Exponential, 3, 9);
        let (mean, sd) = stats(&exponential);
        assert!((mean - 100.0).abs() < 3.0 && (sd - 100.0).abs() < 4.0, "{mean} {sd}");
        assert!(exponential.iter().all(|&x| x >= 0.0));
        assert_eq!(draws(ThinkRandom::Exponential, 3, 9), exponential);
        assert_ne!(draws(ThinkRandom::Exponential, 4, 9)[..10], exponential[..10]);
        let mut p = Closed::of(100, 50, ThinkRandom::Uniform { spread_ms: 40 }, 1, Rng::new(0, 0));
        let after = p.next_start(Some(Previous { end: t0, failed: true }), t0) - t0;
        assert!(
            (Duration::from_millis(110)..Duration::from_millis(190)).contains(&after),
            "{after:?}"
        );
    }

    #[test]
    fn constant_schedule_is_evenly_spaced_from_its_phase() {
        let t0 = Instant::now();
        let mut s = Schedule::new(100.0, false, t0, Duration::from_millis(3), 0);
        let a = s.next_arrival();
        assert_eq!(s.peek() - a, Duration::from_millis(10));
        assert_eq!(a - t0, Duration::from_millis(3));
        let mut last = a;
        for _ in 0..100_000 {
            last = s.next_arrival();
        }
        // No drift after 100 000 gaps (1000 s): within a microsecond of the exact time.
        let exact = 0.003 + 100_000.0 * 0.01;
        assert!(((last - t0).as_secs_f64() - exact).abs() < 1e-6, "{:?}", last - t0);
    }

    /// Kolmogorov–Smirnov: the Poisson schedule's gaps follow Exp(rate). The statistic
    /// D = sup |F_n(x) - F(x)| must stay below the 1 % critical value 1.628 / sqrt(n).
    #[test]
    fn poisson_gaps_pass_a_kolmogorov_smirnov_test() {
        let t0 = Instant::now();
        let rate = 500.0;
        for seed in [1u64, 2, 3] {
            let mut s = Schedule::new(rate, true, t0, Duration::ZERO, seed);
            let n = 5000usize;
            let mut prev = s.next_arrival();
            let mut gaps: Vec<f64> = (0..n)
                .map(|_| {
                    let a = s.next_arrival();
                    let g = (a - prev).as_secs_f64();
                    prev = a;
                    g
                })
                .collect();
            gaps.sort_by(f64::total_cmp);
            let d = gaps
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    let f = 1.0 - (-rate * x).exp();
                    let lo = f - i as f64 / n as f64;
                    let hi = (i + 1) as f64 / n as f64 - f;
                    lo.max(hi)
                })
                .fold(0.0f64, f64::max);
            let critical = 1.628 / (n as f64).sqrt();
            assert!(d < critical, "seed {seed}: KS D = {d:.4} >= {critical:.4}");
            // The test can fail: constant gaps of the same mean are far from exponential.
            let mut c = Schedule::new(rate, false, t0, Duration::ZERO, seed);
            let x0 = c.next_arrival();
            let g = (c.next_arrival() - x0).as_secs_f64();
            let f = 1.0 - (-rate * g).exp();
            assert!((f - 0.0).max(1.0 - f) > critical);
        }
    }

    /// The arrivals of a group's `clients` round-robin over `threads` schedules under `profile`, until `end_s`:
    /// seconds from the origin, merged.
    fn group_arrivals(profile: &RateProfile, poisson: bool, clients: u64, threads: u64, end_s: f64) -> Vec<f64> {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs_f64(end_s);
        let mut all = Vec::new();
        for k in 0..threads {
            let slots: Vec<u64> = (0..clients).filter(|c| c % threads == k).collect();
            let mut s = Schedule::shaped(profile, poisson, t0, slots, clients, Some(end), k);
            while !s.ended(Some(end)) {
                all.push((s.next_arrival() - t0).as_secs_f64());
            }
        }
        all.sort_by(f64::total_cmp);
        all
    }

    fn points(p: &[(f64, f64)], step: bool) -> RateProfile {
        RateProfile::Points {
            points: p.to_vec(),
            step,
        }
    }

    /// Every interval holds the profile's integral over it, rounded: ⌈Λ(b)⌉ − ⌈Λ(a)⌉ (arrival i is due where
    /// Λ = i), so never 1 or more away from the integral; the whole run holds ⌈Λ(end)⌉. 7 clients on 3 threads
    /// (unequal shares) and on 1 thread.
    #[test]
    fn profiles_give_the_integral_in_every_interval() {
        let cases = [
            (points(&[(0.0, 10.0), (10.0, 210.0)], false), 10.0, 1100),
            (points(&[(0.0, 50.0), (3.0, 200.0), (6.0, 50.0)], true), 8.0, 850),
            // spike(base = 50, peak = 2000, at = 3s, hold = 1s), as knee.spec writes it
            (points(&[(0.0, 50.0), (3.0, 2000.0), (4.0, 50.0)], true), 6.0, 2250),
            (
                RateProfile::Sine {
                    mean_hz: 200.0,
                    amplitude_hz: 100.0,
                    period_s: 4.0,
                },
                8.0,
                1600,
            ),
        ];
        for (profile, end_s, total) in &cases {
            let curve = Curve::new(profile);
            for (clients, threads) in [(7, 3), (7, 1), (50, 2)] {
                let arrivals = group_arrivals(profile, false, clients, threads, *end_s);
                assert_eq!(arrivals.len(), *total, "{profile:?} on {threads} threads");
                for width in [1.0, 0.25, 0.1] {
                    let bins = (end_s / width).round() as usize;
                    for b in 0..bins {
                        let (lo, hi) = (b as f64 * width, (b + 1) as f64 * width);
                        let n = arrivals.iter().filter(|&&t| t >= lo && t < hi).count() as f64;
                        let exact = curve.integral(hi) - curve.integral(lo);
                        // ⌈Λ(hi)⌉ − ⌈Λ(lo)⌉, with a nanosecond's rounding of the arrival times allowed for.
                        assert!(
                            (n - exact).abs() < 1.0 + 1e-6,
                            "{profile:?}, {clients} clients on {threads} threads: [{lo}, {hi}) holds {n}, \
                             the integral is {exact}"
                        );
                    }
                }
            }
        }
    }

    /// Shards of a distributed run (clients 0..3 on one machine, 3..7 on another, each on 2 threads) take the turns
    /// of their clients numbered in the whole group: together they issue exactly the group's arrivals.
    #[test]
    fn shards_together_issue_the_groups_arrivals() {
        let profile = points(&[(0.0, 10.0), (10.0, 210.0)], false);
        let curve = Curve::new(&profile);
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(10);
        let mut all = Vec::new();
        for (offset, clients) in [(0u64, 3u64), (3, 4)] {
            for k in 0..2 {
                let slots: Vec<u64> = (0..clients).filter(|c| c % 2 == k).map(|c| offset + c).collect();
                let mut s = Schedule::shaped(&profile, false, t0, slots, 7, Some(end), offset + k);
                while !s.ended(Some(end)) {
                    all.push((s.next_arrival() - t0).as_secs_f64());
                }
            }
        }
        assert_eq!(all.len(), 1100);
        for b in 0..10 {
            let (lo, hi) = (f64::from(b), f64::from(b + 1));
            let n = all.iter().filter(|&&t| t >= lo && t < hi).count() as f64;
            assert!(
                (n - (curve.integral(hi) - curve.integral(lo))).abs() < 1.0 + 1e-6,
                "second {b}: {n}"
            );
        }
    }

    /// A constant profile is today's constant rate: the same arrivals, to the nanosecond.
    #[test]
    fn a_flat_profile_is_the_constant_rate() {
        let t0 = Instant::now();
        let (rate, clients, threads) = (250.0, 10u64, 2u64);
        for k in 0..threads {
            let slots: Vec<u64> = (0..clients).filter(|c| c % threads == k).collect();
            let share = slots.len() as f64 / clients as f64;
            let phase = Duration::from_secs_f64(k as f64 / rate);
            let mut flat = Schedule::shaped(&points(&[(0.0, rate)], false), false, t0, slots, clients, None, k);
            let mut constant = Schedule::new(rate * share, false, t0, phase, k);
            for _ in 0..10_000 {
                let (a, b) = (flat.next_arrival(), constant.next_arrival());
                assert!(a.max(b) - a.min(b) <= Duration::from_nanos(1), "{a:?} {b:?}");
            }
        }
    }

    /// Four machines' shards of a constant 1 000/s over 8 clients (250/s each, 2 clients, one thread) issue the
    /// group's arrivals one every millisecond between them, not four at once every 4 ms.
    #[test]
    fn shards_of_a_constant_rate_interleave() {
        let t0 = Instant::now();
        let mut all = Vec::new();
        for offset in [0u64, 2, 4, 6] {
            let spec: GroupSpec = serde_json::from_value(serde_json::json!({
                "name": "g", "clients": 2, "client_offset": offset, "group_clients": 8, "stop": {"duration_ms": 1000},
                "pacer": {"kind": "rate", "rate_hz": 250.0}, "client": {"kind": "tcp", "addr": "127.0.0.1:9"},
            }))
            .unwrap();
            let end = t0 + Duration::from_secs(1);
            let mut s = Schedule::of_thread(&spec, &[0, 1], t0, Some(end), 7).unwrap();
            while !s.ended(Some(end)) {
                all.push((s.next_arrival() - t0).as_secs_f64());
            }
        }
        all.sort_by(f64::total_cmp);
        assert_eq!(all.len(), 1000);
        for (i, t) in all.iter().enumerate() {
            assert!((t - i as f64 / 1000.0).abs() < 1e-9, "arrival {i} at {t} s");
        }
    }

    /// A profile that ends at rate 0 ends its schedule even without an end time.
    #[test]
    fn a_profile_down_to_zero_ends() {
        let t0 = Instant::now();
        let mut s = Schedule::shaped(
            &points(&[(0.0, 10.0), (1.0, 0.0)], false),
            false,
            t0,
            vec![0],
            1,
            None,
            0,
        );
        let mut n = 0;
        while !s.ended(None) {
            s.next_arrival();
            n += 1;
        }
        assert_eq!(n, 5);
    }

    /// Poisson under a profile is a non-homogeneous Poisson process: by the time-rescaling theorem the gaps of
    /// Λ(t_i) are Exp(1); KS at 1 %. The same arrivals read as a constant rate of their mean fail the test.
    #[test]
    fn poisson_profiles_pass_a_time_rescaled_kolmogorov_smirnov_test() {
        let profile = points(&[(0.0, 20.0), (20.0, 600.0)], false);
        let curve = Curve::new(&profile);
        let ks = |mut gaps: Vec<f64>| {
            gaps.sort_by(f64::total_cmp);
            let n = gaps.len() as f64;
            gaps.iter()
                .enumerate()
                .map(|(i, &x)| {
                    let f = 1.0 - (-x).exp();
                    (f - i as f64 / n).max((i + 1) as f64 / n - f)
                })
                .fold(0.0f64, f64::max)
        };
        for seed_threads in [1u64, 2, 3] {
            let arrivals = group_arrivals(&profile, true, 12, seed_threads, 20.0);
            let n = arrivals.len();
            assert!(
                (n as f64 - 6200.0).abs() < 4.0 * 6200f64.sqrt(),
                "{n} arrivals, 6200 expected"
            );
            let rescaled: Vec<f64> = arrivals.iter().map(|&t| curve.integral(t)).collect();
            let gaps: Vec<f64> = rescaled.windows(2).map(|w| w[1] - w[0]).collect();
            let critical = 1.628 / (gaps.len() as f64).sqrt();
            let d = ks(gaps);
            assert!(d < critical, "{seed_threads} threads: KS D = {d:.4} >= {critical:.4}");
            let mean = n as f64 / 20.0;
            let flat: Vec<f64> = arrivals.windows(2).map(|w| (w[1] - w[0]) * mean).collect();
            assert!(ks(flat) > critical, "a constant rate must fail the test");
        }
    }

    #[test]
    fn seeds_give_distinct_streams() {
        let t0 = Instant::now();
        let mut a = Schedule::new(100.0, true, t0, Duration::ZERO, 0);
        let mut b = Schedule::new(100.0, true, t0, Duration::ZERO, 1);
        assert_ne!(a.next_arrival(), b.next_arrival());
    }
}
