//! One query's prescore through the 4-bit filter (`nibbles`, l2 over u8 codes): once its heap
//! has a threshold, each probed list's nibble blocks are tested against the query's table
//! (`Kernels::nib_lb_below`), and only the rows that pass have their u8 codes scored and
//! offered to the heap. A row the filter drops has a distance above the threshold, so the
//! heap sees what the unfiltered scan would give it: the same bits.
//!
//! The batch prescore does not filter: on AVX2 the tile kernel scores a row's whole codes
//! against eight queries for about what the filter costs per row and query
//! (benchmarks/results/perf-nibble-filter.md).

use super::nibbles::{self, BLOCK_ROWS};
use super::probe::RowRef;
use super::IvfIndex;
use crate::kernels::{prefetch, Kernels};
use crate::topk::Reservoir;

/// One query's table for the single-query scans, built once its heap has a threshold.
#[derive(Default)]
pub(super) struct OneTable {
    table: Vec<u8>,
    /// The table's scale (0: not built for the current query).
    scale: u32,
    masks: Vec<u32>,
    /// Rows that passed the filter (their codes were read).
    pub passed: u64,
}

impl OneTable {
    /// Forgets the table (a new query).
    pub(super) fn reset(&mut self) {
        self.scale = 0;
    }
}

impl IvfIndex {
    /// Whether one query's lists can go through the filter from here on: the table `t` is
    /// built (on the first call with a finite threshold `thr`, `qcode` the query's split
    /// codes), where the table of kernels filters and the index keeps nibbles.
    pub(super) fn filter_ready(&self, kern: &Kernels, qcode: &[u8], thr: f32, t: &mut OneTable) -> bool {
        if t.scale > 0 {
            return true;
        }
        let Some(bins) = self.bins.as_ref().filter(|_| kern.nib_filter) else {
            return false;
        };
        if !thr.is_finite() {
            return false;
        }
        t.scale = bins.scale_for(thr);
        t.table.resize(bins.table_bytes(), 0);
        bins.table(qcode, t.scale, &mut t.table);
        true
    }

    /// One query's scan of list `li` through the filter (`filter_ready` said yes): the rows
    /// whose bound passes `min(heap threshold, bound)` are scored from their codes and
    /// offered in row order, as `offer_rows` would. `next` is the list scanned after this one
    /// (its nibbles are prefetched).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scan_list_filtered(
        &self,
        kern: &Kernels,
        li: usize,
        qcode: &[u8],
        bound: f32,
        heap: &mut Reservoir<RowRef>,
        t: &mut OneTable,
        next: Option<usize>,
    ) {
        let bins = self.bins.as_ref().expect("filter_ready checked the bins");
        if let Some(nl) = next {
            prefetch(&self.lists[nl].nib);
        }
        let list = &self.lists[li];
        let n = list.len();
        if n == 0 {
            return;
        }
        let (h, tl) = (self.head_dims(), self.dim - self.head_dims());
        let (qh, qt) = qcode.split_at(h);
        let nb = n.div_ceil(BLOCK_ROWS);
        t.masks.resize(nb, 0);
        let mut thr = heap.threshold().min(bound);
        let units = nibbles::units(thr, t.scale);
        let nib = &list.nib[..nb * bins.block_bytes()];
        (kern.nib_lb_below)(&[&t.table], &[units], nib, &mut t.masks[..nb]);
        if n % BLOCK_ROWS != 0 {
            t.masks[nb - 1] &= (1u32 << (n % BLOCK_ROWS)) - 1;
        }
        for (b, &mk) in t.masks[..nb].iter().enumerate() {
            for r in bits(mk, b) {
                prefetch(&list.codes[r * h..(r + 1) * h]);
                if tl > 0 {
                    prefetch(&list.tail[r * tl..(r + 1) * tl]);
                }
            }
        }
        for (b, &mk) in t.masks[..nb].iter().enumerate() {
            for r in bits(mk, b) {
                t.passed += 1;
                let mut d = (kern.l2_u8)(qh, &list.codes[r * h..(r + 1) * h]);
                if d as f32 > thr {
                    continue;
                }
                if tl > 0 {
                    d += (kern.l2_u8)(qt, &list.tail[r * tl..(r + 1) * tl]);
                }
                let sc = d as f32;
                if sc <= thr {
                    heap.push(sc, list.ids.get(r), RowRef::new(li, r));
                    thr = heap.threshold().min(bound);
                }
            }
        }
    }
}

/// The rows of block `b` whose bits are set in `mask`, in order.
#[inline]
fn bits(mut mask: u32, b: usize) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let r = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(b * BLOCK_ROWS + r)
    })
}
