//! How service times vary with time: a warm-up (every service time × `warmup_factor` for the
//! first `warmup_for` seconds) and noise (a multiplier drawn anew every second from a log-normal
//! of median 1 and σ = `noise`).
//!
//! Both run on one clock that starts at the first request the service admits and starts again
//! at the first request after `POST /admin/reset`, so what a test sees does not depend on how
//! long its set-up took. Second `k` of the clock always draws the same noise multiplier for a
//! given `seed` (a counter-based generator: splitmix64 of the seed and `k`, then Box–Muller),
//! whoever asks and however often.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::config::Config;

/// The clock and the settings it applies.
pub struct Variation {
    warmup_for: f64,
    warmup_factor: f64,
    noise: f64,
    seed: u64,
    base: Instant,
    /// Nanoseconds from `base` to the clock's start, plus one; 0: not started.
    start: AtomicU64,
}

impl Variation {
    pub fn new(cfg: &Config) -> Variation {
        Variation {
            warmup_for: cfg.warmup_for,
            warmup_factor: cfg.warmup_factor,
            noise: cfg.noise,
            seed: cfg.seed,
            base: Instant::now(),
            start: AtomicU64::new(0),
        }
    }

    /// A request arrived at `now`: start the clock if it has not started.
    pub fn touch(&self, now: Instant) {
        if self.start.load(Relaxed) == 0 {
            let at = now.saturating_duration_since(self.base).as_nanos() as u64 + 1;
            let _ = self.start.compare_exchange(0, at, Relaxed, Relaxed);
        }
    }

    /// Stop the clock: the next request starts it again (and the warm-up with it).
    pub fn restart(&self) {
        self.start.store(0, Relaxed);
    }

    /// Seconds since the clock started (None before the first request).
    pub fn clock(&self, now: Instant) -> Option<f64> {
        match self.start.load(Relaxed) {
            0 => None,
            at => {
                let since = now.saturating_duration_since(self.base).as_nanos() as u64;
                Some(since.saturating_sub(at - 1) as f64 / 1e9)
            }
        }
    }

    /// True while the warm-up lasts.
    pub fn warming_up(&self, now: Instant) -> bool {
        self.warmup_for > 0.0 && self.clock(now).is_some_and(|t| t < self.warmup_for)
    }

    /// The warm-up's multiplier at `now` (1 when it is over or there is none).
    pub fn warmup_multiplier(&self, now: Instant) -> f64 {
        if self.warming_up(now) {
            self.warmup_factor
        } else {
            1.0
        }
    }

    /// The noise's multiplier at `now`: the draw of the clock's current second (1 without noise).
    pub fn noise_multiplier(&self, now: Instant) -> f64 {
        match self.clock(now) {
            Some(t) if self.noise > 0.0 => lognormal(self.seed, t as u64, self.noise),
            _ => 1.0,
        }
    }

    /// Both multipliers at `now`.
    pub fn multiplier(&self, now: Instant) -> f64 {
        self.warmup_multiplier(now) * self.noise_multiplier(now)
    }
}

/// The multiplier of second `k`: e^(σz), z the standard normal draw number `k` of `seed`.
pub fn lognormal(seed: u64, k: u64, sigma: f64) -> f64 {
    (sigma * normal(seed, k)).exp()
}

/// A standard normal draw (Box–Muller over two uniforms from the seed and `k`).
fn normal(seed: u64, k: u64) -> f64 {
    let u1 = uniform(seed, 2 * k);
    let u2 = uniform(seed, 2 * k + 1);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A uniform draw in (0, 1]: the top 53 bits of splitmix64 of (seed, i).
fn uniform(seed: u64, i: u64) -> f64 {
    let x = splitmix64(seed ^ splitmix64(i));
    ((x >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// splitmix64's finalizer (Steele, Lea, Flood 2014): a well-mixed 64-bit hash of `x`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn variation(toml: &str) -> Variation {
        Variation::new(&Config::from_toml(toml).unwrap())
    }

    #[test]
    fn the_warm_up_runs_from_the_first_request_and_again_after_a_reset() {
        let v = variation("warmup_for = 2.0\nwarmup_factor = 4.0\n");
        let t0 = Instant::now() + Duration::from_secs(5);
        // No request yet: no clock, no warm-up, however long the set-up took.
        assert_eq!(v.clock(t0), None);
        assert_eq!(v.multiplier(t0), 1.0);
        v.touch(t0);
        // A later request does not move the start.
        v.touch(t0 + Duration::from_millis(500));
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(v.clock(at(1.5)), Some(1.5));
        assert_eq!(v.multiplier(at(0.0)), 4.0);
        assert_eq!(v.multiplier(at(1.999)), 4.0);
        assert!(v.warming_up(at(1.999)));
        assert_eq!(v.multiplier(at(2.0)), 1.0);
        assert_eq!(v.multiplier(at(60.0)), 1.0);
        // A reset: the clock waits for the next request, which starts a new warm-up.
        v.restart();
        assert_eq!(v.clock(at(70.0)), None);
        assert_eq!(v.multiplier(at(70.0)), 1.0);
        v.touch(at(80.0));
        assert_eq!(v.multiplier(at(81.0)), 4.0);
        assert_eq!(v.multiplier(at(82.0)), 1.0);
    }

    #[test]
    fn the_default_factor_is_three_and_no_warm_up_means_one() {
        let v = variation("warmup_for = 1.0\n");
        let t0 = Instant::now();
        v.touch(t0);
        assert_eq!(v.multiplier(t0), 3.0);
        let none = variation("");
        none.touch(t0);
        assert_eq!(none.multiplier(t0), 1.0);
    }

    #[test]
    fn noise_is_one_draw_per_second_the_same_for_the_same_seed() {
        let v = variation("noise = 0.5\nseed = 7\n");
        let t0 = Instant::now();
        v.touch(t0);
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // Constant within a second, new at the next one.
        assert_eq!(v.multiplier(at(3.1)), v.multiplier(at(3.9)));
        assert_ne!(v.multiplier(at(3.9)), v.multiplier(at(4.0)));
        assert_eq!(v.multiplier(at(3.5)), lognormal(7, 3, 0.5));
        // The same seed draws the same sequence; another seed another one.
        let again = variation("noise = 0.5\nseed = 7\n");
        let other = variation("noise = 0.5\nseed = 8\n");
        let (t1, t2) = (Instant::now(), Instant::now());
        again.touch(t1);
        other.touch(t2);
        for k in 0..20 {
            let s = k as f64 + 0.5;
            assert_eq!(again.multiplier(t1 + Duration::from_secs_f64(s)), v.multiplier(at(s)));
        }
        let differ = (0..20)
            .filter(|&k| lognormal(7, k, 0.5) != lognormal(8, k, 0.5))
            .count();
        assert_eq!(differ, 20);
    }

    #[test]
    fn noise_is_log_normal_with_median_one_and_the_configured_sigma() {
        let n = 20_000u64;
        let logs: Vec<f64> = (0..n).map(|k| lognormal(1, k, 0.5).ln()).collect();
        let mean = logs.iter().sum::<f64>() / n as f64;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        assert!(mean.abs() < 0.02, "log-mean {mean}");
        assert!((sd - 0.5).abs() < 0.02, "log-sd {sd}");
        let mut m: Vec<f64> = logs.iter().map(|x| x.exp()).collect();
        m.sort_by(f64::total_cmp);
        let median = m[m.len() / 2];
        assert!((median - 1.0).abs() < 0.03, "median {median}");
        // The spread a test of throughput sees: one second in six is 1.6× slower or more.
        let over = m.iter().filter(|&&x| x > 0.5f64.exp()).count() as f64 / n as f64;
        assert!((over - 0.159).abs() < 0.02, "{over}");
        // No noise: always one.
        assert_eq!(lognormal(1, 5, 0.0), 1.0);
    }
}
