//! Search: the entry point cuts the queries into blocks; a block runs the stages on one
//! thread with its scratch buffers: routing (which lists each query probes), the prescore
//! (`prescore`: scan the probed lists, keep candidates), the rerank and top k (`rerank`).

use std::cell::RefCell;
use std::time::Instant;

use rayon::prelude::*;

use super::prescore::Prescore;
use super::probe::Probe;
use super::rerank::RerankBufs;
use super::single::ScanBufs;
use super::{IvfIndex, SearchParams, Tuning};
use crate::error::{each_interrupt_chunk, Interrupt, Result, INTERRUPT_EVERY};
use crate::kernels::{kernels, Kernels, TILE_QUERIES};
use crate::metric::{normalize_rows, Metric};
use crate::pool;
use crate::probe_ratio;
use crate::route::{self, SuperRouting, ROUTE_BLOCK};
use crate::search_stats::SearchStats;
use crate::validate;

/// Queries searched together by one task: the lists they share are scanned back to back.
/// Parallel calls use smaller blocks when there are too few queries to keep threads busy.
/// The more queries a block holds, the fuller each list's query tiles and the fewer times a
/// list is read from memory (benchmarks/HISTORY.md, 2026-12-05 day: blocks of up to 2,048).
const SCAN_BLOCK: usize = 2048;

/// Blocks of at least this many queries route by tiles (`SuperRouting::route_tile`) where the
/// kernel table has a fast tile kernel: a tile scores every centroid, about four times the
/// candidates one query scores alone, which a tile of four or more queries pays back.
const ROUTE_TILE_MIN: usize = 4;

/// Per-thread buffers reused across queries and calls: a search allocates nothing per query.
/// Routing's are here; the prescore and the rerank own theirs (`pre`, `fin`).
#[derive(Default)]
struct Scratch {
    /// The block's (normalised) queries, and inner products of a sub-block with every centroid.
    qblock: Vec<f32>,
    dots: Vec<f32>,
    order: Vec<(f32, u32)>,
    /// Two-level routing's buffers.
    route: route::RouteBufs,
    /// Every probe of the block in visiting order: sorted, or for a block of one query
    /// nearest list first.
    probes: Vec<Probe>,
    /// The counting sort of `probes`: where each list's probes start, and the sorted copy.
    list_starts: Vec<u32>,
    probes_tmp: Vec<Probe>,
    /// Per query of a block: its nearest list (`u32::MAX`: none).
    seeds: Vec<u32>,
    /// The prescore's buffers and its candidates (one heap per query); one query's list scan's.
    pre: Prescore,
    one: ScanBufs,
    /// The rerank's.
    fin: RerankBufs,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl IvfIndex {
    /// The k best of each query: (distances, ids), nq * k each, best first.
    pub fn search(
        &self,
        queries: &[f32],
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
        threads: Option<usize>,
        interrupt: Interrupt,
    ) -> Result<(Vec<f32>, Vec<i64>, SearchStats)> {
        self.search_with(queries, k, nprobe, rerank, Tuning::default(), threads, interrupt)
    }

    /// `search` with the `tuning` settings (`SearchParams::reorder`, `probe_ratio`).
    #[allow(clippy::too_many_arguments)]
    pub fn search_with(
        &self,
        queries: &[f32],
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
        tuning: Tuning,
        threads: Option<usize>,
        interrupt: Interrupt,
    ) -> Result<(Vec<f32>, Vec<i64>, SearchStats)> {
        let dim = self.dim;
        let nq = validate::rows(queries, dim, "queries")?;
        let p = self.params_with(k, nprobe, rerank, tuning)?;
        validate::finite(queries, dim, "queries")?;
        pool::check_threads(threads)?;
        let t0 = Instant::now();
        let mut d = vec![0f32; nq * k];
        let mut ids = vec![0i64; nq * k];
        let mut stats = SearchStats::default();
        let sequential = nq <= 1 || threads == Some(1);
        // One block per thread, none larger than SCAN_BLOCK: the larger the block, the more
        // queries share each scan of a list.
        let nthreads = if sequential {
            1
        } else {
            pool::effective_threads(threads)
        };
        // A single query may still use several threads: over its lists, not over queries.
        let split = if nq == 1 && threads != Some(1) {
            pool::effective_threads(threads)
        } else {
            1
        };
        // Each thread's block as large at two threads as at one (up to SCAN_BLOCK): a chunk
        // between interrupt checks holds INTERRUPT_EVERY queries per thread, so a second thread
        // does not halve how many queries share each list's scan.
        let per = INTERRUPT_EVERY * nthreads;
        let block = nq.min(per).div_ceil(nthreads).clamp(8, SCAN_BLOCK);
        each_interrupt_chunk(
            queries,
            per,
            dim,
            &mut d,
            &mut ids,
            k,
            interrupt,
            |qs, dd, ii| {
                let s = if sequential {
                    let mut s = SearchStats::default();
                    for ((qs, dd), ii) in qs
                        .chunks(SCAN_BLOCK * dim)
                        .zip(dd.chunks_mut(SCAN_BLOCK * k))
                        .zip(ii.chunks_mut(SCAN_BLOCK * k))
                    {
                        s.merge(&self.search_block(qs, &p, dd, ii, split));
                    }
                    s
                } else {
                    pool::install(threads, || {
                        qs.par_chunks(block * dim)
                            .zip(dd.par_chunks_mut(block * k))
                            .zip(ii.par_chunks_mut(block * k))
                            .map(|((qs, dd), ii)| self.search_block(qs, &p, dd, ii, 1))
                            .reduce(SearchStats::default, |mut a, b| {
                                a.merge(&b);
                                a
                            })
                    })?
                };
                stats.merge(&s);
                Ok(())
            },
        )?;
        stats.threads = if sequential {
            stats.threads.max(1)
        } else {
            pool::effective_threads(threads).min(nq) as u64
        };
        stats.wall_s = t0.elapsed().as_secs_f64();
        Ok((d, ids, stats))
    }

    /// Searches a block of queries on the current thread with its scratch buffers: route
    /// every query, then visit the probed lists in list order, scoring each list against all
    /// the block's queries that probe it while its codes are in cache, then rerank per query.
    /// Results do not depend on the visiting order (the heaps order hits by score, then id).
    ///
    /// A block of one query with `split_threads` > 1 shares its lists' scan with up to
    /// `split_threads` - 1 helper threads (see `prescore_one`).
    fn search_block(
        &self,
        qs: &[f32],
        p: &SearchParams,
        out_d: &mut [f32],
        out_i: &mut [i64],
        split_threads: usize,
    ) -> SearchStats {
        SCRATCH.with(|cell| {
            let mut guard = cell.borrow_mut();
            let s = &mut *guard;
            let mut stats = SearchStats::default();
            let kern = kernels();
            let m = qs.len() / self.dim;
            let t0 = Instant::now();

            self.route_block(kern, qs, p, s, &mut stats);
            let t1 = Instant::now();
            stats.routing_s += (t1 - t0).as_secs_f64();
            stats.lists_probed += s.probes.len() as u64;
            stats.nq += m as u64;

            self.prepare_prescore(p, &s.qblock, m, &mut s.pre);
            stats.timers.prescore_prepare_s += t1.elapsed().as_secs_f64();
            if m == 1 {
                let one = &mut s.one;
                self.prescore_one(
                    kern,
                    &s.qblock,
                    &s.probes,
                    &mut s.pre,
                    one,
                    split_threads,
                    &mut stats,
                );
            } else if self.prefilters(&s.pre) {
                let fs = &mut s.one.fs;
                let (probes, seeds) = (&s.probes, &s.seeds);
                self.prescore_fs(kern, &s.qblock, probes, seeds, m, &mut s.pre, fs, &mut stats);
            } else {
                self.prescore(kern, &s.qblock, &s.probes, &s.seeds, &mut s.pre, &mut stats);
            }
            let t2 = Instant::now();
            stats.prescore_s += (t2 - t1).as_secs_f64();

            let Prescore {
                heaps, rerank_q, ..
            } = &mut s.pre;
            let (heaps, rerank_q) = (&mut heaps[..m], &rerank_q[..m]);
            self.rerank_topk(
                kern, p, &s.qblock, heaps, rerank_q, &mut s.fin, out_d, out_i, &mut stats,
            );
            let t3 = Instant::now();
            if rerank_q.iter().any(|&r| r) {
                stats.rerank_s += (t3 - t2).as_secs_f64();
            } else {
                stats.topk_s += (t3 - t2).as_secs_f64();
            }
            stats
        })
    }

    /// Routing: copies the block's queries into `s.qblock` (normalised for cosine) and fills
    /// `s.probes` with every probe, sorted so that each list's queries follow one another (a
    /// block of one query: nearest list first). Two-level routing goes query by query; flat
    /// routing scores every centroid with a matrix product per sub-block of `ROUTE_BLOCK`
    /// queries. With a `probe_ratio`, each query keeps only the first of its nprobe lists
    /// that `probe_ratio::within_ratio` allows.
    fn route_block(
        &self,
        kern: &Kernels,
        qs: &[f32],
        p: &SearchParams,
        s: &mut Scratch,
        stats: &mut SearchStats,
    ) {
        let (dim, nlist, nprobe) = (self.dim, self.lists.len(), p.nprobe);
        let ratio = p.probe_ratio;
        let min_probe = probe_ratio::min_probe(nprobe);
        let sim = self.metric.is_similarity();
        let m = qs.len() / dim;
        s.qblock.clear();
        s.qblock.extend_from_slice(qs);
        if self.metric == Metric::Cosine {
            normalize_rows(&mut s.qblock, dim);
        }
        s.probes.clear();
        let two_level = self
            .routing
            .as_ref()
            .filter(|_| SuperRouting::applies(nprobe, nlist));
        let t0 = Instant::now();
        if let Some(r) = two_level {
            // Each query scores only the centroids of its nearest groups.
            let want = SuperRouting::want(nprobe, nlist);
            // Counts what routing query qi read and adds the probes of its lists (best first),
            // those `probe_ratio` keeps.
            let take = |probes: &mut Vec<Probe>,
                        stats: &mut SearchStats,
                        qi: usize,
                        q: &[f32],
                        lists: &[(f32, u32)],
                        done: route::Routed| {
                stats.centroids_scored += done.scored as u64;
                stats.bytes_scanned += done.bytes as u64;
                let n = probe_ratio::within_ratio(lists, q, sim, ratio, min_probe);
                probes.extend(lists[..n].iter().map(|&(_, li)| Probe::new(li as usize, qi)));
            };
            if m >= ROUTE_TILE_MIN && r.tiles(kern, sim) {
                // Sixteen queries at a time against every centroid (AMX): the same lists.
                for (ti, tile) in s.qblock.chunks(TILE_QUERIES * dim).enumerate() {
                    let (probes, seen) = (&mut s.probes, &mut *stats);
                    r.route_tile(
                        kern,
                        tile,
                        nprobe,
                        want,
                        &mut s.route,
                        &mut s.order,
                        |j, lists, done| {
                            let q = &tile[j * dim..(j + 1) * dim];
                            take(probes, seen, ti * TILE_QUERIES + j, q, lists, done);
                        },
                    );
                }
            } else if r.groups_tile(kern, sim, m) {
                // Each group's centroids scored once for the queries that open it (VNNI).
                let (probes, seen, qblock) = (&mut s.probes, &mut *stats, &s.qblock);
                r.route_groups(
                    kern,
                    qblock,
                    nprobe,
                    want,
                    &mut s.route,
                    &mut s.order,
                    |qi, lists, done| {
                        take(probes, seen, qi, &qblock[qi * dim..(qi + 1) * dim], lists, done)
                    },
                );
            } else {
                for (qi, q) in s.qblock.chunks_exact(dim).enumerate() {
                    let done = r.route(kern, q, nprobe, want, sim, &mut s.route, &mut s.order);
                    take(&mut s.probes, stats, qi, q, &s.order, done);
                }
            }
            stats.timers.route_score_s += t0.elapsed().as_secs_f64();
        } else {
            let mut t = t0;
            for (bi, sub) in s.qblock.chunks(ROUTE_BLOCK * dim).enumerate() {
                let mb = sub.len() / dim;
                s.dots.resize(mb * nlist, 0.0);
                route::centroid_dots(
                    kern,
                    sub,
                    mb,
                    &self.centroids,
                    &self.centroids_f16,
                    self.routing.as_ref(),
                    dim,
                    &mut s.dots,
                );
                let scored = Instant::now();
                stats.timers.route_score_s += (scored - t).as_secs_f64();
                for qi in 0..mb {
                    let dots = &s.dots[qi * nlist..(qi + 1) * nlist];
                    route::select_lists(dots, &self.cnorms, sim, nprobe, &mut s.order);
                    let qv = &sub[qi * dim..(qi + 1) * dim];
                    let n = probe_ratio::within_ratio(&s.order, qv, sim, ratio, min_probe);
                    let q = bi * ROUTE_BLOCK + qi;
                    s.probes
                        .extend(s.order[..n].iter().map(|&(_, li)| Probe::new(li as usize, q)));
                }
                t = Instant::now();
                stats.timers.route_select_s += (t - scored).as_secs_f64();
            }
            stats.centroids_scored += (m * nlist) as u64;
            stats.bytes_scanned += route::centroid_bytes(m, nlist, dim) as u64;
        }
        // A block's queries visit the lists in list order, so those probing the same list are
        // scanned together; one query keeps routing's order, nearest list first: its heap's
        // threshold then tightens soonest, and fewer rows pass the heads (split codes: 9.1% of
        // the rows read their tails in list order at 1M, nprobe 52).
        if m > 1 {
            let t = Instant::now();
            nearest_lists(&s.probes, m, &mut s.seeds);
            sort_probes(&mut s.probes, nlist, &mut s.list_starts, &mut s.probes_tmp);
            stats.timers.route_order_s += t.elapsed().as_secs_f64();
        }
    }
}

/// Sorts probes by list, then query. They arrive in query order, so placing them by list in
/// arrival order (a counting sort over the `nlist` lists, linear in the probes) gives the
/// sorted order; a block too small to pay for the nlist counters sorts by comparison.
fn sort_probes(probes: &mut Vec<Probe>, nlist: usize, starts: &mut Vec<u32>, tmp: &mut Vec<Probe>) {
    if probes.len() < nlist || probes.windows(2).any(|w| w[0].query() > w[1].query()) {
        probes.sort_unstable();
        return;
    }
    starts.clear();
    starts.resize(nlist + 1, 0);
    for &v in probes.iter() {
        starts[v.list() + 1] += 1;
    }
    for i in 0..nlist {
        starts[i + 1] += starts[i];
    }
    tmp.clear();
    tmp.resize(probes.len(), Probe::default());
    for &v in probes.iter() {
        let at = &mut starts[v.list()];
        tmp[*at as usize] = v;
        *at += 1;
    }
    std::mem::swap(probes, tmp);
}

/// Each query's nearest list into `seeds` (indexed by query; `u32::MAX` for a query with no
/// probe): the first of its probes, which arrive query by query, best first.
fn nearest_lists(probes: &[Probe], m: usize, seeds: &mut Vec<u32>) {
    seeds.clear();
    seeds.resize(m, u32::MAX);
    let mut last = None;
    for &v in probes {
        let q = v.query();
        if last != Some(q) {
            seeds[q] = v.list() as u32;
            last = Some(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sort_probes;
    use crate::ivf::probe::Probe;

    #[test]
    fn probes_sort_by_list_then_query_either_way() {
        let mut rng = crate::rng::Rng::new(3);
        for (nq, per, nlist) in [
            (0usize, 3usize, 5usize),
            (3, 2, 50),
            (40, 7, 20),
            (300, 5, 64),
        ] {
            let mut probes = Vec::new();
            for q in 0..nq {
                for _ in 0..per {
                    probes.push(Probe::new(rng.below(nlist), q));
                }
            }
            let mut want = probes.clone();
            want.sort_unstable();
            let (mut starts, mut tmp) = (vec![], vec![]);
            sort_probes(&mut probes, nlist, &mut starts, &mut tmp);
            assert_eq!(probes, want, "nq {nq} nlist {nlist}");
        }
    }
}
