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

mod assign;

use rayon::prelude::*;

use crate::error::{Interrupt, Result, VdbError};
use crate::metric::normalize_rows;
use crate::pool;
use crate::rng::Rng;
use assign::CHUNK;
pub use assign::{
    assign, assign_among, centroid_neighbours, fixed_starts, members_by_cluster, row_norms,
};

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
