//! The u8 scalar quantizer of "u8+f16" storage: per-dimension offsets, trained on the data.
//!
//! A value x of dimension d is stored as the code c = round((x - min_d) / step_d), clipped to
//! 0..=255, and stands for min_d + step_d * c.
//!
//! - L2: every dimension shares one step (the largest range / 255), so the squared distance
//!   between the query's codes and a vector's codes is step^2 times an exact integer sum that
//!   the `l2_u8` kernel computes. The price: dimensions with a narrow range get fewer levels
//!   than per-dimension steps would give them, and the query is rounded to the same grid.
//! - ip / cosine: steps are per dimension at no cost, since
//!   <q, min + step*c> = <q, min> + <q*step, c> is one `dot_f32_u8` with a pre-scaled query.
//! - Integer-valued training data whose ranges fit in 256 levels (SIFT descriptors) get
//!   step 1: the codes are then the values themselves, lossless.
//!
//! Measured trade-off of the common L2 step (exact scan, u8 distances only, recall@10 on 300
//! queries, /tmp/sqexp-style numpy simulation): synth-float-20k (d=64): common step 0.951,
//! per-dimension steps 0.964 (0.978 with an unrounded f32 query, which needs a float kernel);
//! synth-sift-20k with a fractional step: 0.984 vs 0.988. The f16 rerank recovers the rest.

use crate::metric::Metric;

#[derive(Clone, Debug, PartialEq)]
pub struct Sq8 {
    pub dim: usize,
    /// Per-dimension offset (the training minimum).
    pub vmin: Vec<f32>,
    /// Per-dimension step (all equal for L2).
    pub step: Vec<f32>,
}

impl Sq8 {
    /// Trains on the rows of `data` (already normalised for cosine).
    pub fn train(data: &[f32], dim: usize, metric: Metric) -> Sq8 {
        let mut lo = vec![f32::INFINITY; dim];
        let mut hi = vec![f32::NEG_INFINITY; dim];
        for row in data.chunks_exact(dim) {
            for d in 0..dim {
                lo[d] = lo[d].min(row[d]);
                hi[d] = hi[d].max(row[d]);
            }
        }
        let ranges: Vec<f32> = lo.iter().zip(&hi).map(|(l, h)| (h - l).max(0.0)).collect();
        let integral = data.iter().all(|v| v.fract() == 0.0);
        let step_of = |r: f32| {
            if integral && r <= 255.0 {
                1.0 // lossless: every integer of the range has its own code
            } else if r > 0.0 {
                r / 255.0
            } else {
                1.0
            }
        };
        let step = match metric {
            Metric::L2 => {
                let widest = ranges.iter().cloned().fold(0.0f32, f32::max);
                vec![step_of(widest); dim]
            }
            Metric::Ip | Metric::Cosine => ranges.iter().map(|&r| step_of(r)).collect(),
        };
        Sq8 {
            dim,
            vmin: lo,
            step,
        }
    }

    /// Codes of one vector, clipped to the trained range.
    #[inline]
    pub fn encode(&self, x: &[f32], out: &mut [u8]) {
        for d in 0..self.dim {
            out[d] = round_to_code((x[d] - self.vmin[d]) / self.step[d]);
        }
    }

    pub fn decode(&self, c: &[u8], out: &mut [f32]) {
        for d in 0..self.dim {
            out[d] = self.vmin[d] + self.step[d] * c[d] as f32;
        }
    }

    /// Whether `codes` stand for exactly the values `x` (no rounding, no clipping).
    pub fn is_exact(&self, x: &[f32], codes: &[u8]) -> bool {
        (0..self.dim).all(|d| self.vmin[d] + self.step[d] * codes[d] as f32 == x[d])
    }

    /// The one step of an L2 quantizer: integer `l2_u8` sums times step^2 are squared L2.
    pub fn l2_scale(&self) -> f32 {
        self.step[0] * self.step[0]
    }

    /// For ip: the pre-scaled query (q * step) and the offset term <q, min>.
    pub fn ip_query(&self, q: &[f32], scaled: &mut [f32]) -> f32 {
        let mut bias = 0.0f32;
        for d in 0..self.dim {
            scaled[d] = q[d] * self.step[d];
            bias += q[d] * self.vmin[d];
        }
        bias
    }
}

/// `v.round().clamp(0.0, 255.0) as u8` (half away from zero; NaN gives 0) in operations that
/// vectorise: `f32::round` is a libm call per value on baseline x86-64. After the clamp, v is
/// 0..=255 (or NaN), its integer part i is exact, and so is the fraction v - i.
#[inline(always)]
pub fn round_to_code(v: f32) -> u8 {
    let c = v.clamp(0.0, 255.0);
    let i = c as i32;
    (i + (c - i as f32 >= 0.5) as i32) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_within_half_a_step() {
        let data: Vec<f32> = (0..64 * 8)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 5.0)
            .collect();
        for metric in [Metric::L2, Metric::Ip] {
            let q = Sq8::train(&data, 8, metric);
            let mut c = [0u8; 8];
            let mut back = [0f32; 8];
            for row in data.chunks_exact(8) {
                q.encode(row, &mut c);
                q.decode(&c, &mut back);
                for d in 0..8 {
                    assert!((row[d] - back[d]).abs() <= 0.5 * q.step[d] * 1.0001);
                }
            }
        }
    }

    #[test]
    fn integer_data_of_range_255_is_lossless_for_l2() {
        let data: Vec<f32> = (0..256 * 4).map(|i| (i / 4) as f32).collect();
        let q = Sq8::train(&data, 4, Metric::L2);
        assert_eq!(q.l2_scale(), 1.0);
        let mut c = [0u8; 4];
        q.encode(&[3.0, 100.0, 255.0, 0.0], &mut c);
        assert_eq!(c, [3, 100, 255, 0]);
        assert!(q.is_exact(&[3.0, 100.0, 255.0, 0.0], &c));
        q.encode(&[3.5, 100.0, 256.0, 0.0], &mut c);
        assert!(!q.is_exact(&[3.5, 100.0, 255.0, 0.0], &c), "rounded");
        assert!(!q.is_exact(&[4.0, 100.0, 256.0, 0.0], &c), "clipped");
        // A narrower integer range (SIFT-like, 0..=120) keeps step 1 rather than 120/255.
        let narrow: Vec<f32> = (0..121 * 4).map(|i| (i / 4) as f32).collect();
        let q = Sq8::train(&narrow, 4, Metric::L2);
        assert_eq!(q.step, vec![1.0; 4]);
        // Fractional data gets the widest range over 255 levels.
        let frac: Vec<f32> = narrow.iter().map(|v| v * 0.5).collect();
        let q = Sq8::train(&frac, 4, Metric::L2);
        assert_eq!(q.step, vec![60.0 / 255.0; 4]);
    }

    #[test]
    fn round_to_code_is_round_then_clamp() {
        let mut vals = vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            -0.5,
            -0.49999997,
            0.49999997,
            0.5,
            1.5,
            2.5,
            254.5,
            254.49998,
            255.0,
            255.5,
            256.0,
            1e9,
            -1e9,
        ];
        let mut x = 0x2545F491u32;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            vals.push((x as f32 / u32::MAX as f32) * 300.0 - 20.0);
            vals.push((x % 600) as f32 * 0.5 - 20.0);
        }
        for v in vals {
            assert_eq!(round_to_code(v), v.round().clamp(0.0, 255.0) as u8, "{v}");
        }
    }
}
