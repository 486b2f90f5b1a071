//! A 4-bit product quantizer over u8 codes, for the single-query prefilter of the u8 l2 scan:
//! each pair of dims (2s, 2s + 1) is coded by the nearest of 16 centroids of its own, so a
//! vector's prefilter code is dim / 4 bytes (32 at dim 128, a quarter of its u8 code). A
//! query scores a code by looking up one small table per pair (`build_lut`), sixteen entries
//! each, quantized to u8 so that SIMD byte shuffles do the lookups (`Kernels::fs_below`), as
//! in faiss's fast-scan and ScaNN's 4-bit asymmetric hashing.
//!
//! Codes are packed in blocks of `FS_BLOCK` rows (`pack_row`): pair-of-pairs p of a block is
//! 32 bytes, byte i holding row i's code of pair 2p in its low nibble and of pair 2p + 1 in
//! its high nibble, so one 32-byte load feeds two lookups for 32 rows.
//!
//! It works in the u8 code domain: an l2 index's codes share one step, so distances between
//! codes are the float distances times step^2, and training on codes, encoding codes and
//! loading an index all see the same numbers.

use crate::rng::Rng;

/// Rows per packed block.
pub const FS_BLOCK: usize = 32;
/// Centroids per pair of dims (one nibble).
const KSUB: usize = 16;
/// Training rows at most (a 16-centroid k-means in two dims needs few).
const TRAIN_ROWS: usize = 16 * 1024;
const TRAIN_ITERS: usize = 16;
/// The largest table entry: two entries add in one byte (`Kernels::fs_below`).
pub const ENTRY_MAX: f32 = 127.0;

#[derive(Clone, Debug, PartialEq)]
pub struct Pq4 {
    pub dim: usize,
    /// pairs x 16 centroids x 2 values, in the u8 code domain.
    pub centroids: Vec<f32>,
}

impl Pq4 {
    /// Whether an index of `dim` can have a prefilter: whole pairs of pairs (dim a multiple
    /// of 4), and sums of `dim / 2` table entries that fit the kernel's u16 lanes.
    pub fn supports(dim: usize) -> bool {
        dim >= 8 && dim.is_multiple_of(4) && (dim / 2) as f32 * ENTRY_MAX <= u16::MAX as f32
    }

    pub fn pairs(&self) -> usize {
        self.dim / 2
    }

    /// Bytes of one packed block.
    pub fn block_bytes(&self) -> usize {
        self.pairs() / 2 * FS_BLOCK
    }

    /// Trains on `rows` (u8 codes of `dim` each, in dim order), at most `TRAIN_ROWS` of them
    /// chosen with `seed`: a k-means of 16 centroids per pair, started from distinct rows.
    pub fn train(rows: &[u8], dim: usize, seed: u64) -> Pq4 {
        assert!(Self::supports(dim), "dim {dim} has no 4-bit prefilter");
        let n = rows.len() / dim;
        let mut rng = Rng::new(seed ^ 0x5051_3400);
        let pick: Vec<usize> = if n > TRAIN_ROWS {
            let mut p = rng.sample_indices(n, TRAIN_ROWS);
            p.sort_unstable();
            p
        } else {
            (0..n).collect()
        };
        let pairs = dim / 2;
        let mut centroids = vec![0f32; pairs * KSUB * 2];
        let mut pts = vec![[0f32; 2]; pick.len()];
        for s in 0..pairs {
            for (p, &r) in pts.iter_mut().zip(&pick) {
                let at = r * dim + 2 * s;
                *p = [rows[at] as f32, rows[at + 1] as f32];
            }
            let c = kmeans2(&pts, &mut rng);
            centroids[s * KSUB * 2..(s + 1) * KSUB * 2].copy_from_slice(&c);
        }
        Pq4 { dim, centroids }
    }

    /// The nearest centroid of each pair of `code` (u8 codes in dim order) into `out` (one
    /// value 0..16 per pair).
    pub fn encode(&self, code: &[u8], out: &mut [u8]) {
        for (s, o) in out.iter_mut().enumerate().take(self.pairs()) {
            let (a, b) = (code[2 * s] as f32, code[2 * s + 1] as f32);
            let c = &self.centroids[s * KSUB * 2..(s + 1) * KSUB * 2];
            *o = nearest(c, a, b) as u8;
        }
    }
}

/// A query's lookup tables for `Kernels::fs_below` into `lut` (32 bytes per pair: its 16
/// entries twice, one copy per 128-bit lane), from the pair centroids `centroids` (pairs x 16
/// centroids x 2 values, `Pq4::centroids`) and the query `q` in the code domain: entry j
/// of pair s is the squared distance of the query's pair s to centroid j, less the pair's
/// smallest, times one scale for all pairs that puts the largest at `ENTRY_MAX`. A row's table
/// sum then orders rows as their prefilter distances do (up to rounding). The scalar table's
/// `pq4_lut`; the SIMD tables' twins take the same f32 steps in the same order.
pub fn build_lut(centroids: &[f32], q: &[f32], dists: &mut Vec<f32>, lut: &mut [u8]) {
    let pairs = centroids.len() / (2 * KSUB);
    assert_eq!(lut.len(), pairs * 2 * KSUB, "a table of {} bytes for {pairs} pairs", lut.len());
    assert!(q.len() >= 2 * pairs, "a query of {} values for {pairs} pairs", q.len());
    // First every pair's distances less its smallest, and the span of all pairs; then the
    // entries. Fixed-size arrays and branch-free min/max, so the loops run as SIMD.
    dists.clear();
    dists.resize(pairs * KSUB, 0.0);
    let mut span = 0f32;
    for (s, d) in dists.chunks_exact_mut(KSUB).enumerate() {
        let c: &[f32; 2 * KSUB] = centroids[s * 2 * KSUB..(s + 1) * 2 * KSUB]
            .try_into()
            .expect("2 * KSUB values a pair");
        let ab = [q[2 * s], q[2 * s + 1]];
        let mut sq = [0f32; 2 * KSUB];
        for (i, v) in sq.iter_mut().enumerate() {
            let x = ab[i & 1] - c[i];
            *v = x * x;
        }
        let mut dd = [0f32; KSUB];
        for (j, v) in dd.iter_mut().enumerate() {
            *v = sq[2 * j] + sq[2 * j + 1];
        }
        let (lo, hi) = (pick16(&dd, |a, b| a < b), pick16(&dd, |a, b| a > b));
        for (o, &v) in d.iter_mut().zip(&dd) {
            *o = v - lo;
        }
        span = span.max(hi - lo);
    }
    let scale = if span > 0.0 { ENTRY_MAX / span } else { 0.0 };
    for (d, out) in dists.chunks_exact(KSUB).zip(lut.chunks_exact_mut(2 * KSUB)) {
        let mut e = [0u8; KSUB];
        for (x, &v) in e.iter_mut().zip(d) {
            // non-negative and at most ENTRY_MAX: rounding is adding a half and truncating
            *x = (v * scale + 0.5).min(ENTRY_MAX) as i32 as u8;
        }
        out[..KSUB].copy_from_slice(&e);
        out[KSUB..].copy_from_slice(&e);
    }
}

/// The value of 16 distances (no NaN) that `first(a, b)` prefers to every other (`<`: the
/// smallest, `>`: the largest), halving as SIMD lanes do.
#[inline(always)]
fn pick16(d: &[f32; KSUB], first: impl Fn(f32, f32) -> bool) -> f32 {
    let mut m = *d;
    let mut w = KSUB / 2;
    while w > 0 {
        for i in 0..w {
            m[i] = if first(m[i + w], m[i]) { m[i + w] } else { m[i] };
        }
        w /= 2;
    }
    m[0]
}

/// Writes row `r`'s pair codes `code` (values 0..16) into the packed blocks `packed` of
/// `block_bytes` each, adding a zeroed block when `r` starts one. Rows are written in order.
pub fn pack_row(packed: &mut Vec<u8>, block_bytes: usize, r: usize, code: &[u8]) {
    let (b, i) = (r / FS_BLOCK, r % FS_BLOCK);
    if packed.len() < (b + 1) * block_bytes {
        packed.resize((b + 1) * block_bytes, 0);
    }
    let blk = &mut packed[b * block_bytes..(b + 1) * block_bytes];
    for (p, two) in code.chunks_exact(2).enumerate() {
        blk[p * FS_BLOCK + i] = (two[0] & 15) | (two[1] << 4);
    }
}

/// Bytes of the packed blocks of `n` rows.
pub fn packed_len(n: usize, block_bytes: usize) -> usize {
    n.div_ceil(FS_BLOCK) * block_bytes
}

/// The centroid of `c` (16 pairs of values) nearest to (a, b), the first of equals.
#[inline]
fn nearest(c: &[f32], a: f32, b: f32) -> usize {
    let mut best = (0, f32::INFINITY);
    for j in 0..KSUB {
        let (da, db) = (a - c[2 * j], b - c[2 * j + 1]);
        let d = da * da + db * db;
        if d < best.1 {
            best = (j, d);
        }
    }
    best.0
}

/// 16 centroids of the points `pts` (Lloyd's iterations from distinct points; an emptied
/// centroid restarts at the point farthest from its own).
fn kmeans2(pts: &[[f32; 2]], rng: &mut Rng) -> Vec<f32> {
    let mut c = vec![0f32; KSUB * 2];
    // distinct starting points where there are enough distinct points
    let mut chosen: Vec<[f32; 2]> = Vec::with_capacity(KSUB);
    for _ in 0..8 * KSUB {
        if chosen.len() == KSUB || pts.is_empty() {
            break;
        }
        let p = pts[rng.below(pts.len())];
        if !chosen.contains(&p) {
            chosen.push(p);
        }
    }
    for (j, p) in chosen.iter().enumerate() {
        c[2 * j] = p[0];
        c[2 * j + 1] = p[1];
    }
    // fewer distinct points than centroids: the rest repeat the last (never nearest first)
    for j in chosen.len()..KSUB {
        let last = chosen.last().copied().unwrap_or([0.0, 0.0]);
        c[2 * j] = last[0];
        c[2 * j + 1] = last[1];
    }
    if chosen.len() < KSUB {
        return c;
    }
    let mut asg = vec![0usize; pts.len()];
    for _ in 0..TRAIN_ITERS {
        let mut sum = [[0f64; 2]; KSUB];
        let mut cnt = [0usize; KSUB];
        let mut far = (0usize, -1f32);
        for (i, p) in pts.iter().enumerate() {
            let j = nearest(&c, p[0], p[1]);
            asg[i] = j;
            sum[j][0] += p[0] as f64;
            sum[j][1] += p[1] as f64;
            cnt[j] += 1;
            let (da, db) = (p[0] - c[2 * j], p[1] - c[2 * j + 1]);
            if da * da + db * db > far.1 {
                far = (i, da * da + db * db);
            }
        }
        for j in 0..KSUB {
            if cnt[j] > 0 {
                c[2 * j] = (sum[j][0] / cnt[j] as f64) as f32;
                c[2 * j + 1] = (sum[j][1] / cnt[j] as f64) as f32;
            } else {
                let p = pts[far.0];
                c[2 * j] = p[0];
                c[2 * j + 1] = p[1];
                far.1 = -1.0;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, dim: usize, seed: u64) -> Vec<u8> {
        let mut rng = Rng::new(seed);
        (0..n * dim).map(|_| (rng.below(64) * rng.below(4)) as u8).collect()
    }

    #[test]
    fn a_row_table_sum_orders_rows_as_their_decoded_distance_does() {
        let (dim, n) = (16, 3000);
        let data = rows(n, dim, 1);
        let pq = Pq4::train(&data, dim, 7);
        let q: Vec<f32> = data[..dim].iter().map(|&v| v as f32 + 0.3).collect();
        let mut lut = vec![0u8; dim / 2 * 32];
        build_lut(&pq.centroids, &q, &mut Vec::new(), &mut lut);
        let mut code = vec![0u8; dim / 2];
        let mut pairs_err = 0usize;
        let mut scored: Vec<(u32, f32)> = Vec::new();
        for r in 0..n {
            pq.encode(&data[r * dim..(r + 1) * dim], &mut code);
            let sum: u32 = code.iter().enumerate().map(|(s, &j)| lut[s * 32 + j as usize] as u32).sum();
            let exact: f32 = code.iter().enumerate().map(|(s, &j)| {
                let c = &pq.centroids[s * 32 + 2 * j as usize..];
                (q[2 * s] - c[0]).powi(2) + (q[2 * s + 1] - c[1]).powi(2)
            }).sum();
            scored.push((sum, exact));
            // encoding picks the nearest centroid of each pair
            for s in 0..dim / 2 {
                let (a, b) = (data[r * dim + 2 * s] as f32, data[r * dim + 2 * s + 1] as f32);
                let c = &pq.centroids[s * 32..(s + 1) * 32];
                let d = |j: usize| (a - c[2 * j]).powi(2) + (b - c[2 * j + 1]).powi(2);
                pairs_err += (0..16).any(|j| d(j) < d(code[s] as usize)) as usize;
            }
        }
        assert_eq!(pairs_err, 0);
        // the u8 sums rank rows as the float sums do, up to rounding: few inversions
        let mut inv = 0;
        for w in scored.windows(2) {
            let (du, df) = (w[0].0 as f32 - w[1].0 as f32, w[0].1 - w[1].1);
            if du * df < 0.0 && df.abs() > 0.05 * (w[0].1 + w[1].1) {
                inv += 1;
            }
        }
        assert!(inv < n / 50, "{inv} inversions of {n}");
    }

    #[test]
    fn packing_puts_pair_2p_low_and_2p_plus_1_high_in_block_order() {
        let pairs = 8;
        let bb = pairs / 2 * FS_BLOCK;
        let mut packed = Vec::new();
        for r in 0..40 {
            let code: Vec<u8> = (0..pairs).map(|s| ((r + s) % 16) as u8).collect();
            pack_row(&mut packed, bb, r, &code);
        }
        assert_eq!(packed.len(), packed_len(40, bb));
        for r in 0..40 {
            let blk = &packed[(r / 32) * bb..];
            for p in 0..pairs / 2 {
                let byte = blk[p * 32 + r % 32];
                assert_eq!(byte & 15, ((r + 2 * p) % 16) as u8);
                assert_eq!(byte >> 4, ((r + 2 * p + 1) % 16) as u8);
            }
        }
    }

    #[test]
    fn few_distinct_points_still_train() {
        let data = vec![3u8; 8 * 100];
        let pq = Pq4::train(&data, 8, 1);
        let mut code = vec![0u8; 4];
        pq.encode(&data[..8], &mut code);
        assert!(code.iter().all(|&c| c < 16));
    }
}
