//! A query-adaptive number of lists (`SearchParams::probe_ratio`): of the nprobe lists routing
//! gives a query, best first, it probes those whose centroid lies within a ratio of its nearest
//! centroid's distance. On real SIFT descriptors the routed distances tell the queries apart: a
//! query sitting on one centroid needs few lists, one between several needs many
//! (benchmarks/results/adaptive-probing.md).

/// With a `probe_ratio`, a query probes at least nprobe / `MIN_PROBE_SHARE` of its nprobe lists.
pub const MIN_PROBE_SHARE: usize = 4;

/// The fewest lists a query probes with a `probe_ratio` and `nprobe`: a quarter of nprobe,
/// rounded up.
pub fn min_probe(nprobe: usize) -> usize {
    nprobe.div_ceil(MIN_PROBE_SHARE).max(1)
}

/// How many of a query's lists `order` (best first, scored as `select_lists` scores them) it
/// probes with `probe_ratio` r: those whose centroid lies within r times the distance of
/// its nearest centroid (L2 distances: ||c||^2 - 2 <q, c> + ||q||^2, or, `sim` with unit
/// queries and centroids (cosine), 2 - 2 <q, c>), and never fewer than `min`. A query near
/// one centroid stops early; one between several goes on to nprobe. r <= 0: all of them.
pub fn within_ratio(order: &[(f32, u32)], q: &[f32], sim: bool, ratio: f32, min: usize) -> usize {
    if ratio <= 0.0 || order.len() <= min {
        return order.len();
    }
    let qn = if sim { 0.0 } else { q.iter().map(|v| v * v).sum::<f32>() };
    let dist2 = |score: f32| if sim { 2.0 + 2.0 * score } else { score + qn };
    let limit = dist2(order[0].0).max(0.0) * ratio * ratio;
    let n = order.iter().take_while(|&&(sc, _)| dist2(sc) <= limit).count();
    n.clamp(min, order.len())
}
