//! Rate profiles: an open loop's arrival rate as a function of time (docs/load-shapes.md).
//!
//! A profile is read through its integral Λ(t), the arrivals due from the start to `t`, and that
//! integral's inverse: arrival number `i` of a group is due at the `t` where Λ(t) = i, so the
//! arrivals in any interval are the integral over it, rounded (a constant rate is Λ(t) = rate·t).
//! Piecewise-linear Λ is quadratic per segment and inverts exactly; a sine's inverts by a
//! safeguarded Newton iteration. A spike is a step profile (`knee.spec` writes it so).

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// The most seconds a profile may run to: past it an arrival is never due (a profile that ends at
/// rate 0 has no more arrivals; `Duration::from_secs_f64` would overflow on the infinite time).
const NEVER_S: f64 = 1e9;

/// An open loop's rate over time; times in seconds from the step's start (warm-up included).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "shape", rename_all = "snake_case", deny_unknown_fields)]
pub enum RateProfile {
    /// `(seconds, arrivals per second)` points, times strictly increasing: linear between points
    /// (a ramp) or, with `step`, each rate held until the next point. Before the first point the
    /// first rate holds, after the last the last one.
    Points {
        points: Vec<(f64, f64)>,
        #[serde(default)]
        step: bool,
    },
    /// `mean_hz + amplitude_hz · sin(2π t / period_s)`, with `amplitude_hz ≤ mean_hz`.
    Sine {
        mean_hz: f64,
        amplitude_hz: f64,
        period_s: f64,
    },
}

impl RateProfile {
    /// Check every value of an open loop's rate profile; the error names the key, the value and the fix.
    pub fn validate(&self, key: &str) -> Result<(), SpecError> {
        self.check(key, None)?;
        if self.peak_hz() > crate::pacer::MAX_RATE_HZ {
            return Err(SpecError::new(format!(
                "{key}.peak rate {} is more than the engine can pace (at most {} a second); lower the profile",
                self.peak_hz(),
                crate::pacer::MAX_RATE_HZ
            )));
        }
        Ok(())
    }

    /// Check a closed loop's clients profile, of a group of `clients` clients (every shard's): its values are
    /// numbers of clients running, at most the group's.
    pub fn validate_clients(&self, key: &str, clients: u64) -> Result<(), SpecError> {
        self.check(key, Some(clients))
    }

    /// `clients`: None for a rate profile, the group's clients for a clients profile.
    fn check(&self, key: &str, clients: Option<u64>) -> Result<(), SpecError> {
        let what = if clients.is_some() { "clients" } else { "rate" };
        let bad = |what: String| -> Result<(), SpecError> { Err(SpecError::new(format!("{key}.{what}"))) };
        match self {
            RateProfile::Points { points, .. } => {
                if points.is_empty() {
                    return bad("points must hold at least one (seconds, rate) point (got none)".into());
                }
                for (i, &(t, r)) in points.iter().enumerate() {
                    if !(t.is_finite() && t >= 0.0) {
                        return bad(format!("points[{i}] time must be at least 0 seconds (got {t})"));
                    }
                    if !(r.is_finite() && r >= 0.0) {
                        return bad(format!("points[{i}] {what} must be a number of at least 0 (got {r})"));
                    }
                    if i > 0 && t <= points[i - 1].0 {
                        return bad(format!(
                            "points[{i}] time {t} s is not after the point before it ({} s); give the points in \
                             increasing time",
                            points[i - 1].0
                        ));
                    }
                }
                if points.iter().all(|&(_, r)| r == 0.0) {
                    return bad(if clients.is_some() {
                        "points are all at 0 clients: no client would ever run; give a count above 0".into()
                    } else {
                        "points are all at rate 0: no arrival would ever be due; give a rate above 0".into()
                    });
                }
            }
            RateProfile::Sine {
                mean_hz,
                amplitude_hz,
                period_s,
            } => {
                if !(mean_hz.is_finite() && *mean_hz > 0.0) {
                    return bad(format!("mean_hz must be a positive number (got {mean_hz})"));
                }
                if !(amplitude_hz.is_finite() && *amplitude_hz >= 0.0 && amplitude_hz <= mean_hz) {
                    return bad(format!(
                        "amplitude_hz must be between 0 and mean_hz ({mean_hz}) (got {amplitude_hz}): a rate \
                         cannot fall below 0"
                    ));
                }
                if !(period_s.is_finite() && *period_s > 0.0) {
                    return bad(format!(
                        "period_s must be a positive number of seconds (got {period_s})"
                    ));
                }
            }
        }
        if let Some(n) = clients.filter(|&n| self.peak_hz().floor() > n as f64) {
            return bad(format!(
                "peak of {} clients is more than the group's clients ({n}); give the group at least {} clients",
                self.peak_hz(),
                self.peak_hz().floor()
            ));
        }
        Ok(())
    }

    /// The highest rate the profile reaches.
    pub fn peak_hz(&self) -> f64 {
        match self {
            RateProfile::Points { points, .. } => points.iter().map(|p| p.1).fold(0.0, f64::max),
            RateProfile::Sine {
                mean_hz, amplitude_hz, ..
            } => mean_hz + amplitude_hz,
        }
    }
}

/// A profile prepared for reading: cumulative arrivals at each point, and where the last inverse
/// was (arrivals come in increasing order, so the segment search only moves forward).
pub(crate) struct Curve {
    shape: Shape,
    /// Points: the segment of the last inverse.
    seg: usize,
}

enum Shape {
    /// Segment k runs from `t[k]` with rate `r[k]` and slope `s[k]`; `c[k]` = Λ(t[k]).
    Points {
        t: Vec<f64>,
        r: Vec<f64>,
        s: Vec<f64>,
        c: Vec<f64>,
    },
    Sine {
        mean: f64,
        amp: f64,
        period: f64,
    },
}

impl Curve {
    pub fn new(p: &RateProfile) -> Curve {
        let shape = match p {
            RateProfile::Points { points, step } => {
                let mut pts = points.clone();
                if pts.first().is_some_and(|&(t, _)| t > 0.0) {
                    pts.insert(0, (0.0, pts[0].1));
                }
                let n = pts.len();
                let t: Vec<f64> = pts.iter().map(|p| p.0).collect();
                let r: Vec<f64> = pts.iter().map(|p| p.1).collect();
                let s: Vec<f64> = (0..n)
                    .map(|k| {
                        if *step || k + 1 == n {
                            0.0
                        } else {
                            (r[k + 1] - r[k]) / (t[k + 1] - t[k])
                        }
                    })
                    .collect();
                let mut c = Vec::with_capacity(n);
                let mut so_far = 0.0;
                c.push(so_far);
                for ((w, rk), sk) in t.windows(2).zip(&r).zip(&s) {
                    let d = w[1] - w[0];
                    so_far += rk * d + 0.5 * sk * d * d;
                    c.push(so_far);
                }
                Shape::Points { t, r, s, c }
            }
            RateProfile::Sine {
                mean_hz,
                amplitude_hz,
                period_s,
            } => Shape::Sine {
                mean: *mean_hz,
                amp: *amplitude_hz,
                period: *period_s,
            },
        };
        Curve { shape, seg: 0 }
    }

    /// Λ(t): the arrivals due from 0 to `t` seconds.
    pub fn integral(&self, at: f64) -> f64 {
        match &self.shape {
            Shape::Points { t, r, s, c } => {
                let k = t.partition_point(|&x| x <= at).saturating_sub(1);
                let d = at - t[k];
                c[k] + r[k] * d + 0.5 * s[k] * d * d
            }
            Shape::Sine { mean, amp, period } => {
                let w = std::f64::consts::TAU / period;
                mean * at + amp / w * (1.0 - (w * at).cos())
            }
        }
    }

    /// Λ(∞): the arrivals the profile ever has (infinite unless it ends at rate 0).
    pub fn supremum(&self) -> f64 {
        match &self.shape {
            Shape::Points { r, c, .. } if r.last() == Some(&0.0) => c[c.len() - 1],
            _ => f64::INFINITY,
        }
    }

    /// The earliest time where Λ(t) = y (y ≥ 0, increasing from call to call) and the rate is not 0 there, or
    /// infinity when Λ never reaches it (a profile that ends at rate 0). A stretch at rate 0 where Λ stays at y is
    /// waited through: a profile that starts at rate 0 (a spike from base 0) issues nothing before its rate rises,
    /// and no arrival falls at the start of a pause, so the arrivals in such a stretch are its integral, 0.
    pub fn inverse(&mut self, y: f64) -> f64 {
        let at = match &self.shape {
            Shape::Points { t, r, s, c } => {
                let n = t.len();
                let flat = |k: usize| r[k] == 0.0 && s[k] == 0.0;
                let at_flat = |k: usize| y == c[k + 1] && (flat(k) || flat(k + 1));
                while self.seg + 1 < n && (y > c[self.seg + 1] || at_flat(self.seg)) {
                    self.seg += 1;
                }
                let k = self.seg;
                let (d, rk, sk) = ((y - c[k]).max(0.0), r[k], s[k]);
                if d == 0.0 {
                    t[k]
                } else if sk == 0.0 {
                    if rk > 0.0 {
                        t[k] + d / rk
                    } else {
                        f64::INFINITY
                    }
                } else {
                    // τ of (s/2)τ² + rτ = d, in the form that keeps its precision when s is small or negative.
                    t[k] + 2.0 * d / (rk + (rk * rk + 2.0 * sk * d).max(0.0).sqrt())
                }
            }
            Shape::Sine { mean, amp, period } => sine_inverse(*mean, *amp, *period, y),
        };
        if at > NEVER_S {
            f64::INFINITY
        } else {
            at
        }
    }
}

impl Curve {
    /// The profile's value at `at` seconds: a rate, or (a closed loop's clients profile) a number of clients.
    pub fn value(&self, at: f64) -> f64 {
        match &self.shape {
            Shape::Points { t, r, s, .. } => {
                let k = t.partition_point(|&x| x <= at).saturating_sub(1);
                r[k] + s[k] * (at - t[k])
            }
            Shape::Sine { mean, amp, period } => mean + amp * (std::f64::consts::TAU * at / period).sin(),
        }
    }

    /// The earliest time at or after `from` where the value is at least `level`, or infinity when it never is
    /// again: when a closed loop's client number `level` (1-based) is due to run. Its answer, read back with
    /// `value`, may be below `level` by a rounding error; `LEVEL_SLACK` covers it.
    pub fn first_at_least(&self, level: f64, from: f64) -> f64 {
        let level = level - LEVEL_SLACK;
        if self.value(from) >= level {
            return from;
        }
        let at = match &self.shape {
            Shape::Points { t, r, s, .. } => {
                let mut k = t.partition_point(|&x| x <= from).saturating_sub(1);
                let mut found = f64::INFINITY;
                while k < t.len() {
                    let start = t[k].max(from);
                    if r[k] + s[k] * (start - t[k]) >= level {
                        found = start;
                        break;
                    }
                    if s[k] > 0.0 {
                        let cross = t[k] + (level - r[k]) / s[k];
                        if t.get(k + 1).is_none_or(|&end| cross <= end) {
                            found = cross.max(start);
                            break;
                        }
                    }
                    k += 1;
                }
                found
            }
            Shape::Sine { mean, amp, period } => {
                // sin(wt) ≥ x holds on [a, π − a] (mod 2π), a = asin x: the next such stretch starts at a + 2πm.
                let x = if *amp > 0.0 {
                    (level - mean) / amp
                } else {
                    f64::INFINITY
                };
                if x > 1.0 {
                    f64::INFINITY
                } else {
                    let w = std::f64::consts::TAU / period;
                    let a = x.asin();
                    let m = ((w * from - a) / std::f64::consts::TAU).ceil();
                    (a + m * std::f64::consts::TAU) / w
                }
            }
        };
        if at > NEVER_S {
            f64::INFINITY
        } else {
            at
        }
    }
}

/// How far below a client's number the profile may read at the time `first_at_least` gave (rounding errors).
const LEVEL_SLACK: f64 = 1e-9;

/// Λ(t) = mean·t + (amp/w)(1 − cos wt) = y: one period's worth of arrivals is mean·period, so the
/// answer is whole periods plus a root in [0, period), found by Newton steps kept inside a bracket.
fn sine_inverse(mean: f64, amp: f64, period: f64, y: f64) -> f64 {
    let w = std::f64::consts::TAU / period;
    let per_period = mean * period;
    let whole = (y / per_period).floor();
    let rest = y - whole * per_period;
    let f = |x: f64| mean * x + amp / w * (1.0 - (w * x).cos()) - rest;
    let (mut lo, mut hi) = (0.0, period);
    let mut x = rest / mean;
    for _ in 0..60 {
        let fx = f(x);
        if fx.abs() < 1e-9 {
            break;
        }
        if fx > 0.0 {
            hi = x;
        } else {
            lo = x;
        }
        let slope = mean + amp * (w * x).sin();
        let newton = x - fx / slope;
        x = if slope > 0.0 && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if hi - lo < 1e-12 * period {
            break;
        }
    }
    whole * period + x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(p: &[(f64, f64)], step: bool) -> RateProfile {
        RateProfile::Points {
            points: p.to_vec(),
            step,
        }
    }

    #[test]
    fn integrals_of_each_shape() {
        let ramp = Curve::new(&points(&[(0.0, 10.0), (10.0, 210.0)], false));
        assert_eq!(ramp.integral(10.0), 1100.0);
        assert_eq!(ramp.integral(1.0), 20.0);
        assert_eq!(ramp.integral(12.0), 1100.0 + 420.0);
        let steps = Curve::new(&points(&[(0.0, 50.0), (3.0, 200.0), (6.0, 50.0)], true));
        assert_eq!(steps.integral(3.0), 150.0);
        assert_eq!(steps.integral(6.0), 750.0);
        assert_eq!(steps.integral(8.0), 850.0);
        let late = Curve::new(&points(&[(2.0, 10.0), (4.0, 30.0)], false));
        assert_eq!(late.integral(2.0), 20.0);
        assert_eq!(late.integral(4.0), 60.0);
        let sine = Curve::new(&RateProfile::Sine {
            mean_hz: 200.0,
            amplitude_hz: 100.0,
            period_s: 10.0,
        });
        assert!((sine.integral(10.0) - 2000.0).abs() < 1e-9);
        assert!((sine.integral(5.0) - (1000.0 + 100.0 * 10.0 / std::f64::consts::PI)).abs() < 1e-9);
    }

    /// A ramp from 0, one with a pause at 0, steps down to 0, one whose first point is late, a sine down to 0.
    fn shapes() -> [RateProfile; 5] {
        [
            points(&[(0.0, 0.0), (10.0, 40.0)], false),
            points(&[(0.0, 300.0), (5.0, 0.0), (7.0, 0.0), (9.0, 40.0)], false),
            points(&[(0.0, 50.0), (3.0, 0.0), (6.0, 50.0)], true),
            points(&[(2.0, 10.0), (4.0, 30.0)], false),
            RateProfile::Sine {
                mean_hz: 20.0,
                amplitude_hz: 20.0,
                period_s: 7.0,
            },
        ]
    }

    #[test]
    fn a_clients_turn_is_the_first_time_the_profile_reaches_its_number() {
        for p in &shapes() {
            let c = Curve::new(p);
            for number in 1..=45 {
                for k in 0..40 {
                    let (level, from) = (f64::from(number), f64::from(k) * 0.37);
                    let t = c.first_at_least(level, from);
                    // Never earlier than asked, and the profile is that high there when it is ever.
                    let grid = (0..2000).map(|i| from + f64::from(i) * 0.01);
                    let reached = grid.clone().find(|&x| c.value(x) >= level);
                    match reached {
                        None if t.is_infinite() || t > from + 20.0 => {}
                        None => assert!(c.value(t) >= level - 1e-6, "{p:?}: {level} at {t}"),
                        Some(x) => {
                            assert!(
                                t >= from && t <= x + 1e-9,
                                "{p:?}: {level} from {from}: {t}, sampled {x}"
                            );
                            assert!(c.value(t) >= level - 1e-6, "{p:?}: {level} at {t}: {}", c.value(t));
                            // The earliest: 10 ms before it (and after `from`), the profile was below the number.
                            assert!(t - 0.01 < from || c.value(t - 0.01) < level, "{p:?}: {level} at {t}");
                        }
                    }
                }
            }
        }
        // A profile that falls to 0 and stays there: a client whose number it left never runs again.
        let down = Curve::new(&points(&[(0.0, 10.0), (5.0, 0.0)], false));
        assert_eq!(down.first_at_least(3.0, 1.0), 1.0);
        assert!(down.first_at_least(3.0, 4.0).is_infinite());
        assert!(Curve::new(&RateProfile::Sine {
            mean_hz: 10.0,
            amplitude_hz: 2.0,
            period_s: 4.0
        })
        .first_at_least(13.0, 0.0)
        .is_infinite());
    }

    #[test]
    fn the_inverse_undoes_the_integral() {
        for p in &shapes() {
            let mut c = Curve::new(p);
            for i in 0..3000 {
                let y = f64::from(i) * 0.731;
                let t = c.inverse(y);
                assert!(
                    (c.integral(t) - y).abs() < 1e-6,
                    "{p:?}: Λ(Λ⁻¹({y})) = {}",
                    c.integral(t)
                );
                // The earliest such time: a moment before it, fewer arrivals were due.
                assert!(t == 0.0 || c.integral(t - 1e-4) < y, "{p:?} at {y}");
            }
        }
        // A stretch at rate 0 is waited through: a spike from base 0 starts its arrivals where its rate rises, and
        // a pause has none at its start (arrival 150 of 50/s for 3 s, then 0 for 3 s, comes at 6 s, not at 3 s).
        let mut spike = Curve::new(&points(&[(0.0, 0.0), (4.0, 1500.0), (7.0, 0.0)], true));
        assert_eq!((spike.inverse(0.0), spike.inverse(1.5)), (4.0, 4.001));
        let mut pause = Curve::new(&points(&[(0.0, 50.0), (3.0, 0.0), (6.0, 50.0)], true));
        assert_eq!(
            (pause.inverse(149.0), pause.inverse(150.0), pause.inverse(151.0)),
            (2.98, 6.0, 6.02)
        );
        // A profile that ends at rate 0 has no arrival past its last.
        let mut c = Curve::new(&points(&[(0.0, 10.0), (1.0, 0.0)], false));
        assert!((c.inverse(4.0) - (1.0 - 0.2f64.sqrt())).abs() < 1e-12);
        assert!(c.inverse(5.5).is_infinite());
    }

    #[test]
    fn bad_profiles_name_the_key_the_value_and_the_fix() {
        let e = |p: RateProfile| p.validate("g.pacer.profile").unwrap_err().to_string();
        assert_eq!(
            e(points(&[(0.0, 10.0), (60.0, 400.0), (30.0, 5.0)], false)),
            "g.pacer.profile.points[2] time 30 s is not after the point before it (60 s); give the points in \
             increasing time"
        );
        assert_eq!(
            e(points(&[(0.0, -1.0)], false)),
            "g.pacer.profile.points[0] rate must be a number of at least 0 (got -1)"
        );
        assert!(e(points(&[(0.0, 0.0)], true)).contains("all at rate 0"));
        assert!(e(RateProfile::Sine {
            mean_hz: 10.0,
            amplitude_hz: 20.0,
            period_s: 1.0
        })
        .starts_with("g.pacer.profile.amplitude_hz must be between 0 and mean_hz (10) (got 20)"));
        assert!(e(points(&[(0.0, 2e7)], false)).contains("more than the engine can pace"));
    }
}
