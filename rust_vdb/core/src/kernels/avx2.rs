//! AVX2 + FMA + F16C kernels (x86_64), the `Avx2` table.
//!
//! Each `unsafe fn` carries `#[target_feature]`; the safe wrappers in the table check slice
//! lengths (so no read goes out of bounds) and rely on `kernels_for` handing the table out only
//! after `is_x86_feature_detected!` confirmed avx2, fma and f16c.
//!
//! Layout of the work: f32-query kernels keep four (single) or one-per-row (batch of 4 rows)
//! FMA accumulators so the 4-cycle FMA latency is hidden; u8 l2 takes |a-b| with saturating
//! subtractions, widens to i16 by unpacking with zero and squares-and-adds with `vpmaddwd`;
//! the i8 . u8 dots (and `l2_u8_batch_pre`, which is one) split the row bytes into even and
//! odd i16 lanes by mask and shift for `vpmaddwd` with the sign-extended query. The batch
//! prescore's tile kernel (`l2_u8_tile_below`) splits each row chunk once and multiplies it
//! with up to eight queries' chunks, so a list is read once per eight queries that probe it
//! (AVX2 has no `vpdpbusd`, and `vpmaddubsw` would saturate u8 x i8 pair sums).
//! Tails (dims not a multiple of the vector width) run the scalar twin's arithmetic.

use super::{scalar, Kernels, SimdLevel};
use half::f16;
use std::arch::x86_64::*;

pub static AVX2: Kernels = Kernels {
    level: SimdLevel::Avx2,
    name: "avx2",
    l2_f32,
    dot_f32,
    l2_f32_f16,
    dot_f32_f16,
    l2_u8,
    dot_f32_u8,
    l2_f32_batch,
    dot_f32_batch,
    l2_f32_f16_batch,
    dot_f32_f16_batch,
    l2_u8_batch,
    dot_f32_u8_batch,
    f32_to_f16,
    f16_to_f32,
    u8_row_term: super::scalar::u8_row_term,
    l2_u8_batch_pre,
    dot_i8_u8_batch,
    l2_u8_batch_pre_below,
    l2_u8_tile_below,
    tile_min_queries: 4,
    l2_u8_tile_all,
    tile_all_fast: false,
    route_tile_min: usize::MAX,
    argmin_score,
    fs_below,
    fs_below_many,
    pq4_lut,
};

/// This table's `l2_u8_batch_pre` for each query of the tile in turn.
pub(super) fn l2_u8_tile_all(qs: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    super::tile_all_via(l2_u8_batch_pre, qs, rows, terms, out)
}

/// `Kernels::l2_u8_tile_below` on AVX2: each 32-byte chunk of a row is loaded and split into
/// even and odd i16 lanes once per group of eight queries, then multiplied (`vpmaddwd`) with
/// their pre-split chunks (`tile_below_impl`). Queries wider than
/// `TILE_MAX_DIM` go through `l2_u8_batch_pre` one at a time.
#[allow(clippy::too_many_arguments)]
pub(super) fn l2_u8_tile_below(
    qs: &[u8],
    rows: &[u8],
    terms: &[i32],
    tail_rows: &[u8],
    tail_terms: &[i32],
    thrs: &[f32],
    pos: &mut [u32],
    dist: &mut [u32],
    counts: &mut [u32],
) {
    let (h, t) = super::check_tile(
        qs.len(),
        rows.len(),
        terms.len(),
        tail_rows.len(),
        tail_terms.len(),
        thrs.len(),
        pos.len(),
        dist.len(),
        counts.len(),
    );
    if h + t > TILE_MAX_DIM || thrs.is_empty() {
        let pre = l2_u8_batch_pre;
        return super::tile_below_via(
            pre, qs, rows, terms, tail_rows, tail_terms, thrs, pos, dist, counts,
        );
    }
    // SAFETY: lengths checked above (qs = nq x (h + t) with nq <= 16, rows = h x terms,
    // tail_rows = t x terms or empty with t = 0, tail_terms one per row when t > 0, outputs
    // nq x nrows values); every vector load of a row lies inside its block (whole 32-byte
    // chunks only, the rest read bytewise); this table is only handed out after
    // is_x86_feature_detected! confirmed avx2, fma and f16c.
    unsafe {
        tile_below_impl(
            qs, h, t, rows, terms, tail_rows, tail_terms, thrs, pos, dist, counts,
        )
    }
}

/// The widest query the AVX2 tile kernel pre-splits on its stack (16 KiB for sixteen).
const TILE_MAX_DIM: usize = 512;
/// Queries scored per pass over a row: one i32 lane each in the reduced result.
const TILE_GROUP: usize = 8;

/// The even and odd bytes of each whole 32-byte chunk of `q` (a block of `w` codes), each
/// minus 128 and sign-extended to i16, into `out[2c]` / `out[2c + 1]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn split_chunks(q: &[u8], out: *mut __m256i) {
    let flip = _mm256_set1_epi8(-128);
    for c in 0..q.len() / 32 {
        let (e, o) = split_i8::<true>(q.as_ptr().add(32 * c), flip);
        out.add(2 * c).write(e);
        out.add(2 * c + 1).write(o);
    }
}

/// Lane j of the result: the sum of the eight lanes of `a[j]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn reduce8(a: &[__m256i; TILE_GROUP]) -> __m256i {
    let pair = |x: __m256i, y: __m256i| {
        _mm256_add_epi32(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
    };
    let quad = |x: __m256i, y: __m256i| {
        _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y))
    };
    // per 128-bit half: lanes (a0, a1, a2, a3) and (a4, a5, a6, a7), half-sums
    let lo = quad(pair(a[0], a[1]), pair(a[2], a[3]));
    let hi = quad(pair(a[4], a[5]), pair(a[6], a[7]));
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(lo, hi),
        _mm256_permute2x128_si256::<0x31>(lo, hi),
    )
}

/// Adds to `acc[j]` the products of the whole chunks of one block of a row (`chunks` of 32
/// bytes from `x`) with query j's pre-split chunks (`q[j * stride..]`, `2 * chunks` vectors).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_block<const Q: usize>(
    acc: &mut [__m256i; Q],
    q: *const __m256i,
    stride: usize,
    x: *const u8,
    chunks: usize,
) {
    let low = _mm256_set1_epi16(0x00FF);
    for c in 0..chunks {
        let xv = _mm256_loadu_si256(x.add(32 * c) as *const __m256i);
        let xe = _mm256_and_si256(xv, low);
        let xo = _mm256_srli_epi16::<8>(xv);
        for (j, a) in acc.iter_mut().enumerate() {
            let qj = q.add(j * stride + 2 * c);
            let p = _mm256_add_epi32(
                _mm256_madd_epi16(xe, *qj),
                _mm256_madd_epi16(xo, *qj.add(1)),
            );
            *a = _mm256_add_epi32(*a, p);
        }
    }
}

/// The dots of one row (head block at `xh`, tail block at `xt`) with the `Q` queries from
/// `q`, lane j for query j (lanes past Q zero).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_dots<const Q: usize>(
    q: *const __m256i,
    stride: usize,
    xh: *const u8,
    hc: usize,
    xt: *const u8,
    tc: usize,
) -> __m256i {
    let mut acc = [_mm256_setzero_si256(); Q];
    group_block(&mut acc, q, stride, xh, hc);
    if tc > 0 {
        group_block(&mut acc, q.add(2 * hc), stride, xt, tc);
    }
    let mut all = [_mm256_setzero_si256(); TILE_GROUP];
    all[..Q].copy_from_slice(&acc);
    reduce8(&all)
}

#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_below_impl(
    qs: &[u8],
    h: usize,
    t: usize,
    rows: &[u8],
    terms: &[i32],
    tail_rows: &[u8],
    tail_terms: &[i32],
    thrs: &[f32],
    pos: &mut [u32],
    dist: &mut [u32],
    counts: &mut [u32],
) {
    let (nq, dim) = (thrs.len(), h + t);
    let (hc, tc) = (h / 32, t / 32);
    let (hm, tm) = (32 * hc, 32 * tc);
    let stride = 2 * (hc + tc);
    let groups = nq.div_ceil(TILE_GROUP);
    // Query j's pre-split chunks at qsp[j * stride..]: head chunks, then tail chunks; queries
    // past nq in the last group are zeros (their dots are 0 and their threshold -inf).
    let mut qbuf =
        [std::mem::MaybeUninit::<__m256i>::uninit(); TILE_QUERIES_MAX * 2 * TILE_MAX_DIM / 32];
    let qsp = qbuf.as_mut_ptr() as *mut __m256i;
    let (mut qn, mut thr) = (
        [0u32; TILE_QUERIES_MAX],
        [f32::NEG_INFINITY; TILE_QUERIES_MAX],
    );
    for j in 0..groups * TILE_GROUP {
        let at = qsp.add(j * stride);
        if j < nq {
            let q = &qs[j * dim..(j + 1) * dim];
            split_chunks(&q[..hm], at);
            split_chunks(&q[h..h + tm], at.add(2 * hc));
            qn[j] = super::sq_norm(q);
            thr[j] = thrs[j];
        } else {
            for c in 0..stride {
                at.add(c).write(_mm256_setzero_si256());
            }
        }
    }
    let qsp = qsp as *const __m256i;
    let mut cnt = [0u32; TILE_QUERIES_MAX];
    let tile = TileRows {
        qs,
        h,
        t,
        rows,
        terms,
        tail_rows,
        tail_terms,
        stride,
        qn: &qn,
        thr: &thr,
    };
    // Group after group over all the rows (a list's codes, tens of KiB on average, are read
    // from cache by the second group): the group's query pointers, norms and thresholds then
    // stay in registers across the rows. Each query's passing rows still come in row order.
    for g in 0..groups {
        let q = qsp.add(g * TILE_GROUP * stride);
        // as few query lanes as cover the group's queries (the rest of a group of eight is
        // zeros): a list probed by one query of the block costs that one query
        match nq - g * TILE_GROUP {
            1 => tile.group_rows::<1>(g, q, nq, pos, dist, &mut cnt),
            2 => tile.group_rows::<2>(g, q, nq, pos, dist, &mut cnt),
            3 | 4 => tile.group_rows::<4>(g, q, nq, pos, dist, &mut cnt),
            _ => tile.group_rows::<TILE_GROUP>(g, q, nq, pos, dist, &mut cnt),
        }
    }
    counts[..nq].copy_from_slice(&cnt[..nq]);
}

/// Sixteen queries, rounded up to whole groups of eight.
const TILE_QUERIES_MAX: usize = super::TILE_QUERIES.div_ceil(TILE_GROUP) * TILE_GROUP;

/// The rows of one `tile_below_impl` call, and its queries' codes, squared norms and
/// thresholds (-inf past the tile's queries).
struct TileRows<'a> {
    qs: &'a [u8],
    h: usize,
    t: usize,
    rows: &'a [u8],
    terms: &'a [i32],
    tail_rows: &'a [u8],
    tail_terms: &'a [i32],
    stride: usize,
    qn: &'a [u32; TILE_QUERIES_MAX],
    thr: &'a [f32; TILE_QUERIES_MAX],
}

impl TileRows<'_> {
    /// Every row against group g (its `Q` lanes cover its queries; `q` its first query's
    /// pre-split chunks): the rows at or under each query's threshold go to `pos` / `dist` at
    /// `j * n + cnt[j]`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn group_rows<const Q: usize>(
        &self,
        g: usize,
        q: *const __m256i,
        nq: usize,
        pos: &mut [u32],
        dist: &mut [u32],
        cnt: &mut [u32; TILE_QUERIES_MAX],
    ) {
        let (h, t, stride) = (self.h, self.t, self.stride);
        let (hc, tc) = (h / 32, t / 32);
        let (hm, tm) = (32 * hc, 32 * tc);
        let ragged = hm < h || tm < t;
        let dim = h + t;
        let n = self.terms.len();
        let at = g * TILE_GROUP;
        let qn_v = _mm256_loadu_si256(self.qn.as_ptr().add(at) as *const __m256i);
        let thr_v = _mm256_loadu_ps(self.thr.as_ptr().add(at));
        for r in 0..n {
            let term = if t > 0 {
                self.terms[r].wrapping_add(self.tail_terms[r])
            } else {
                self.terms[r]
            };
            let xh = self.rows.as_ptr().add(r * h);
            let xt = self.tail_rows.as_ptr().add(r * t);
            let mut dots = group_dots::<Q>(q, stride, xh, hc, xt, tc);
            if ragged {
                // the dims past the whole chunks of each block, as the scalar twin does them
                let mut dv = [0i32; TILE_GROUP];
                _mm256_storeu_si256(dv.as_mut_ptr() as *mut __m256i, dots);
                for (k, d) in dv.iter_mut().enumerate() {
                    let j = at + k;
                    if j < nq {
                        let q = &self.qs[j * dim..(j + 1) * dim];
                        let row = &self.rows[r * h..(r + 1) * h];
                        let mut s = dot_i8_u8_tail(&q[hm..h], -128, &row[hm..]);
                        if t > 0 {
                            let row = &self.tail_rows[r * t..(r + 1) * t];
                            s = s.wrapping_add(dot_i8_u8_tail(&q[h + tm..], -128, &row[tm..]));
                        }
                        *d = d.wrapping_add(s);
                    }
                }
                dots = _mm256_loadu_si256(dv.as_ptr() as *const __m256i);
            }
            let base = _mm256_add_epi32(qn_v, _mm256_set1_epi32(term));
            let d = _mm256_sub_epi32(base, _mm256_slli_epi32::<1>(dots));
            // d < 2^31 for dims up to TILE_MAX_DIM, so the signed conversion is `d as f32`
            let pass = _mm256_cmp_ps::<_CMP_LE_OQ>(_mm256_cvtepi32_ps(d), thr_v);
            let mut bits = _mm256_movemask_ps(pass) as u32;
            if bits != 0 {
                let mut dv = [0u32; TILE_GROUP];
                _mm256_storeu_si256(dv.as_mut_ptr() as *mut __m256i, d);
                while bits != 0 {
                    let k = bits.trailing_zeros() as usize;
                    let j = at + k;
                    let o = j * n + cnt[j] as usize;
                    pos[o] = r as u32;
                    dist[o] = dv[k];
                    cnt[j] += 1;
                    bits &= bits - 1;
                }
            }
        }
    }
}

/// `Kernels::l2_u8_batch_pre_below` on AVX2: four rows at a time against the query split once
/// per call (`pre_below_impl`), the threshold test on the four distances in one compare, the
/// passing rows written without a branch. Queries wider than `TILE_MAX_DIM` take
/// `l2_u8_batch_pre` and a scalar test (`kernels::pre_below_via`).
pub fn l2_u8_batch_pre_below(
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    super::check_below(q.len(), rows.len(), terms.len(), pos.len(), dist.len());
    if q.len() > TILE_MAX_DIM {
        return super::pre_below_via(l2_u8_batch_pre, q, rows, terms, thr, pos, dist);
    }
    // SAFETY: lengths checked above (rows = dim x terms, pos and dist one value per row at
    // least); vector loads stay inside rows (whole 32-byte chunks only); the tables holding
    // this function (Avx2, Avx512) are only handed out after is_x86_feature_detected!
    // confirmed avx2, fma and f16c.
    unsafe { pre_below_impl(q, rows, terms, thr, pos, dist) }
}

/// The dots of `K` consecutive rows from `xp` (rows of `dim` codes) with a query pre-split into
/// `chunks` whole 32-byte chunks at `qsp` (lanes past K zero).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_dots<const K: usize>(
    qsp: *const __m256i,
    xp: *const u8,
    dim: usize,
    chunks: usize,
) -> __m128i {
    let low = _mm256_set1_epi16(0x00FF);
    let mut a = [_mm256_setzero_si256(); 4];
    for c in 0..chunks {
        let (qe, qo) = (*qsp.add(2 * c), *qsp.add(2 * c + 1));
        for (i, acc) in a[..K].iter_mut().enumerate() {
            let xv = _mm256_loadu_si256(xp.add(i * dim + 32 * c) as *const __m256i);
            let xe = _mm256_and_si256(xv, low);
            let xo = _mm256_srli_epi16::<8>(xv);
            let p = _mm256_add_epi32(_mm256_madd_epi16(xe, qe), _mm256_madd_epi16(xo, qo));
            *acc = _mm256_add_epi32(*acc, p);
        }
    }
    hsum4_epi32(a[0], a[1], a[2], a[3])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pre_below_impl(
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    let (dim, n) = (q.len(), terms.len());
    let chunks = dim / 32;
    let main = 32 * chunks;
    let mut qbuf = [std::mem::MaybeUninit::<__m256i>::uninit(); 2 * TILE_MAX_DIM / 32];
    let qsp = qbuf.as_mut_ptr() as *mut __m256i;
    split_chunks(&q[..main], qsp);
    let qsp = qsp as *const __m256i;
    let qn = super::sq_norm(q);
    let (qn_v, thr_v) = (_mm_set1_epi32(qn as i32), _mm_set1_ps(thr));
    let (pp, dp) = (pos.as_mut_ptr(), dist.as_mut_ptr());
    let mut cnt = 0usize;
    let mut r = 0;
    while r < n {
        let k = (n - r).min(4);
        let xp = rows.as_ptr().add(r * dim);
        let mut s = match k {
            4 => rows_dots::<4>(qsp, xp, dim, chunks),
            3 => rows_dots::<3>(qsp, xp, dim, chunks),
            2 => rows_dots::<2>(qsp, xp, dim, chunks),
            _ => rows_dots::<1>(qsp, xp, dim, chunks),
        };
        let mut tv = [0i32; 4];
        for (i, t) in tv[..k].iter_mut().enumerate() {
            *t = terms[r + i];
        }
        if main < dim {
            let mut t4 = [0i32; 4];
            for (i, t) in t4[..k].iter_mut().enumerate() {
                let row = &rows[(r + i) * dim..(r + i + 1) * dim];
                *t = dot_i8_u8_tail(&q[main..], -128, &row[main..]);
            }
            s = _mm_add_epi32(s, _mm_loadu_si128(t4.as_ptr() as *const __m128i));
        }
        let base = _mm_add_epi32(qn_v, _mm_loadu_si128(tv.as_ptr() as *const __m128i));
        let d = _mm_sub_epi32(base, _mm_slli_epi32::<1>(s));
        // d < 2^31 for dims up to TILE_MAX_DIM, so the signed conversion is `d as f32`
        let pass = _mm_cmple_ps(_mm_cvtepi32_ps(d), thr_v);
        let bits = (_mm_movemask_ps(pass) as u32) & ((1u32 << k) - 1);
        if bits != 0 {
            let mut dv = [0u32; 4];
            _mm_storeu_si128(dv.as_mut_ptr() as *mut __m128i, d);
            // every row of the four written at the next free slot, kept by the count: no
            // branch per row (slot cnt <= r + i < n lies inside pos and dist)
            for (i, &dd) in dv[..k].iter().enumerate() {
                *pp.add(cnt) = (r + i) as u32;
                *dp.add(cnt) = dd;
                cnt += ((bits >> i) & 1) as usize;
            }
        }
        r += k;
    }
    cnt
}

/// `scalar::argmin_score` compiled for AVX2 (eight-lane compares and blends).
#[target_feature(enable = "avx2,fma")]
unsafe fn argmin_score_impl(dots: &[f32], norms: &[f32], ip: bool) -> (u32, f32) {
    scalar::argmin_score(dots, norms, ip)
}

fn argmin_score(dots: &[f32], norms: &[f32], ip: bool) -> (u32, f32) {
    // SAFETY: this table is only handed out when the CPU has AVX2 and FMA (kernels_for).
    unsafe { argmin_score_impl(dots, norms, ip) }
}

// ---------------------------------------------------------------------------------------------
// Loads of 8 lanes as f32, for each stored element type.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld_f32(p: *const f32) -> __m256 {
    _mm256_loadu_ps(p)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld_f16(p: *const f16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld_u8(p: *const u8) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Horizontal sums of four vectors: lane i of the result is the sum of `v[i]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum4_ps(a: __m256, b: __m256, c: __m256, d: __m256) -> __m128 {
    let ab = _mm256_hadd_ps(a, b); // a01 a23 b01 b23 | a45 a67 b45 b67
    let cd = _mm256_hadd_ps(c, d);
    let abcd = _mm256_hadd_ps(ab, cd); // a0123 b0123 c0123 d0123 | a4567 ...
    _mm_add_ps(
        _mm256_castps256_ps128(abcd),
        _mm256_extractf128_ps::<1>(abcd),
    )
}

/// Horizontal sums of four integer vectors: lane i of the result is the sum of the i-th.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum4_epi32(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m128i {
    let ab = _mm256_hadd_epi32(a, b);
    let cd = _mm256_hadd_epi32(c, d);
    let abcd = _mm256_hadd_epi32(ab, cd);
    _mm_add_epi32(
        _mm256_castsi256_si128(abcd),
        _mm256_extracti128_si256::<1>(abcd),
    )
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_epi32(v: __m256i) -> u32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s) as u32
}

// ---------------------------------------------------------------------------------------------
// f32 query against f32 / f16 / u8 rows. One macro, so the three element types share the
// accumulator layout; `$l2` selects (q-x)^2 or q*x at compile time.

macro_rules! f32_query {
    ($single:ident, $batch:ident, $t:ty, $ld:ident, $tail:path, $l2:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $single(q: &[f32], x: &[$t]) -> f32 {
            let n = q.len();
            let (qp, xp) = (q.as_ptr(), x.as_ptr());
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= n {
                for (k, a) in acc.iter_mut().enumerate() {
                    let o = i + 8 * k;
                    *a = term::<{ $l2 }>(_mm256_loadu_ps(qp.add(o)), $ld(xp.add(o)), *a);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = term::<{ $l2 }>(_mm256_loadu_ps(qp.add(i)), $ld(xp.add(i)), acc[0]);
                i += 8;
            }
            let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            hsum_ps(v) + $tail(&q[i..], &x[i..])
        }

        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $batch(q: &[f32], rows: &[$t], out: &mut [f32]) {
            let n = q.len();
            let qp = q.as_ptr();
            let main = n & !7;
            let mut r = 0;
            let nrows = out.len();
            // Four rows at a time: the query chunk is loaded once for four FMAs.
            while r + 4 <= nrows {
                let xp = rows.as_ptr().add(r * n);
                let mut a = [_mm256_setzero_ps(); 4];
                let mut i = 0;
                while i < main {
                    let qv = _mm256_loadu_ps(qp.add(i));
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc = term::<{ $l2 }>(qv, $ld(xp.add(k * n + i)), *acc);
                    }
                    i += 8;
                }
                let s = hsum4_ps(a[0], a[1], a[2], a[3]);
                let mut s4 = [0f32; 4];
                _mm_storeu_ps(s4.as_mut_ptr(), s);
                for k in 0..4 {
                    let row = &rows[(r + k) * n..(r + k + 1) * n];
                    out[r + k] = s4[k]
                        + if main < n {
                            $tail(&q[main..], &row[main..])
                        } else {
                            0.0
                        };
                }
                r += 4;
            }
            while r < nrows {
                out[r] = $single(q, &rows[r * n..(r + 1) * n]);
                r += 1;
            }
        }
    };
}

/// One accumulation step: acc + (q-x)^2 for l2, acc + q*x for dot.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn term<const L2: bool>(q: __m256, x: __m256, acc: __m256) -> __m256 {
    if L2 {
        let d = _mm256_sub_ps(q, x);
        _mm256_fmadd_ps(d, d, acc)
    } else {
        _mm256_fmadd_ps(q, x, acc)
    }
}

f32_query!(
    l2_f32_impl,
    l2_f32_batch_impl,
    f32,
    ld_f32,
    scalar::l2_f32,
    true
);
f32_query!(
    dot_f32_impl,
    dot_f32_batch_impl,
    f32,
    ld_f32,
    scalar::dot_f32,
    false
);
f32_query!(
    l2_f32_f16_impl,
    l2_f32_f16_batch_impl,
    f16,
    ld_f16,
    scalar::l2_f32_f16,
    true
);
f32_query!(
    dot_f32_f16_impl,
    dot_f32_f16_batch_impl,
    f16,
    ld_f16,
    scalar::dot_f32_f16,
    false
);
f32_query!(
    dot_f32_u8_impl,
    dot_f32_u8_batch_impl,
    u8,
    ld_u8,
    scalar::dot_f32_u8,
    false
);

// ---------------------------------------------------------------------------------------------
// u8 l2: |a-b| per byte (two saturating subtractions), widened to i16, squared and summed in
// pairs by vpmaddwd into i32 lanes. All sums are taken modulo 2^32, so the result equals the
// scalar twin's u32 sum exactly whenever that sum fits in u32 (any dim below 66051).

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sqdiff32(a: __m256i, b: __m256i, acc: __m256i) -> __m256i {
    let d = _mm256_or_si256(_mm256_subs_epu8(a, b), _mm256_subs_epu8(b, a));
    let z = _mm256_setzero_si256();
    let lo = _mm256_unpacklo_epi8(d, z);
    let hi = _mm256_unpackhi_epi8(d, z);
    _mm256_add_epi32(
        acc,
        _mm256_add_epi32(_mm256_madd_epi16(lo, lo), _mm256_madd_epi16(hi, hi)),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn l2_u8_impl(a: &[u8], b: &[u8]) -> u32 {
    let n = a.len();
    let (ap, bp) = (a.as_ptr() as *const __m256i, b.as_ptr() as *const __m256i);
    let mut acc0 = _mm256_setzero_si256();
    let mut acc1 = _mm256_setzero_si256();
    let mut i = 0;
    while i + 64 <= n {
        let j = i / 32;
        acc0 = sqdiff32(
            _mm256_loadu_si256(ap.add(j)),
            _mm256_loadu_si256(bp.add(j)),
            acc0,
        );
        acc1 = sqdiff32(
            _mm256_loadu_si256(ap.add(j + 1)),
            _mm256_loadu_si256(bp.add(j + 1)),
            acc1,
        );
        i += 64;
    }
    if i + 32 <= n {
        let j = i / 32;
        acc0 = sqdiff32(
            _mm256_loadu_si256(ap.add(j)),
            _mm256_loadu_si256(bp.add(j)),
            acc0,
        );
        i += 32;
    }
    hsum_epi32(_mm256_add_epi32(acc0, acc1)).wrapping_add(scalar::l2_u8(&a[i..], &b[i..]))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn l2_u8_batch_impl(q: &[u8], rows: &[u8], out: &mut [u32]) {
    let n = q.len();
    let main = n & !31;
    let qp = q.as_ptr();
    let nrows = out.len();
    let mut r = 0;
    while r + 4 <= nrows {
        let xp = rows.as_ptr().add(r * n);
        let mut a = [_mm256_setzero_si256(); 4];
        let mut i = 0;
        while i < main {
            let qv = _mm256_loadu_si256(qp.add(i) as *const __m256i);
            for (k, acc) in a.iter_mut().enumerate() {
                *acc = sqdiff32(
                    qv,
                    _mm256_loadu_si256(xp.add(k * n + i) as *const __m256i),
                    *acc,
                );
            }
            i += 32;
        }
        let s = hsum4_epi32(a[0], a[1], a[2], a[3]);
        let mut s4 = [0u32; 4];
        _mm_storeu_si128(s4.as_mut_ptr() as *mut __m128i, s);
        for k in 0..4 {
            let tail = if main < n {
                scalar::l2_u8(&q[main..], &rows[(r + k) * n + main..(r + k + 1) * n])
            } else {
                0
            };
            out[r + k] = s4[k].wrapping_add(tail);
        }
        r += 4;
    }
    while r < nrows {
        out[r] = l2_u8_impl(q, &rows[r * n..(r + 1) * n]);
        r += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// i8 query . u8 rows: vpmaddwd on even and odd bytes, split by mask and shift (vpmaddubsw
// would saturate its i16 pair sums), four rows at a time.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_i8_u8_32(qe: __m256i, qo: __m256i, x: __m256i, acc: __m256i) -> __m256i {
    let xe = _mm256_and_si256(x, _mm256_set1_epi16(0x00FF));
    let xo = _mm256_srli_epi16::<8>(x);
    let p = _mm256_add_epi32(_mm256_madd_epi16(xe, qe), _mm256_madd_epi16(xo, qo));
    _mm256_add_epi32(acc, p)
}

/// The even and odd bytes of 32 query bytes (xor `flip` if FLIP), sign-extended to i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn split_i8<const FLIP: bool>(qp: *const u8, flip: __m256i) -> (__m256i, __m256i) {
    let mut q = _mm256_loadu_si256(qp as *const __m256i);
    if FLIP {
        q = _mm256_xor_si256(q, flip);
    }
    (
        _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(q)),
        _mm256_srai_epi16::<8>(q),
    )
}

fn dot_i8_u8_tail(q: &[u8], flip: i8, x: &[u8]) -> i32 {
    q.iter()
        .zip(x)
        .map(|(&a, &b)| (a as i8 ^ flip) as i32 * b as i32)
        .sum()
}

/// The dots `s` of rows r..r + 4 (their whole 32-byte chunks) completed with their bytes past
/// `main`, against the query bytes xor `flip` taken as i8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn add_tails4(s: __m128i, q: &[u8], flip: i8, rows: &[u8], r: usize, main: usize) -> __m128i {
    let n = q.len();
    if main == n {
        return s;
    }
    let mut t4 = [0i32; 4];
    for (k, t) in t4.iter_mut().enumerate() {
        let row = &rows[(r + k) * n..(r + k + 1) * n];
        *t = dot_i8_u8_tail(&q[main..], flip, &row[main..]);
    }
    _mm_add_epi32(s, _mm_loadu_si128(t4.as_ptr() as *const __m128i))
}

/// `qn + terms[r..r + 4] - 2 * dots`, modulo 2^32: the rewritten l2 of `Kernels::l2_u8_batch_pre`
/// for four rows (`terms` holds r + 4 values at least).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pre4(dots: __m128i, qn: u32, terms: &[i32], r: usize) -> __m128i {
    let t = _mm_loadu_si128(terms.as_ptr().add(r) as *const __m128i);
    _mm_sub_epi32(_mm_add_epi32(_mm_set1_epi32(qn as i32), t), _mm_slli_epi32::<1>(dots))
}

/// `out[r]` = the dot of row r with the query bytes xor `flip` taken as i8; or, with `PRE`,
/// `qn + terms[r] - 2 * dot` (the rewritten l2 of `Kernels::l2_u8_batch_pre`, modulo 2^32).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dots_impl<const PRE: bool>(
    q: &[u8],
    flip: i8,
    rows: &[u8],
    terms: &[i32],
    out: &mut [i32],
) {
    let n = q.len();
    let main = n & !31;
    let qp = q.as_ptr();
    let nrows = out.len();
    let fv = _mm256_set1_epi8(flip);
    let qn = super::sq_norm(q);
    let finish = |dot: i32, r: usize| {
        if PRE {
            qn.wrapping_add(terms[r] as u32)
                .wrapping_sub((dot as u32).wrapping_mul(2)) as i32
        } else {
            dot
        }
    };
    let mut r = 0;
    while r + 4 <= nrows {
        let xp = rows.as_ptr().add(r * n);
        let mut a = [_mm256_setzero_si256(); 4];
        let mut i = 0;
        while i < main {
            let (qe, qo) = split_i8::<PRE>(qp.add(i), fv);
            for (k, acc) in a.iter_mut().enumerate() {
                let xv = _mm256_loadu_si256(xp.add(k * n + i) as *const __m256i);
                *acc = dot_i8_u8_32(qe, qo, xv, *acc);
            }
            i += 32;
        }
        let mut s = add_tails4(hsum4_epi32(a[0], a[1], a[2], a[3]), q, flip, rows, r, main);
        if PRE {
            s = pre4(s, qn, terms, r);
        }
        _mm_storeu_si128(out.as_mut_ptr().add(r) as *mut __m128i, s);
        r += 4;
    }
    while r < nrows {
        let row = &rows[r * n..(r + 1) * n];
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i < main {
            let (qe, qo) = split_i8::<PRE>(qp.add(i), fv);
            let xv = _mm256_loadu_si256(row.as_ptr().add(i) as *const __m256i);
            acc = dot_i8_u8_32(qe, qo, xv, acc);
            i += 32;
        }
        let tail = dot_i8_u8_tail(&q[main..], flip, &row[main..]);
        out[r] = finish((hsum_epi32(acc) as i32).wrapping_add(tail), r);
        r += 1;
    }
}

/// Public so that the AVX-512 table without VNNI can share it.
pub fn dot_i8_u8_batch(q: &[i8], rows: &[u8], out: &mut [i32]) {
    check_batch(q.len(), rows.len(), out.len());
    // SAFETY: lengths checked above; the tables holding this function (Avx2, and Avx512 whose
    // detection requires avx2+fma+f16c too) are only handed out after is_x86_feature_detected!.
    unsafe { dots_impl::<false>(bytemuck::cast_slice(q), 0, rows, &[], out) }
}

/// Public so that the AVX-512 table without VNNI can share it.
pub fn l2_u8_batch_pre(q: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    check_batch(q.len(), rows.len(), out.len());
    assert_eq!(
        terms.len(),
        out.len(),
        "{} row terms for {} rows",
        terms.len(),
        out.len()
    );
    if q.len() <= I7_MAX_DIM && fits_i7(q) {
        // SAFETY: as for dot_i8_u8_batch; the query fits the i7 kernel's range and width.
        return unsafe { pre_i7_impl(q, rows, terms, out) };
    }
    // SAFETY: as for dot_i8_u8_batch.
    unsafe { dots_impl::<true>(q, -128, rows, terms, bytemuck::cast_slice_mut(out)) }
}

/// The widest query `pre_i7_impl` takes (its chunks are kept on the stack).
const I7_MAX_DIM: usize = 512;

/// Whether every code of `q` lies in 64..=191, i.e. minus 128 in -64..=63: then `vpmaddubsw`
/// of a u8 row with it cannot saturate (two products of at most 255 x 64). Routing codes its
/// queries so (`centroid_codes::encode_half_step`); stored vectors' codes span 0..=255 and take
/// `dots_impl`.
#[inline]
fn fits_i7(q: &[u8]) -> bool {
    q.iter().fold(0u8, |m, &v| m | (v.wrapping_sub(64) & 0x80)) == 0
}

/// `l2_u8_batch_pre` for a query whose codes minus 128 fit i7 (`fits_i7`): one `vpmaddubsw`
/// and one `vpmaddwd` per 32 bytes of a row instead of splitting the query into i16 halves,
/// the same exact integer sums, so the same bits as `dots_impl`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pre_i7_impl(q: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    let n = q.len();
    let (main, chunks) = (n & !31, n / 32);
    let nrows = out.len();
    let flip = _mm256_set1_epi8(-128);
    let ones = _mm256_set1_epi16(1);
    let mut qb = [_mm256_setzero_si256(); I7_MAX_DIM / 32];
    for (c, v) in qb.iter_mut().enumerate().take(chunks) {
        *v = _mm256_xor_si256(_mm256_loadu_si256(q.as_ptr().add(32 * c) as *const __m256i), flip);
    }
    let qn = super::sq_norm(q);
    let mut r = 0;
    while r + 4 <= nrows {
        let xp = rows.as_ptr().add(r * n);
        let mut a = [_mm256_setzero_si256(); 4];
        for (c, &qv) in qb.iter().enumerate().take(chunks) {
            for (k, acc) in a.iter_mut().enumerate() {
                let xv = _mm256_loadu_si256(xp.add(k * n + 32 * c) as *const __m256i);
                *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, qv), ones));
            }
        }
        let s = add_tails4(hsum4_epi32(a[0], a[1], a[2], a[3]), q, -128, rows, r, main);
        _mm_storeu_si128(out.as_mut_ptr().add(r) as *mut __m128i, pre4(s, qn, terms, r));
        r += 4;
    }
    while r < nrows {
        let row = &rows[r * n..(r + 1) * n];
        let mut acc = _mm256_setzero_si256();
        for (c, &qv) in qb.iter().enumerate().take(chunks) {
            let xv = _mm256_loadu_si256(row.as_ptr().add(32 * c) as *const __m256i);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, qv), ones));
        }
        let dot = (hsum_epi32(acc) as i32).wrapping_add(dot_i8_u8_tail(&q[main..], -128, &row[main..]));
        out[r] = qn
            .wrapping_add(terms[r] as u32)
            .wrapping_sub((dot as u32).wrapping_mul(2));
        r += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions (F16C; round to nearest even, as `half`).

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_to_f16_impl(src: &[f32], dst: &mut [f16]) {
    let n = src.len();
    let mut i = 0;
    while i + 8 <= n {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(ld_f32(src.as_ptr().add(i)));
        _mm_storeu_si128(dst.as_mut_ptr().add(i) as *mut __m128i, h);
        i += 8;
    }
    scalar::f32_to_f16(&src[i..], &mut dst[i..]);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_to_f32_impl(src: &[f16], dst: &mut [f32]) {
    let n = src.len();
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(dst.as_mut_ptr().add(i), ld_f16(src.as_ptr().add(i)));
        i += 8;
    }
    scalar::f16_to_f32(&src[i..], &mut dst[i..]);
}

// ---------------------------------------------------------------------------------------------
// Safe wrappers: the length checks make every pointer read above stay inside its slice.

#[inline]
fn check_pair(a: usize, b: usize) {
    assert_eq!(a, b, "kernel operands differ in length: {a} vs {b}");
}

#[inline]
fn check_batch(dim: usize, rows: usize, nout: usize) {
    assert_eq!(
        rows,
        dim * nout,
        "batch rows hold {rows} values, expected dim {dim} x {nout} rows"
    );
}

macro_rules! wrap_pair {
    ($name:ident, $imp:ident, $a:ty, $b:ty, $r:ty) => {
        fn $name(a: &[$a], b: &[$b]) -> $r {
            check_pair(a.len(), b.len());
            // SAFETY: lengths checked above; the Avx2 table is only handed out after
            // is_x86_feature_detected! confirmed avx2, fma and f16c (kernels::kernels_for).
            unsafe { $imp(a, b) }
        }
    };
}

macro_rules! wrap_batch {
    ($name:ident, $imp:ident, $a:ty, $b:ty, $r:ty) => {
        fn $name(q: &[$a], rows: &[$b], out: &mut [$r]) {
            check_batch(q.len(), rows.len(), out.len());
            // SAFETY: lengths checked above; the Avx2 table is only handed out after
            // is_x86_feature_detected! confirmed avx2, fma and f16c (kernels::kernels_for).
            unsafe { $imp(q, rows, out) }
        }
    };
}

wrap_pair!(l2_f32, l2_f32_impl, f32, f32, f32);
wrap_pair!(dot_f32, dot_f32_impl, f32, f32, f32);
wrap_pair!(l2_f32_f16, l2_f32_f16_impl, f32, f16, f32);
wrap_pair!(dot_f32_f16, dot_f32_f16_impl, f32, f16, f32);
wrap_pair!(l2_u8, l2_u8_impl, u8, u8, u32);
wrap_pair!(dot_f32_u8, dot_f32_u8_impl, f32, u8, f32);
wrap_batch!(l2_f32_batch, l2_f32_batch_impl, f32, f32, f32);
wrap_batch!(dot_f32_batch, dot_f32_batch_impl, f32, f32, f32);
wrap_batch!(l2_f32_f16_batch, l2_f32_f16_batch_impl, f32, f16, f32);
wrap_batch!(dot_f32_f16_batch, dot_f32_f16_batch_impl, f32, f16, f32);
wrap_batch!(l2_u8_batch, l2_u8_batch_impl, u8, u8, u32);
wrap_batch!(dot_f32_u8_batch, dot_f32_u8_batch_impl, f32, u8, f32);

fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    check_pair(src.len(), dst.len());
    // SAFETY: lengths checked; table handed out only after the feature check (see above).
    unsafe { f32_to_f16_impl(src, dst) }
}

fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    check_pair(src.len(), dst.len());
    // SAFETY: lengths checked; table handed out only after the feature check (see above).
    unsafe { f16_to_f32_impl(src, dst) }
}

/// `Kernels::fs_below` on AVX2: a block of 32 rows at a time, two `vpshufb` lookups per 32
/// bytes of codes (low and high nibbles, the pair tables in both lanes), their byte sums
/// accumulated in u16 lanes twice over (whole, and shifted right by 8: the odd rows), the even
/// rows recovered by subtracting the odd ones shifted back (faiss's fast-scan accumulation).
pub fn fs_below(
    packed: &[u8],
    n: usize,
    lut: &[u8],
    thr: u32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    super::check_fs(packed.len(), n, lut.len(), pos.len(), dist.len());
    let mut c = [0usize];
    // SAFETY: lengths checked above: packed holds n.div_ceil(32) whole blocks of
    // lut.len() / 64 32-byte loads, lut lut.len() / 32 32-byte tables, pos and dist n values
    // (one query: its outputs from 0 on); the tables holding this function are handed out
    // only after is_x86_feature_detected! confirmed avx2, fma and f16c.
    unsafe { fs_below_many_impl::<1>(packed, n, &[lut], &[thr], pos, dist, &mut c) };
    c[0]
}

/// `Kernels::pq4_lut` on AVX2 (the same bytes as the scalar table's `pq4::build_lut`).
pub fn pq4_lut(centroids: &[f32], q: &[f32], dists: &mut Vec<f32>, lut: &mut [u8]) {
    // SAFETY: the tables holding this function (Avx2, and Avx512 whose detection requires
    // avx2+fma+f16c too) are only handed out after is_x86_feature_detected! confirmed them.
    unsafe { pq4_lut_impl(centroids, q, dists, lut) }
}

/// `pq4::build_lut` in AVX2 intrinsics, step for step: per pair, the squared differences of
/// its 16 centroids (four vectors of x, y interleaved), their x + y sums put back in centroid
/// order, the smallest and largest; then every entry scaled, rounded and packed to bytes.
/// The same f32 operations in the same order (no fused multiply-add), so the same bytes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pq4_lut_impl(centroids: &[f32], q: &[f32], dists: &mut Vec<f32>, lut: &mut [u8]) {
    const ENTRY_MAX: f32 = crate::pq4::ENTRY_MAX;
    let pairs = centroids.len() / 32;
    assert_eq!(lut.len(), pairs * 32, "a table of {} bytes for {pairs} pairs", lut.len());
    assert!(q.len() >= 2 * pairs, "a query of {} values for {pairs} pairs", q.len());
    dists.clear();
    dists.resize(pairs * 16, 0.0);
    let (cp, dp, qp) = (centroids.as_ptr(), dists.as_mut_ptr(), q.as_ptr());
    // 0b11_01_10_00: 64-bit lanes 0, 2, 1, 3, undoing hadd's per-128-bit-lane order
    const ORDER: i32 = 0b11_01_10_00;
    let mut span = 0f32;
    for s in 0..pairs {
        // (a, b) of pair s four times
        let ab = _mm256_castpd_ps(_mm256_set1_pd((qp.add(2 * s) as *const f64).read_unaligned()));
        let c = cp.add(s * 32);
        let sq = |i: usize| {
            let x = _mm256_sub_ps(ab, _mm256_loadu_ps(c.add(8 * i)));
            _mm256_mul_ps(x, x)
        };
        let (s0, s1, s2, s3) = (sq(0), sq(1), sq(2), sq(3));
        let d_lo = _mm256_castpd_ps(_mm256_permute4x64_pd::<ORDER>(_mm256_castps_pd(_mm256_hadd_ps(s0, s1))));
        let d_hi = _mm256_castpd_ps(_mm256_permute4x64_pd::<ORDER>(_mm256_castps_pd(_mm256_hadd_ps(s2, s3))));
        let lo = hmin_ps(_mm256_min_ps(d_lo, d_hi));
        let hi = hmax_ps(_mm256_max_ps(d_lo, d_hi));
        let lov = _mm256_set1_ps(lo);
        _mm256_storeu_ps(dp.add(16 * s), _mm256_sub_ps(d_lo, lov));
        _mm256_storeu_ps(dp.add(16 * s + 8), _mm256_sub_ps(d_hi, lov));
        span = span.max(hi - lo);
    }
    let scale = _mm256_set1_ps(if span > 0.0 { ENTRY_MAX / span } else { 0.0 });
    let (half, top, zero) = (_mm256_set1_ps(0.5), _mm256_set1_ps(ENTRY_MAX), _mm256_setzero_ps());
    let lp = lut.as_mut_ptr();
    for s in 0..pairs {
        let entry = |v: __m256| {
            let r = _mm256_min_ps(_mm256_add_ps(_mm256_mul_ps(v, scale), half), top);
            _mm256_cvttps_epi32(_mm256_max_ps(r, zero))
        };
        let e0 = entry(_mm256_loadu_ps(dp.add(16 * s)));
        let e1 = entry(_mm256_loadu_ps(dp.add(16 * s + 8)));
        // 16 i32 (0..=127) to 16 bytes in order
        let w = _mm256_permute4x64_epi64::<ORDER>(_mm256_packs_epi32(e0, e1));
        let b = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
        _mm_storeu_si128(lp.add(32 * s) as *mut __m128i, b);
        _mm_storeu_si128(lp.add(32 * s + 16) as *mut __m128i, b);
    }
}

/// The smallest of 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hmin_ps(v: __m256) -> f32 {
    let m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_min_ss(m, _mm_shuffle_ps::<1>(m, m)))
}

/// The largest of 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hmax_ps(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)))
}

/// `Kernels::fs_below_many` on AVX2: `fs_below`'s loop with G queries' sums side by side,
/// each 32 bytes of codes split into nibbles once for all of them.
pub fn fs_below_many(
    packed: &[u8],
    n: usize,
    luts: &[&[u8]],
    thrs: &[u32],
    pos: &mut [u32],
    dist: &mut [u32],
    counts: &mut [usize],
) {
    super::check_fs_many(packed.len(), n, luts, thrs.len(), pos.len(), dist.len(), counts.len());
    // SAFETY: as for fs_below, for each of the luts.len() queries (checked above: 1..=4 tables
    // of one length, a threshold and a count each, n positions and sums each).
    unsafe {
        match luts.len() {
            1 => fs_below_many_impl::<1>(packed, n, luts, thrs, pos, dist, counts),
            2 => fs_below_many_impl::<2>(packed, n, luts, thrs, pos, dist, counts),
            3 => fs_below_many_impl::<3>(packed, n, luts, thrs, pos, dist, counts),
            _ => fs_below_many_impl::<4>(packed, n, luts, thrs, pos, dist, counts),
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fs_below_many_impl<const G: usize>(
    packed: &[u8],
    n: usize,
    luts: &[&[u8]],
    thrs: &[u32],
    pos: &mut [u32],
    dist: &mut [u32],
    counts: &mut [usize],
) {
    const B: usize = crate::pq4::FS_BLOCK;
    let quads = luts[0].len() / 64;
    let nib = _mm256_set1_epi8(0x0F);
    let thr_v: [__m256i; G] =
        std::array::from_fn(|g| _mm256_set1_epi16(thrs[g].min(u16::MAX as u32) as u16 as i16));
    let lp: [*const u8; G] = std::array::from_fn(|g| luts[g].as_ptr());
    let (pp, dp) = (pos.as_mut_ptr(), dist.as_mut_ptr());
    let mut c = [0usize; G];
    for b in 0..n.div_ceil(B) {
        let bp = packed.as_ptr().add(b * quads * B);
        let mut whole = [_mm256_setzero_si256(); G];
        let mut odd = [_mm256_setzero_si256(); G];
        for p in 0..quads {
            let v = _mm256_loadu_si256(bp.add(p * B) as *const __m256i);
            let lo = _mm256_and_si256(v, nib);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nib);
            for g in 0..G {
                let t0 = _mm256_loadu_si256(lp[g].add(2 * p * 32) as *const __m256i);
                let t1 = _mm256_loadu_si256(lp[g].add((2 * p + 1) * 32) as *const __m256i);
                let d = _mm256_add_epi8(_mm256_shuffle_epi8(t0, lo), _mm256_shuffle_epi8(t1, hi));
                whole[g] = _mm256_add_epi16(whole[g], d);
                odd[g] = _mm256_add_epi16(odd[g], _mm256_srli_epi16::<8>(d));
            }
        }
        let here = n - b * B;
        for g in 0..G {
            let even = _mm256_sub_epi16(whole[g], _mm256_slli_epi16::<8>(odd[g]));
            // x <= thr in u16: min(x, thr) == x
            let le_e = _mm256_cmpeq_epi16(_mm256_min_epu16(even, thr_v[g]), even);
            let le_o = _mm256_cmpeq_epi16(_mm256_min_epu16(odd[g], thr_v[g]), odd[g]);
            let me = _mm256_movemask_epi8(le_e) as u32 & 0x5555_5555;
            let mo = _mm256_movemask_epi8(le_o) as u32 & 0x5555_5555;
            let mut mask = me | (mo << 1);
            if here < B {
                mask &= (1u32 << here) - 1;
            }
            if mask != 0 {
                let (mut ev, mut od) = ([0u16; 16], [0u16; 16]);
                _mm256_storeu_si256(ev.as_mut_ptr() as *mut __m256i, even);
                _mm256_storeu_si256(od.as_mut_ptr() as *mut __m256i, odd[g]);
                while mask != 0 {
                    let j = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    let d = if j & 1 == 0 { ev[j / 2] } else { od[j / 2] };
                    *pp.add(g * n + c[g]) = (b * B + j) as u32;
                    *dp.add(g * n + c[g]) = d as u32;
                    c[g] += 1;
                }
            }
        }
    }
    counts[..G].copy_from_slice(&c);
}
