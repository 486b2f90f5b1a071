//! The coarse centroids as u8 codes for two-level routing (`route::SuperRouting`), and the
//! query's half-step code they are scored against: 128 levels two steps apart, so that the
//! query minus 128 fits i7 and AVX2 scores a centroid with one `vpmaddubsw` per 32 dims, while
//! every kernel table ranks the centroids by the same exact integers.

use crate::quant::Sq8;

/// The centroids as u8 codes of the index's quantizer, with their `half_step_term`s (what
/// `l2_u8_batch_pre` needs for a query coded by `encode_half_step`), and the quantizer that
/// encodes the query.
#[derive(Clone, Debug)]
pub(crate) struct CentroidCodes {
    pub sq: Sq8,
    pub codes: Vec<u8>,
    pub terms: Vec<i32>,
}

/// A query coded for routing: its u8 code `c` (the index's quantizer) halved to 128 levels,
/// value h = c / 2 standing for 2h + 0.5, stored as h + 64 (64..=191), so that the kernels'
/// query minus 128 is h - 64, within i7 (`l2_u8_batch_pre` takes one `vpmaddubsw` per 32 dims
/// on AVX2). With the rows' `half_step_term`s, `l2_u8_batch_pre` returns
/// D / 2 + sum(127h - h^2 + 4096) - dim / 8 for D the squared distance between the row's code
/// and the query's 2h + 0.5: the query's own constant plus D / 2, so it ranks rows as D does,
/// exactly, and stays in 0..2^32 (each dim adds at most 255^2 / 2 + 8128: below 100,000 dims).
pub(crate) fn encode_half_step(sq: &Sq8, q: &[f32], out: &mut [u8]) {
    sq.encode(q, out);
    for c in out.iter_mut() {
        *c = (*c >> 1) + 64;
    }
}

/// A row's term for queries coded by `encode_half_step`: sum(x (x - 257)) / 2, exact (each
/// x (x - 257) is even); `l2_u8_batch_pre` adds it to sum(q^2) - 2 sum(x (q - 128)).
pub(crate) fn half_step_term(x: &[u8]) -> i32 {
    x.iter().map(|&v| v as i32 * (v as i32 - 257) / 2).sum()
}

impl CentroidCodes {
    /// The centroids `centroids` (nlist x dim, list order) coded by `sq`, in the order
    /// `members` lists them.
    pub fn new(sq: &Sq8, centroids: &[f32], members: &[u32]) -> CentroidCodes {
        let dim = sq.dim;
        let mut codes = vec![0u8; members.len() * dim];
        for (&li, out) in members.iter().zip(codes.chunks_exact_mut(dim)) {
            sq.encode(&centroids[li as usize * dim..(li as usize + 1) * dim], out);
        }
        let terms = codes.chunks_exact(dim).map(half_step_term).collect();
        CentroidCodes {
            sq: sq.clone(),
            codes,
            terms,
        }
    }

    pub fn bytes(&self) -> usize {
        self.codes.len() + self.terms.len() * 4 + self.sq.dim * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::scalar;
    use crate::metric::Metric;
    use crate::rng::Rng;

    /// The kernel's value with half-step codes is the query's constant plus half the squared
    /// distance to the query's 2h + 0.5, exactly: 8 out - 4D = sum(8 (127h - h^2 + 4096)) - dim.
    #[test]
    fn half_step_codes_rank_rows_by_their_distance_to_the_halved_query() {
        let mut rng = Rng::new(5);
        for dim in [1usize, 24, 128, 129] {
            let x: Vec<f32> = (0..200 * dim).map(|_| rng.below(256) as f32 * 0.37).collect();
            let sq = Sq8::train(&x, dim, Metric::L2);
            let mut rows = vec![0u8; 50 * dim];
            for (v, out) in x.chunks_exact(dim).zip(rows.chunks_exact_mut(dim)) {
                sq.encode(v, out);
            }
            rows[..dim].fill(0);
            rows[dim..2 * dim].fill(255);
            let terms: Vec<i32> = rows.chunks_exact(dim).map(half_step_term).collect();
            for q in x.chunks_exact(dim).skip(60).take(20) {
                let mut code = vec![0u8; dim];
                encode_half_step(&sq, q, &mut code);
                assert!(code.iter().all(|c| (64..=191).contains(c)), "{code:?}");
                let mut out = vec![0u32; 50];
                scalar::l2_u8_batch_pre(&code, &rows, &terms, &mut out);
                let h: Vec<i64> = code.iter().map(|&c| c as i64 - 64).collect();
                let konst: i64 = h.iter().map(|&h| 8 * (127 * h - h * h + 4096)).sum::<i64>() - dim as i64;
                for (row, &o) in rows.chunks_exact(dim).zip(&out) {
                    let d4: i64 = row.iter().zip(&h).map(|(&x, &h)| (2 * x as i64 - 4 * h - 1).pow(2)).sum();
                    assert_eq!(8 * o as i64 - d4, konst, "dim {dim}");
                }
            }
        }
    }
}
