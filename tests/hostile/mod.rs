//! Support for `tests/hostile_corpus.rs`: a seeded PRNG, a YAML emitter for mutated trees, the
//! blueprint mutations, the snapshot corruptions and a line-based reducer for reproducers.
//!
//! Everything here is deterministic: the same master seed gives the same inputs, byte for byte, so a
//! failure names its input by number and anyone can regenerate it (`GPUCTL_CORPUS_ONLY=N`).

pub mod emit;
pub mod mutate;
pub mod reduce;
pub mod snapshot;

/// SplitMix64: tiny, fast, and good enough to drive mutations (not cryptography).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num/den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An index into `weights`, chosen in proportion to the weights.
    pub fn weighted(&mut self, weights: &[usize]) -> usize {
        let total: usize = weights.iter().sum();
        let mut r = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        weights.len() - 1
    }
}

/// The seed of input `index` under `master`: inputs are independent, so one can be rerun alone.
pub fn input_seed(master: u64, index: usize) -> u64 {
    let mut r = Rng::new(master ^ (index as u64).wrapping_mul(0xA076_1D64_78BD_642F));
    r.next_u64()
}
