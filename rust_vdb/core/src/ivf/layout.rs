//! The inverted lists and their memory: what a list keeps per vector, how added rows are
//! laid out (each list written front to back, lists in order), and the huge-page advice for
//! the blocks the scan streams.

use half::f16;
use rayon::prelude::*;

use super::{CodeSplit, IvfIndex, Storage};
use crate::error::Result;
use crate::kernels::{kernels, Kernels};
use crate::kmeans;
use crate::metric::Metric;
use crate::pool;
use crate::quant::Sq8;

/// One inverted list: row i of each block belongs to `ids.get(i)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InvList {
    pub ids: Ids,
    /// u8 codes per vector ("u8+f16" only): whole rows in dim order, or with a `CodeSplit`
    /// ("l2") the head dims of each row, in the split's order...
    pub codes: Vec<u8>,
    /// ...and the other dims of each row here (empty without a split).
    pub tail: Vec<u8>,
    /// dim f16 values per vector ("f16" and "u8+f16").
    pub vf16: Vec<f16>,
    /// dim f32 values per vector ("f32" only).
    pub vf32: Vec<f32>,
    /// Per-vector `u8_row_term` of the codes ("u8+f16" with L2): lets the u8 prescore use
    /// `l2_u8_batch_pre` (VNNI). Derived data: recomputed on load, never stored.
    pub terms: Vec<i32>,
    /// The same of each tail (with a split).
    pub tail_terms: Vec<i32>,
    /// Each row's 4-bit prefilter code, packed in blocks (`crate::pq4`; "u8+f16" with L2
    /// where the index has a `Pq4`). Derived from the u8 codes: kept up by `add`, recomputed
    /// on load, never stored.
    pub fs: Vec<u8>,
}

impl InvList {
    /// Recomputes the derived per-vector terms (after loading), for heads of `head` codes
    /// and tails of `tail`.
    pub fn fill_terms(&mut self, head: usize, tail: usize) {
        let term = crate::kernels::scalar::u8_row_term;
        self.terms = self.codes.chunks_exact(head).map(term).collect();
        self.tail_terms = if tail > 0 {
            self.tail.chunks_exact(tail).map(term).collect()
        } else {
            Vec::new()
        };
    }

    /// Row `r`'s whole u8 code in dim order (joined from head and tail with a split).
    pub fn code_of(&self, r: usize, dim: usize, split: Option<&CodeSplit>, out: &mut [u8]) {
        match split {
            Some(s) => {
                let (h, t) = (s.head, s.tail());
                s.join_row(
                    &self.codes[r * h..(r + 1) * h],
                    &self.tail[r * t..(r + 1) * t],
                    out,
                );
            }
            None => out.copy_from_slice(&self.codes[r * dim..(r + 1) * dim]),
        }
    }

    /// Replaces whole-row codes (as loaded) by their head and tail blocks.
    pub fn split_codes(&mut self, dim: usize, split: &CodeSplit) {
        let whole = std::mem::take(&mut self.codes);
        let n = whole.len() / dim;
        let (h, t) = (split.head, split.tail());
        self.codes = vec![0u8; n * h];
        self.tail = vec![0u8; n * t];
        for (r, code) in whole.chunks_exact(dim).enumerate() {
            split.split_row(
                code,
                &mut self.codes[r * h..(r + 1) * h],
                &mut self.tail[r * t..(r + 1) * t],
            );
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// A list's ids: four bytes each while every one of them lies in 0..=u32::MAX (the usual
/// 0..n numbering: 4 of an index's 400 bytes per vector at SIFT-1M), eight once one does not.
/// The same ids either way; files store them as i64.
#[derive(Clone, Debug, PartialEq)]
pub enum Ids {
    Narrow(Vec<u32>),
    Wide(Vec<i64>),
}

impl Default for Ids {
    fn default() -> Self {
        Ids::Narrow(Vec::new())
    }
}

impl Ids {
    /// The ids of `v`, narrow if they all fit.
    pub fn from_vec(v: Vec<i64>) -> Ids {
        if v.iter().all(|&id| Self::fits(id)) {
            Ids::Narrow(v.into_iter().map(|id| id as u32).collect())
        } else {
            Ids::Wide(v)
        }
    }

    #[inline(always)]
    fn fits(id: i64) -> bool {
        (0..=u32::MAX as i64).contains(&id)
    }

    /// Row i's id.
    #[inline(always)]
    pub fn get(&self, i: usize) -> i64 {
        match self {
            Ids::Narrow(v) => v[i] as i64,
            Ids::Wide(v) => v[i],
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Ids::Narrow(v) => v.len(),
            Ids::Wide(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends an id, widening the list's ids the first time one does not fit in u32.
    pub fn push(&mut self, id: i64) {
        match self {
            Ids::Narrow(v) if Self::fits(id) => v.push(id as u32),
            Ids::Narrow(v) => {
                let mut wide: Vec<i64> = v.iter().map(|&x| x as i64).collect();
                wide.push(id);
                *self = Ids::Wide(wide);
            }
            Ids::Wide(v) => v.push(id),
        }
    }

    pub fn reserve(&mut self, n: usize) {
        match self {
            Ids::Narrow(v) => v.reserve(n),
            Ids::Wide(v) => v.reserve(n),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match self {
            Ids::Narrow(v) => v.len() * 4,
            Ids::Wide(v) => v.len() * 8,
        }
    }

    /// Asks the CPU to load row i's id (see `kernels::prefetch`).
    #[inline(always)]
    pub fn prefetch(&self, i: usize) {
        match self {
            Ids::Narrow(v) => crate::kernels::prefetch(std::slice::from_ref(&v[i])),
            Ids::Wide(v) => crate::kernels::prefetch(std::slice::from_ref(&v[i])),
        }
    }

    /// The ids in row order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Rows being added, with what encoding them into a list needs.
struct NewRows<'a> {
    x: &'a [f32],
    dim: usize,
    /// The caller's ids, else row i gets `base_id + i`.
    ids: Option<&'a [i64]>,
    base_id: i64,
    storage: Storage,
    metric: Metric,
    sq: Option<&'a Sq8>,
    split: Option<&'a CodeSplit>,
    kern: &'static Kernels,
}

impl NewRows<'_> {
    /// Appends rows `members` (in that order) to list `l`, with `codes`/`halfs` as one row's
    /// buffers; returns whether their u8 codes (and f16 values) give back the rows exactly.
    fn append_to(
        &self,
        l: &mut InvList,
        members: &[u32],
        codes: &mut [u8],
        halfs: &mut [f16],
    ) -> bool {
        let (dim, kern) = (self.dim, self.kern);
        let mut exact = self.storage == Storage::U8F16 && self.metric == Metric::L2;
        for &i in members {
            let i = i as usize;
            let row = &self.x[i * dim..(i + 1) * dim];
            l.ids
                .push(self.ids.map_or(self.base_id + i as i64, |ids| ids[i]));
            match self.storage {
                Storage::F32 => l.vf32.extend_from_slice(row),
                Storage::F16 => {
                    (kern.f32_to_f16)(row, halfs);
                    l.vf16.extend_from_slice(halfs);
                }
                Storage::U8F16 => {
                    let sq = self.sq.expect("u8+f16 index trained without quantizer");
                    (kern.f32_to_f16)(row, halfs);
                    l.vf16.extend_from_slice(halfs);
                    sq.encode(row, codes);
                    match self.split {
                        Some(split) => {
                            let (h, t) = (split.head, split.tail());
                            let (a, b) = (l.codes.len(), l.tail.len());
                            l.codes.resize(a + h, 0);
                            l.tail.resize(b + t, 0);
                            split.split_row(codes, &mut l.codes[a..], &mut l.tail[b..]);
                            l.terms.push((kern.u8_row_term)(&l.codes[a..]));
                            l.tail_terms.push((kern.u8_row_term)(&l.tail[b..]));
                        }
                        None => {
                            l.codes.extend_from_slice(codes);
                            if !self.metric.is_similarity() {
                                l.terms.push((kern.u8_row_term)(codes));
                            }
                        }
                    }
                    exact = exact
                        && sq.is_exact(row, codes)
                        && halfs.iter().zip(row).all(|(h, &v)| h.to_f32() == v);
                }
            }
        }
        exact
    }
}

impl IvfIndex {
    /// Appends the rows of `x` to their lists (`asg[i]` for row i), with the given ids or
    /// ntotal.., and returns whether every new row's codes are exact (see `codes_exact`).
    ///
    /// Each list is filled from its own rows in input order, after every list was reserved
    /// once in list order: a list's memory is then written front to back, lists in order, so
    /// the scan streams pages that were first touched in that order.
    pub(super) fn fill_lists(
        &mut self,
        x: &[f32],
        asg: &[u32],
        ids: Option<&[i64]>,
        threads: Option<usize>,
    ) -> Result<bool> {
        let dim = self.dim;
        let (start, members) = kmeans::members_by_cluster(asg, self.lists.len());
        self.reserve_lists(&start);
        let rows = NewRows {
            x,
            dim,
            ids,
            base_id: self.ntotal as i64,
            storage: self.storage,
            metric: self.metric,
            sq: self.sq.as_ref(),
            split: self.split.as_ref(),
            kern: kernels(),
        };
        let fill = |(codes, halfs): &mut (Vec<u8>, Vec<f16>), (li, l): (usize, &mut InvList)| {
            rows.append_to(l, &members[start[li]..start[li + 1]], codes, halfs)
        };
        // Lists are independent: filled in parallel (each thread still writes whole lists).
        let init = || (vec![0u8; dim], vec![f16::ZERO; dim]);
        if threads == Some(1) {
            let mut buf = init();
            Ok(self
                .lists
                .iter_mut()
                .enumerate()
                .fold(true, |acc, item| fill(&mut buf, item) & acc))
        } else {
            pool::install(threads, || {
                self.lists
                    .par_iter_mut()
                    .enumerate()
                    .with_min_len(16)
                    .map_init(init, fill)
                    .reduce(|| true, |a, b| a && b)
            })
        }
    }

    /// The prefilter codes (`InvList::fs`) of every list's rows from `from[li]` on (all of
    /// them on load), from their u8 codes; nothing without a `Pq4`.
    pub(crate) fn encode_fs(&mut self, from: &[usize], threads: Option<usize>) -> Result<()> {
        let Some(pq) = self.pq.as_ref() else {
            return Ok(());
        };
        let (dim, split) = (self.dim, self.split.as_ref());
        let bb = pq.block_bytes();
        let encode = |(code, fs): &mut (Vec<u8>, Vec<u8>), (l, &f): (&mut InvList, &usize)| {
            for r in f..l.len() {
                l.code_of(r, dim, split, code);
                pq.encode(code, fs);
                crate::pq4::pack_row(&mut l.fs, bb, r, fs);
            }
        };
        // every list's room first, in one pass, so the blocks lie together (as the u8 codes
        // do: `reserve_lists`) for `advise_huge_pages`
        for l in self.lists.iter_mut() {
            let want = crate::pq4::packed_len(l.len(), bb);
            l.fs.reserve_exact(want.saturating_sub(l.fs.len()));
        }
        let init = || (vec![0u8; dim], vec![0u8; pq.pairs()]);
        pool::install(threads, || {
            self.lists
                .par_iter_mut()
                .zip(from)
                .with_min_len(16)
                .for_each_init(init, encode)
        })
    }

    /// Reserves room for the new rows of every list (`start` as from `members_by_cluster`):
    /// first the blocks the scan streams, every list's in one pass (so they lie together, the
    /// stretch `advise_huge_pages` collapses), then the ids and the rerank's f16 rows.
    fn reserve_lists(&mut self, start: &[usize]) {
        let (dim, storage, sim) = (self.dim, self.storage, self.metric.is_similarity());
        let (head, tail) = self.split.as_ref().map_or((dim, 0), |s| (s.head, s.tail()));
        for (li, l) in self.lists.iter_mut().enumerate() {
            let c = start[li + 1] - start[li];
            match storage {
                Storage::F32 => l.vf32.reserve(c * dim),
                Storage::F16 => l.vf16.reserve(c * dim),
                Storage::U8F16 => {
                    l.codes.reserve(c * head);
                    if !sim {
                        l.terms.reserve(c);
                    }
                }
            }
        }
        for (li, l) in self.lists.iter_mut().enumerate() {
            let c = start[li + 1] - start[li];
            l.ids.reserve(c);
            if storage == Storage::U8F16 {
                l.vf16.reserve(c * dim);
            }
            if tail > 0 {
                // read only for the rows whose head passes: not with the streamed blocks
                l.tail.reserve(c * tail);
                l.tail_terms.reserve(c);
            }
        }
    }

    /// Asks for transparent huge pages under the blocks the scan streams (best effort,
    /// `hugepages`): u8 codes and their terms, or the f16 / f32 rows. The rerank's scattered
    /// f16 reads gain little from them, and collapsing costs a copy (~1 s for all 400 MB of
    /// a 1M u8+f16 index, a third of that for its codes).
    pub(crate) fn advise_huge_pages(&self) {
        let mut bufs: Vec<(usize, usize)> = self
            .lists
            .iter()
            .flat_map(|l| {
                let f16 = if self.storage == Storage::F16 {
                    l.vf16.len() * 2
                } else {
                    0
                };
                [
                    (l.codes.as_ptr() as usize, l.codes.len()),
                    (l.terms.as_ptr() as usize, l.terms.len() * 4),
                    (l.tail.as_ptr() as usize, l.tail.len()),
                    (l.tail_terms.as_ptr() as usize, l.tail_terms.len() * 4),
                    (l.vf16.as_ptr() as usize, f16),
                    (l.vf32.as_ptr() as usize, l.vf32.len() * 4),
                    (l.fs.as_ptr() as usize, l.fs.len()),
                ]
            })
            .collect();
        crate::hugepages::advise(&mut bufs);
    }
}
