//! The 4-bit prefilter of the u8 l2 scan (`SearchParams::reorder`): a query's probed lists are
//! scanned through their 4-bit codes (`crate::pq4`, a quarter of the u8 codes' bytes) into the
//! `reorder` rows with the smallest table sums (`FsCands`), and only those rows get their whole
//! u8 distance, into the query's heap (`reorder_into`). One query per call takes it on the
//! calling thread (`scan_one_fs`); a block of queries visits its probes list by list, each
//! list's codes read once from memory and scanned for up to `FS_MANY` of the queries that
//! probe it at a time (`scan_block_fs`, `Kernels::fs_below_many`).

use std::time::Instant;

use super::prescore::Prescore;
use super::probe::{Probe, RowRef};
use super::{IvfIndex, Storage};
use crate::kernels::{Kernels, FS_MANY};
use crate::search_stats::SearchStats;
use crate::topk::Reservoir;

/// The reorder asks for the lines of the candidate this many places ahead of the one it scores.
const REORDER_AHEAD: usize = 12;
/// One query's scan asks for this much of the next list's codes while it scans a list (asking
/// for a whole list at once stalled the scan on full miss buffers; a cursor running 2-4 KiB
/// ahead across lists measured the same as this).
const FS_AHEAD_BYTES: usize = 512;
/// A block's queries bound their candidates with the table sums of this many rows of their
/// nearest list at most (`fs_seed_bounds`), before the scan in list order.
const FS_SEED_ROWS: usize = 256;

/// Buffers of the prefilter, kept across calls: per query of a block its code-domain values,
/// tables and candidates; the kernel's outputs; the candidates being reordered.
#[derive(Default)]
pub(super) struct FsBufs {
    qf: Vec<f32>,
    dists: Vec<f32>,
    luts: Vec<u8>,
    cands: Vec<FsCands>,
    rows: (Vec<u32>, Vec<u32>),
    hits: Vec<RowRef>,
}

impl IvfIndex {
    /// Readies the prefilter for the block's `m` queries `qblock`: each one's tables and an
    /// empty candidate set of `reorder` (at least its heap's size) rows.
    fn fs_begin(&self, kern: &Kernels, qblock: &[f32], m: usize, s: &Prescore, f: &mut FsBufs) -> usize {
        let (Some(pq), Some(sq)) = (self.pq.as_ref(), self.sq.as_ref()) else {
            unreachable!("SearchParams::reorder is 0 without a prefilter");
        };
        let dim = self.dim;
        let lut_len = pq.pairs() * 32;
        f.luts.resize(m * lut_len, 0);
        if f.cands.len() < m {
            f.cands.resize_with(m, FsCands::default);
        }
        let row_bits = cand_row_bits(self.lists.len(), self.ntotal());
        for qi in 0..m {
            // the query in the code domain, unrounded
            let q = &qblock[qi * dim..(qi + 1) * dim];
            f.qf.clear();
            f.qf.extend((0..dim).map(|d| (q[d] - sq.vmin[d]) / sq.step[d]));
            (kern.pq4_lut)(&pq.centroids, &f.qf, &mut f.dists, &mut f.luts[qi * lut_len..(qi + 1) * lut_len]);
            f.cands[qi].reset(s.reorder.max(s.heaps[qi].k()), row_bits);
        }
        lut_len
    }

    /// Scans list `li`'s 4-bit codes for the block's queries `group` (visits of that list, at
    /// most FS_MANY; one for a single query) into their candidates, the codes read once for
    /// all of them.
    fn fs_scan_list_many(&self, kern: &Kernels, li: usize, group: &[Probe], lut_len: usize, f: &mut FsBufs) {
        let list = &self.lists[li];
        let (n, g) = (list.len(), group.len());
        let FsBufs {
            luts, cands, rows, ..
        } = f;
        let (pos, dist) = rows;
        if pos.len() < g * n {
            pos.resize(g * n, 0);
            dist.resize(g * n, 0);
        }
        let mut tables: [&[u8]; FS_MANY] = [&[]; FS_MANY];
        let mut thrs = [0u32; FS_MANY];
        for (x, v) in group.iter().enumerate() {
            let qi = v.query();
            tables[x] = &luts[qi * lut_len..(qi + 1) * lut_len];
            thrs[x] = cands[qi].threshold();
        }
        let mut counts = [0usize; FS_MANY];
        (kern.fs_below_many)(&list.fs, n, &tables[..g], &thrs[..g], pos, dist, &mut counts);
        for (x, v) in group.iter().enumerate() {
            let cand = &mut cands[v.query()];
            let at = x * n..x * n + counts[x];
            for (&r, &d) in pos[at.clone()].iter().zip(&dist[at]) {
                cand.push(d, li, r as usize);
            }
        }
    }

    /// One query's prefilter scan: its lists nearest first, each list's first lines asked for
    /// while the one before is scanned; then its best rows reordered into its heap.
    pub(super) fn scan_one_fs(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        s: &mut Prescore,
        f: &mut FsBufs,
    ) {
        let lut_len = self.fs_begin(kern, qblock, 1, s, f);
        for (i, probe) in probes.iter().enumerate() {
            if let Some(next) = probes.get(i + 1) {
                let fs = &self.lists[next.list()].fs;
                crate::kernels::prefetch(&fs[..fs.len().min(FS_AHEAD_BYTES)]);
            }
            // the header of the list after that one
            if let Some(after) = probes.get(i + 2) {
                crate::kernels::prefetch(std::slice::from_ref(&self.lists[after.list()]));
            }
            self.fs_scan_list_many(kern, probe.list(), std::slice::from_ref(probe), lut_len, f);
        }
        f.cands[0].drain_sorted(&mut f.hits);
        let dim = self.dim;
        s.tails.read += self.reorder_into(kern, &s.qsplit[..dim], &f.hits, &mut s.heaps[0]);
    }

    /// Whether this search's scans take the prefilter (`Prescore::reorder`, u8 l2).
    pub(super) fn prefilters(&self, s: &Prescore) -> bool {
        s.reorder > 0 && self.storage == Storage::U8F16 && !self.metric.is_similarity()
    }

    /// A block's prescore through the prefilter (`scan_block_fs`), counted as `prescore`
    /// counts its scans.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prescore_fs(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        seeds: &[u32],
        m: usize,
        s: &mut Prescore,
        f: &mut FsBufs,
        stats: &mut SearchStats,
    ) {
        let planned = self.begin_scan(probes, s, stats);
        let t = Instant::now();
        self.scan_block_fs(kern, qblock, probes, seeds, m, s, f);
        stats.timers.prescore_lists_s += t.elapsed().as_secs_f64();
        self.fs_count_bytes(planned, s.tails.read, stats);
        self.end_scan(s, stats);
    }

    /// A block's prefilter scan: `probes` sorted by list, each list scanned for every query
    /// of the block that probes it, then each query's best rows reordered into its heap.
    /// Each query's candidates start bounded by the rows of its nearest list (`seeds`), so
    /// that its far lists, met early in list order, do not fill them.
    #[allow(clippy::too_many_arguments)]
    fn scan_block_fs(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        seeds: &[u32],
        m: usize,
        s: &mut Prescore,
        f: &mut FsBufs,
    ) {
        let lut_len = self.fs_begin(kern, qblock, m, s, f);
        self.fs_seed_bounds(kern, seeds, m, lut_len, f);
        // each list once, for up to FS_MANY of the queries that probe it at a time
        let mut i = 0;
        while i < probes.len() {
            let li = probes[i].list();
            let end = i + probes[i..].iter().take_while(|v| v.list() == li).count();
            if let Some(next) = probes.get(end) {
                let fs = &self.lists[next.list()].fs;
                crate::kernels::prefetch(&fs[..fs.len().min(FS_AHEAD_BYTES)]);
            }
            for group in probes[i..end].chunks(FS_MANY) {
                self.fs_scan_list_many(kern, li, group, lut_len, f);
            }
            i = end;
        }
        let dim = self.dim;
        for qi in 0..m {
            f.cands[qi].drain_sorted(&mut f.hits);
            let qsplit = &s.qsplit[qi * dim..(qi + 1) * dim];
            s.tails.read += self.reorder_into(kern, qsplit, &f.hits, &mut s.heaps[qi]);
        }
    }

    /// Bounds each of the block's `m` queries' candidates (`seeds`: its nearest list) by the
    /// k-th smallest table sum among the first `FS_SEED_ROWS` rows of its nearest list: rows it
    /// scans, so at least k of its rows sum to the bound or less, and no row above it is among
    /// its k best. In list order a query meets its far lists first, which would otherwise
    /// fill its candidates with rows a cut throws away.
    fn fs_seed_bounds(&self, kern: &Kernels, seeds: &[u32], m: usize, lut_len: usize, f: &mut FsBufs) {
        let block_bytes = self.pq.as_ref().map_or(0, |p| p.block_bytes());
        for (qi, &li) in seeds.iter().enumerate().take(m) {
            let Some(list) = self.lists.get(li as usize) else {
                continue;
            };
            let n = list.len().min(FS_SEED_ROWS);
            let k = f.cands[qi].k;
            if n < k {
                continue;
            }
            let (pos, dist) = &mut f.rows;
            if pos.len() < n {
                pos.resize(n, 0);
                dist.resize(n, 0);
            }
            let lut = &f.luts[qi * lut_len..(qi + 1) * lut_len];
            let fs = &list.fs[..crate::pq4::packed_len(n, block_bytes)];
            let got = (kern.fs_below)(fs, n, lut, u32::MAX, pos, dist);
            debug_assert_eq!(got, n);
            f.cands[qi].bound(*dist[..n].select_nth_unstable(k - 1).1);
        }
    }

    /// Corrects the bytes `begin_scan` counted for a prefilter scan of `planned` rows: their
    /// 4-bit codes were read instead of their heads and l2 terms, and each of the `reordered`
    /// rows' head and id (its tail is counted with the tails, by `end_scan`).
    pub(super) fn fs_count_bytes(&self, planned: usize, reordered: u64, stats: &mut SearchStats) {
        let fs = self.pq.as_ref().map_or(0, |p| p.block_bytes() / crate::pq4::FS_BLOCK);
        stats.bytes_scanned -= (planned * (self.row_bytes() - fs)) as u64;
        stats.bytes_scanned += reordered * (self.head_dims() + 4) as u64;
    }

    /// The whole u8 distances of the rows `hits` (`qsplit` the query's split codes) into
    /// `heap`, each row's head, tail and id asked for `REORDER_AHEAD` rows before it is
    /// scored. Returns how many rows were read.
    fn reorder_into(
        &self,
        kern: &Kernels,
        qsplit: &[u8],
        hits: &[RowRef],
        heap: &mut Reservoir<RowRef>,
    ) -> u64 {
        let h = self.head_dims();
        let t = self.dim - h;
        let ask = |at: &RowRef| {
            let (l, r) = (&self.lists[at.list()], at.row());
            crate::kernels::prefetch(&l.codes[r * h..(r + 1) * h]);
            if t > 0 {
                crate::kernels::prefetch(&l.tail[r * t..(r + 1) * t]);
            }
            l.ids.prefetch(r);
        };
        hits.iter().take(REORDER_AHEAD).for_each(ask);
        let (qh, qt) = qsplit.split_at(h);
        for (i, at) in hits.iter().enumerate() {
            if let Some(later) = hits.get(i + REORDER_AHEAD) {
                ask(later);
            }
            let (l, r) = (&self.lists[at.list()], at.row());
            let mut d = (kern.l2_u8)(qh, &l.codes[r * h..(r + 1) * h]);
            if t > 0 {
                d = d.wrapping_add((kern.l2_u8)(qt, &l.tail[r * t..(r + 1) * t]));
            }
            let sc = d as f32;
            if sc <= heap.threshold() {
                heap.push(sc, l.ids.get(r), *at);
            }
        }
        hits.len() as u64
    }
}

/// A query's best rows by table sum, a reservoir as `topk::Reservoir` (rows at or under the
/// threshold appended, a cut to the best when full) over one packed word a row: sum, list,
/// row, so a cut is a selection of plain integers and ties go to the earlier place, the same
/// on every run. The word is a u64 (sum in the top 16 bits, the list above `row_bits` bits of
/// row) where the index's lists and rows fit 48 bits, which is every index of fewer than 2^24
/// lists and 2^24 vectors and most beyond; else a u128. (Keeping the threshold at the k-th best
/// with a histogram of the sums, as a heap would, does not pay: the cuts are not what the scan
/// waits on; benchmarks/results/perf-prefilter.md.)
#[derive(Default)]
struct FsCands {
    k: usize,
    thr: u32,
    /// Bits of row in a u64 word; 0: u128 words.
    row_bits: u32,
    narrow: Vec<u64>,
    wide: Vec<u128>,
}

/// `FsCands::row_bits` for an index of `nlist` lists and `ntotal` rows: the bits a list number
/// leaves of 48, if every row number fits them, else 0.
fn cand_row_bits(nlist: usize, ntotal: usize) -> u32 {
    let list_bits = usize::BITS - nlist.saturating_sub(1).leading_zeros();
    let row_bits = 48u32.saturating_sub(list_bits);
    if row_bits > 0 && (ntotal as u64) <= 1u64 << row_bits {
        row_bits
    } else {
        0
    }
}

impl FsCands {
    fn reset(&mut self, k: usize, row_bits: u32) {
        self.k = k.max(1);
        self.thr = u32::MAX;
        self.row_bits = row_bits;
        self.narrow.clear();
        self.wide.clear();
        if row_bits > 0 {
            self.narrow.reserve(2 * self.k + 16);
        } else {
            self.wide.reserve(2 * self.k + 16);
        }
    }

    /// Sums above this cannot enter.
    fn threshold(&self) -> u32 {
        self.thr
    }

    /// Lowers the threshold to `thr`, a sum that at least k of the rows to come reach.
    fn bound(&mut self, thr: u32) {
        self.thr = self.thr.min(thr);
    }

    /// Adds a row (one above the threshold is harmless: cut later). `sum` < 2^16 (the kernel's
    /// u16 lanes).
    #[inline]
    fn push(&mut self, sum: u32, list: usize, row: usize) {
        let full = if self.row_bits > 0 {
            let w = (sum as u64) << 48 | (list as u64) << self.row_bits | row as u64;
            self.narrow.push(w);
            self.narrow.len()
        } else {
            self.wide
                .push(((sum as u128) << 64) | ((list as u128) << 32) | row as u128);
            self.wide.len()
        };
        if full >= 2 * self.k + 16 {
            self.cut();
        }
    }

    /// Keeps the k best; the threshold becomes the worst of them.
    fn cut(&mut self) {
        let k = self.k;
        if self.row_bits > 0 {
            if self.narrow.len() > k {
                self.narrow.select_nth_unstable(k - 1);
                self.narrow.truncate(k);
                self.thr = (self.narrow[k - 1] >> 48) as u32;
            }
        } else if self.wide.len() > k {
            self.wide.select_nth_unstable(k - 1);
            self.wide.truncate(k);
            self.thr = (self.wide[k - 1] >> 64) as u32;
        }
    }

    /// The k best rows, best first, into `out`; empties the set.
    fn drain_sorted(&mut self, out: &mut Vec<RowRef>) {
        self.cut();
        out.clear();
        if self.row_bits > 0 {
            let rb = self.row_bits;
            let (rmask, place) = ((1u64 << rb) - 1, (1u64 << 48) - 1);
            self.narrow.sort_unstable();
            out.extend(
                self.narrow
                    .drain(..)
                    .map(|w| RowRef::new(((w & place) >> rb) as usize, (w & rmask) as usize)),
            );
        } else {
            self.wide.sort_unstable();
            out.extend(
                self.wide
                    .drain(..)
                    .map(|w| RowRef::new((w >> 32) as u32 as usize, w as u32 as usize)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{cand_row_bits, FsCands};

    #[test]
    fn prefilter_candidates_keep_the_best_sums_ties_to_the_earlier_place() {
        // u64 words (12 bits of list, 36 of row) and u128 words: the same rows
        for row_bits in [36, 0] {
            let mut c = FsCands::default();
            c.reset(3, row_bits);
            let mut rng = crate::rng::Rng::new(5);
            let mut all = Vec::new();
            for i in 0..200 {
                let (sum, list, row) = (rng.below(40) as u32, 4095 - i % 7, (i * 977) % 4096);
                all.push((sum, list, row));
                if sum <= c.threshold() {
                    c.push(sum, list, row);
                }
            }
            all.sort_unstable();
            let mut out = Vec::new();
            c.drain_sorted(&mut out);
            let got: Vec<(usize, usize)> = out.iter().map(|r| (r.list(), r.row())).collect();
            let want: Vec<(usize, usize)> = all[..3].iter().map(|&(_, l, r)| (l, r)).collect();
            assert_eq!(got, want, "row_bits {row_bits}");
        }
    }

    #[test]
    fn candidate_words_are_narrow_only_where_every_list_and_row_fits() {
        assert_eq!(cand_row_bits(1, 10), 48);
        assert_eq!(cand_row_bits(2828, 500_000), 36);
        assert_eq!(cand_row_bits(1 << 24, 1 << 24), 24);
        assert_eq!(cand_row_bits(1 << 24, (1 << 24) + 1), 0);
        assert_eq!(cand_row_bits((1 << 24) + 1, 1 << 23), 23);
        assert_eq!(cand_row_bits(1 << 40, 1 << 8), 8);
    }
}
