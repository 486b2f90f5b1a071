//! One query's prescore (`prescore_one`): its lists nearest first, `CHUNK_ROWS` rows at a time
//! behind a prefetch cursor (`Ahead`), the rows whose heads pass completed with their tails
//! (`offer_rows`); and the same scan shared between the calling thread and helper threads
//! (`scan_split`). With `SearchParams::reorder` the query takes the 4-bit prefilter instead
//! (`prefilter.rs`), on the calling thread.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use super::prescore::{Prescore, QueryView, Tails};
use super::probe::{Probe, RowRef};
use super::{IvfIndex, Storage};
use crate::kernels::Kernels;
use crate::pool;
use crate::search_stats::SearchStats;
use crate::topk::{Hit, Reservoir};

/// A single query searched with several threads splits its scan across them only when its
/// probed lists hold at least this many vectors (below, the hand-off costs more than it saves).
const SPLIT_MIN_CODES: usize = 2048;
/// A single query's u8 l2 scan scores its lists this many rows at a time ...
const CHUNK_ROWS: usize = 16;
/// ... with the prefetch cursor this many rows ahead (8 KiB of codes at dim 128): far enough
/// to cover a DRAM latency, near enough to stay in cache (benchmarks/results/perf-single-round2.md).
const AHEAD_ROWS: usize = 64;

impl IvfIndex {
    /// Scans the lists of one query's `probes` (nearest first) into its heap, `qblock` the
    /// query. With `split` > 1 and at least SPLIT_MIN_CODES vectors to scan, the lists are
    /// shared out between the calling thread and up to `split` - 1 helper threads
    /// (`scan_split`), as many as `pool::helpers_free` gives: none when a helper stalled a
    /// caller lately or other processes' work leaves no core free.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prescore_one(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        s: &mut Prescore,
        bufs: &mut ScanBufs,
        split: usize,
        stats: &mut SearchStats,
    ) {
        let planned = self.begin_scan(probes, s, stats);
        let t0 = Instant::now();
        // the prefilter scans on the calling thread alone (measured faster than the u8 scan
        // split over two threads)
        let fs = self.prefilters(s);
        let helpers = if !fs && split > 1 && planned >= SPLIT_MIN_CODES && probes.len() > 1 {
            pool::helpers_free(split - 1)
        } else {
            0
        };
        if helpers > 0 {
            let read = AtomicU64::new(0);
            let parts = self.scan_split(kern, qblock, probes, s, helpers + 1, &read);
            let scanned = Instant::now();
            stats.timers.prescore_lists_s += (scanned - t0).as_secs_f64();
            s.tails.read += read.into_inner();
            let heap = &mut s.heaps[0];
            for h in parts.iter().flatten() {
                if h.score <= heap.threshold() {
                    heap.push(h.score, h.id, h.payload);
                }
            }
            stats.threads = parts.len() as u64;
            stats.timers.prescore_merge_s += scanned.elapsed().as_secs_f64();
        } else {
            if fs {
                self.scan_one_fs(kern, qblock, probes, s, &mut bufs.fs);
                self.fs_count_bytes(planned, s.tails.read, stats);
            } else if self.storage == Storage::U8F16 && !self.metric.is_similarity() {
                self.scan_one_l2_u8(kern, probes, s, bufs);
            } else {
                self.scan_probes(kern, qblock, probes, s);
            }
            stats.timers.prescore_lists_s += t0.elapsed().as_secs_f64();
        }
        self.end_scan(s, stats);
    }

    /// One query, several threads: each scans a share of its lists into a heap of its own;
    /// the union's best are the same hits a single heap keeps (hits are ordered by score,
    /// then id). Returns each run's hits.
    ///
    /// The caller takes lists from the front of the probes (nearest first), the helpers from
    /// the back (`Claims`), so each run's lists follow one another in its own order and its
    /// prefetch cursor runs across their boundaries; a helper that wakes late takes fewer.
    /// The u8 l2 runs share their heaps' thresholds (`SharedBound`): a row above any run's
    /// k-th best cannot be among the union's k best, so the helper's far lists are cut by
    /// the caller's near ones.
    pub(super) fn scan_split(
        &self,
        kern: &Kernels,
        qblock: &[f32],
        probes: &[Probe],
        s: &Prescore,
        split: usize,
        tails_read: &AtomicU64,
    ) -> Vec<Vec<Hit<RowRef>>> {
        let qv = QueryView::of(self.dim, qblock, &s.qsplit, &s.qscaled, &s.bias, 0);
        let cap = s.heaps[0].k();
        let claims = Claims::new(probes.len());
        let bound = SharedBound::new();
        let caller = std::thread::current().id();
        let l2u8 = self.storage == Storage::U8F16 && !self.metric.is_similarity();
        let work = || {
            let front = std::thread::current().id() == caller;
            let take = || claims.take(front);
            // each thread's own buffers, kept across calls (a search allocates nothing per query)
            BUFS.with_borrow_mut(|bufs| {
                bufs.heap.reset(cap);
                if l2u8 {
                    bufs.scan.tails.read = 0;
                    let order = if front {
                        Order::Forward
                    } else {
                        Order::Backward
                    };
                    let (heap, scan) = (&mut bufs.heap, &mut bufs.scan);
                    self.scan_l2_u8_lists(
                        kern,
                        qv.qcode,
                        probes,
                        take,
                        order,
                        Some(&bound),
                        heap,
                        scan,
                    );
                    tails_read.fetch_add(bufs.scan.tails.read, Ordering::Relaxed);
                } else {
                    let SplitBufs {
                        heap,
                        ubuf,
                        pbuf,
                        fbuf,
                        tails,
                        ..
                    } = &mut *bufs;
                    while let Some(i) = take() {
                        let li = probes[i].list();
                        self.scan_list(kern, li, &qv, heap, ubuf, pbuf, fbuf, tails);
                    }
                }
                let mut hits = Vec::new();
                bufs.heap.drain_sorted(&mut hits);
                hits
            })
        };
        pool::run_shared(split - 1, &work)
    }

    /// One query's u8 l2 scan over all its probed lists (`scan_l2_u8_lists`, in order).
    fn scan_one_l2_u8(
        &self,
        kern: &Kernels,
        probes: &[Probe],
        s: &mut Prescore,
        bufs: &mut ScanBufs,
    ) {
        let qcode = &s.qsplit[..self.dim];
        let mut i = 0;
        let take = || {
            i += 1;
            Some(i - 1).filter(|&i| i < probes.len())
        };
        let heap = &mut s.heaps[0];
        self.scan_l2_u8_lists(kern, qcode, probes, take, Order::Forward, None, heap, bufs);
        s.tails.read += bufs.tails.read;
        bufs.tails.read = 0;
    }

    /// Scans the lists of the probes `take` hands out (indexes into `probes`, in `order`) for
    /// one query (`qcode` its split codes) into `heap`: each list's heads `CHUNK_ROWS` rows at
    /// a time (`head_scan`), with a prefetch cursor `AHEAD_ROWS` rows ahead through the same
    /// lists in the same order, across list boundaries (a list starts at a random address:
    /// without the cursor the scan waits for its first lines; perf-single-round2.md),
    /// restarted where `take` skips probes (other threads took them); then the rows whose
    /// heads passed, completed with their tails (`offer_rows`). With `shared`, each list is
    /// cut by the lowest threshold any run sharing the query has published, and this run's
    /// own is published at each list's start. Completing a list's tails only after the next
    /// list's heads (so their prefetches land meanwhile) measured the same, so it does not
    /// (benchmarks/results/perf-split-codes.md).
    #[allow(clippy::too_many_arguments)]
    fn scan_l2_u8_lists(
        &self,
        kern: &Kernels,
        qcode: &[u8],
        probes: &[Probe],
        mut take: impl FnMut() -> Option<usize>,
        order: Order,
        shared: Option<&SharedBound>,
        heap: &mut Reservoir<RowRef>,
        bufs: &mut ScanBufs,
    ) {
        let h = self.head_dims();
        let (qhead, qtail) = qcode.split_at(h);
        let mut ahead: Option<Ahead> = None;
        let mut last = None;
        while let Some(i) = take() {
            let li = probes[i].list();
            if ahead.is_none() || last.and_then(|l| order.next(l)) != Some(i) {
                ahead = Some(Ahead::at(&self.lists, probes, i, order, h));
            }
            last = Some(i);
            let cursor = ahead.as_mut().expect("set above");
            let own = heap.tightened();
            let bound = match shared {
                Some(b) => b.offer(own),
                None => own,
            };
            let c = self.head_scan(kern, qhead, li, bound, &mut bufs.rows, cursor);
            let (pos, dist) = (&bufs.rows.0[..c], &bufs.rows.1[..c]);
            self.offer_rows(kern, li, qtail, pos, dist, bound, heap, &mut bufs.tails);
        }
    }

    /// The rows of list `li` whose heads are at or under `thr` (u8 l2, `qhead` the query's
    /// head codes), `CHUNK_ROWS` at a time behind the prefetch cursor, into `pos` / `dist`;
    /// returns how many. Their tails (if the codes are split) are prefetched.
    fn head_scan(
        &self,
        kern: &Kernels,
        qhead: &[u8],
        li: usize,
        thr: f32,
        (pos, dist): &mut (Vec<u32>, Vec<u32>),
        ahead: &mut Ahead,
    ) -> usize {
        let (h, t) = (qhead.len(), self.dim - qhead.len());
        let list = &self.lists[li];
        let n = list.len();
        if pos.len() < n {
            pos.resize(n, 0);
            dist.resize(n, 0);
        }
        let (mut r0, mut c) = (0, 0);
        while r0 < n {
            let r1 = (r0 + CHUNK_ROWS).min(n);
            ahead.advance(r1 - r0);
            let got = (kern.l2_u8_batch_pre_below)(
                qhead,
                &list.codes[r0 * h..r1 * h],
                &list.terms[r0..r1],
                thr,
                &mut pos[c..],
                &mut dist[c..],
            );
            for p in &mut pos[c..c + got] {
                *p += r0 as u32;
                if t > 0 {
                    let j = *p as usize;
                    crate::kernels::prefetch(&list.tail[j * t..(j + 1) * t]);
                }
            }
            c += got;
            r0 = r1;
        }
        c
    }
}

thread_local! {
    /// The heap and buffers of a thread sharing one query's lists (`scan_split`), kept across
    /// calls: growing fresh ones in every call costs a helper more than its share of the scan
    /// saves (benchmarks/results/perf-split-codes.md).
    static BUFS: std::cell::RefCell<SplitBufs> = std::cell::RefCell::new(SplitBufs::default());
}

/// A run's heap and buffers in `scan_split`.
#[derive(Default)]
struct SplitBufs {
    heap: Reservoir<RowRef>,
    scan: ScanBufs,
    ubuf: Vec<u32>,
    pbuf: Vec<u32>,
    fbuf: Vec<f32>,
    tails: Tails,
}

/// The probes of one query not yet claimed by a run of `scan_split`: `front..back`, packed in
/// one atomic word (front in the high half) so that a claim from either end is one
/// compare-and-swap and no probe is claimed twice.
struct Claims(AtomicU64);

impl Claims {
    fn new(n: usize) -> Self {
        // probes are at most nlist, and lists are numbered in u32
        assert!(
            n <= u32::MAX as usize,
            "{n} probes do not fit the packed claims"
        );
        Claims(AtomicU64::new(n as u64))
    }

    /// The next unclaimed probe from the front (the nearest left) or from the back.
    fn take(&self, front: bool) -> Option<usize> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (f, b) = (cur >> 32, cur & 0xFFFF_FFFF);
            if f >= b {
                return None;
            }
            let (next, got) = if front {
                (((f + 1) << 32) | b, f)
            } else {
                ((f << 32) | (b - 1), b - 1)
            };
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(got as usize),
                Err(seen) => cur = seen,
            }
        }
    }
}

/// The lowest k-th best score any run of `scan_split` has published: a row scoring above it
/// cannot be among the union's k best (that run already holds k better or equal hits), so
/// every run may skip it. u8 l2 distances are non-negative, so their f32 bits order as they
/// do and the minimum is one `fetch_min`.
struct SharedBound(AtomicU32);

impl SharedBound {
    fn new() -> Self {
        SharedBound(AtomicU32::new(f32::INFINITY.to_bits()))
    }

    /// Publishes a run's own threshold `own` (>= 0) and returns the lowest published.
    fn offer(&self, own: f32) -> f32 {
        let bits = own.to_bits();
        let seen = self.0.fetch_min(bits, Ordering::Relaxed);
        f32::from_bits(seen.min(bits))
    }
}

/// The order in which a run of one query's scan takes its probes.
#[derive(Clone, Copy)]
enum Order {
    Forward,
    Backward,
}

impl Order {
    /// The probe after `i` in this order.
    fn next(self, i: usize) -> Option<usize> {
        match self {
            Order::Forward => i.checked_add(1),
            Order::Backward => i.checked_sub(1),
        }
    }
}

/// Buffers of `IvfIndex::scan_l2_u8_lists`: the passing rows (positions, head distances) of
/// the list being scanned, and `offer_rows`' buffers.
#[derive(Default)]
pub(super) struct ScanBufs {
    rows: (Vec<u32>, Vec<u32>),
    pub tails: Tails,
    /// The 4-bit prefilter's state (`prefilter.rs`).
    pub fs: super::prefilter::FsBufs,
}

/// A prefetch cursor over the u8 codes and l2 terms of a query's probed lists, in visiting
/// order (`Order`: the probes forward or backward, each list's rows forward): `advance`
/// hints the lines of the next rows after it to the cache.
struct Ahead<'a> {
    lists: &'a [super::InvList],
    probes: &'a [Probe],
    order: Order,
    /// The next row to prefetch: row `row` of the list of `probes[p]` (None: past the last).
    p: Option<usize>,
    row: usize,
    dim: usize,
}

impl<'a> Ahead<'a> {
    /// A cursor at the start of `probes[p]`, already `AHEAD_ROWS` rows ahead of it.
    fn at(
        lists: &'a [super::InvList],
        probes: &'a [Probe],
        p: usize,
        order: Order,
        dim: usize,
    ) -> Self {
        let mut a = Ahead {
            lists,
            probes,
            order,
            p: Some(p),
            row: 0,
            dim,
        };
        a.advance(AHEAD_ROWS);
        a
    }

    /// Prefetches the next `rows` rows after the cursor, crossing into the following lists.
    fn advance(&mut self, mut rows: usize) {
        while rows > 0 {
            let Some(&probe) = self.p.and_then(|p| self.probes.get(p)) else {
                return;
            };
            let list = &self.lists[probe.list()];
            let n = list.len();
            let take = rows.min(n - self.row);
            if take > 0 {
                let (a, b) = (self.row, self.row + take);
                crate::kernels::prefetch(&list.codes[a * self.dim..b * self.dim]);
                crate::kernels::prefetch(&list.terms[a..b]);
            }
            self.row += take;
            rows -= take;
            if self.row >= n {
                self.p = self.p.and_then(|p| self.order.next(p));
                self.row = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Claims, Order, SharedBound};

    #[test]
    fn claims_from_both_ends_hand_out_every_probe_once() {
        for n in [0usize, 1, 2, 7, 500] {
            let claims = Claims::new(n);
            let (mut front, mut back) = (vec![], vec![]);
            std::thread::scope(|sc| {
                let f = sc.spawn(|| std::iter::from_fn(|| claims.take(true)).collect::<Vec<_>>());
                let b = sc.spawn(|| std::iter::from_fn(|| claims.take(false)).collect::<Vec<_>>());
                front = f.join().unwrap();
                back = b.join().unwrap();
            });
            // Each end's claims come in its own order: ascending from the front, descending
            // from the back, and together they are every probe exactly once.
            assert!(front.windows(2).all(|w| w[1] == w[0] + 1), "{front:?}");
            assert!(back.windows(2).all(|w| w[1] + 1 == w[0]), "{back:?}");
            let mut all: Vec<usize> = front.iter().chain(&back).copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
            assert_eq!(claims.take(true), None);
            assert_eq!(claims.take(false), None);
        }
    }

    #[test]
    fn shared_bound_is_the_lowest_threshold_offered() {
        let b = SharedBound::new();
        assert_eq!(b.offer(f32::INFINITY), f32::INFINITY);
        assert_eq!(b.offer(900.0), 900.0);
        assert_eq!(b.offer(1200.0), 900.0);
        assert_eq!(b.offer(0.0), 0.0);
        assert_eq!(b.offer(5.0), 0.0);
    }

    #[test]
    fn orders_step_through_the_probes() {
        assert_eq!(Order::Forward.next(3), Some(4));
        assert_eq!(Order::Backward.next(3), Some(2));
        assert_eq!(Order::Backward.next(0), None);
    }
}
