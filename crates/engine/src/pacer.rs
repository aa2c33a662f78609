//! Pacing: when operations are meant to start.
//!
//! `Closed` (per client): the next operation starts when the previous one ended (+ think time, and
//! after a failed one the think time on failure too).
//! `Schedule` (open loop, per runtime thread and group): a stream of *intended* start times at a
//! target rate, constant or Poisson (exponential gaps, seeded), independent of how fast the
//! service answers. The thread hands each arrival to an idle client slot; latency is measured
//! from the intended start, so a stall shows up in full (coordinated omission, as wrk2 fixed it).

use std::time::{Duration, Instant};

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
    think: Duration,
    /// Added to `think` after a failed operation.
    on_failure: Duration,
}

/// How a closed-loop client's previous operation ended, as its pacer needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Previous {
    pub end: Instant,
    pub failed: bool,
}

impl Closed {
    pub fn new(think_ms: u64, think_on_failure_ms: u64) -> Closed {
        Closed {
            think: Duration::from_millis(think_ms),
            on_failure: Duration::from_millis(think_on_failure_ms),
        }
    }

    /// When the next operation should start, given how the previous one ended (None: first one).
    pub fn next_start(&self, prev: Option<Previous>, now: Instant) -> Instant {
        prev.map_or(now, |p| {
            if p.failed {
                p.end + self.think + self.on_failure
            } else {
                p.end + self.think
            }
        })
    }
}

/// Open loop: intended start times at `rate_hz` from `first` on.
pub(crate) struct Schedule {
    mean_gap_s: f64,
    poisson: bool,
    /// Seconds from `origin` to the next arrival (f64 sums do not drift like rounded Durations).
    next_s: f64,
    origin: Instant,
    rng: u64,
}

impl Schedule {
    /// `rate_hz` arrivals per second starting at `origin + phase`; `seed` picks the Poisson stream.
    pub fn new(rate_hz: f64, poisson: bool, origin: Instant, phase: Duration, seed: u64) -> Schedule {
        let mut s = Schedule {
            mean_gap_s: 1.0 / rate_hz,
            poisson,
            next_s: phase.as_secs_f64(),
            origin,
            rng: splitmix(seed),
        };
        if poisson {
            // A Poisson stream has no fixed phase: its first arrival is one exponential gap away.
            s.next_s += s.gap();
        }
        s
    }

    fn gap(&mut self) -> f64 {
        if self.poisson {
            -self.mean_gap_s * (1.0 - uniform(&mut self.rng)).ln()
        } else {
            self.mean_gap_s
        }
    }

    /// The next intended start, without consuming it.
    pub fn peek(&self) -> Instant {
        self.origin + Duration::from_secs_f64(self.next_s)
    }

    /// The next intended start; advances the schedule.
    pub fn next_arrival(&mut self) -> Instant {
        let at = self.peek();
        self.next_s += self.gap();
        at
    }
}

/// splitmix64: spreads small seeds (0, 1, 2 …) over the state space; never returns 0 for xorshift.
fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
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
        assert_eq!(Closed::new(5, 0).next_start(None, t0), t0);
        let ok = Previous { end: t0, failed: false };
        let failed = Previous { end: t0, failed: true };
        let ms = Duration::from_millis;
        for (think, on_failure, after_ok, after_failure) in [(5, 0, 5, 5), (5, 100, 5, 105), (0, 100, 0, 100)] {
            let p = Closed::new(think, on_failure);
            assert_eq!(p.next_start(Some(ok), t0), t0 + ms(after_ok));
            assert_eq!(p.next_start(Some(failed), t0), t0 + ms(after_failure));
        }
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

    #[test]
    fn seeds_give_distinct_streams() {
        let t0 = Instant::now();
        let mut a = Schedule::new(100.0, true, t0, Duration::ZERO, 0);
        let mut b = Schedule::new(100.0, true, t0, Duration::ZERO, 1);
        assert_ne!(a.next_arrival(), b.next_arrival());
    }
}
