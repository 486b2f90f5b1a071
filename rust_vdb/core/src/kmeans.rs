//! Seeded k-means: k-means++ init on a subsample, Lloyd iterations with parallel assignment
//! that gives the same centroids at any thread count, empty clusters split from the largest.
//!
//! With many centroids, every iteration after the first scores each point against only the
//! `neighbours` centroids nearest to the one it was assigned last (its own included): points
//! move between neighbouring clusters, so that finds the nearest centroid for nearly every
//! point at a small fraction of the cost. Measured on synth-sift-1m (4000 centroids, 256,000
//! points): the nearest is among the 256 neighbours of the previous centroid for 99.86% of the
//! points at the second assignment and 99.99% by the fifth; the others go to the best of the
//! 256, and no point ever moves to a farther centroid than the one it had. (The exact bound,
//! Elkan's `d(c, c') >= 2 d(x, c)`, holds for under 1% of the points in 128 dimensions.)

use rayon::prelude::*;

use crate::error::{Interrupt, Result, VdbError};
use crate::metric::normalize_rows;
use crate::pool;
use crate::rng::Rng;

/// Points per assignment task: fixed, so the work split never depends on the thread count.
/// Each task's matrix product packs every centroid once, so larger tasks amortise the packing.
const CHUNK: usize = 1024;
/// Points assigned between two interrupt checks in a k-means iteration (a multiple of CHUNK).
const INTERRUPT_POINTS: usize = 16 * CHUNK;

/// How centroids are fitted.
#[derive(Clone, Debug)]
pub struct KMeansParams {
    pub k: usize,
    /// Lloyd iterations at most.
    pub niter: usize,
    /// Stop when the objective improves by less than this fraction between iterations.
    pub tol: f64,
    pub seed: u64,
    /// Training sets larger than `max_points_per_centroid * k` are subsampled to that size.
    pub max_points_per_centroid: usize,
    /// Points for the k-means++ seeding: at most `init_points_per_centroid * k`.
    pub init_points_per_centroid: usize,
    /// Assign by largest inner product instead of smallest L2 (ip / cosine indexes).
    pub inner_product: bool,
    /// Renormalise centroids to unit length after each update (cosine).
    pub spherical: bool,
    /// Thread cap of the parallel parts (None: all cores). Results do not depend on it.
    pub threads: Option<usize>,
    /// Candidate centroids per point after the first iteration: the nearest ones to its
    /// previous centroid. Used for L2 and spherical k-means with k >= 4 * neighbours; 0 scores
    /// every centroid in every iteration.
    pub neighbours: usize,
}

impl KMeansParams {
    pub fn new(k: usize, seed: u64) -> Self {
        KMeansParams {
            k,
            niter: 10,
            tol: 1e-4,
            seed,
            // 64, the sample the benchmark gives every IVF (ours and faiss'; faiss' own guidance
            // is 39..256): a caller who trains on all of a 1M base gets the same centroids' quality
            // in a quarter of the time (4000 lists: 256k points, not 1M).
            max_points_per_centroid: 64,
            // 4, not 16: seeding streams its whole sample once per centroid, and 16 points per
            // centroid at 4000 centroids (32 MB) do not stay in cache; 4 give equal recall.
            init_points_per_centroid: 4,
            inner_product: false,
            spherical: false,
            threads: None,
            neighbours: NEIGHBOURS,
        }
    }

    /// Whether the iterations after the first score only each point's neighbour centroids.
    fn uses_neighbours(&self) -> bool {
        self.neighbours > 0
            && self.k >= 4 * self.neighbours
            && (!self.inner_product || self.spherical)
    }
}

/// The default `KMeansParams::neighbours`: 256 of 4000 centroids finds the nearest for all but
/// 0.01-0.14% of the points (module comment); 128 misses 0.2-0.8%.
pub const NEIGHBOURS: usize = 256;

/// What training produced.
#[derive(Clone, Debug)]
pub struct KMeansResult {
    /// k rows of `dim` values.
    pub centroids: Vec<f32>,
    /// Objective (sum of squared distances, or of negated inner products) per iteration.
    pub objective: Vec<f64>,
    /// Number of points actually used after subsampling.
    pub n_train: usize,
    /// Empty clusters re-split over the whole run.
    pub splits: usize,
}

/// Groups the points of each cluster: point i belongs to cluster `asg[i]` (< k). Returns
/// (starts, members): cluster c holds the points members[starts[c]..starts[c + 1]], in
/// increasing order (a counting sort).
pub fn members_by_cluster(asg: &[u32], k: usize) -> (Vec<usize>, Vec<u32>) {
    let mut starts = vec![0usize; k + 1];
    for &a in asg {
        starts[a as usize + 1] += 1;
    }
    for c in 0..k {
        starts[c + 1] += starts[c];
    }
    let mut next = starts.clone();
    let mut members = vec![0u32; asg.len()];
    for (i, &a) in asg.iter().enumerate() {
        members[next[a as usize]] = i as u32;
        next[a as usize] += 1;
    }
    (starts, members)
}

/// Squared norms of the rows.
pub fn row_norms(x: &[f32], dim: usize) -> Vec<f32> {
    x.chunks_exact(dim)
        .map(|r| r.iter().map(|v| v * v).sum())
        .collect()
}

/// For each point, the index of its nearest centroid (smallest L2, or largest inner product;
/// ties to the smaller index) and the score it got (squared L2, or the negated inner product).
/// The points are processed in fixed chunks of a matrix product, in parallel.
#[allow(clippy::too_many_arguments)]
pub fn assign(
    threads: Option<usize>,
    points: &[f32],
    centroids: &[f32],
    c_norms: &[f32],
    dim: usize,
    inner_product: bool,
    out_assign: &mut [u32],
    out_score: &mut [f32],
) -> Result<()> {
    let k = c_norms.len();
    debug_assert_eq!(centroids.len(), k * dim);
    if threads == Some(1) || points.len() <= CHUNK * dim {
        // One chunk at a time on the calling thread: same chunks, same results.
        let mut buf = Vec::new();
        for ((pts, asg), sc) in points
            .chunks(CHUNK * dim)
            .zip(out_assign.chunks_mut(CHUNK))
            .zip(out_score.chunks_mut(CHUNK))
        {
            assign_chunk(
                pts,
                centroids,
                c_norms,
                dim,
                inner_product,
                asg,
                sc,
                &mut buf,
            );
        }
        return Ok(());
    }
    pool::install(threads, || {
        points
            .par_chunks(CHUNK * dim)
            .zip(out_assign.par_chunks_mut(CHUNK))
            .zip(out_score.par_chunks_mut(CHUNK))
            .for_each_init(Vec::new, |buf: &mut Vec<f32>, ((pts, asg), sc)| {
                assign_chunk(pts, centroids, c_norms, dim, inner_product, asg, sc, buf)
            })
    })
}

/// Nearest centroid of each point of one chunk, through one matrix product.
#[allow(clippy::too_many_arguments)]
fn assign_chunk(
    pts: &[f32],
    centroids: &[f32],
    c_norms: &[f32],
    dim: usize,
    inner_product: bool,
    asg: &mut [u32],
    sc: &mut [f32],
    buf: &mut Vec<f32>,
) {
    let k = c_norms.len();
    let m = pts.len() / dim;
    let kern = crate::kernels::kernels();
    if buf.len() < m * k {
        buf.resize(m * k, 0.0); // every element is overwritten by the product (beta = 0)
    }
    crate::matmul::dots_abt(pts, centroids, dim, &mut buf[..m * k]);
    for i in 0..m {
        let row = &buf[i * k..(i + 1) * k];
        let (best, best_s) = (kern.argmin_score)(row, c_norms, inner_product);
        asg[i] = best;
        sc[i] = point_score(best_s, &pts[i * dim..(i + 1) * dim], inner_product);
    }
}

/// The score `assign` reports for a point whose best `argmin_score` was `best_s`: the squared
/// L2 distance (adding the point's norm, never below 0), or the negated inner product.
#[inline]
fn point_score(best_s: f32, point: &[f32], inner_product: bool) -> f32 {
    if inner_product {
        best_s
    } else {
        let x_norm: f32 = point.iter().map(|v| v * v).sum();
        (best_s + x_norm).max(0.0)
    }
}

/// For each centroid, the `t` centroids nearest to it in L2 (itself first, the others in no
/// particular order): row c of the returned k x t table. Blocks of CHUNK centroids, each one
/// matrix product against all of them, in parallel (the same table at any thread count).
pub fn centroid_neighbours(
    threads: Option<usize>,
    centroids: &[f32],
    c_norms: &[f32],
    dim: usize,
    t: usize,
) -> Result<Vec<u32>> {
    let k = c_norms.len();
    let t = t.min(k);
    let mut table = vec![0u32; k * t];
    let block = |(bi, out): (usize, &mut [u32]), buf: &mut Vec<f32>| {
        let first = bi * CHUNK;
        let m = out.len() / t;
        buf.resize(m * k, 0.0);
        crate::matmul::dots_abt(
            &centroids[first * dim..(first + m) * dim],
            centroids,
            dim,
            &mut buf[..m * k],
        );
        let mut order: Vec<(f32, u32)> = Vec::with_capacity(k);
        for (i, row_out) in out.chunks_exact_mut(t).enumerate() {
            let own = first + i;
            order.clear();
            order.extend(buf[i * k..(i + 1) * k].iter().zip(c_norms).enumerate().map(
                |(j, (&d, &n))| {
                    let s = if j == own {
                        f32::NEG_INFINITY
                    } else {
                        n - 2.0 * d
                    };
                    (s, j as u32)
                },
            ));
            let by = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            if t < k {
                order.select_nth_unstable_by(t - 1, by);
            }
            order[..t].sort_unstable_by(by);
            for (o, &(_, j)) in row_out.iter_mut().zip(&order[..t]) {
                *o = j;
            }
        }
    };
    if threads == Some(1) || k <= CHUNK {
        let mut buf = Vec::new();
        table
            .chunks_mut(CHUNK * t)
            .enumerate()
            .for_each(|item| block(item, &mut buf));
    } else {
        pool::install(threads, || {
            table
                .par_chunks_mut(CHUNK * t)
                .enumerate()
                .for_each_init(Vec::new, |buf, item| block(item, buf))
        })?;
    }
    Ok(table)
}

/// `assign` restricted to candidates: point i is scored against the centroids
/// `cand[cand_starts[keys[i]]..cand_starts[keys[i] + 1]]` only (all of them where that range is
/// empty). The points sharing a key go through one matrix product against its candidates, in
/// parallel over keys (the same results at any thread count).
#[allow(clippy::too_many_arguments)]
pub fn assign_among(
    threads: Option<usize>,
    points: &[f32],
    centroids: &[f32],
    c_norms: &[f32],
    dim: usize,
    inner_product: bool,
    keys: &[u32],
    cand_starts: &[usize],
    cand: &[u32],
    out_assign: &mut [u32],
    out_score: &mut [f32],
) -> Result<()> {
    let nkeys = cand_starts.len().saturating_sub(1);
    let (start, members) = members_by_cluster(keys, nkeys);
    struct Bufs {
        pts: Vec<f32>,
        cents: Vec<f32>,
        norms: Vec<f32>,
        dots: Vec<f32>,
    }
    let kern = crate::kernels::kernels();
    let one_key = |bufs: &mut Bufs, key: usize| -> Vec<(u32, f32)> {
        let mem = &members[start[key]..start[key + 1]];
        if mem.is_empty() {
            return Vec::new();
        }
        let nb = &cand[cand_starts[key]..cand_starts[key + 1]];
        bufs.pts.clear();
        for &i in mem {
            bufs.pts
                .extend_from_slice(&points[i as usize * dim..(i as usize + 1) * dim]);
        }
        let (cents, norms): (&[f32], &[f32]) = if nb.is_empty() {
            (centroids, c_norms)
        } else {
            bufs.cents.clear();
            bufs.norms.clear();
            for &j in nb {
                bufs.cents
                    .extend_from_slice(&centroids[j as usize * dim..(j as usize + 1) * dim]);
                bufs.norms.push(c_norms[j as usize]);
            }
            (&bufs.cents, &bufs.norms)
        };
        let (m, t) = (mem.len(), norms.len());
        bufs.dots.resize(m * t, 0.0);
        crate::matmul::dots_abt(&bufs.pts, cents, dim, &mut bufs.dots[..m * t]);
        (0..m)
            .map(|r| {
                let row = &bufs.dots[r * t..(r + 1) * t];
                let (best, best_s) = (kern.argmin_score)(row, norms, inner_product);
                let score = point_score(best_s, &bufs.pts[r * dim..(r + 1) * dim], inner_product);
                let c = if nb.is_empty() {
                    best
                } else {
                    nb[best as usize]
                };
                (c, score)
            })
            .collect()
    };
    let init = || Bufs {
        pts: Vec::new(),
        cents: Vec::new(),
        norms: Vec::new(),
        dots: Vec::new(),
    };
    let results: Vec<Vec<(u32, f32)>> = if threads == Some(1) {
        let mut bufs = init();
        (0..nkeys).map(|key| one_key(&mut bufs, key)).collect()
    } else {
        pool::install(threads, || {
            (0..nkeys)
                .into_par_iter()
                .with_min_len(4)
                .map_init(init, one_key)
                .collect()
        })?
    };
    for (key, res) in results.into_iter().enumerate() {
        for (&i, (a, s)) in members[start[key]..start[key + 1]].iter().zip(res) {
            out_assign[i as usize] = a;
            out_score[i as usize] = s;
        }
    }
    Ok(())
}

/// The row starts of a table of `rows` rows of `t` entries, as `assign_among` takes them.
pub fn fixed_starts(rows: usize, t: usize) -> Vec<usize> {
    (0..=rows).map(|r| r * t).collect()
}

/// k-means++ seeding (D^2 sampling) of `k` centroids among `x`'s rows.
fn kmeans_pp(
    x: &[f32],
    dim: usize,
    k: usize,
    rng: &mut Rng,
    threads: Option<usize>,
    interrupt: Interrupt,
) -> Result<Vec<f32>> {
    let n = x.len() / dim;
    let mut centroids = Vec::with_capacity(k * dim);
    let first = rng.below(n);
    centroids.extend_from_slice(&x[first * dim..(first + 1) * dim]);
    let mut d2 = vec![f32::INFINITY; n];
    let l2 = crate::kernels::kernels().l2_f32;
    for c in 1..k {
        if c % 64 == 0 {
            interrupt()?;
        }
        let last = &centroids[(c - 1) * dim..c * dim];
        let update = |(ci, ch): (usize, &mut [f32])| {
            for (i, d) in ch.iter_mut().enumerate() {
                let p = ci * CHUNK + i;
                let v = l2(&x[p * dim..(p + 1) * dim], last);
                if v < *d {
                    *d = v;
                }
            }
        };
        if threads == Some(1) || n <= CHUNK {
            d2.chunks_mut(CHUNK).enumerate().for_each(update);
        } else {
            pool::install(threads, || {
                d2.par_chunks_mut(CHUNK).enumerate().for_each(update)
            })?;
        }
        let total: f64 = d2.iter().map(|&v| v as f64).sum();
        let pick = if total > 0.0 {
            let target = rng.next_f64() * total;
            let mut acc = 0.0f64;
            let mut pick = n - 1;
            for (i, &v) in d2.iter().enumerate() {
                acc += v as f64;
                if acc > target {
                    pick = i;
                    break;
                }
            }
            pick
        } else {
            rng.below(n) // every point coincides with a centroid: any choice is as good
        };
        centroids.extend_from_slice(&x[pick * dim..(pick + 1) * dim]);
    }
    Ok(centroids)
}

/// Fits `params.k` centroids to the rows of `data` (`dim` values each).
pub fn kmeans(
    data: &[f32],
    dim: usize,
    params: &KMeansParams,
    interrupt: Interrupt,
) -> Result<KMeansResult> {
    let n = data.len().checked_div(dim).unwrap_or(0);
    let k = params.k;
    if k == 0 || n < k {
        return Err(VdbError::InvalidInput(format!(
            "k-means needs at least k={k} training vectors (and k >= 1), got {n}"
        )));
    }
    let mut rng = Rng::new(params.seed);

    // Subsample large training sets (as faiss does), deterministically by seed.
    let max_n = params.max_points_per_centroid.saturating_mul(k).max(k);
    let owned;
    let x: &[f32] = if n > max_n {
        let idx = rng.sample_indices(n, max_n);
        let mut v = Vec::with_capacity(max_n * dim);
        for i in idx {
            v.extend_from_slice(&data[i * dim..(i + 1) * dim]);
        }
        owned = v;
        &owned
    } else {
        data
    };
    let n = x.len() / dim;

    // Seeding on a smaller subsample keeps k-means++ (O(n k d), sequential over k) cheap.
    let n_init = params
        .init_points_per_centroid
        .saturating_mul(k)
        .max(k)
        .min(n);
    let mut centroids = if n_init < n {
        let idx = rng.sample_indices(n, n_init);
        let mut v = Vec::with_capacity(n_init * dim);
        for i in idx {
            v.extend_from_slice(&x[i * dim..(i + 1) * dim]);
        }
        kmeans_pp(&v, dim, k, &mut rng, params.threads, interrupt)?
    } else {
        kmeans_pp(x, dim, k, &mut rng, params.threads, interrupt)?
    };
    if params.spherical {
        normalize_rows(&mut centroids, dim);
    }
    interrupt()?;

    let mut asg = vec![0u32; n];
    let mut score = vec![0f32; n];
    let mut objective = Vec::new();
    let mut splits = 0;
    let mut sums = vec![0f64; k * dim];
    let mut counts = vec![0usize; k];
    let mut prev = vec![0u32; n];
    for iter in 0..params.niter.max(1) {
        let c_norms = row_norms(&centroids, dim);
        if iter > 0 && params.uses_neighbours() {
            let table =
                centroid_neighbours(params.threads, &centroids, &c_norms, dim, params.neighbours)?;
            interrupt()?;
            prev.copy_from_slice(&asg);
            assign_among(
                params.threads,
                x,
                &centroids,
                &c_norms,
                dim,
                params.inner_product,
                &prev,
                &fixed_starts(k, params.neighbours.min(k)),
                &table,
                &mut asg,
                &mut score,
            )?;
            interrupt()?;
        } else {
            // In slices of whole CHUNKs (so the results are the same as one call), with an
            // interrupt check between slices: one pass over 1M points takes tens of seconds.
            for ((xs, a), sc) in x
                .chunks(INTERRUPT_POINTS * dim)
                .zip(asg.chunks_mut(INTERRUPT_POINTS))
                .zip(score.chunks_mut(INTERRUPT_POINTS))
            {
                assign(
                    params.threads,
                    xs,
                    &centroids,
                    &c_norms,
                    dim,
                    params.inner_product,
                    a,
                    sc,
                )?;
                interrupt()?;
            }
        }
        let obj: f64 = score.iter().map(|&s| s as f64).sum();

        // Update in a fixed order (sequential f64 sums): identical at any thread count.
        sums.iter_mut().for_each(|s| *s = 0.0);
        counts.iter_mut().for_each(|c| *c = 0);
        for (i, &a) in asg.iter().enumerate() {
            let a = a as usize;
            counts[a] += 1;
            let s = &mut sums[a * dim..(a + 1) * dim];
            for (acc, &v) in s.iter_mut().zip(&x[i * dim..(i + 1) * dim]) {
                *acc += v as f64;
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                let inv = 1.0 / counts[c] as f64;
                for d in 0..dim {
                    centroids[c * dim + d] = (sums[c * dim + d] * inv) as f32;
                }
            }
        }
        splits += split_empty(&mut centroids, &mut counts, dim, &mut rng);
        if params.spherical {
            normalize_rows(&mut centroids, dim);
        }
        interrupt()?;

        let converged = match objective.last() {
            Some(&prev) => {
                let prev: f64 = prev;
                (prev - obj).abs() <= params.tol * prev.abs().max(f64::MIN_POSITIVE)
            }
            None => false,
        };
        objective.push(obj);
        if converged {
            break;
        }
    }
    Ok(KMeansResult {
        centroids,
        objective,
        n_train: n,
        splits,
    })
}

/// Gives each empty cluster half of the largest cluster: both get that centroid, nudged
/// apart by a tiny symmetric perturbation (faiss' rule). Returns the number of splits.
fn split_empty(centroids: &mut [f32], counts: &mut [usize], dim: usize, rng: &mut Rng) -> usize {
    const EPS: f32 = 1.0 / 1024.0;
    let k = counts.len();
    let mut splits = 0;
    for empty in 0..k {
        if counts[empty] != 0 {
            continue;
        }
        // Largest cluster, ties to the smaller index.
        let mut big = 0;
        for c in 1..k {
            if counts[c] > counts[big] {
                big = c;
            }
        }
        if counts[big] <= 1 {
            break; // nothing left to split (k close to n): keep the centroid as it is
        }
        for d in 0..dim {
            let v = centroids[big * dim + d];
            let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            let delta = sign * EPS * v.abs().max(EPS);
            centroids[empty * dim + d] = v + delta;
            centroids[big * dim + d] = v - delta;
        }
        counts[empty] = counts[big] / 2;
        counts[big] -= counts[empty];
        splits += 1;
    }
    splits
}

#[cfg(test)]
mod tests {
    use super::members_by_cluster;

    #[test]
    fn members_by_cluster_groups_points_in_order_and_keeps_empty_clusters() {
        let (starts, members) = members_by_cluster(&[2, 0, 2, 2, 0], 4);
        assert_eq!(starts, vec![0, 2, 2, 5, 5]);
        assert_eq!(members, vec![1, 4, 0, 2, 3]);
        assert_eq!(members_by_cluster(&[], 2), (vec![0, 0, 0], vec![]));
    }
}
