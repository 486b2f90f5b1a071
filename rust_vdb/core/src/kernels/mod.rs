//! Distance kernels: one table of functions per SIMD level, chosen at run time.
//!
//! Every kernel has a scalar twin (`scalar.rs`), the reference the SIMD paths are tested
//! against. The active level is the best the CPU has, capped by the environment variable
//! `VDBBENCH_SIMD=scalar|avx2|avx512bw|avx512vnni|avx512amx|avx512|neon` (read on first use) or
//! by `set_level_cap`; `avx512` is the best AVX-512 table the CPU has.
//!
//! Conventions: `l2_*` is the squared Euclidean distance; `dot_*` the inner product. `*_batch`
//! scores one query against `out.len()` contiguous rows of `q.len()` values each.
//!
//! Levels and tables:
//! - x86_64: `Avx2` needs AVX2 + FMA + F16C (`avx2.rs`); `Avx512Bw` needs AVX-512 F/BW/VL
//!   (`avx512/`); `Avx512Vnni` adds VNNI (`vpdpwssd`, `vpdpbusd`) for the u8 kernels (the
//!   table named "avx512+vnni"), and `Avx512Amx` AMX (`tdpbusd`) for the query tiles of the
//!   batch prescore, where the CPU has AMX-INT8 and the OS lets the process use it
//!   ("avx512+vnni+amx"). Each is a level of its own, so a cap can run the VNNI path most
//!   AVX-512 machines have on a CPU with AMX.
//! - aarch64: `Neon` (`neon.rs`), UNTESTED: never compiled or run on an aarch64 machine yet;
//!   f32 l2/dot and u8 l2 only, the rest from the scalar twins.
//!
//! Hot paths for an IVF scan: `l2_u8_batch_pre` (u8 prescore from per-row terms),
//! `dot_i8_u8_batch` (ip prescore), `l2_f32_f16_batch` / `dot_f32_f16_batch` (f16 scan), the
//! single-row f16 kernels with `prefetch` for the rerank. Figures per kernel and table, and
//! what each optimisation gained: `benchmarks/results/kernels.md`.
//!
//! Detection happens once. `VDBBENCH_SIMD` is a cap, not a demand: the active level is the
//! best available level not above it (`neon` on x86_64 therefore means scalar, `avx2` on
//! aarch64 means neon). An unknown value is reported once on stderr and ignored;
//! `env_cap()` returns the same verdict for callers (the Python bindings) that want to surface
//! it. `set_level_cap` overrides the environment at run time (tests, bindings).

mod level;
pub mod scalar;

pub use level::{
    active_level, available_levels, available_tables, detected_level, env_cap, kernels,
    kernels_for, level_named, set_level_cap, SimdLevel,
};

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "aarch64")]
pub mod neon;

use half::f16;

/// `l2_u8_batch_pre(q, rows, row_terms, out)`.
pub type L2U8BatchPre = fn(&[u8], &[u8], &[i32], &mut [u32]);

/// `l2_u8_batch_pre_below(q, rows, row_terms, thr, pos, dist) -> count`.
pub type L2U8BatchPreBelow = fn(&[u8], &[u8], &[i32], f32, &mut [u32], &mut [u32]) -> usize;

/// `l2_u8_tile_below(qs, rows, row_terms, tail_rows, tail_terms, thrs, pos, dist, counts)`.
pub type L2U8TileBelow =
    fn(&[u8], &[u8], &[i32], &[u8], &[i32], &[f32], &mut [u32], &mut [u32], &mut [u32]);

/// `l2_u8_tile_all(qs, rows, row_terms, out)`.
pub type L2U8TileAll = fn(&[u8], &[u8], &[i32], &mut [u32]);

/// The most queries one `l2_u8_tile_below` call takes (one per lane of a 512-bit vector).
pub const TILE_QUERIES: usize = 16;

/// `fs_below(packed, n, lut, thr, pos, dist) -> count`.
pub type FsBelow = fn(&[u8], usize, &[u8], u32, &mut [u32], &mut [u32]) -> usize;

/// `pq4_lut(centroids, q, dists, lut)`.
pub type Pq4Lut = fn(&[f32], &[f32], &mut Vec<f32>, &mut [u8]);

/// `fs_below_many(packed, n, luts, thrs, pos, dist, counts)`.
pub type FsBelowMany = fn(&[u8], usize, &[&[u8]], &[u32], &mut [u32], &mut [u32], &mut [usize]);

/// The most queries one `fs_below_many` call takes.
pub const FS_MANY: usize = 4;

/// `argmin_score(dots, norms, ip) -> (position, score)`.
pub type ArgminScore = fn(&[f32], &[f32], bool) -> (u32, f32);

/// The kernels of one SIMD level.
pub struct Kernels {
    pub level: SimdLevel,
    /// The table's name: the level, plus the optional features it uses (e.g. "avx512+vnni").
    pub name: &'static str,
    pub l2_f32: fn(&[f32], &[f32]) -> f32,
    pub dot_f32: fn(&[f32], &[f32]) -> f32,
    /// f32 query against a stored f16 vector.
    pub l2_f32_f16: fn(&[f32], &[f16]) -> f32,
    pub dot_f32_f16: fn(&[f32], &[f16]) -> f32,
    /// Sum of squared differences of two u8 code vectors, exact in u32.
    pub l2_u8: fn(&[u8], &[u8]) -> u32,
    /// f32 query against u8 codes taken as integers 0..=255.
    pub dot_f32_u8: fn(&[f32], &[u8]) -> f32,
    pub l2_f32_batch: fn(&[f32], &[f32], &mut [f32]),
    pub dot_f32_batch: fn(&[f32], &[f32], &mut [f32]),
    pub l2_f32_f16_batch: fn(&[f32], &[f16], &mut [f32]),
    pub dot_f32_f16_batch: fn(&[f32], &[f16], &mut [f32]),
    pub l2_u8_batch: fn(&[u8], &[u8], &mut [u32]),
    pub dot_f32_u8_batch: fn(&[f32], &[u8], &mut [f32]),
    pub f32_to_f16: fn(&[f32], &mut [f16]),
    pub f16_to_f32: fn(&[f16], &mut [f32]),
    /// The per-row term `l2_u8_batch_pre` needs: sum(x^2) - 256 * sum(x) of one u8 code
    /// vector (exact in i32 for any dim below 131072). Compute it once per row at add time.
    pub u8_row_term: fn(&[u8]) -> i32,
    /// `l2_u8_batch` for rows whose `u8_row_term`s are known: `out[r] = sum((q - x_r)^2)`,
    /// exactly (dims below 66051), given `terms[r] == u8_row_term(x_r)` (wrong terms give
    /// wrong distances). It rewrites the distance as `sum(q^2) + term(x) - 2 * sum((q - 128) *
    /// x)`, a dot product of u8 rows with an i8 query: with VNNI one `vpdpbusd` per 64 dims,
    /// with AVX2 `vpmaddwd` on even and odd bytes, or one `vpmaddubsw` when every query code
    /// lies in 64..=191 (each faster than `l2_u8_batch`: benchmarks/results/kernels.md). Every table computes that
    /// formula, modulo 2^32, for whatever terms it is given (routing passes its own: see
    /// `centroid_codes::encode_half_step`).
    pub l2_u8_batch_pre: L2U8BatchPre,
    /// Exact integer dots of an i8 query with u8 rows (in i32: exact for dims below 65793).
    /// With VNNI one `vpdpbusd` per 64 dims: for an inner-product prescore over u8 codes, a
    /// query quantized to i8 scores several times faster than `dot_f32_u8_batch` (the
    /// quantization of the query is the caller's choice and accuracy; benchmarks/results/kernels.md).
    pub dot_i8_u8_batch: fn(&[i8], &[u8], &mut [i32]),
    /// `l2_u8_batch_pre` with the scan's threshold test folded in: of the rows whose distance
    /// `d`, converted to f32, is at most `thr` (`d as f32 <= thr`), the positions go to `pos`
    /// and the distances to `dist`, in row order; returns how many. `pos` and `dist` hold at
    /// least one value per row. The batch prescore's kernel: a row that cannot enter a
    /// query's candidates costs no scalar compare and branch.
    pub l2_u8_batch_pre_below: L2U8BatchPreBelow,
    /// `l2_u8_batch_pre_below` for a tile of `nq = thrs.len()` queries (at most
    /// `TILE_QUERIES`) against the same rows: `qs` holds the queries' u8 codes one after
    /// another (`nq x dim`), `thrs[j]` is query j's threshold, and query j's rows go to
    /// `pos[j * nrows..]` / `dist[j * nrows..]` (`nrows = terms.len()`; both outputs hold at
    /// least `nq * nrows` values), `counts[j]` saying how many, in row order: exactly what
    /// `l2_u8_batch_pre_below(query j, rows, terms, thrs[j], ..)` returns. The batch
    /// prescore's kernel for a list that several queries of a block probe: with VNNI each
    /// row is read once for the whole tile and scored against sixteen queries at a time with
    /// no horizontal reduction (see `avx512::l2_u8_tile_below_vnni`).
    ///
    /// The rows may come in two blocks, as split codes are stored (`ivf::CodeSplit`): row r is
    /// `rows[r * h..(r + 1) * h]` followed by `tail_rows[r * t..(r + 1) * t]`, its term
    /// `row_terms[r] + tail_terms[r]`, and each query of `qs` holds its `h + t` codes in that
    /// order. `tail_rows` and `tail_terms` are empty for rows in one block; with a tail, h is a
    /// multiple of 16.
    pub l2_u8_tile_below: L2U8TileBelow,
    /// From how many queries on the same rows `l2_u8_tile_below` beats that many calls of
    /// `l2_u8_batch_pre_below` (measured per table; `usize::MAX` where the tile kernel is
    /// that loop itself).
    pub tile_min_queries: usize,
    /// Every distance of a tile of up to `TILE_QUERIES` queries to the same rows: `qs` holds
    /// the queries' u8 codes one after another (`nq x dim`), `rows` whole rows of dim codes
    /// with their `u8_row_term`s in `row_terms`, and `out[j * n + r]` becomes
    /// `l2_u8_batch_pre`'s distance of query j to row r, the same bits (`n =
    /// row_terms.len()`; `out` holds at least `nq x n`). Batch routing's kernel: with AMX a
    /// tile of sixteen queries costs about what one query costs alone.
    pub l2_u8_tile_all: L2U8TileAll,
    /// Whether `l2_u8_tile_all` scores a tile of queries in much less time than its queries
    /// take one by one (`l2_u8_batch_pre`): batch routing then scores every centroid for a
    /// tile rather than each query's candidates on their own.
    pub tile_all_fast: bool,
    /// From how many queries of a block that open the same group of centroids batch routing
    /// scores the group for them as tiles (`l2_u8_tile_all`) rather than query by query
    /// (`l2_u8_batch_pre`); `usize::MAX` where the tile kernel is that loop itself.
    pub route_tile_min: usize,
    /// Nearest centroid from its inner products: `(j, score)` of the first smallest score,
    /// -dots[j] (`ip`) or norms[j] - 2 dots[j]. Exact: every level returns the scalar answer.
    pub argmin_score: ArgminScore,
    /// The 4-bit prefilter's scan (`crate::pq4`): of `n` rows packed in `packed` (blocks of
    /// `pq4::FS_BLOCK` rows, `lut.len() / 64` 32-byte pair-of-pairs each), the positions of
    /// those whose table sum is at most `thr` go to `pos` and the sums to `dist`, in row
    /// order; returns how many. `lut` holds 32 bytes per pair, an entry per code in each
    /// 16-byte half. Sums are taken as the SIMD tables take them: each pair-of-pairs' two
    /// entries added in a byte, those added in u16, both wrapping, so entries up to 127 and
    /// `pairs * 127 < 65536` give the exact sums (`pq4::build_lut` keeps to that).
    pub fs_below: FsBelow,
    /// `fs_below` for up to `FS_MANY` queries over the same rows (query g: tables `luts[g]`,
    /// threshold `thrs[g]`), each block of codes loaded once for all of them: query g's
    /// positions and sums go to `pos` and `dist` from `g * n` on, its count to `counts[g]`.
    /// The same results as `fs_below` query by query.
    pub fs_below_many: FsBelowMany,
    /// A query's 4-bit prefilter tables (`crate::pq4::build_lut`, compiled at this table's
    /// vector width): the same bytes on every level.
    pub pq4_lut: Pq4Lut,
}

pub static SCALAR: Kernels = Kernels {
    level: SimdLevel::Scalar,
    name: "scalar",
    l2_f32: scalar::l2_f32,
    dot_f32: scalar::dot_f32,
    l2_f32_f16: scalar::l2_f32_f16,
    dot_f32_f16: scalar::dot_f32_f16,
    l2_u8: scalar::l2_u8,
    dot_f32_u8: scalar::dot_f32_u8,
    l2_f32_batch: scalar::l2_f32_batch,
    dot_f32_batch: scalar::dot_f32_batch,
    l2_f32_f16_batch: scalar::l2_f32_f16_batch,
    dot_f32_f16_batch: scalar::dot_f32_f16_batch,
    l2_u8_batch: scalar::l2_u8_batch,
    dot_f32_u8_batch: scalar::dot_f32_u8_batch,
    f32_to_f16: scalar::f32_to_f16,
    f16_to_f32: scalar::f16_to_f32,
    u8_row_term: scalar::u8_row_term,
    l2_u8_batch_pre: scalar::l2_u8_batch_pre,
    dot_i8_u8_batch: scalar::dot_i8_u8_batch,
    l2_u8_batch_pre_below: scalar::l2_u8_batch_pre_below,
    l2_u8_tile_below: scalar::l2_u8_tile_below,
    tile_min_queries: usize::MAX,
    l2_u8_tile_all: scalar::l2_u8_tile_all,
    tile_all_fast: false,
    route_tile_min: usize::MAX,
    argmin_score: scalar::argmin_score,
    fs_below: scalar::fs_below,
    fs_below_many: scalar::fs_below_many,
    pq4_lut: crate::pq4::build_lut,
};

/// sum(q^2) of a u8 code vector, modulo 2^32: the query's term of the rewritten l2
/// (`Kernels::l2_u8_batch_pre`), computed once per query by the x86 SIMD tables.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn sq_norm(q: &[u8]) -> u32 {
    q.iter()
        .map(|&v| v as u32 * v as u32)
        .fold(0u32, u32::wrapping_add)
}

/// `l2_u8_batch_pre_below` from a table's `l2_u8_batch_pre`: distances of up to 64 rows at a
/// time into a buffer on the stack, then the threshold test row by row (the tables without a
/// kernel of their own: their `l2_u8_batch_pre` does the arithmetic).
#[inline(always)]
pub(crate) fn pre_below_via(
    pre: L2U8BatchPre,
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    const CHUNK: usize = 64;
    let dim = q.len();
    let n = terms.len();
    check_below(dim, rows.len(), n, pos.len(), dist.len());
    let mut buf = [0u32; CHUNK];
    let mut cnt = 0;
    let mut r0 = 0;
    while r0 < n {
        let c = CHUNK.min(n - r0);
        pre(
            q,
            &rows[r0 * dim..(r0 + c) * dim],
            &terms[r0..r0 + c],
            &mut buf[..c],
        );
        for (j, &d) in buf[..c].iter().enumerate() {
            if d as f32 <= thr {
                pos[cnt] = (r0 + j) as u32;
                dist[cnt] = d;
                cnt += 1;
            }
        }
        r0 += c;
    }
    cnt
}

/// `l2_u8_tile_below` from a table's `l2_u8_batch_pre`, one query of the tile after the
/// other, 64 rows at a time (head and tail distances added, then the threshold test): the
/// tables without a tile kernel of their own.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_below_via(
    pre: L2U8BatchPre,
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
    const CHUNK: usize = 64;
    let (h, t) = check_tile(
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
    let n = terms.len();
    let (mut a, mut b) = ([0u32; CHUNK], [0u32; CHUNK]);
    for (j, &thr) in thrs.iter().enumerate() {
        let q = &qs[j * (h + t)..(j + 1) * (h + t)];
        let (qh, qt) = q.split_at(h);
        let mut cnt = 0;
        let mut r0 = 0;
        while r0 < n {
            let c = CHUNK.min(n - r0);
            pre(
                qh,
                &rows[r0 * h..(r0 + c) * h],
                &terms[r0..r0 + c],
                &mut a[..c],
            );
            if t > 0 {
                let tr = &tail_rows[r0 * t..(r0 + c) * t];
                pre(qt, tr, &tail_terms[r0..r0 + c], &mut b[..c]);
            }
            for i in 0..c {
                let d = if t > 0 { a[i].wrapping_add(b[i]) } else { a[i] };
                if d as f32 <= thr {
                    pos[j * n + cnt] = (r0 + i) as u32;
                    dist[j * n + cnt] = d;
                    cnt += 1;
                }
            }
            r0 += c;
        }
        counts[j] = cnt as u32;
    }
}

/// `l2_u8_tile_all` from a table's `l2_u8_batch_pre`, one query of the tile after the other:
/// the tables without a tile kernel of their own.
#[inline(always)]
pub(crate) fn tile_all_via(
    pre: L2U8BatchPre,
    qs: &[u8],
    rows: &[u8],
    terms: &[i32],
    out: &mut [u32],
) {
    let (nq, dim) = check_tile_all(qs.len(), rows.len(), terms.len(), out.len());
    let n = terms.len();
    for j in 0..nq {
        pre(
            &qs[j * dim..(j + 1) * dim],
            rows,
            terms,
            &mut out[j * n..(j + 1) * n],
        );
    }
}

/// The length checks of every `l2_u8_tile_all`; returns (nq, dim): how many queries `qs`
/// holds (none when there are no rows) and their width.
#[inline]
pub(crate) fn check_tile_all(qs: usize, rows: usize, n: usize, out: usize) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let dim = rows / n;
    assert!(
        dim > 0 && rows == dim * n,
        "tile rows hold {rows} values for {n} terms"
    );
    let nq = qs / dim;
    assert_eq!(
        qs,
        nq * dim,
        "tile queries hold {qs} values, not a multiple of {dim}"
    );
    assert!(
        nq <= TILE_QUERIES,
        "a tile holds at most {TILE_QUERIES} queries, got {nq}"
    );
    assert!(
        out >= nq * n,
        "the output holds {out} values for {nq} queries x {n} rows"
    );
    (nq, dim)
}

/// The length checks of every `l2_u8_tile_below`; returns (h, t), the widths of the head and
/// tail blocks (`qs` holds h + t codes per query, `rows` h per term, `tail_rows` t per tail
/// term, or nothing; the outputs a value per query and row, `counts` one per query).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_tile(
    qs: usize,
    rows: usize,
    n: usize,
    tail_rows: usize,
    tail_n: usize,
    nq: usize,
    pos: usize,
    dist: usize,
    counts: usize,
) -> (usize, usize) {
    assert!(
        nq <= TILE_QUERIES,
        "a tile holds at most {TILE_QUERIES} queries, got {nq} thresholds"
    );
    let dim = qs.checked_div(nq).unwrap_or(0);
    assert_eq!(
        qs,
        dim * nq,
        "tile queries hold {qs} values, not a multiple of {nq}"
    );
    assert!(
        tail_n == n || (tail_n == 0 && tail_rows == 0),
        "{tail_n} tail terms for {n} rows"
    );
    let t = tail_rows.checked_div(n).unwrap_or(0);
    assert_eq!(
        tail_rows,
        t * n,
        "tail rows hold {tail_rows} values for {n} rows"
    );
    assert!(
        t <= dim || nq == 0,
        "tails of {t} codes for queries of {dim}"
    );
    let h = dim.saturating_sub(t);
    if nq > 0 {
        assert_eq!(
            rows,
            h * n,
            "tile rows hold {rows} values, expected {h} x {n} rows (queries of {dim}, tails of {t})"
        );
        assert!(
            t == 0 || h.is_multiple_of(16),
            "a head of {h} codes is not a multiple of 16"
        );
    }
    assert!(
        pos >= nq * n && dist >= nq * n && counts >= nq,
        "outputs hold {pos} positions, {dist} distances and {counts} counts for {nq} queries x {n} rows"
    );
    (h, t)
}

/// The length checks of every `l2_u8_batch_pre_below`: `rows` holds one code per term, and
/// both outputs one value per row.
#[inline]
pub(crate) fn check_below(dim: usize, rows: usize, n: usize, pos: usize, dist: usize) {
    assert_eq!(
        rows,
        dim * n,
        "batch rows hold {rows} values, expected dim {dim} x {n} rows"
    );
    assert!(
        pos >= n && dist >= n,
        "outputs hold {pos} positions and {dist} distances for {n} rows"
    );
}

/// The length checks of every `fs_below`: whole 32-byte pair tables, an even number of pairs,
/// the packed blocks of `n` rows, and room for every row in the outputs.
pub(crate) fn check_fs(packed: usize, n: usize, lut: usize, pos: usize, dist: usize) {
    assert!(lut.is_multiple_of(64) && lut > 0, "fs tables hold {lut} bytes, expected 64 per pair of pairs");
    let want = n.div_ceil(crate::pq4::FS_BLOCK) * (lut / 64) * 32;
    assert_eq!(packed, want, "fs blocks hold {packed} bytes, expected {want} for {n} rows");
    assert!(pos >= n && dist >= n, "outputs hold {pos} positions and {dist} distances for {n} rows");
}

/// The length checks of every `fs_below_many`: 1..=FS_MANY queries with tables of one length,
/// a threshold and a count each, room for n positions and sums a query, and `check_fs`'s.
pub(crate) fn check_fs_many(packed: usize, n: usize, luts: &[&[u8]], thrs: usize, pos: usize, dist: usize, counts: usize) {
    let g = luts.len();
    assert!((1..=FS_MANY).contains(&g), "{g} queries for fs_below_many, expected 1..={FS_MANY}");
    assert!(luts.iter().all(|l| l.len() == luts[0].len()), "fs tables of different lengths");
    assert!(thrs == g && counts >= g, "{thrs} thresholds and {counts} counts for {g} queries");
    check_fs(packed, n, luts[0].len(), pos / g, dist / g);
}

/// Asks the CPU to start loading every cache line of `data`, for rows whose use is known a few
/// steps ahead (the rerank's gathers of candidate vectors, which otherwise each wait a DRAM
/// latency: see the "rerank gather" probe of the kernels bench). Never changes results; a
/// no-op off x86_64.
#[inline]
pub fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return;
        }
        // One prefetch per cache line `data` touches: its first byte, then each later line's
        // start (a small `data`, such as one id, costs one instruction).
        let (start, last) = (data.as_ptr() as usize, data.as_ptr() as usize + bytes - 1);
        let mut at = start;
        loop {
            // SAFETY: a prefetch neither faults nor writes; `at` lies inside `data` (start, or
            // a line start at most `last`), and SSE (which has prefetcht0) is part of the
            // x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at as *const i8) };
            at = (at & !63) + 64;
            if at > last {
                break;
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}
