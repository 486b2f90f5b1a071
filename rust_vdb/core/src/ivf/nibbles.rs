//! The 4-bit filter in front of the u8 prescore (l2): a lower bound on each row's u8 distance
//! from 4 bits per dimension, tested before the row's codes are read.
//!
//! Per dimension (in the order the split codes are stored: head dims, then tail dims) the 256
//! code values are cut into 16 runs of about equal population (`Bins`); a row keeps the run
//! number of each code (its nibbles, 32 rows to a block: `Kernels::nib_lb_below`). For a
//! query code q and a run whose stored codes lie in `lo..=hi`, every row in that run is at
//! least `gap = max(lo - q, q - hi, 0)` away in that dimension, so `sum(gap^2)` over the
//! dimensions bounds the row's u8 distance from below. The query's table holds
//! `min(255, gap^2 / s)` (integer division, so each entry times s is at most its gap^2); a row
//! whose table sum exceeds `thr / s` therefore has a distance above `thr` and could not enter
//! the heap. The filter drops only such rows, so the results are the same bits as without it.
//!
//! On real SIFT descriptors (docs/real-sift.md) about 3% of a query's probed rows pass at its
//! final threshold and ~15% at the seed bound it starts from, against ~45-65% for the u8
//! heads: the rows' u8 codes are read for the few that pass.

use rayon::prelude::*;

use super::{IvfIndex, InvList, Storage};
use crate::metric::Metric;

/// Rows per nibble block (one byte per row and pair of dimensions: a 256-bit vector).
pub const BLOCK_ROWS: usize = 32;
/// Dimensions per group the kernel sums in u8 (saturating) before widening.
const GROUP_DIMS: usize = 4;
/// The widest dimension the filter takes: its u16 sums (at most 255 per group of four) stay
/// exact up to 257 groups.
pub const MAX_DIM: usize = 1024;
/// The table's resolution: `s` is chosen so that the starting threshold is about this many
/// units per dimension (a row's rounding loss is under one unit per dimension).
const UNITS_PER_DIM: u64 = 16;

/// The 16 runs of code values per dimension and the stored codes' extent in each.
#[derive(Clone, Debug, PartialEq)]
pub struct Bins {
    dim: usize,
    /// `map[p * 256 + c]`: the run of code value c in position p.
    map: Vec<u8>,
    /// `lo[p * 16 + h]..=hi[p * 16 + h]`: the smallest and largest stored code of run h in
    /// position p (lo > hi: no stored code yet).
    lo: Vec<u8>,
    hi: Vec<u8>,
}

impl Bins {
    /// Whether the filter applies to rows of `dim` codes.
    pub fn fits(dim: usize) -> bool {
        dim > 0 && dim <= MAX_DIM
    }

    /// Runs of about equal population per position, from the rows' codes in stored order
    /// (each row a head and a tail block, `dim` codes together), then the extents of those
    /// rows.
    pub fn train<'a>(rows: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone, dim: usize) -> Bins {
        let mut hist = vec![0u64; dim * 256];
        for (head, tail) in rows.clone() {
            for (p, &c) in head.iter().chain(tail).enumerate() {
                hist[p * 256 + c as usize] += 1;
            }
        }
        let mut map = vec![0u8; dim * 256];
        for p in 0..dim {
            cut_runs(&hist[p * 256..(p + 1) * 256], &mut map[p * 256..(p + 1) * 256]);
        }
        let mut bins = Bins {
            dim,
            map,
            lo: vec![u8::MAX; dim * 16],
            hi: vec![0; dim * 16],
        };
        for (head, tail) in rows {
            bins.widen(head, tail);
        }
        bins
    }

    /// Takes a stored row's codes (head and tail blocks) into the runs' extents.
    pub fn widen(&mut self, head: &[u8], tail: &[u8]) {
        for (p, &c) in head.iter().chain(tail).enumerate() {
            let h = p * 16 + self.map[p * 256 + c as usize] as usize;
            self.lo[h] = self.lo[h].min(c);
            self.hi[h] = self.hi[h].max(c);
        }
    }

    /// Position p padded up to whole groups of four.
    pub fn groups(&self) -> usize {
        self.dim.div_ceil(GROUP_DIMS)
    }

    /// Bytes of one block of `BLOCK_ROWS` rows' nibbles.
    pub fn block_bytes(&self) -> usize {
        self.groups() * GROUP_DIMS / 2 * BLOCK_ROWS
    }

    /// Bytes of one query's table (16 per padded dimension).
    pub fn table_bytes(&self) -> usize {
        self.groups() * GROUP_DIMS * 16
    }

    /// Writes row `r`'s nibbles (its codes in stored order: `head` then `tail`) into `nib`,
    /// growing it by a zeroed block when r starts one.
    pub fn put_row(&self, nib: &mut Vec<u8>, r: usize, head: &[u8], tail: &[u8]) {
        let bb = self.block_bytes();
        let (b, rr) = (r / BLOCK_ROWS, r % BLOCK_ROWS);
        if nib.len() < (b + 1) * bb {
            nib.resize((b + 1) * bb, 0);
        }
        let block = &mut nib[b * bb..(b + 1) * bb];
        for (p, &c) in head.iter().chain(tail).enumerate() {
            let bin = self.map[p * 256 + c as usize];
            let byte = &mut block[(p / 2) * BLOCK_ROWS + rr];
            *byte = if p % 2 == 0 {
                (*byte & 0xF0) | bin
            } else {
                (*byte & 0x0F) | (bin << 4)
            };
        }
    }

    /// The nibble blocks of a whole list (codes split as `head` + `tail` per row).
    pub fn pack(&self, list: &InvList, head: usize, tail: usize) -> Vec<u8> {
        let mut nib = Vec::with_capacity(list.len().div_ceil(BLOCK_ROWS) * self.block_bytes());
        for r in 0..list.len() {
            let (h, t) = row_blocks(list, r, head, tail);
            self.put_row(&mut nib, r, h, t);
        }
        nib
    }

    /// The scale of a query's table: its starting threshold `thr` (a u8 distance) at about
    /// `UNITS_PER_DIM` units per dimension; 1 when there is none.
    pub fn scale_for(&self, thr: f32) -> u32 {
        if !thr.is_finite() {
            return 1;
        }
        let per = UNITS_PER_DIM * self.dim as u64;
        ((thr as u64) / per).clamp(1, u32::MAX as u64) as u32
    }

    /// Query `q`'s table (codes in stored order) at scale `s` into `out`
    /// (`table_bytes()`): `out[p * 16 + h] <= min(255, gap(q[p], run h)^2 / s)`, 0 for
    /// padding. The division is a multiplication by floor(2^32 / s), which rounds down (an
    /// entry may fall one short of the quotient: still a bound). Runs with no stored code get
    /// some value no row looks up.
    pub fn table(&self, q: &[u8], s: u32, out: &mut [u8]) {
        let inv = (1u64 << 32) / s.max(1) as u64;
        out[q.len() * 16..].fill(0);
        for ((&qc, o), (lo, hi)) in q
            .iter()
            .zip(out.chunks_exact_mut(16))
            .zip(self.lo.chunks_exact(16).zip(self.hi.chunks_exact(16)))
        {
            for h in 0..16 {
                let gap = lo[h].saturating_sub(qc) as u64 + qc.saturating_sub(hi[h]) as u64;
                o[h] = (((gap * gap) * inv) >> 32).min(255) as u8;
            }
        }
    }
}

/// Row r's head and tail code blocks.
#[inline]
fn row_blocks(list: &InvList, r: usize, head: usize, tail: usize) -> (&[u8], &[u8]) {
    (
        &list.codes[r * head..(r + 1) * head],
        &list.tail[r * tail..(r + 1) * tail],
    )
}

impl IvfIndex {
    /// Whether this index keeps nibbles: u8 codes compared by l2, dims the filter takes.
    pub(crate) fn keeps_nibbles(&self) -> bool {
        self.storage == Storage::U8F16 && self.metric == Metric::L2 && Bins::fits(self.dim)
    }

    /// Brings the bins and every list's nibbles up to date: from all stored codes when there
    /// are no bins yet (the first add, a load), else by taking in the rows past `old[li]` of
    /// each list (a later add: the runs stay, their extents widen).
    pub(crate) fn update_nibbles(&mut self, old: Option<&[usize]>) {
        if !self.keeps_nibbles() {
            return;
        }
        let (head, tail) = (self.head_dims(), self.dim - self.head_dims());
        match (&mut self.bins, old) {
            (Some(bins), Some(old)) => {
                for (l, &o) in self.lists.iter_mut().zip(old) {
                    for r in o..l.len() {
                        let (h, t) = row_blocks(l, r, head, tail);
                        bins.widen(h, t);
                    }
                }
                for (l, &o) in self.lists.iter_mut().zip(old) {
                    let mut nib = std::mem::take(&mut l.nib);
                    for r in o..l.len() {
                        let (h, t) = row_blocks(l, r, head, tail);
                        bins.put_row(&mut nib, r, h, t);
                    }
                    l.nib = nib;
                }
            }
            _ => {
                let rows = self
                    .lists
                    .iter()
                    .flat_map(|l| (0..l.len()).map(move |r| row_blocks(l, r, head, tail)));
                let bins = Bins::train(rows, self.dim);
                self.lists
                    .par_iter_mut()
                    .with_min_len(16)
                    .for_each(|l| l.nib = bins.pack(l, head, tail));
                self.bins = Some(bins);
            }
        }
    }
}

/// A threshold `thr` (a u8 distance, +inf for none) in table units of scale `s`: a row whose
/// table sum is above it has a distance above `thr`.
#[inline]
pub fn units(thr: f32, s: u32) -> u16 {
    if !(thr < 65536.0 * s as f32) {
        return u16::MAX;
    }
    if thr < 0.0 {
        return 0;
    }
    ((thr as u64) / s as u64).min(u16::MAX as u64) as u16
}

/// Cuts the 256 code values of one position into 16 runs of consecutive values, each closed
/// once it holds its share of what is left (so a value holding more than a share, such as the
/// zeros of SIFT, gets a run of its own and the rest still spread over the other runs).
fn cut_runs(hist: &[u64], map: &mut [u8]) {
    let mut left: u64 = hist.iter().sum();
    let mut run = 0u8;
    let mut held = 0u64;
    for (c, &n) in hist.iter().enumerate() {
        map[c] = run;
        held += n;
        let runs_left = 16 - run as u64;
        if run < 15 && held > 0 && held * runs_left >= left {
            left -= held;
            held = 0;
            run += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn rows(n: usize, dim: usize, seed: u64) -> Vec<u8> {
        let mut rng = Rng::new(seed);
        (0..n * dim)
            .map(|i| {
                // skewed like SIFT: many zeros, small values, a few large ones
                let v = rng.next_f64();
                if i % 3 == 0 {
                    0
                } else {
                    (v * v * 200.0) as u8
                }
            })
            .collect()
    }

    fn l2(a: &[u8], b: &[u8]) -> u32 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as i32 - y as i32).pow(2) as u32)
            .sum()
    }

    #[test]
    fn runs_cover_every_value_in_order_and_split_the_population() {
        let dim = 8;
        let data = rows(4000, dim, 1);
        let bins = Bins::train(data.chunks_exact(dim).map(|r| (r, &[][..])), dim);
        for p in 0..dim {
            let m = &bins.map[p * 256..(p + 1) * 256];
            assert_eq!(m[0], 0);
            assert!(m.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
            let used = (0..16).filter(|&h| bins.lo[p * 16 + h] <= bins.hi[p * 16 + h]).count();
            assert!(used >= 12, "position {p} uses only {used} runs");
        }
    }

    #[test]
    fn the_table_sum_bounds_the_distance_from_below() {
        for dim in [5usize, 16, 128] {
            let data = rows(600, dim, dim as u64);
            let bins = Bins::train(data.chunks_exact(dim).map(|r| r.split_at(dim / 2)), dim);
            let queries = rows(20, dim, 99);
            let mut table = vec![0u8; bins.table_bytes()];
            for q in queries.chunks_exact(dim) {
                let thr = l2(q, &data[..dim]) as f32;
                let s = bins.scale_for(thr);
                bins.table(q, s, &mut table);
                for row in data.chunks_exact(dim) {
                    let mut sum = 0u32;
                    for g in 0..bins.groups() {
                        let mut grp = 0u32;
                        for p in g * 4..(g * 4 + 4).min(dim) {
                            let h = bins.map[p * 256 + row[p] as usize] as usize;
                            grp += table[p * 16 + h] as u32;
                        }
                        sum += grp.min(255);
                    }
                    let d = l2(q, row);
                    assert!(sum as u64 * s as u64 <= d as u64, "dim {dim}: {sum} * {s} > {d}");
                    if sum > units(thr, s) as u32 {
                        assert!(d as f32 > thr);
                    }
                }
            }
        }
    }

    #[test]
    fn rows_pack_into_blocks_of_nibbles() {
        let dim = 6;
        let data = rows(70, dim, 3);
        let bins = Bins::train(data.chunks_exact(dim).map(|r| (r, &[][..])), dim);
        let mut nib = Vec::new();
        for (r, row) in data.chunks_exact(dim).enumerate() {
            bins.put_row(&mut nib, r, &row[..4], &row[4..]);
        }
        assert_eq!(nib.len(), 3 * bins.block_bytes());
        for (r, row) in data.chunks_exact(dim).enumerate() {
            let block = &nib[(r / 32) * bins.block_bytes()..];
            for (p, &c) in row.iter().enumerate() {
                let byte = block[(p / 2) * 32 + r % 32];
                let got = if p % 2 == 0 { byte & 15 } else { byte >> 4 };
                assert_eq!(got, bins.map[p * 256 + c as usize]);
            }
        }
    }

    #[test]
    fn units_round_down_and_saturate() {
        assert_eq!(units(f32::INFINITY, 3), u16::MAX);
        assert_eq!(units(10.0, 3), 3);
        assert_eq!(units(1e12, 1), u16::MAX);
        assert_eq!(units(0.0, 7), 0);
    }
}
