//! AVX-512 query tiles (`l2_u8_tile_below`): up to sixteen queries against the same rows, one
//! query per 32-bit lane, on VNNI, and on AMX where the CPU and OS allow it. See the section
//! comment below; the tables that hand these out are in the parent module.

use super::*;

// ---------------------------------------------------------------------------------------------
// Query tiles (`l2_u8_tile_below`): up to sixteen queries against the same rows, one query per
// 32-bit lane. The queries are transposed once per call into `qt`, one vector per group of
// four dims (lane j: query j's four bytes, shifted to i8); a row's four bytes of that group are
// broadcast to every lane, and one `vpdpbusd` adds the group's products for all the queries.
// A row's sixteen dots thus end up in one vector with no horizontal reduction, and each row
// is read once for the whole tile. With AMX (`amx_rows`) the same transposed queries are the
// B operand of `tdpbusd`, which scores sixteen rows against them in one instruction. The
// arithmetic is `l2_u8_batch_pre`'s (exact i32 dots, then sum(q^2) + term - 2 * dot modulo
// 2^32), so the distances are the same bits.

/// The largest number of four-dim groups the tile kernel transposes on its stack (dim 1024);
/// wider queries go through `l2_u8_batch_pre_below_vnni` one at a time.
const TILE_MAX_GROUPS: usize = 256;
const _: () = assert!(TILE_MAX_GROUPS.is_multiple_of(16));

/// Rows the tile kernel scores at once, one accumulator each.
const TILE_ROWS: usize = 8;
const _: () = assert!(2 * TILE_ROWS == 16);
/// The same for tiles of up to eight queries (256-bit accumulators).
const TILE_ROWS8: usize = 8;
/// Rows ahead of the current ones that the VNNI tile loop asks for.
const PREFETCH_AHEAD: usize = 32;

/// Bytes `off..off + 4` of `v` (those that exist; the others 0) as a little-endian word,
/// each byte xor `flip`.
#[inline]
fn word_at(v: &[u8], off: usize, flip: u8) -> u32 {
    let mut w = [0u8; 4];
    for (b, &x) in w.iter_mut().zip(&v[off..v.len().min(off + 4)]) {
        *b = x ^ flip;
    }
    u32::from_le_bytes(w)
}

/// A tile call's rows: row r is `head[r * h..(r + 1) * h]` followed by `tail[r * t..(r + 1) *
/// t]` (t = 0: rows in one block). With a tail, h is a multiple of 16, so no group of four
/// dims (and no 64-dim chunk where h is a multiple of 64) straddles the two blocks.
#[derive(Clone, Copy)]
struct Rows<'a> {
    head: &'a [u8],
    h: usize,
    tail: &'a [u8],
    t: usize,
}

/// The accumulators of a tile's row: sixteen query lanes (`__m512i`), or the low eight
/// (`__m256i`: half the work per row for tiles of up to eight queries, and twice the issue
/// rate where 512-bit operations are split in two, as on Zen 4).
trait Lanes: Copy {
    /// All lanes zero.
    unsafe fn zero() -> Self;
    /// Adds to each lane the dot of the row's four bytes `word` (u8) with that lane's four
    /// bytes of the transposed group `qg` (i8): one `vpdpbusd`.
    unsafe fn dpbusd(self, word: i32, qg: __m512i) -> Self;
}

impl Lanes for __m512i {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn zero() -> Self {
        _mm512_setzero_si512()
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn dpbusd(self, word: i32, qg: __m512i) -> Self {
        _mm512_dpbusd_epi32(self, _mm512_set1_epi32(word), qg)
    }
}

impl Lanes for __m256i {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn zero() -> Self {
        _mm256_setzero_si256()
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn dpbusd(self, word: i32, qg: __m512i) -> Self {
        _mm256_dpbusd_epi32(self, _mm256_set1_epi32(word), _mm512_castsi512_si256(qg))
    }
}

/// Adds one block's dots to the accumulators of `R` consecutive rows (row `r` of `w` bytes
/// in `block`, at most `r + R` rows there), `qt` the transposed groups of that block: `full`
/// whole groups of four dims, then the last partial group if `w % 4 != 0` (its bytes
/// gathered one by one, so nothing past the rows is read).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn block_rows<V: Lanes, const R: usize>(
    acc: &mut [V; R],
    qt: &[__m512i],
    block: &[u8],
    r: usize,
    w: usize,
) {
    let full = w / 4;
    let xp = block.as_ptr().add(r * w);
    for (g, &qg) in qt[..full].iter().enumerate() {
        for (k, a) in acc.iter_mut().enumerate() {
            let v = (xp.add(k * w + 4 * g) as *const i32).read_unaligned();
            *a = a.dpbusd(v, qg);
        }
    }
    if full < qt.len() {
        let qg = qt[full];
        for (k, a) in acc.iter_mut().enumerate() {
            let x = &block[(r + k) * w..(r + k + 1) * w];
            *a = a.dpbusd(word_at(x, 4 * full, 0) as i32, qg);
        }
    }
}

/// Asks for the cache lines of rows `from..to` (those of them that exist) of both blocks,
/// ahead of the loop that scores them: the hardware prefetchers alone left the VNNI loop
/// waiting on rows (lists are read from memory once per block of queries).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn prefetch_rows(rows: Rows, from: usize, to: usize) {
    let n = rows.head.len().checked_div(rows.h).unwrap_or(0);
    let to = to.min(n);
    if from >= to {
        return;
    }
    for (block, w) in [(rows.head, rows.h), (rows.tail, rows.t)] {
        if w == 0 {
            continue;
        }
        let mut line = block.as_ptr().add(from * w) as usize & !63;
        let stop = block.as_ptr().add(to * w) as usize;
        while line < stop {
            _mm_prefetch::<_MM_HINT_T0>(line as *const i8);
            line += 64;
        }
    }
}

/// The tile's dot accumulators of `R` consecutive rows from `r`: the head block's groups,
/// then the tail's.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_rows<V: Lanes, const R: usize>(qt: &[__m512i], rows: Rows, r: usize) -> [V; R] {
    let mut acc = [V::zero(); R];
    let hg = rows.h.div_ceil(4);
    block_rows(&mut acc, &qt[..hg], rows.head, r, rows.h);
    if rows.t > 0 {
        block_rows(&mut acc, &qt[hg..], rows.tail, r, rows.t);
    }
    acc
}

/// Writes the transposed queries of a tile to `qt`: for each group g of four dims,
/// `qt[g]` lane j = query j's bytes 4g..4g+4, each xor 0x80 (u8 - 128 as i8); zeros past dim
/// and in lanes past `nq`. Sixteen 64-dim chunks of the queries go through one 16 x 16
/// transpose of 32-bit words; `qt` gets `16 * dim.div_ceil(64)` entries (at most
/// `TILE_MAX_GROUPS`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn transpose_queries(qs: &[u8], nq: usize, dim: usize, qt: *mut __m512i) {
    let flip = _mm512_set1_epi8(-128);
    for c in 0..dim.div_ceil(64) {
        let at = 64 * c;
        let m = if at + 64 <= dim {
            !0u64
        } else {
            mask64(dim - at)
        };
        let mut r = [_mm512_setzero_si512(); 16];
        for (j, v) in r[..nq].iter_mut().enumerate() {
            let x = _mm512_maskz_loadu_epi8(m, qs.as_ptr().add(j * dim + at) as *const i8);
            *v = _mm512_xor_si512(x, _mm512_maskz_mov_epi8(m, flip));
        }
        transpose16(&mut r);
        for (g, v) in r.iter().enumerate() {
            _mm512_storeu_si512(qt.add(16 * c + g) as _, *v);
        }
    }
}

/// Transposes a 16 x 16 matrix of 32-bit words held one row per vector: afterwards `r[g]`
/// lane j is what `r[j]` lane g was.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn transpose16(r: &mut [__m512i; 16]) {
    let mut t = [_mm512_setzero_si512(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for i in 0..4 {
        let b = 4 * i;
        r[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
        r[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
        r[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
        r[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    for h in 0..2 {
        let b = 8 * h;
        for i in 0..4 {
            t[b + i] = _mm512_shuffle_i32x4::<0x88>(r[b + i], r[b + 4 + i]);
            t[b + 4 + i] = _mm512_shuffle_i32x4::<0xdd>(r[b + i], r[b + 4 + i]);
        }
    }
    for i in 0..8 {
        r[i] = _mm512_shuffle_i32x4::<0x88>(t[i], t[8 + i]);
        r[8 + i] = _mm512_shuffle_i32x4::<0xdd>(t[i], t[8 + i]);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn l2_u8_tile_below_impl<const AMX: bool>(
    qs: &[u8],
    dim: usize,
    rows: Rows,
    terms: &[i32],
    tail_terms: &[i32],
    thrs: &[f32],
    pos: &mut [u32],
    dist: &mut [u32],
    counts: &mut [u32],
) {
    let nq = thrs.len();
    let n = terms.len();
    let groups = dim.div_ceil(4);
    // The transposed queries; lanes past nq hold zeros (their dots are 0) and a threshold of
    // -inf (no distance passes it, so they never write). Left uninitialised past the last
    // chunk: zeroing all 16 KiB would cost more than filling them.
    let mut qt_buf = [std::mem::MaybeUninit::<__m512i>::uninit(); TILE_MAX_GROUPS];
    let (mut qn, mut thr) = ([0u32; 16], [f32::NEG_INFINITY; 16]);
    transpose_queries(qs, nq, dim, qt_buf.as_mut_ptr() as *mut __m512i);
    for j in 0..nq {
        qn[j] = sq_norm(&qs[j * dim..(j + 1) * dim]);
        thr[j] = thrs[j];
    }
    // SAFETY: the first `groups` entries were written just above.
    let qt = std::slice::from_raw_parts(qt_buf.as_ptr() as *const __m512i, groups);
    let qn_v = _mm512_loadu_si512(qn.as_ptr() as _);
    let thr_v = _mm512_loadu_ps(thr.as_ptr());
    let mut cnt = [0u32; 16];
    // One row's sixteen dots: distances, the threshold test in one compare, and the rare
    // passing (row, query) pairs appended to their query's outputs.
    let mut emit = |row: usize, acc: __m512i| {
        let term = if rows.t > 0 {
            terms[row].wrapping_add(tail_terms[row])
        } else {
            terms[row]
        };
        let t = _mm512_set1_epi32(term);
        let d = _mm512_sub_epi32(_mm512_add_epi32(qn_v, t), _mm512_slli_epi32::<1>(acc));
        let m = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(_mm512_cvtepu32_ps(d), thr_v);
        if m != 0 {
            let mut dv = [0u32; 16];
            _mm512_storeu_si512(dv.as_mut_ptr() as _, d);
            let mut bits = m as u32;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                let at = j * n + cnt[j] as usize;
                pos[at] = row as u32;
                dist[at] = dv[j];
                cnt[j] += 1;
                bits &= bits - 1;
            }
        }
    };
    // With AMX, sixteen rows at a time by the tile unit (`amx_rows`), the rest below.
    let mut r = if AMX {
        amx_rows(qt_buf.as_ptr() as *const u8, groups / 16, rows, &mut emit)
    } else {
        0
    };
    if nq <= 8 {
        // Up to eight queries: 256-bit accumulators (lanes 8.. of `emit`'s vector are zero
        // and their thresholds -inf).
        while r + TILE_ROWS8 <= n {
            prefetch_rows(rows, r + PREFETCH_AHEAD, r + PREFETCH_AHEAD + TILE_ROWS8);
            let acc = tile_rows::<__m256i, TILE_ROWS8>(qt, rows, r);
            for (k, &a) in acc.iter().enumerate() {
                emit(r + k, _mm512_zextsi256_si512(a));
            }
            r += TILE_ROWS8;
        }
    }
    // Eight rows at a time: eight independent accumulators hide vpdpbusd's latency (five
    // cycles) behind its throughput (one per cycle); four rows ran latency-bound.
    while r + TILE_ROWS <= n {
        prefetch_rows(rows, r + PREFETCH_AHEAD, r + PREFETCH_AHEAD + TILE_ROWS);
        let acc = tile_rows::<__m512i, TILE_ROWS>(qt, rows, r);
        for (k, &a) in acc.iter().enumerate() {
            emit(r + k, a);
        }
        r += TILE_ROWS;
    }
    while r + 4 <= n {
        let acc = tile_rows::<__m512i, 4>(qt, rows, r);
        for (k, &a) in acc.iter().enumerate() {
            emit(r + k, a);
        }
        r += 4;
    }
    while r < n {
        let [a] = tile_rows::<__m512i, 1>(qt, rows, r);
        emit(r, a);
        r += 1;
    }
    counts[..nq].copy_from_slice(&cnt[..nq]);
}

#[allow(clippy::too_many_arguments)]
pub(super) fn l2_u8_tile_below_vnni(
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
    let (h, t) = crate::kernels::check_tile(
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
    let dim = h + t;
    if dim.div_ceil(4) > TILE_MAX_GROUPS {
        let pre = super::l2_u8_batch_pre_vnni;
        return crate::kernels::tile_below_via(
            pre, qs, rows, terms, tail_rows, tail_terms, thrs, pos, dist, counts,
        );
    }
    let rows = Rows {
        head: rows,
        h,
        tail: tail_rows,
        t,
    };
    // SAFETY: lengths checked above (qs = nq x dim with nq <= 16, rows = h x terms and
    // tail_rows = t x terms, tail_terms one per row or none, the outputs hold nq x nrows
    // values and every query writes at most nrows of them; row reads stay inside each block:
    // whole groups lie inside a row, a partial one is read bytewise, and with a tail h is a
    // multiple of 16, so the head has no partial group); AVX512_VNNI is only handed out after
    // is_x86_feature_detected! confirmed avx512f/bw/vl and avx512vnni.
    unsafe {
        l2_u8_tile_below_impl::<false>(qs, dim, rows, terms, tail_terms, thrs, pos, dist, counts)
    }
}

/// `l2_u8_tile_below` with the rows scored sixteen at a time by AMX (`amx_rows`), for head and
/// tail widths that are multiples of 64, up to `AMX_MAX_DIM` in all; others as
/// `l2_u8_tile_below_vnni`.
#[allow(clippy::too_many_arguments)]
pub(super) fn l2_u8_tile_below_amx(
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
    let (h, t) = crate::kernels::check_tile(
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
    let dim = h + t;
    if dim == 0 || !h.is_multiple_of(64) || !t.is_multiple_of(64) || dim > AMX_MAX_DIM {
        return l2_u8_tile_below_vnni(
            qs, rows, terms, tail_rows, tail_terms, thrs, pos, dist, counts,
        );
    }
    let rows = Rows {
        head: rows,
        h,
        tail: tail_rows,
        t,
    };
    // SAFETY: as in `l2_u8_tile_below_vnni`; in addition AVX512_AMX is only handed out after
    // CPUID reported AMX-TILE and AMX-INT8 and the OS granted this process the tile state
    // (kernels::detect), and `amx_rows` reads whole 64-byte chunks of rows only (h and t are
    // multiples of 64).
    unsafe {
        l2_u8_tile_below_impl::<true>(qs, dim, rows, terms, tail_terms, thrs, pos, dist, counts)
    }
}

/// `l2_u8_tile_all` on VNNI: the tile's transposed queries against eight rows at a time
/// (`tile_rows`), each block of sixteen rows' distance vectors (one lane per query) transposed
/// and stored as sixteen runs of one query's distances; queries wider than the tile kernel
/// takes through `l2_u8_batch_pre_vnni` one at a time.
pub(super) fn l2_u8_tile_all_vnni(qs: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    let (nq, dim) = crate::kernels::check_tile_all(qs.len(), rows.len(), terms.len(), out.len());
    if nq == 0 || dim == 0 || dim.div_ceil(4) > TILE_MAX_GROUPS {
        return crate::kernels::tile_all_via(super::l2_u8_batch_pre_vnni, qs, rows, terms, out);
    }
    // SAFETY: lengths checked above (qs = nq x dim with 1 <= nq <= 16, rows = dim x terms, out
    // holds nq x terms values); dim.div_ceil(4) <= TILE_MAX_GROUPS, so the transposed queries
    // fit their buffer; AVX512_VNNI is only handed out after is_x86_feature_detected!
    // confirmed avx512f/bw/vl and avx512vnni.
    unsafe { l2_u8_tile_all_vnni_impl(qs, nq, dim, rows, terms, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn l2_u8_tile_all_vnni_impl(
    qs: &[u8],
    nq: usize,
    dim: usize,
    rows: &[u8],
    terms: &[i32],
    out: &mut [u32],
) {
    let n = terms.len();
    let groups = dim.div_ceil(4);
    let mut qt_buf = [std::mem::MaybeUninit::<__m512i>::uninit(); TILE_MAX_GROUPS];
    transpose_queries(qs, nq, dim, qt_buf.as_mut_ptr() as *mut __m512i);
    // SAFETY: `transpose_queries` wrote the first 16 * dim.div_ceil(64) >= groups entries.
    let qt = std::slice::from_raw_parts(qt_buf.as_ptr() as *const __m512i, groups);
    let mut qn = [0u32; 16];
    for j in 0..nq {
        qn[j] = sq_norm(&qs[j * dim..(j + 1) * dim]);
    }
    let qn_v = _mm512_loadu_si512(qn.as_ptr() as _);
    let dist = |row: usize, acc: __m512i| {
        let t = _mm512_set1_epi32(terms[row]);
        _mm512_sub_epi32(_mm512_add_epi32(qn_v, t), _mm512_slli_epi32::<1>(acc))
    };
    let rows = Rows {
        head: rows,
        h: dim,
        tail: &[],
        t: 0,
    };
    let o = out.as_mut_ptr();
    let mut r = 0;
    while r + 16 <= n {
        let a = tile_rows::<__m512i, TILE_ROWS>(qt, rows, r);
        let b = tile_rows::<__m512i, TILE_ROWS>(qt, rows, r + TILE_ROWS);
        let mut block = [_mm512_setzero_si512(); 16];
        for k in 0..TILE_ROWS {
            block[k] = dist(r + k, a[k]);
            block[TILE_ROWS + k] = dist(r + TILE_ROWS + k, b[k]);
        }
        // lane j of block[k] is query j's distance to row r + k; after the transpose lane k of
        // block[j] is
        transpose16(&mut block);
        for (j, v) in block[..nq].iter().enumerate() {
            _mm512_storeu_si512(o.add(j * n + r) as _, *v);
        }
        r += 16;
    }
    for row in r..n {
        let [a] = tile_rows::<__m512i, 1>(qt, rows, row);
        let mut dv = [0u32; 16];
        _mm512_storeu_si512(dv.as_mut_ptr() as _, dist(row, a));
        for (j, &d) in dv[..nq].iter().enumerate() {
            out[j * n + row] = d;
        }
    }
}

/// `l2_u8_tile_all` with the rows scored sixteen at a time by AMX (`amx_rows`), for widths that
/// are multiples of 64 up to `AMX_MAX_DIM`; others as `l2_u8_tile_all_vnni`. Each block of
/// sixteen rows' distance vectors (one lane per query) is transposed and stored as sixteen
/// runs of one query's distances; rows past the last whole block go through VNNI.
pub(super) fn l2_u8_tile_all_amx(qs: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    let (nq, dim) = crate::kernels::check_tile_all(qs.len(), rows.len(), terms.len(), out.len());
    if nq == 0 || !dim.is_multiple_of(64) || dim > AMX_MAX_DIM {
        return l2_u8_tile_all_vnni(qs, rows, terms, out);
    }
    // SAFETY: lengths checked above (qs = nq x dim with 1 <= nq <= 16, rows = dim x terms, out
    // holds nq x terms values); dim is a multiple of 64 up to AMX_MAX_DIM, so `amx_rows` reads
    // whole 64-byte chunks of rows only; AVX512_AMX is only handed out after CPUID reported
    // AMX-TILE and AMX-INT8, the OS granted the tile state, and avx512f/bw/vl/vnni were found.
    unsafe { l2_u8_tile_all_impl(qs, nq, dim, rows, terms, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn l2_u8_tile_all_impl(
    qs: &[u8],
    nq: usize,
    dim: usize,
    rows: &[u8],
    terms: &[i32],
    out: &mut [u32],
) {
    let n = terms.len();
    let groups = dim.div_ceil(4);
    let mut qt_buf = [std::mem::MaybeUninit::<__m512i>::uninit(); TILE_MAX_GROUPS];
    transpose_queries(qs, nq, dim, qt_buf.as_mut_ptr() as *mut __m512i);
    let mut qn = [0u32; 16];
    for j in 0..nq {
        qn[j] = sq_norm(&qs[j * dim..(j + 1) * dim]);
    }
    let qn_v = _mm512_loadu_si512(qn.as_ptr() as _);
    let dist = |row: usize, acc: __m512i| {
        let t = _mm512_set1_epi32(terms[row]);
        _mm512_sub_epi32(_mm512_add_epi32(qn_v, t), _mm512_slli_epi32::<1>(acc))
    };
    let rows = Rows {
        head: rows,
        h: dim,
        tail: &[],
        t: 0,
    };
    let o = out.as_mut_ptr();
    let mut block = [_mm512_setzero_si512(); 16];
    // `amx_rows` hands the rows over in order, sixteen by sixteen from row 0.
    let mut emit = |row: usize, acc: __m512i| {
        block[row % 16] = dist(row, acc);
        if row % 16 == 15 {
            transpose16(&mut block);
            for (j, v) in block[..nq].iter().enumerate() {
                _mm512_storeu_si512(o.add(j * n + row - 15) as _, *v);
            }
        }
    };
    let done = amx_rows(qt_buf.as_ptr() as *const u8, groups / 16, rows, &mut emit);
    // SAFETY: the first `groups` entries were written by `transpose_queries`.
    let qt = std::slice::from_raw_parts(qt_buf.as_ptr() as *const __m512i, groups);
    for row in done..n {
        let [a] = tile_rows::<__m512i, 1>(qt, rows, row);
        let mut dv = [0u32; 16];
        _mm512_storeu_si512(dv.as_mut_ptr() as _, dist(row, a));
        for (j, &d) in dv[..nq].iter().enumerate() {
            out[j * n + row] = d;
        }
    }
}

/// Rows ahead of the current block that `amx_rows` prefetches (8 KiB at dim 128): the fastest
/// distance measured (benchmarks/results/perf-build-round3.md).
const PREFETCH_ROWS: usize = 64;

/// The widest query `amx_rows` takes: four 64-dim chunks, one tile register each.
const AMX_MAX_DIM: usize = 256;

/// The AMX tile configuration (`ldtilecfg`'s 64-byte operand).
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

/// Sixteen i32 per row, 64-byte aligned for `tilestored` and the row loads.
#[repr(C, align(64))]
struct TileOut([i32; 256]);

/// The rows of a tile call, sixteen at a time, by AMX: `tdpbusd` multiplies a 16-row x 64-byte
/// block of u8 codes (tile A, read straight from the list with the row stride) by 64 dims of
/// the transposed queries (tile B: 16 groups of 4 dims x 16 queries, i8) into 16 x 16 i32
/// dots (tile C), the same sums `vpdpbusd` makes. Every tile register is 16 rows of 64 bytes:
/// tmm0 = C, tmm1 / tmm2 = A (alternating), tmm4.. = B, one per chunk (and, up to 128 dims,
/// a second block in tmm1 = C, tmm6 / tmm7 = A). C goes to memory and
/// each row's dots to `emit`. Returns how many rows it scored (a multiple of 16); the tile
/// state is released before returning. `qt` holds `chunks` x 1 KiB of transposed queries.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn amx_rows(
    qt: *const u8,
    chunks: usize,
    rows: Rows,
    emit: &mut impl FnMut(usize, __m512i),
) -> usize {
    use std::arch::asm;
    debug_assert!((1..=4).contains(&chunks) && rows.h + rows.t == 64 * chunks);
    debug_assert!(rows.h.is_multiple_of(64) && rows.t.is_multiple_of(64) && rows.h > 0);
    let n = rows.head.len() / rows.h;
    if n < 16 {
        return 0;
    }
    // Chunk c of row r: in the head block for c < hc, else in the tail; with its row stride.
    let hc = rows.h / 64;
    let at = |c: usize, r: usize| -> (*const u8, usize) {
        if c < hc {
            (rows.head.as_ptr().add(r * rows.h + 64 * c), rows.h)
        } else {
            (rows.tail.as_ptr().add(r * rows.t + 64 * (c - hc)), rows.t)
        }
    };
    let mut cfg = TileConfig([0; 64]);
    cfg.0[0] = 1; // palette 1
    for t in 0..8 {
        cfg.0[16 + 2 * t] = 64; // bytes per row of tmm t
        cfg.0[48 + t] = 16; // rows of tmm t
    }
    asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(), options(nostack));
    let b = 64usize;
    for c in 0..chunks {
        let p = qt.add(1024 * c);
        match c {
            0 => asm!("tileloadd tmm4, [{0} + {1}]", in(reg) p, in(reg) b, options(nostack)),
            1 => asm!("tileloadd tmm5, [{0} + {1}]", in(reg) p, in(reg) b, options(nostack)),
            2 => asm!("tileloadd tmm6, [{0} + {1}]", in(reg) p, in(reg) b, options(nostack)),
            _ => asm!("tileloadd tmm7, [{0} + {1}]", in(reg) p, in(reg) b, options(nostack)),
        }
    }
    let mut out = TileOut([0; 256]);
    let mut out2 = TileOut([0; 256]);
    let mut r = 0;
    // Up to 128 dims (two B tiles), two blocks of sixteen rows at a time, in C tiles tmm0 and
    // tmm1 with A tiles tmm2 / tmm3 and tmm6 / tmm7: `tdpbusd` has a latency several times its
    // issue interval, and one block alone waits on it (benchmarks/results/perf-round2.md).
    while chunks <= 2 && r + 32 <= n {
        // The next blocks' rows into L1 while these are scored: tile loads stall on rows that
        // the hardware prefetchers have not brought in (most of the kernel's time at 1M).
        let ahead = (r + PREFETCH_ROWS).min(n);
        let end = (ahead + 32).min(n);
        for (block, w) in [(rows.head, rows.h), (rows.tail, rows.t)] {
            let mut line = block.as_ptr().add(ahead * w);
            let stop = block.as_ptr().add(end * w);
            while line < stop {
                _mm_prefetch::<_MM_HINT_T0>(line as *const i8);
                line = line.add(64);
            }
        }
        let ((x, d), (y, _)) = (at(0, r), at(0, r + 16));
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tileloadd tmm2, [{x} + {d}]",
            "tileloadd tmm6, [{y} + {d}]",
            "tdpbusd tmm0, tmm2, tmm4",
            "tdpbusd tmm1, tmm6, tmm4",
            x = in(reg) x, y = in(reg) y, d = in(reg) d, options(nostack),
        );
        if chunks == 2 {
            let ((x, d), (y, _)) = (at(1, r), at(1, r + 16));
            asm!(
                "tileloadd tmm3, [{x} + {d}]",
                "tileloadd tmm7, [{y} + {d}]",
                "tdpbusd tmm0, tmm3, tmm5",
                "tdpbusd tmm1, tmm7, tmm5",
                x = in(reg) x, y = in(reg) y, d = in(reg) d, options(nostack),
            );
        }
        asm!(
            "tilestored [{o} + {b}], tmm0",
            "tilestored [{o2} + {b}], tmm1",
            o = in(reg) out.0.as_mut_ptr(), o2 = in(reg) out2.0.as_mut_ptr(), b = in(reg) b,
            options(nostack),
        );
        for i in 0..16 {
            emit(r + i, _mm512_load_si512(out.0.as_ptr().add(16 * i) as _));
        }
        for i in 0..16 {
            emit(
                r + 16 + i,
                _mm512_load_si512(out2.0.as_ptr().add(16 * i) as _),
            );
        }
        r += 32;
    }
    while r + 16 <= n {
        asm!("tilezero tmm0", options(nostack));
        for c in 0..chunks {
            let (a, d) = at(c, r);
            match c {
                0 => asm!("tileloadd tmm1, [{0} + {1}]", "tdpbusd tmm0, tmm1, tmm4",
                          in(reg) a, in(reg) d, options(nostack)),
                1 => asm!("tileloadd tmm2, [{0} + {1}]", "tdpbusd tmm0, tmm2, tmm5",
                          in(reg) a, in(reg) d, options(nostack)),
                2 => asm!("tileloadd tmm1, [{0} + {1}]", "tdpbusd tmm0, tmm1, tmm6",
                          in(reg) a, in(reg) d, options(nostack)),
                _ => asm!("tileloadd tmm2, [{0} + {1}]", "tdpbusd tmm0, tmm2, tmm7",
                          in(reg) a, in(reg) d, options(nostack)),
            }
        }
        asm!("tilestored [{0} + {1}], tmm0", in(reg) out.0.as_mut_ptr(), in(reg) b, options(nostack));
        for i in 0..16 {
            emit(r + i, _mm512_load_si512(out.0.as_ptr().add(16 * i) as _));
        }
        r += 16;
    }
    asm!("tilerelease", options(nostack));
    r
}
