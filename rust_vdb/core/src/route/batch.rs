//! Two-level routing of a block of queries at once over the centroids' u8 codes: every
//! centroid for sixteen queries at a time with AMX (`route_tile`), or each group's centroids for
//! the queries of the block that open it with VNNI (`route_groups`). Both hand each query the
//! lists `SuperRouting::route` gives it alone.

use super::{Dists, RouteBufs, Routed, SuperRouting, RECHECK_MARGIN};
use crate::centroid_codes::encode_half_step;
use crate::kernels::{Kernels, TILE_QUERIES};

/// Queries whose candidates `SuperRouting::route_groups` scores together: their distances
/// (~900 u32 each at nprobe 50) stay in the L2 cache, and each group is opened by ~40 of
/// them (1/3 of the groups are opened per query at 0.5M vectors), enough for full tiles.
pub const GROUP_BLOCK: usize = 128;

/// Scratch buffers of `SuperRouting::route_groups`.
#[derive(Default)]
pub(super) struct GroupedBufs {
    /// The block's query codes; per query the groups it opened with where their distances
    /// start in `dist` (`opened[first[j]..first[j + 1]]`).
    codes: Vec<u8>,
    opened: Vec<(u32, usize)>,
    first: Vec<usize>,
    dist: Vec<u32>,
    /// The (query, where its distances go) pairs by group, and the counting sort's counts.
    by_group: Vec<(u32, usize)>,
    count: Vec<usize>,
    /// One tile's query codes and its distances (query-major).
    qtile: Vec<u8>,
    out: Vec<u32>,
}

impl SuperRouting {
    /// Whether a block of queries routes by `route_tile`: "l2" over u8 codes, with a kernel
    /// table that scores a tile of queries against every centroid at once
    /// (`Kernels::tile_all_fast`, AMX).
    pub fn tiles(&self, kern: &Kernels, sim: bool) -> bool {
        self.codes.is_some() && !sim && kern.tile_all_fast
    }

    /// `route` for up to `TILE_QUERIES` queries `qs` (nq x dim) at once, when `tiles` says so:
    /// one `l2_u8_tile_all` scores every centroid's u8 code against all of them, and each
    /// query then takes its candidates' distances from there, group by group as `route`
    /// does. The distances are the same bits, so each query probes the very lists `route`
    /// gives it. `each(j, lists, routed)` receives query j's lists, best first.
    #[allow(clippy::too_many_arguments)]
    pub fn route_tile(
        &self,
        kern: &Kernels,
        qs: &[f32],
        nprobe: usize,
        want: usize,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
        mut each: impl FnMut(usize, &[(f32, u32)], Routed),
    ) {
        let cc = self
            .codes
            .as_ref()
            .expect("route_tile needs the centroids' u8 codes");
        let dim = self.dim;
        let nq = qs.len() / dim;
        let nlist = cc.terms.len();
        let (mut codes, mut all) = (std::mem::take(&mut b.code), std::mem::take(&mut b.tile));
        codes.resize(nq * dim, 0);
        for (q, c) in qs.chunks_exact(dim).zip(codes.chunks_exact_mut(dim)) {
            encode_half_step(&cc.sq, q, c);
        }
        all.resize(nq * nlist, 0);
        (kern.l2_u8_tile_all)(&codes, &cc.codes, &cc.terms, &mut all);
        let keep = nprobe + RECHECK_MARGIN;
        for (j, q) in qs.chunks_exact(dim).enumerate() {
            let given = Dists::Given(&all[j * nlist..(j + 1) * nlist]);
            let mut found = self.route_u8_among(cc, kern, q, given, nprobe, keep, want, b, order);
            // every centroid was scored, its codes read once for the whole tile
            found.scored = self.groups() + nlist;
            found.bytes = self.groups() * 4 * dim + nlist * dim / nq + keep.min(nlist) * 2 * dim;
            each(j, order, found);
        }
        (b.code, b.tile) = (codes, all);
    }


    /// Whether a block of `m` queries routes by `route_groups`: "l2" over u8 codes, with a
    /// kernel table whose `l2_u8_tile_all` scores a tile of queries faster than one by one.
    pub fn groups_tile(&self, kern: &Kernels, sim: bool, m: usize) -> bool {
        self.codes.is_some() && !sim && m >= kern.route_tile_min
    }

    /// `route` for a block of queries `qs` (m x dim), when `groups_tile` says so: each query
    /// ranks the groups and opens its nearest as `route` does; then, `GROUP_BLOCK` queries at
    /// a time, each group's centroids are scored once for the queries that opened it, in
    /// tiles of up to `TILE_QUERIES` (`l2_u8_tile_all`; fewer than the table's
    /// `route_tile_min` go one by one), and each query selects among its candidates as
    /// `route_with_margin` does. The u8 distances are the same bits, so each query probes the
    /// very lists `route` gives it. `each(j, lists, routed)` receives query j's lists, best
    /// first.
    #[allow(clippy::too_many_arguments)]
    pub fn route_groups(
        &self,
        kern: &Kernels,
        qs: &[f32],
        nprobe: usize,
        want: usize,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
        mut each: impl FnMut(usize, &[(f32, u32)], Routed),
    ) {
        let cc = self
            .codes
            .as_ref()
            .expect("route_groups needs the centroids' u8 codes");
        let (dim, ng) = (self.dim, self.groups());
        let keep = nprobe + RECHECK_MARGIN;
        let mut g = std::mem::take(&mut b.grouped);
        for (bi, sub) in qs.chunks(GROUP_BLOCK * dim).enumerate() {
            let m = sub.len() / dim;
            g.codes.resize(m * dim, 0);
            // Each query's code and its opened groups, best first (`g.opened[g.first[j]..
            // g.first[j + 1]]`), each with where its distances go in `g.dist`.
            g.opened.clear();
            g.first.clear();
            let mut total = 0usize;
            for (j, q) in sub.chunks_exact(dim).enumerate() {
                encode_half_step(&cc.sq, q, &mut g.codes[j * dim..(j + 1) * dim]);
                self.rank_groups(kern, q, &mut b.groups, &mut b.dots);
                g.first.push(g.opened.len());
                let mut held = 0;
                for &(_, gi) in b.groups.iter() {
                    let n = self.starts[gi as usize + 1] - self.starts[gi as usize];
                    g.opened.push((gi, total));
                    total += n;
                    held += n;
                    if held >= want {
                        break;
                    }
                }
            }
            g.first.push(g.opened.len());
            g.dist.resize(total, 0);
            // The (group, query) pairs by group: a counting sort over the groups.
            g.count.clear();
            g.count.resize(ng + 1, 0);
            for &(gi, _) in &g.opened {
                g.count[gi as usize + 1] += 1;
            }
            for i in 0..ng {
                g.count[i + 1] += g.count[i];
            }
            g.by_group.resize(g.opened.len(), (0, 0));
            for j in 0..m {
                for &(gi, at) in &g.opened[g.first[j]..g.first[j + 1]] {
                    let c = &mut g.count[gi as usize];
                    g.by_group[*c] = (j as u32, at);
                    *c += 1;
                }
            }
            // Group gi's pairs now end at count[gi] and start where gi - 1's end.
            let mut start = 0;
            for gi in 0..ng {
                let end = g.count[gi];
                let (lo, hi) = (self.starts[gi], self.starts[gi + 1]);
                let n = hi - lo;
                let (rows, terms) = (&cc.codes[lo * dim..hi * dim], &cc.terms[lo..hi]);
                for tile in g.by_group[start..end].chunks(TILE_QUERIES) {
                    if tile.len() < kern.route_tile_min {
                        for &(j, at) in tile {
                            let j = j as usize;
                            let code = &g.codes[j * dim..(j + 1) * dim];
                            (kern.l2_u8_batch_pre)(code, rows, terms, &mut g.dist[at..at + n]);
                        }
                        continue;
                    }
                    let nt = tile.len();
                    g.qtile.resize(nt * dim, 0);
                    for (t, &(j, _)) in tile.iter().enumerate() {
                        let j = j as usize;
                        g.qtile[t * dim..(t + 1) * dim]
                            .copy_from_slice(&g.codes[j * dim..(j + 1) * dim]);
                    }
                    g.out.resize(nt * n, 0);
                    (kern.l2_u8_tile_all)(&g.qtile, rows, terms, &mut g.out);
                    for (t, &(_, at)) in tile.iter().enumerate() {
                        g.dist[at..at + n].copy_from_slice(&g.out[t * n..(t + 1) * n]);
                    }
                }
                start = end;
            }
            // Each query's candidates in its groups' order, then `route_with_margin`'s end.
            for (j, q) in sub.chunks_exact(dim).enumerate() {
                b.keys.clear();
                let mut scored = ng;
                for &(gi, at) in &g.opened[g.first[j]..g.first[j + 1]] {
                    let lo = self.starts[gi as usize];
                    let n = self.starts[gi as usize + 1] - lo;
                    let d = &g.dist[at..at + n];
                    b.keys.extend(
                        d.iter()
                            .zip(lo as u64..)
                            .map(|(&d, p)| (d as u64) << 32 | p),
                    );
                    scored += n;
                }
                let kept = self.select_kept(kern, q, nprobe, keep, b, order);
                let bytes = ng * 4 * dim + (scored - ng) * dim + kept * 2 * dim;
                each(bi * GROUP_BLOCK + j, order, Routed { scored, bytes });
            }
        }
        b.grouped = g;
    }
}
