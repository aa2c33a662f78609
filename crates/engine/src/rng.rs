//! A small seeded generator (xorshift64*, seeded through splitmix64): mix picks, random rows, shuffles and the
//! templates' `random_*` functions. Seeded from the spec's `seed`, so a run can be replayed exactly.

/// splitmix64: spreads small seeds (0, 1, 2 …) over the state space; never returns 0 (xorshift's one bad state).
pub(crate) fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// xorshift64*.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for stream `stream` of seed `seed` (e.g. a client's number): distinct streams are independent.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(splitmix(seed ^ splitmix(stream.wrapping_add(0x5851_F42D_4C95_7F2D))))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, n) (n > 0), without modulo bias worth measuring (Lemire's multiply-shift).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_and_stream_give_the_same_numbers_and_others_differ() {
        let a: Vec<u64> = (0..5).scan(Rng::new(7, 1), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(7, 1), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..5).scan(Rng::new(7, 2), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_is_uniform_enough() {
        let mut r = Rng::new(1, 0);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        // Each bucket expects 10 000 (σ ≈ 95): within 5σ.
        assert!(counts.iter().all(|&c| (9_525..=10_475).contains(&c)), "{counts:?}");
    }
}
