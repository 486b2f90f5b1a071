//! Assigning points to centroids: the nearest of all (`assign`, a matrix product per chunk of
//! points) or of each point's previous centroid's neighbours (`centroid_neighbours`,
//! `assign_among`), the same at any thread count; and the cluster bookkeeping around them.

use rayon::prelude::*;

use crate::error::Result;
use crate::pool;

/// Points per assignment task: fixed, so the work split never depends on the thread count.
/// Each task's matrix product packs every centroid once, so larger tasks amortise the packing.
pub(super) const CHUNK: usize = 1024;

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
