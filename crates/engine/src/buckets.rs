//! An interval's latency: successes counted in buckets of a sixteenth of an octave, so that a series keeps its
//! percentiles interval by interval at a few hundred bytes each (an HdrHistogram of 3 digits is 190 KB). Values
//! below 16 µs have a bucket each; above, a bucket holds the values from (16 + s)·2^k to (17 + s)·2^k − 1, a
//! width of at most 1/16 of its lowest value (6.25 %). A percentile is read as HdrHistogram reads one: the
//! highest value of the bucket in which the rank ⌈q · count⌉ falls. Buckets add, so shards' and threads'
//! intervals merge exactly, and so does a run of intervals (knee.analysis.series_latency reads the same buckets).

use serde::{Deserialize, Serialize};

use crate::histo::HIGHEST_US;

/// Buckets per octave (and values below this have one each).
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;

/// The bucket of `us` microseconds.
#[inline]
pub fn index(us: u64) -> usize {
    let us = us.min(HIGHEST_US);
    if us < SUB {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros(); // ≥ SUB_BITS
    let shift = octave - SUB_BITS;
    (SUB + u64::from(shift) * SUB + ((us >> shift) & (SUB - 1))) as usize
}

/// The highest value bucket `i` holds.
pub fn highest(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = (i - SUB) / SUB;
    let sub = (i - SUB) % SUB;
    ((SUB + sub + 1) << shift) - 1
}

/// Counts by bucket, as long as the highest bucket recorded (empty: nothing recorded).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Buckets(Vec<u32>);

impl Buckets {
    #[inline]
    pub fn record(&mut self, us: u64) {
        let i = index(us);
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] += 1;
    }

    pub fn add(&mut self, o: &Buckets) {
        add_counts(&mut self.0, &o.0);
    }

    pub fn count(&self) -> u64 {
        self.0.iter().map(|&c| u64::from(c)).sum()
    }

    /// The value at `percent` (50.0 for the median), as HdrHistogram's `value_at_quantile`; None when empty.
    pub fn percentile(&self, percent: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((percent / 100.0 * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (i, &c) in self.0.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(highest(i));
            }
        }
        unreachable!("the ranks end at the total")
    }

    /// The buckets that hold a count, as (bucket, count).
    pub fn sparse(&self) -> Vec<(u16, u32)> {
        let nonzero = self.0.iter().enumerate().filter(|(_, &c)| c > 0);
        nonzero.map(|(i, &c)| (i as u16, c)).collect()
    }
}

/// Add `more` into `counts` element by element, `counts` grown to the longer of the two (counts kept only as far
/// as something was counted: an interval's buckets, its failures by class).
pub(crate) fn add_counts<T: Copy + Default + std::ops::AddAssign>(counts: &mut Vec<T>, more: &[T]) {
    if counts.len() < more.len() {
        counts.resize(more.len(), T::default());
    }
    for (a, &b) in counts.iter_mut().zip(more) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histo::new_histogram;

    #[test]
    fn every_value_falls_in_a_bucket_whose_width_is_at_most_a_sixteenth_of_it() {
        let mut v = 0u64;
        while v <= HIGHEST_US {
            let i = index(v);
            let (lo, hi) = (if i == 0 { 0 } else { highest(i - 1) + 1 }, highest(i));
            assert!(lo <= v && v <= hi, "{v} in bucket {i} of {lo}..={hi}");
            assert!(
                (hi - lo) * 16 <= lo.max(1),
                "bucket {i}: {lo}..={hi} is wider than 1/16"
            );
            v = if v < 100_000 { v + 1 } else { v + v / 997 };
        }
        assert!(index(HIGHEST_US) < u16::MAX as usize);
    }

    #[test]
    fn percentiles_are_hdrhistograms_to_the_bucket() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let (mut b, mut h) = (Buckets::default(), new_histogram());
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let us = 50 + (rng % 1000) * (rng % 997) / 3; // 50 µs … 330 ms, a long tail
            b.record(us);
            h.record(us).unwrap();
        }
        for p in [1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            let exact = h.value_at_quantile(p / 100.0);
            let ours = b.percentile(p).unwrap();
            assert_eq!(
                index(ours),
                index(exact),
                "p{p}: {ours} and HdrHistogram's {exact} in other buckets"
            );
        }
        let (mut one, mut two) = (Buckets::default(), Buckets::default());
        for (n, us) in [(3u32, 10u64), (1, 1_000), (96, 20)] {
            for _ in 0..n {
                one.record(us);
            }
        }
        two.add(&one);
        two.add(&one);
        assert_eq!((one.count(), two.count()), (100, 200));
        assert_eq!(
            (one.percentile(3.0), one.percentile(4.0), one.percentile(99.0)),
            (Some(10), Some(20), Some(20))
        );
        assert_eq!(one.percentile(100.0), Some(highest(index(1_000))));
        assert_eq!(two.sparse(), vec![(10, 6), (20, 192), (index(1_000) as u16, 2)]);
        assert_eq!(Buckets::default().percentile(50.0), None);
    }
}
