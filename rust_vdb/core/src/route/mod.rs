//! Routing: the lists a query probes.
//!
//! Flat routing scores every centroid (`centroid_dots`, then `select_lists`); below
//! `MIN_NLIST` lists, for "ip", and for searches probing a large share of the lists, that is
//! all there is. Two-level routing (`SuperRouting`) groups the coarse centroids under about
//! sqrt(nlist) super-centroids: a query scores the super-centroids, opens the nearest groups
//! until they hold `ROUTE_FACTOR * max(nprobe, default nprobe)` centroids, and picks its
//! nprobe lists among those only.
//!
//! The lists two-level routing picks differ a little from flat routing's (never the nearest).
//! Recall@10 at equal nprobe is within ~0.002 on the replica (benchmarks/results/perf.md) and
//! ~0.003 lower on real SIFT descriptors (0.9517 against 0.9546 at nprobe 54 on photo-sift-a).
//! Scoring every centroid to win that back cost more than the ~6% of codes it saves on AVX2
//! (benchmarks/results/perf-prefilter.md, round 6). The floor of the default nprobe serves
//! diffuse data, whose nearest lists often sit outside the nearest group.
//!
//! With "l2" over "u8+f16" storage, two-level routing ranks its candidates over the centroids'
//! u8 codes (the index's own Sq8 quantizer, derived when the centroids are set, never stored)
//! with the scan's u8 l2 kernel (`l2_u8_batch_pre`): half the bytes of the f16 copy. The query
//! is coded at half that resolution (`crate::centroid_codes`: 128 levels, two steps apart),
//! which lets AVX2 score a centroid with one `vpmaddubsw` per 32 dims. The codes round each
//! centroid by up to half a step per dimension and the query by up to a step, so the best
//! `nprobe + RECHECK_MARGIN` are re-scored in f16 and the nprobe best of those are probed. A
//! block of queries on a kernel table with a fast tile kernel (AMX) takes the u8 distances from
//! one `l2_u8_tile_all` per sixteen queries over every centroid (`route_tile`); with VNNI,
//! each group's centroids are scored once for the queries of the block that open it, sixteen
//! at a time (`route_groups`). Both are the same bits, so the same lists.

use half::f16;

use crate::centroid_codes::{encode_half_step, CentroidCodes};
use crate::defaults::default_nprobe;
use crate::error::never_interrupt;
use crate::kernels::Kernels;
use crate::kmeans::{self, KMeansParams};
use crate::quant::Sq8;

mod batch;
pub use batch::GROUP_BLOCK;

/// Indexes with fewer lists score every centroid: that costs little there, and the groups
/// would be too few to skip much.
pub const MIN_NLIST: usize = 512;
/// Candidate centroids per probed list. Groups are opened best-first until they hold this
/// many times max(nprobe, default nprobe) centroids (smaller factors lose recall at equal
/// nprobe on SIFT-like data). Searches where that is half of nlist or more score every centroid.
pub const ROUTE_FACTOR: usize = 16;
/// Queries routed by one matrix product (the product packs every centroid once per block).
pub const ROUTE_BLOCK: usize = 128;
/// Blocks with fewer queries route query by query with the kernels (a matrix product packs
/// every centroid first, which only pays off over several queries).
pub const ROUTE_GEMM_MIN: usize = 4;
/// Candidates beyond nprobe re-scored in f16 after the u8 ranking: the smallest margin after
/// which u8 routing probes f16 routing's lists (benches/margin_sweep.rs; "List identity" in
/// benchmarks/results/perf-single-round2.md).
pub const RECHECK_MARGIN: usize = 16;

/// Inner products of m queries with every centroid (m x nlist): one matrix product for a
/// block of `ROUTE_GEMM_MIN` or more, else the dot kernel over an f16 copy of the centroids
/// (the same values in half the bytes: a query or two is memory-bound on them): the grouped
/// copy of two-level routing where there is one (`grouped`, its products put back in list
/// order), else `centroids_f16`.
#[allow(clippy::too_many_arguments)]
pub fn centroid_dots(
    kern: &Kernels,
    qblock: &[f32],
    m: usize,
    centroids: &[f32],
    centroids_f16: &[f16],
    grouped: Option<&SuperRouting>,
    dim: usize,
    dots: &mut [f32],
) {
    let nlist = centroids.len() / dim;
    if m >= ROUTE_GEMM_MIN {
        crate::matmul::dots_abt(&qblock[..m * dim], centroids, dim, &mut dots[..m * nlist]);
        return;
    }
    for (q, row) in qblock.chunks_exact(dim).zip(dots.chunks_exact_mut(nlist)) {
        match grouped {
            Some(r) => GROUPED.with_borrow_mut(|tmp| {
                tmp.resize(nlist, 0.0);
                (kern.dot_f32_f16_batch)(q, &r.cent_f16, tmp);
                for (&d, &li) in tmp.iter().zip(&r.members) {
                    row[li as usize] = d;
                }
            }),
            None => (kern.dot_f32_f16_batch)(q, centroids_f16, row),
        }
    }
}

thread_local! {
    /// `centroid_dots`' products in group order, kept across calls.
    static GROUPED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Bytes of centroids `centroid_dots` reads for m queries: the f32 copy once per
/// `ROUTE_BLOCK` sub-block of a matrix product, or the f16 copy per query.
pub fn centroid_bytes(m: usize, nlist: usize, dim: usize) -> usize {
    if m >= ROUTE_GEMM_MIN {
        m.div_ceil(ROUTE_BLOCK) * nlist * 4 * dim
    } else {
        m * nlist * 2 * dim
    }
}

/// The nprobe best lists for one query's centroid inner products `dots`, best first: by
/// ||c||^2 - 2 <q, c> (l2, `cnorms` = ||c||^2) or -<q, c> (`sim`: ip, cosine), ties to the
/// smaller list.
pub fn select_lists(
    dots: &[f32],
    cnorms: &[f32],
    sim: bool,
    nprobe: usize,
    order: &mut Vec<(f32, u32)>,
) {
    order.clear();
    if sim {
        order.extend(dots.iter().enumerate().map(|(i, &d)| (-d, i as u32)));
    } else {
        order.extend(
            dots.iter()
                .zip(cnorms)
                .enumerate()
                .map(|(i, (&d, &c))| (c - 2.0 * d, i as u32)),
        );
    }
    keep_best(order, nprobe);
}

/// Keeps the `nprobe` best (score, list) pairs, best first; ties go to the smaller list.
pub fn keep_best(order: &mut Vec<(f32, u32)>, nprobe: usize) {
    KEYS.with_borrow_mut(|keys| {
        // (score, list) as one u64 whose unsigned order is the pairs' order: the selection
        // and sort compare plain integers instead of calling the pairs' comparator.
        keys.clear();
        keys.extend(order.iter().map(|&(sc, li)| pair_key(sc, li)));
        if nprobe < keys.len() {
            keys.select_nth_unstable(nprobe.max(1) - 1);
            keys.truncate(nprobe);
        }
        keys.sort_unstable();
        order.clear();
        order.extend(keys.iter().map(|&k| key_pair(k)));
    });
}

thread_local! {
    /// `keep_best`'s keys, kept across calls (routing allocates nothing per query).
    static KEYS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `(score, list)` as a u64 that orders like `score.total_cmp`, then the list: the score's
/// bits mapped to an unsigned order (sign bit set for positive, all bits flipped for negative)
/// above the list.
#[inline(always)]
pub fn pair_key(score: f32, list: u32) -> u64 {
    let b = score.to_bits();
    let ordered = if (b as i32) < 0 { !b } else { b ^ 0x8000_0000 };
    ((ordered as u64) << 32) | list as u64
}

/// The `(score, list)` of a `pair_key`.
#[inline(always)]
pub fn key_pair(key: u64) -> (f32, u32) {
    let ordered = (key >> 32) as u32;
    let b = if ordered & 0x8000_0000 != 0 {
        ordered ^ 0x8000_0000
    } else {
        !ordered
    };
    (f32::from_bits(b), key as u32)
}

/// Keeps the `keep` smallest of `keys` (distinct values), in no particular order. A long list
/// is cut first to the keys at or under a bound taken from every eighth key (rank
/// `2 * keep / 8 + 4` of that sample: far more often than not, `keep` keys or more lie under
/// it), and only those are selected among; the kept set is the same as a selection over all.
pub fn keep_smallest(keys: &mut Vec<u64>, keep: usize, tmp: &mut Vec<u64>) {
    const STRIDE: usize = 8;
    let n = keys.len();
    if keep >= n {
        return;
    }
    if keep == 0 {
        keys.clear();
        return;
    }
    if n >= 4 * keep.max(16) {
        tmp.clear();
        tmp.extend(keys.iter().step_by(STRIDE).copied());
        let r = (2 * keep.div_ceil(STRIDE) + 4).min(tmp.len());
        let bound = *tmp.select_nth_unstable(r - 1).1;
        // branch-free: every key is written, the count moves only for those kept
        tmp.resize(n, 0);
        let mut c = 0;
        for &k in keys.iter() {
            tmp[c] = k;
            c += (k <= bound) as usize;
        }
        if c >= keep {
            tmp.truncate(c);
            std::mem::swap(keys, tmp);
        }
    }
    if keep < keys.len() {
        keys.select_nth_unstable(keep - 1);
        keys.truncate(keep);
    }
}

/// The grouped centroids (derived from the coarse centroids; rebuilt on load, never stored).
#[derive(Clone, Debug)]
pub struct SuperRouting {
    dim: usize,
    /// Super-centroids, groups x dim, and their squared norms.
    sup: Vec<f32>,
    sup_norms: Vec<f32>,
    /// Group g holds the centroids members[starts[g]..starts[g + 1]].
    starts: Vec<usize>,
    members: Vec<u32>,
    /// The centroids in group order (f16: the centroids are f16 values already) and norms.
    cent_f16: Vec<f16>,
    cnorms: Vec<f32>,
    /// "l2" over u8 codes: the centroids encoded like the stored vectors, in group order.
    codes: Option<CentroidCodes>,
}

/// Scratch buffers of `SuperRouting::route`, reused across queries.
#[derive(Default)]
pub struct RouteBufs {
    /// The groups of one query, best first.
    pub groups: Vec<(f32, u32)>,
    pub dots: Vec<f32>,
    /// The query's u8 code, u8 distances of a group, and (distance << 32 | position) keys.
    code: Vec<u8>,
    dist: Vec<u32>,
    keys: Vec<u64>,
    tmp: Vec<u64>,
    /// `route_tile`'s distances of a tile's queries to every centroid (query-major).
    tile: Vec<u32>,
    /// `route_groups`' buffers.
    grouped: batch::GroupedBufs,
}


/// Where `route_u8_among` takes a query's u8 centroid distances from: computed group by group
/// from its code, or all of them given (in group order).
#[derive(Clone, Copy)]
enum Dists<'a> {
    Compute(&'a [u8]),
    Given(&'a [u32]),
}

/// What routing one query read: centroids (and super-centroids) scored, and their bytes.
pub struct Routed {
    pub scored: usize,
    pub bytes: usize,
}

impl SuperRouting {
    /// Groups `centroids` (nlist x dim, f16-exact values); None below MIN_NLIST lists. With
    /// `sq` ("l2" over u8 codes) the candidates are ranked over the centroids' u8 codes.
    pub fn build(
        centroids: &[f32],
        dim: usize,
        seed: u64,
        sq: Option<&Sq8>,
    ) -> Option<SuperRouting> {
        let nlist = centroids.len() / dim.max(1);
        if nlist < MIN_NLIST {
            return None;
        }
        let groups = ((nlist as f64).sqrt().round() as usize).max(2);
        let mut p = KMeansParams::new(groups, seed ^ 0x5EED_2222);
        p.niter = 20;
        let km = kmeans::kmeans(centroids, dim, &p, &never_interrupt).ok()?;
        let sup = km.centroids;
        let sup_norms = kmeans::row_norms(&sup, dim);
        let (mut of, mut sc) = (vec![0u32; nlist], vec![0f32; nlist]);
        kmeans::assign(
            None, centroids, &sup, &sup_norms, dim, false, &mut of, &mut sc,
        )
        .ok()?;
        // The centroids by group; within a group, by list number.
        let (starts, members) = kmeans::members_by_cluster(&of, groups);
        let mut cent_f16 = Vec::with_capacity(nlist * dim);
        let mut cnorms = Vec::with_capacity(nlist);
        for &li in &members {
            let c = &centroids[li as usize * dim..(li as usize + 1) * dim];
            cent_f16.extend(c.iter().map(|&v| f16::from_f32(v)));
            cnorms.push(c.iter().map(|v| v * v).sum());
        }
        let codes = sq.map(|sq| CentroidCodes::new(sq, centroids, &members));
        Some(SuperRouting {
            dim,
            sup,
            sup_norms,
            starts,
            members,
            cent_f16,
            cnorms,
            codes,
        })
    }

    /// The groups: the super-centroids (groups x dim) and their squared norms, and the
    /// centroids of group g, `members[starts[g]..starts[g + 1]]` (as (sup, sup_norms, starts,
    /// members)).
    pub fn grouping(&self) -> (&[f32], &[f32], &[usize], &[u32]) {
        (&self.sup, &self.sup_norms, &self.starts, &self.members)
    }

    /// Whether a search probing `nprobe` of `nlist` lists should route through the groups.
    pub fn applies(nprobe: usize, nlist: usize) -> bool {
        Self::want(nprobe, nlist) < nlist / 2
    }

    /// Candidate centroids for a search probing `nprobe` of `nlist` lists: ROUTE_FACTOR times
    /// nprobe, and never fewer than for the default nprobe (a small nprobe must still find its
    /// nearest lists, which can sit in the third or fourth group: see the module notes).
    pub fn want(nprobe: usize, nlist: usize) -> usize {
        ROUTE_FACTOR * nprobe.max(default_nprobe(nlist))
    }

    /// Scores the candidate lists of query `q` into `order` as (score, list): the groups
    /// nearest to `q` in L2, best first, until they hold `want` centroids. A list's score is
    /// ||c||^2 - 2 <q, c> (l2), or -<q, c> with `sim` (cosine: unit queries and centroids).
    /// Returns the number of centroids and super-centroids scored.
    #[allow(clippy::too_many_arguments)]
    pub fn candidates(
        &self,
        kern: &Kernels,
        q: &[f32],
        want: usize,
        sim: bool,
        groups: &mut Vec<(f32, u32)>,
        dots: &mut Vec<f32>,
        order: &mut Vec<(f32, u32)>,
    ) -> usize {
        let dim = self.dim;
        let mut scored = self.rank_groups(kern, q, groups, dots);
        order.clear();
        for &(_, g) in groups.iter() {
            let (a, b) = (self.starts[g as usize], self.starts[g as usize + 1]);
            if a == b {
                continue;
            }
            let n = b - a;
            dots.resize(n.max(dots.len()), 0.0);
            (kern.dot_f32_f16_batch)(q, &self.cent_f16[a * dim..b * dim], &mut dots[..n]);
            let members = &self.members[a..b];
            if sim {
                order.extend(dots[..n].iter().zip(members).map(|(&d, &li)| (-d, li)));
            } else {
                order.extend(
                    dots[..n]
                        .iter()
                        .zip(&self.cnorms[a..b])
                        .zip(members)
                        .map(|((&d, &c), &li)| (c - 2.0 * d, li)),
                );
            }
            scored += n;
            if order.len() >= want {
                break;
            }
        }
        scored
    }

    /// The groups of `q` into `groups`, nearest (L2 to the super-centroid) first; returns
    /// their number.
    fn rank_groups(
        &self,
        kern: &Kernels,
        q: &[f32],
        groups: &mut Vec<(f32, u32)>,
        dots: &mut Vec<f32>,
    ) -> usize {
        let ng = self.sup_norms.len();
        dots.resize(ng.max(dots.len()), 0.0);
        (kern.dot_f32_batch)(q, &self.sup, &mut dots[..ng]);
        groups.clear();
        groups.extend(
            dots[..ng]
                .iter()
                .zip(&self.sup_norms)
                .enumerate()
                .map(|(g, (&d, &n))| (n - 2.0 * d, g as u32)),
        );
        keep_best(groups, ng);
        ng
    }

    /// The `nprobe` lists query `q` probes into `order` as (score, list), best first, among
    /// its `want` candidates: `candidates` then `keep_best`, or, with u8 codes and "l2",
    /// `route_with_margin` (the same lists but where the rounding of the centroids pushes one
    /// of the nprobe best beyond the margin, or at near-ties the f16 kernels round apart).
    #[allow(clippy::too_many_arguments)]
    pub fn route(
        &self,
        kern: &Kernels,
        q: &[f32],
        nprobe: usize,
        want: usize,
        sim: bool,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
    ) -> Routed {
        if sim || self.codes.is_none() {
            let (dim, ng) = (self.dim, self.groups());
            let scored = self.candidates(kern, q, want, sim, &mut b.groups, &mut b.dots, order);
            keep_best(order, nprobe);
            // f32 super-centroids, then the f16 centroids of the opened groups
            let bytes = ng * 4 * dim + (scored - ng) * 2 * dim;
            return Routed { scored, bytes };
        }
        self.route_with_margin(kern, q, nprobe, RECHECK_MARGIN, want, b, order)
    }

    /// `route` over the centroids' u8 codes ("l2"), re-scoring the best `nprobe + margin` in
    /// f16 (`route` passes RECHECK_MARGIN; benches/margin_sweep.rs measures the others).
    #[allow(clippy::too_many_arguments)]
    pub fn route_with_margin(
        &self,
        kern: &Kernels,
        q: &[f32],
        nprobe: usize,
        margin: usize,
        want: usize,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
    ) -> Routed {
        let cc = self
            .codes
            .as_ref()
            .expect("route_with_margin needs the centroids' u8 codes");
        let keep = nprobe + margin;
        let mut code = std::mem::take(&mut b.code);
        code.resize(self.dim, 0);
        encode_half_step(&cc.sq, q, &mut code);
        let found = self.route_u8_among(
            cc,
            kern,
            q,
            Dists::Compute(&code),
            nprobe,
            keep,
            want,
            b,
            order,
        );
        b.code = code;
        found
    }

    /// `route_with_margin` for a query whose centroid distances come from `dists`: the groups
    /// nearest to `q`, then the u8 distances of their centroids (in group order) until `want`,
    /// the best `keep` of those re-scored in f16, and the `nprobe` best of these into `order`.
    #[allow(clippy::too_many_arguments)]
    fn route_u8_among(
        &self,
        cc: &CentroidCodes,
        kern: &Kernels,
        q: &[f32],
        dists: Dists,
        nprobe: usize,
        keep: usize,
        want: usize,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
    ) -> Routed {
        let (dim, ng) = (self.dim, self.groups());
        let mut scored = self.rank_groups(kern, q, &mut b.groups, &mut b.dots);
        b.keys.clear();
        for &(_, g) in b.groups.iter() {
            let (lo, hi) = (self.starts[g as usize], self.starts[g as usize + 1]);
            let n = hi - lo;
            let d = match dists {
                Dists::Given(all) => &all[lo..hi],
                Dists::Compute(code) => {
                    b.dist.resize(n.max(b.dist.len()), 0);
                    (kern.l2_u8_batch_pre)(
                        code,
                        &cc.codes[lo * dim..hi * dim],
                        &cc.terms[lo..hi],
                        &mut b.dist[..n],
                    );
                    &b.dist[..n]
                }
            };
            // (u8 distance, position in group order): one u64 compare ranks them.
            let at = d.iter().zip(lo as u64..);
            b.keys.extend(at.map(|(&d, p)| (d as u64) << 32 | p));
            scored += n;
            if b.keys.len() >= want {
                break;
            }
        }
        let keep = self.select_kept(kern, q, nprobe, keep, b, order);
        // f32 super-centroids, u8 candidates, f16 re-checks
        let bytes = ng * 4 * dim + (scored - ng) * dim + keep * 2 * dim;
        Routed { scored, bytes }
    }

    /// The end of u8 routing for query `q` whose candidates' (u8 distance << 32 | position in
    /// group order) keys are in `b.keys`: the best `keep` of them re-scored in f16, and the
    /// `nprobe` best of these into `order`. Returns how many were re-scored.
    fn select_kept(
        &self,
        kern: &Kernels,
        q: &[f32],
        nprobe: usize,
        keep: usize,
        b: &mut RouteBufs,
        order: &mut Vec<(f32, u32)>,
    ) -> usize {
        let dim = self.dim;
        let keep = keep.min(b.keys.len());
        keep_smallest(&mut b.keys, keep, &mut b.tmp);
        order.clear();
        // The kept candidates' f16 rows, asked for before the first is scored (each would
        // otherwise wait on its own).
        for &k in &b.keys {
            let p = k as u32 as usize;
            crate::kernels::prefetch(&self.cent_f16[p * dim..(p + 1) * dim]);
        }
        order.extend(b.keys.iter().map(|&k| {
            let p = k as u32 as usize;
            let d = (kern.dot_f32_f16)(q, &self.cent_f16[p * dim..(p + 1) * dim]);
            (self.cnorms[p] - 2.0 * d, self.members[p])
        }));
        keep_best(order, nprobe);
        keep
    }

    /// The number of groups (super-centroids).
    pub fn groups(&self) -> usize {
        self.sup_norms.len()
    }

    /// Memory of the grouped copy.
    pub fn bytes(&self) -> usize {
        (self.sup.len() + self.sup_norms.len() + self.cnorms.len()) * 4
            + self.cent_f16.len() * 2
            + self.codes.as_ref().map_or(0, CentroidCodes::bytes)
            + self.members.len() * 4
            + self.starts.len() * 8
    }
}
