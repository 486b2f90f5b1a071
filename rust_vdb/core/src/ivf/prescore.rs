//! The prescore: every probed list scanned against the block's queries that probe it (u8
//! codes keeping the best `rerank` candidates, or f16 / f32 vectors keeping the best k), into
//! one heap per query. One query's own scan, alone or shared between threads, is `single.rs`.

use std::time::Instant;

use super::probe::{Probe, RowRef};
use super::{Ids, IvfIndex, SearchParams, Storage};
use crate::kernels::{Kernels, TILE_QUERIES};
use crate::search_stats::SearchStats;
use crate::topk::Reservoir;

/// Rows of each query's nearest list the batch prescore scores up front for its bound
/// (`seed_bounds`): more rows, a tighter bound, up to where the bound stops tightening
/// (benchmarks/results/perf-batch-round4.md).
const SEED_ROWS: usize = 96;
/// How many queries ahead `seed_bounds` prefetches those rows.
const SEED_AHEAD: usize = 2;

/// The prescore's per-thread buffers, reused across blocks, and what it hands the rerank: per
/// query of the block, whether its candidates are rescored with f16, and its heap of them.
#[derive(Default)]
pub(super) struct Prescore {
    /// Per query: u8 codes (l2) or step-scaled values and offset term (ip) for the prescore.
    pub qcodes: Vec<u8>,
    /// Per query (l2): its u8 codes as the lists hold theirs, head dims then tail dims
    /// (`split`; the codes themselves without a split).
    pub qsplit: Vec<u8>,
    pub qscaled: Vec<f32>,
    pub bias: Vec<f32>,
    /// Per query of a block: the batch prescore's bound from a few rows of its nearest list
    /// (`seed_bounds`).
    pub bounds: Vec<f32>,
    /// The tails the l2 scan completes (`offer_rows`).
    pub tails: Tails,
    pub fbuf: Vec<f32>,
    pub ubuf: Vec<u32>,
    /// Row positions the batch prescore's kernel keeps (`ubuf` holds their distances).
    pub pbuf: Vec<u32>,
    /// The u8 codes of a query tile (the block's queries that probe one list, side by side).
    pub qtile: Vec<u8>,
    /// Per query of the block: whether its u8 candidates are rescored with f16.
    pub rerank_q: Vec<bool>,
    /// Per query of the block: the best candidates, payload = where the row lives.
    pub heaps: Vec<Reservoir<RowRef>>,
    /// The search's `SearchParams::reorder`.
    pub reorder: usize,
}

impl IvfIndex {
    /// Readies the block's m queries `qblock` for the scan: their u8 codes (l2) or step-scaled
    /// values and offsets (ip, cosine) for a u8+f16 index, whether each is reranked, and its heap.
    pub(super) fn prepare_prescore(
        &self,
        p: &SearchParams,
        qblock: &[f32],
        m: usize,
        s: &mut Prescore,
    ) {
        let dim = self.dim;
        let sq = self.sq.as_ref();
        if let (Storage::U8F16, Some(sq)) = (self.storage, sq) {
            if self.metric.is_similarity() {
                s.qscaled.resize(m * dim, 0.0);
                s.bias.clear();
                for (q, sc) in qblock
                    .chunks_exact(dim)
                    .zip(s.qscaled.chunks_exact_mut(dim))
                {
                    s.bias.push(sq.ip_query(q, sc));
                }
            } else {
                s.qcodes.resize(m * dim, 0);
                for (q, c) in qblock.chunks_exact(dim).zip(s.qcodes.chunks_exact_mut(dim)) {
                    sq.encode(q, c);
                }
                s.qsplit.resize(m * dim, 0);
                let head = self.head_dims();
                for (c, out) in s
                    .qcodes
                    .chunks_exact(dim)
                    .zip(s.qsplit.chunks_exact_mut(dim))
                {
                    match &self.split {
                        Some(split) => {
                            let (h, t) = out.split_at_mut(head);
                            split.split_row(c, h, t);
                        }
                        None => out.copy_from_slice(c),
                    }
                }
            }
        }
        // Per query: rerank the best `rerank` u8 candidates, or keep the u8 top k (rerank 0,
        // or the default on exact codes for a query whose own codes are exact).
        s.reorder = p.reorder;
        let rerank = self.storage == Storage::U8F16 && p.rerank > 0;
        s.rerank_q.clear();
        for qi in 0..m {
            let exact = p.rerank_auto
                && sq.is_some_and(|sq| {
                    sq.is_exact(
                        &qblock[qi * dim..(qi + 1) * dim],
                        &s.qcodes[qi * dim..(qi + 1) * dim],
                    )
                });
            s.rerank_q.push(rerank && !exact);
        }
        if s.heaps.len() < m {
            s.heaps.resize_with(m, Reservoir::default);
        }
        for (h, &rq) in s.heaps[..m].iter_mut().zip(&s.rerank_q) {
            h.reset(if rq { p.rerank } else { p.k });
        }
    }

    /// The batch prescore: scans every probe of `probes` (sorted by list) into the heaps of
    /// its query, `qblock` the block's queries and `seeds` each one's nearest list. One
    /// query's prescore is `prescore_one` (single.rs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prescore(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        seeds: &[u32],
        s: &mut Prescore,
        stats: &mut SearchStats,
    ) {
        self.begin_scan(probes, s, stats);
        if self.storage == Storage::U8F16 && !self.metric.is_similarity() {
            // A block of queries over u8 codes (l2): the threshold test inside the kernel, and
            // the queries that probe the same list scored together in tiles.
            self.scan_block_l2_u8(kern, probes, seeds, s, stats);
        } else {
            let t = Instant::now();
            self.scan_probes(kern, qblock, probes, s);
            stats.timers.prescore_lists_s += t.elapsed().as_secs_f64();
        }
        self.end_scan(s, stats);
    }

    /// Counts the codes and bytes the scan of `probes` will read and clears the tail counts;
    /// returns how many vectors the probed lists hold.
    pub(super) fn begin_scan(
        &self,
        probes: &[Probe],
        s: &mut Prescore,
        stats: &mut SearchStats,
    ) -> usize {
        let planned: usize = probes.iter().map(|v| self.lists[v.list()].len()).sum();
        stats.codes_scanned += planned as u64;
        stats.bytes_scanned += (planned * self.row_bytes()) as u64;
        s.tails.read = 0;
        s.tails.terms_read = 0;
        planned
    }

    /// Counts the tails the scan read (and the bytes of them and their terms).
    pub(super) fn end_scan(&self, s: &Prescore, stats: &mut SearchStats) {
        let tail = self.dim - self.head_dims();
        stats.tails_read += s.tails.read;
        stats.bytes_scanned += s.tails.read * tail as u64 + s.tails.terms_read * 4;
    }

    /// Scans each probe's list against its query, one at a time (`scan_list`).
    pub(super) fn scan_probes(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        s: &mut Prescore,
    ) {
        let dim = self.dim;
        for &visit in probes {
            let (li, qi) = (visit.list(), visit.query());
            let qv = QueryView::of(dim, qblock, &s.qsplit, &s.qscaled, &s.bias, qi);
            let (heap, ubuf, fbuf, tails) =
                (&mut s.heaps[qi], &mut s.ubuf, &mut s.fbuf, &mut s.tails);
            self.scan_list(kern, li, &qv, heap, ubuf, &mut s.pbuf, fbuf, tails);
        }
    }

    /// Offers rows `pos` of list `li`, whose head distances `dist` passed the threshold the
    /// heap had when the list began (or `bound`, if lower: see `SharedBound`), to `heap` in
    /// row order. Without a split (`qtail` empty) those are the whole distances. With one,
    /// the rows still at or under the current threshold get their tails' distances added
    /// first, scored in place (the callers have prefetched the tails of `pos`). A row goes in
    /// exactly when its whole distance passes the threshold at its turn, as if whole codes
    /// had been scored.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn offer_rows(
        &self,
        kern: &Kernels,
        li: usize,
        qtail: &[u8],
        pos: &[u32],
        dist: &[u32],
        bound: f32,
        heap: &mut Reservoir<RowRef>,
        tails: &mut Tails,
    ) {
        let list = &self.lists[li];
        let mut thr = heap.threshold().min(bound);
        if qtail.is_empty() {
            for (&j, &d) in pos.iter().zip(dist) {
                let sc = d as f32;
                if sc <= thr {
                    heap.push(sc, list.ids.get(j as usize), RowRef::new(li, j as usize));
                    thr = heap.threshold().min(bound);
                }
            }
            return;
        }
        let t = qtail.len();
        tails.rows.clear();
        tails.head.clear();
        for (&j, &d) in pos.iter().zip(dist) {
            if d as f32 <= thr {
                tails.rows.push(j);
                tails.head.push(d);
            }
        }
        let c = tails.rows.len();
        if c == 0 {
            return;
        }
        // The whole distances: head + tail (both exact, so is their sum), the tail's straight
        // from its codes (prefetched by `head_scan`), in place: its l2 term (`tail_terms`, for
        // the batch tiles) would be one more scattered cache line per row, and gathering the
        // rows for a batch kernel one more copy.
        tails.out.clear();
        tails
            .out
            .extend(tails.rows.iter().zip(&tails.head).map(|(&j, &hd)| {
                let j = j as usize;
                hd.wrapping_add((kern.l2_u8)(qtail, &list.tail[j * t..(j + 1) * t]))
            }));
        tails.read += c as u64;
        // The ids of the rows that will go in, asked for before any is read (each would
        // otherwise wait a DRAM latency on its own).
        for (&j, &d) in tails.rows.iter().zip(&tails.out) {
            if d as f32 <= thr {
                list.ids.prefetch(j as usize);
            }
        }
        for (&j, &d) in tails.rows.iter().zip(&tails.out) {
            let sc = d as f32;
            if sc <= thr {
                heap.push(sc, list.ids.get(j as usize), RowRef::new(li, j as usize));
                thr = heap.threshold().min(bound);
            }
        }
    }

    /// Bytes the scan reads per stored vector.
    pub(super) fn row_bytes(&self) -> usize {
        let dim = self.dim;
        match (self.storage, self.metric.is_similarity()) {
            (Storage::U8F16, false) => self.head_dims() + 4, // head code + its l2 term (tails apart)
            (Storage::U8F16, true) => dim,
            (Storage::F16, _) => 2 * dim,
            (Storage::F32, _) => 4 * dim,
        }
    }

    /// Scores list `li` against one query and offers the rows that can enter to its heap:
    /// u8 codes (l2 through the VNNI-ready terms and the tails of the rows whose heads pass,
    /// ip/cosine through step-scaled values), or the f16 / f32 vectors themselves.
    /// `ubuf`/`pbuf`/`fbuf` are reused score buffers.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scan_list(
        &self,
        kern: &Kernels,
        li: usize,
        qv: &QueryView,
        heap: &mut Reservoir<RowRef>,
        ubuf: &mut Vec<u32>,
        pbuf: &mut Vec<u32>,
        fbuf: &mut Vec<f32>,
        tails: &mut Tails,
    ) {
        let list = &self.lists[li];
        let n = list.len();
        if n == 0 {
            return;
        }
        match (self.storage, self.metric.is_similarity()) {
            (Storage::U8F16, false) => {
                if pbuf.len() < n {
                    pbuf.resize(n, 0);
                    ubuf.resize(n, 0);
                }
                self.scan_list_below(kern, li, qv.qcode, heap, pbuf, ubuf, tails);
            }
            (Storage::U8F16, true) => {
                fbuf.resize(n, 0.0);
                let out = &mut fbuf[..n];
                (kern.dot_f32_u8_batch)(qv.qscaled, &list.codes, out);
                let mut thr = heap.threshold();
                for (j, &v) in out.iter().enumerate() {
                    let sc = -(qv.bias + v);
                    if sc <= thr {
                        heap.push(sc, list.ids.get(j), RowRef::new(li, j));
                        thr = heap.threshold();
                    }
                }
            }
            (storage, sim) => {
                fbuf.resize(n, 0.0);
                let out = &mut fbuf[..n];
                let q = qv.q;
                match (storage, sim) {
                    (Storage::F32, false) => (kern.l2_f32_batch)(q, &list.vf32, out),
                    (Storage::F32, true) => (kern.dot_f32_batch)(q, &list.vf32, out),
                    (_, false) => (kern.l2_f32_f16_batch)(q, &list.vf16, out),
                    (_, true) => (kern.dot_f32_f16_batch)(q, &list.vf16, out),
                }
                push_all(heap, out, &list.ids, li, sim);
            }
        }
    }
}

impl IvfIndex {
    /// The batch prescore over u8 codes (l2). The probes are sorted by list, so the queries
    /// that probe a list come one after another: they go through `l2_u8_tile_below` in tiles
    /// of up to `TILE_QUERIES`, except a tile smaller than the table's `tile_min_queries`
    /// (a short run, or what is left of a long one), which goes query by query through
    /// `scan_list_below` (heads first, then the tails of the rows that pass). Each
    /// query's heap sees the same rows in the same order either way, so results do not depend
    /// on the grouping.
    fn scan_block_l2_u8(
        &self,
        kern: &Kernels,
        probes: &[Probe],
        seeds: &[u32],
        s: &mut Prescore,
        stats: &mut SearchStats,
    ) {
        let dim = self.dim;
        let longest = self.lists.iter().map(|l| l.len()).max().unwrap_or(0);
        s.ubuf.resize(TILE_QUERIES * longest, 0);
        s.pbuf.resize(TILE_QUERIES * longest, 0);
        s.qtile.resize(TILE_QUERIES * dim, 0);
        let t0 = Instant::now();
        self.seed_bounds(kern, seeds, s);
        // the clock is read once or twice per tile or short run: `clock` is the last reading
        let mut clock = Instant::now();
        let timers = &mut stats.timers;
        timers.prescore_seed_bounds_s += (clock - t0).as_secs_f64();
        let mut i = 0;
        while i < probes.len() {
            let li = probes[i].list();
            let run = probes[i..].iter().take_while(|v| v.list() == li).count();
            for tile in probes[i..i + run].chunks(TILE_QUERIES) {
                if tile.len() < kern.tile_min_queries {
                    for &visit in tile {
                        let qi = visit.query();
                        let qcode = &s.qsplit[qi * dim..(qi + 1) * dim];
                        let heap = &mut s.heaps[qi];
                        let (p, u, t) = (&mut s.pbuf, &mut s.ubuf, &mut s.tails);
                        self.scan_list_below(kern, li, qcode, heap, p, u, t);
                    }
                    let now = Instant::now();
                    timers.prescore_short_runs_s += (now - clock).as_secs_f64();
                    clock = now;
                    continue;
                }
                // The whole codes in the tile (head and tail blocks read together): with AMX a
                // row costs little more than its bytes, and the tile's queries share them.
                let list = &self.lists[li];
                let n = list.len();
                let nq = tile.len();
                let mut thrs = [0f32; TILE_QUERIES];
                for (j, &visit) in tile.iter().enumerate() {
                    let qi = visit.query();
                    s.qtile[j * dim..(j + 1) * dim]
                        .copy_from_slice(&s.qsplit[qi * dim..(qi + 1) * dim]);
                    thrs[j] = s.heaps[qi].threshold().min(s.bounds[qi]);
                }
                let mut counts = [0u32; TILE_QUERIES];
                if !list.tail.is_empty() {
                    s.tails.read += (n * nq) as u64;
                    s.tails.terms_read += (n * nq) as u64;
                }
                (kern.l2_u8_tile_below)(
                    &s.qtile[..nq * dim],
                    &list.codes,
                    &list.terms,
                    &list.tail,
                    &list.tail_terms,
                    &thrs[..nq],
                    &mut s.pbuf,
                    &mut s.ubuf,
                    &mut counts,
                );
                let scanned = Instant::now();
                timers.prescore_tiles_s += (scanned - clock).as_secs_f64();
                // The ids of the rows that passed, asked for before any is read: the loop
                // below reads one per row it pushes, and each would otherwise wait a DRAM
                // latency on its own behind the compare's mispredicted branches.
                for (j, &c) in counts[..nq].iter().enumerate() {
                    for &r in &s.pbuf[j * n..j * n + c as usize] {
                        list.ids.prefetch(r as usize);
                    }
                }
                for (j, &visit) in tile.iter().enumerate() {
                    let qi = visit.query();
                    let (heap, bound) = (&mut s.heaps[qi], s.bounds[qi]);
                    let out = j * n..j * n + counts[j] as usize;
                    // each kept row tested again as the heap's threshold tightens, as in
                    // `offer_rows`
                    let mut thr = thrs[j];
                    for (&r, &d) in s.pbuf[out.clone()].iter().zip(&s.ubuf[out]) {
                        let sc = d as f32;
                        if sc <= thr {
                            heap.push(sc, list.ids.get(r as usize), RowRef::new(li, r as usize));
                            thr = heap.threshold().min(bound);
                        }
                    }
                }
                clock = Instant::now();
                timers.prescore_tile_offers_s += (clock - scanned).as_secs_f64();
            }
            i += run;
        }
    }

    /// Per query of the block (`seeds`: its nearest list), a bound on its k-th best u8 distance
    /// (`s.bounds`; +inf where there is none): the k-th smallest distance among the first
    /// `SEED_ROWS` rows of its nearest list. Those rows are among the ones its search scans, so at
    /// least k of its candidates lie at or under the bound, and no row above it can be among its k
    /// best. The tiles test rows against the bound until the query's heap has a tighter threshold
    /// of its own: in list order its first lists are mostly far ones, and with no bound every row
    /// of the first would pass (half of all the rows the tiles handed back at 1M).
    fn seed_bounds(&self, kern: &Kernels, seeds: &[u32], s: &mut Prescore) {
        let dim = self.dim;
        let (h, t) = (self.head_dims(), dim - self.head_dims());
        s.bounds.clear();
        let mut d = [0u32; SEED_ROWS];
        let mut dt = [0u32; SEED_ROWS];
        for (qi, &li) in seeds.iter().enumerate() {
            // the rows of a query a few ahead, asked for while this one's are scored
            if let Some(l) = seeds
                .get(qi + SEED_AHEAD)
                .and_then(|&a| self.lists.get(a as usize))
            {
                let c = l.len().min(SEED_ROWS);
                crate::kernels::prefetch(&l.codes[..c * h]);
                crate::kernels::prefetch(&l.tail[..c * t]);
            }
            let k = s.heaps[qi].k();
            let list = self.lists.get(li as usize);
            let c = list.map_or(0, |l| l.len().min(SEED_ROWS));
            if k == 0 || c < k {
                s.bounds.push(f32::INFINITY);
                continue;
            }
            let list = &self.lists[li as usize];
            let q = &s.qsplit[qi * dim..(qi + 1) * dim];
            (kern.l2_u8_batch_pre)(&q[..h], &list.codes[..c * h], &list.terms[..c], &mut d[..c]);
            if t > 0 {
                let tail = &list.tail[..c * t];
                (kern.l2_u8_batch_pre)(&q[h..], tail, &list.tail_terms[..c], &mut dt[..c]);
                for (a, &b) in d[..c].iter_mut().zip(&dt[..c]) {
                    *a = a.wrapping_add(b);
                }
            }
            let kth = *d[..c].select_nth_unstable(k - 1).1;
            s.bounds.push(kth as f32);
        }
    }

    /// Scores list `li` (u8 codes, l2) against one query's split codes and offers the rows
    /// under the heap's threshold: the kernel hands back only the rows whose heads are at or
    /// under the threshold the heap had when the list began (`pos` / `dist` hold a value per
    /// row of the list), and `offer_rows` completes and tests them as it tightens.
    #[allow(clippy::too_many_arguments)]
    fn scan_list_below(
        &self,
        kern: &Kernels,
        li: usize,
        qcode: &[u8],
        heap: &mut Reservoir<RowRef>,
        pos: &mut [u32],
        dist: &mut [u32],
        tails: &mut Tails,
    ) {
        let list = &self.lists[li];
        if list.is_empty() {
            return;
        }
        let (qhead, qtail) = qcode.split_at(self.head_dims());
        let thr = heap.threshold();
        let c = (kern.l2_u8_batch_pre_below)(qhead, &list.codes, &list.terms, thr, pos, dist);
        let t = qtail.len();
        if t > 0 {
            for &j in &pos[..c] {
                crate::kernels::prefetch(&list.tail[j as usize * t..(j as usize + 1) * t]);
            }
        }
        self.offer_rows(
            kern,
            li,
            qtail,
            &pos[..c],
            &dist[..c],
            f32::INFINITY,
            heap,
            tails,
        );
    }
}

/// Buffers of `IvfIndex::offer_rows`: the rows whose tails it completes, their head
/// distances and the tails' distances; and how many tails the current search read.
#[derive(Default)]
pub(super) struct Tails {
    rows: Vec<u32>,
    head: Vec<u32>,
    out: Vec<u32>,
    pub read: u64,
    /// How many of those tails' l2 terms were read as well (the batch tiles read them).
    pub terms_read: u64,
}

/// One query as the list scan needs it: the (normalised) f32 query, and for u8 codes its
/// own codes (l2) or step-scaled values and offset (ip, cosine); unused parts are empty.
pub(super) struct QueryView<'a> {
    q: &'a [f32],
    pub(super) qcode: &'a [u8],
    qscaled: &'a [f32],
    bias: f32,
}

impl<'a> QueryView<'a> {
    pub(super) fn of(
        dim: usize,
        qblock: &'a [f32],
        qcodes: &'a [u8],
        qscaled: &'a [f32],
        bias: &[f32],
        qi: usize,
    ) -> Self {
        let row = qi * dim..(qi + 1) * dim;
        QueryView {
            q: &qblock[row.clone()],
            qcode: qcodes.get(row.clone()).unwrap_or(&[]),
            qscaled: qscaled.get(row).unwrap_or(&[]),
            bias: bias.get(qi).copied().unwrap_or(0.0),
        }
    }
}

/// Pushes a list's scores into the heap, skipping those that cannot enter.
#[inline]
fn push_all(heap: &mut Reservoir<RowRef>, scores: &[f32], ids: &Ids, li: usize, negate: bool) {
    let mut thr = heap.threshold();
    for (j, &v) in scores.iter().enumerate() {
        let sc = if negate { -v } else { v };
        if sc <= thr {
            heap.push(sc, ids.get(j), RowRef::new(li, j));
            thr = heap.threshold();
        }
    }
}
