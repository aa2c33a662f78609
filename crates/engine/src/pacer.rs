//! Pacing: one small abstraction that says when a client's next operation is meant to start.
//!
//! Like vegeta's `Pace(elapsed, hits) -> (wait, stop)`, a pacer only answers "when"; stop rules
//! live elsewhere. `Closed` starts the next operation when the previous one ended (+ think time).
//! `Rate` is an open loop: the group's `rate_hz` is split evenly over its clients (staggered
//! phases, constant or Poisson gaps), and the operation's latency is measured from its
//! *intended* start, so a slow server cannot hide its queueing (coordinated omission).

use std::time::{Duration, Instant};

use crate::spec::PacerSpec;

pub(crate) enum Pacer {
    Closed {
        think: Duration,
    },
    Rate {
        mean_gap_s: f64,
        poisson: bool,
        next: Instant,
        rng: u64,
    },
}

impl Pacer {
    pub fn new(spec: &PacerSpec, think_ms: u64, clients: u64, client: u64, start: Instant) -> Pacer {
        match *spec {
            PacerSpec::Closed => Pacer::Closed {
                think: Duration::from_millis(think_ms),
            },
            PacerSpec::Rate { rate_hz, poisson, .. } => {
                let mean_gap_s = clients as f64 / rate_hz;
                let phase = Duration::from_secs_f64(client as f64 / rate_hz);
                Pacer::Rate {
                    mean_gap_s,
                    poisson,
                    next: start + phase,
                    rng: 0x9E37_79B9_7F4A_7C15 ^ (client + 1),
                }
            }
        }
    }

    /// True when latency is measured from the intended start (open loop).
    pub fn open(&self) -> bool {
        matches!(self, Pacer::Rate { .. })
    }

    /// When the next operation should start, given when the previous one ended (None: first one).
    pub fn next_start(&mut self, prev_end: Option<Instant>, now: Instant) -> Instant {
        match self {
            Pacer::Closed { think } => prev_end.map_or(now, |e| e + *think),
            Pacer::Rate {
                mean_gap_s,
                poisson,
                next,
                rng,
            } => {
                let at = *next;
                let gap = if *poisson {
                    -mean_gap_s.to_owned() * (1.0 - uniform(rng)).ln()
                } else {
                    *mean_gap_s
                };
                *next += Duration::from_secs_f64(gap);
                at
            }
        }
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
    fn closed_waits_think_after_the_previous_end() {
        let t0 = Instant::now();
        let mut p = Pacer::new(&PacerSpec::Closed, 5, 3, 0, t0);
        assert!(!p.open());
        assert_eq!(p.next_start(None, t0), t0);
        assert_eq!(p.next_start(Some(t0), t0), t0 + Duration::from_millis(5));
    }

    #[test]
    fn rate_spreads_the_group_rate_over_clients() {
        let t0 = Instant::now();
        let spec = PacerSpec::Rate {
            rate_hz: 100.0,
            poisson: false,
            max_in_flight: None,
        };
        let mut p = Pacer::new(&spec, 0, 4, 1, t0);
        assert!(p.open());
        let a = p.next_start(None, t0);
        let b = p.next_start(Some(a), a);
        assert_eq!(a - t0, Duration::from_millis(10));
        assert_eq!(b - a, Duration::from_millis(40));
        let spec = PacerSpec::Rate {
            rate_hz: 1000.0,
            poisson: true,
            max_in_flight: None,
        };
        let mut p = Pacer::new(&spec, 0, 1, 0, t0);
        let mut last = p.next_start(None, t0);
        for _ in 0..2000 {
            last = p.next_start(Some(last), last);
        }
        let mean_ms = (last - t0).as_secs_f64() * 1000.0 / 2000.0;
        assert!((0.85..1.15).contains(&mean_ms), "poisson mean gap {mean_ms} ms");
    }
}
