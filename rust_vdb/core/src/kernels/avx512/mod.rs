//! AVX-512 kernels (x86_64), the `Avx512` tables: F/BW/VL everywhere, and a second table
//! whose u8 kernels use VNNI (`vpdpwssd` for |a-b|^2, `vpdpbusd` for the i8 . u8 dots behind
//! `l2_u8_batch_pre` and `dot_i8_u8_batch`) when the CPU has avx512vnni. Batch kernels score
//! 16 rows per block and reduce them with one transposing reduction (`hsum16_*`).
//!
//! Each `unsafe fn` carries `#[target_feature]`; the safe wrappers in the tables check slice
//! lengths (so no read goes out of bounds) and rely on `kernels_for` handing a table out only
//! after `is_x86_feature_detected!` confirmed its features. Tails use masked loads (masked-off
//! lanes are neither read nor faulted on), so every dim runs the vector path.

use super::{Kernels, SimdLevel};
use half::f16;
use std::arch::x86_64::*;

mod tile;
use tile::{l2_u8_tile_all_amx, l2_u8_tile_all_vnni, l2_u8_tile_below_amx, l2_u8_tile_below_vnni};

pub static AVX512: Kernels = Kernels {
    level: SimdLevel::Avx512Bw,
    name: "avx512",
    l2_f32,
    dot_f32,
    l2_f32_f16,
    dot_f32_f16,
    l2_u8: l2_u8_madd,
    dot_f32_u8,
    l2_f32_batch,
    dot_f32_batch,
    l2_f32_f16_batch,
    dot_f32_f16_batch,
    l2_u8_batch: l2_u8_batch_madd,
    dot_f32_u8_batch,
    f32_to_f16,
    f16_to_f32,
    u8_row_term: super::scalar::u8_row_term,
    // without VNNI the 256-bit vpmaddwd form of AVX2 beats the |a-b| form (kernel bench:
    // benchmarks/results/kernels.md)
    l2_u8_batch_pre: super::avx2::l2_u8_batch_pre,
    // AVX-512 implies AVX2 here (kernels::detect), and without VNNI the 256-bit form is as
    // fast on double-pumped cores.
    dot_i8_u8_batch: super::avx2::dot_i8_u8_batch,
    l2_u8_batch_pre_below: super::avx2::l2_u8_batch_pre_below,
    l2_u8_tile_below: super::avx2::l2_u8_tile_below,
    // the AVX2 table's threshold with its tile kernel: this table's batch would otherwise never
    // tile (benchmarks/HISTORY.md, 2026-12-05 morning)
    tile_min_queries: super::avx2::AVX2.tile_min_queries,
    l2_u8_tile_all: super::avx2::l2_u8_tile_all,
    tile_all_fast: false,
    route_tile_min: usize::MAX,
    argmin_score,
    // the AVX2 kernel: 256-bit shuffles are what its lookups need
    fs_below: super::avx2::fs_below,
    fs_below_many: super::avx2::fs_below_many,
    pq4_lut: super::avx2::pq4_lut,
};

/// `AVX512_VNNI` with the query tiles scored by AMX (`l2_u8_tile_below_amx`), for CPUs with
/// AMX-INT8 whose OS lets this process use the tile registers.
pub static AVX512_AMX: Kernels = Kernels {
    level: SimdLevel::Avx512Amx,
    name: "avx512+vnni+amx",
    l2_u8_tile_below: l2_u8_tile_below_amx,
    tile_min_queries: 2,
    l2_u8_tile_all: l2_u8_tile_all_amx,
    tile_all_fast: true,
    ..AVX512_VNNI
};

pub static AVX512_VNNI: Kernels = Kernels {
    level: SimdLevel::Avx512Vnni,
    name: "avx512+vnni",
    l2_u8: l2_u8_vnni,
    l2_u8_batch: l2_u8_batch_vnni,
    l2_u8_batch_pre: l2_u8_batch_pre_vnni,
    dot_i8_u8_batch: dot_i8_u8_batch_vnni,
    l2_u8_batch_pre_below: l2_u8_batch_pre_below_vnni,
    l2_u8_tile_below: l2_u8_tile_below_vnni,
    // 4, not 12: tiles pay from four queries on VNNI without AMX (benchmarks/HISTORY.md,
    // 2026-12-03 afternoon and 2026-12-05 morning)
    tile_min_queries: 4,
    l2_u8_tile_all: l2_u8_tile_all_vnni,
    route_tile_min: 4,
    ..AVX512
};

#[inline]
fn mask16(n: usize) -> __mmask16 {
    debug_assert!(n < 16);
    ((1u32 << n) - 1) as __mmask16
}

#[inline]
fn mask64(n: usize) -> __mmask64 {
    debug_assert!(n < 64);
    (1u64 << n) - 1
}

// ---------------------------------------------------------------------------------------------
// Loads of 16 lanes as f32 (full, and masked for tails), for each stored element type.

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld_f32(p: *const f32) -> __m512 {
    _mm512_loadu_ps(p)
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ldm_f32(p: *const f32, m: __mmask16) -> __m512 {
    _mm512_maskz_loadu_ps(m, p)
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld_f16(p: *const f16) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ldm_f16(p: *const f16, m: __mmask16) -> __m512 {
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p as *const i16))
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ld_u8(p: *const u8) -> __m512 {
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i)))
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn ldm_u8(p: *const u8, m: __mmask16) -> __m512 {
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(
        m,
        p as *const i8,
    )))
}

/// One accumulation step: acc + (q-x)^2 for l2, acc + q*x for dot.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn term<const L2: bool>(q: __m512, x: __m512, acc: __m512) -> __m512 {
    if L2 {
        let d = _mm512_sub_ps(q, x);
        _mm512_fmadd_ps(d, d, acc)
    } else {
        _mm512_fmadd_ps(q, x, acc)
    }
}

/// The sum of the low and high 256-bit halves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn half_ps(v: __m512) -> __m256 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    _mm256_add_ps(_mm512_castps512_ps256(v), hi)
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn half_epi32(v: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
}

/// Horizontal sums of four vectors: lane i of the result is the sum of the i-th argument.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn hsum4_ps(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    let ab = _mm256_hadd_ps(half_ps(a), half_ps(b));
    let cd = _mm256_hadd_ps(half_ps(c), half_ps(d));
    let abcd = _mm256_hadd_ps(ab, cd);
    _mm_add_ps(
        _mm256_castps256_ps128(abcd),
        _mm256_extractf128_ps::<1>(abcd),
    )
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn hsum4_epi32(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m128i {
    let ab = _mm256_hadd_epi32(half_epi32(a), half_epi32(b));
    let cd = _mm256_hadd_epi32(half_epi32(c), half_epi32(d));
    let abcd = _mm256_hadd_epi32(ab, cd);
    _mm_add_epi32(
        _mm256_castsi256_si128(abcd),
        _mm256_extracti128_si256::<1>(abcd),
    )
}

/// Horizontal sums of sixteen f32 vectors: lane i of the result is the sum of `v[i]` (the
/// same three rounds as `hsum16_epi32`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn hsum16_ps(v: &[__m512; 16]) -> __m512 {
    let mut p = [_mm512_setzero_ps(); 8];
    for (j, pj) in p.iter_mut().enumerate() {
        let (a, b) = (v[2 * j], v[2 * j + 1]);
        *pj = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    let mut w = [_mm512_setzero_ps(); 4];
    for (j, wj) in w.iter_mut().enumerate() {
        let (a, b) = (_mm512_castps_pd(p[2 * j]), _mm512_castps_pd(p[2 * j + 1]));
        *wj = _mm512_add_ps(
            _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
            _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
        );
    }
    let u01 = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(w[0], w[1]),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(w[0], w[1]),
    );
    let u23 = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(w[2], w[3]),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(w[2], w[3]),
    );
    _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(u01, u23),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(u01, u23),
    )
}

/// Horizontal sums of sixteen vectors: lane i of the result is the sum of `v[i]`. Three
/// rounds of pairwise combining (32-bit, 64-bit, then 128-bit lanes), 45 instructions for
/// sixteen sums.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn hsum16_epi32(v: &[__m512i; 16]) -> __m512i {
    // Round 1: rows (2j, 2j+1) -> per 128-bit lane [a, b, a, b] partial sums.
    let mut p = [_mm512_setzero_si512(); 8];
    for (j, pj) in p.iter_mut().enumerate() {
        let (a, b) = (v[2 * j], v[2 * j + 1]);
        *pj = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    }
    // Round 2: -> per 128-bit lane [a, b, c, d] for rows 4j..4j+3.
    let mut w = [_mm512_setzero_si512(); 4];
    for (j, wj) in w.iter_mut().enumerate() {
        let (a, b) = (p[2 * j], p[2 * j + 1]);
        *wj = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }
    // Round 3: sum the four 128-bit lanes of each w[j] into 128-bit lane j of the result.
    let u01 = _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(w[0], w[1]),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(w[0], w[1]),
    );
    let u23 = _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(w[2], w[3]),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(w[2], w[3]),
    );
    _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(u01, u23),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(u01, u23),
    )
}

// ---------------------------------------------------------------------------------------------
// f32 query against f32 / f16 / u8 rows.

macro_rules! f32_query {
    ($single:ident, $batch:ident, $t:ty, $ld:ident, $ldm:ident, $l2:expr, $block16:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn $single(q: &[f32], x: &[$t]) -> f32 {
            let n = q.len();
            let (qp, xp) = (q.as_ptr(), x.as_ptr());
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i + 64 <= n {
                for (k, a) in acc.iter_mut().enumerate() {
                    let o = i + 16 * k;
                    *a = term::<{ $l2 }>(_mm512_loadu_ps(qp.add(o)), $ld(xp.add(o)), *a);
                }
                i += 64;
            }
            while i + 16 <= n {
                acc[1] = term::<{ $l2 }>(_mm512_loadu_ps(qp.add(i)), $ld(xp.add(i)), acc[1]);
                i += 16;
            }
            if i < n {
                let m = mask16(n - i);
                acc[2] = term::<{ $l2 }>(ldm_f32(qp.add(i), m), $ldm(xp.add(i), m), acc[2]);
            }
            let v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            _mm512_reduce_add_ps(v)
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn $batch(q: &[f32], rows: &[$t], out: &mut [f32]) {
            let n = q.len();
            let qp = q.as_ptr();
            let main = n & !15;
            let nrows = out.len();
            let tail = (main < n).then(|| mask16(n - main));
            let mut r = 0;
            // Sixteen rows at a time: each query chunk is loaded once for sixteen FMAs, and
            // one transposing reduction yields the sixteen results in one vector. (Off for l2
            // over f16 rows, where it does not pay: benchmarks/results/kernels.md.)
            while $block16 && r + 16 <= nrows {
                let xp = rows.as_ptr().add(r * n);
                let mut a = [_mm512_setzero_ps(); 16];
                let mut i = 0;
                while i < main {
                    let qv = _mm512_loadu_ps(qp.add(i));
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc = term::<{ $l2 }>(qv, $ld(xp.add(k * n + i)), *acc);
                    }
                    i += 16;
                }
                if let Some(m) = tail {
                    let qv = ldm_f32(qp.add(main), m);
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc = term::<{ $l2 }>(qv, $ldm(xp.add(k * n + main), m), *acc);
                    }
                }
                _mm512_storeu_ps(out.as_mut_ptr().add(r), hsum16_ps(&a));
                r += 16;
            }
            // Then four at a time: four independent chains still hide the FMA latency.
            while r + 4 <= nrows {
                let xp = rows.as_ptr().add(r * n);
                let mut a = [_mm512_setzero_ps(); 4];
                let mut i = 0;
                while i < main {
                    let qv = _mm512_loadu_ps(qp.add(i));
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc = term::<{ $l2 }>(qv, $ld(xp.add(k * n + i)), *acc);
                    }
                    i += 16;
                }
                if let Some(m) = tail {
                    let qv = ldm_f32(qp.add(main), m);
                    for (k, acc) in a.iter_mut().enumerate() {
                        *acc = term::<{ $l2 }>(qv, $ldm(xp.add(k * n + main), m), *acc);
                    }
                }
                _mm_storeu_ps(out.as_mut_ptr().add(r), hsum4_ps(a[0], a[1], a[2], a[3]));
                r += 4;
            }
            while r < nrows {
                out[r] = $single(q, &rows[r * n..(r + 1) * n]);
                r += 1;
            }
        }
    };
}

// (single, batch, element, load, masked load, l2?, 16-row blocks?)
f32_query!(
    l2_f32_impl,
    l2_f32_batch_impl,
    f32,
    ld_f32,
    ldm_f32,
    true,
    true
);
f32_query!(
    dot_f32_impl,
    dot_f32_batch_impl,
    f32,
    ld_f32,
    ldm_f32,
    false,
    true
);
f32_query!(
    l2_f32_f16_impl,
    l2_f32_f16_batch_impl,
    f16,
    ld_f16,
    ldm_f16,
    true,
    false
);
f32_query!(
    dot_f32_f16_impl,
    dot_f32_f16_batch_impl,
    f16,
    ld_f16,
    ldm_f16,
    false,
    true
);
f32_query!(
    dot_f32_u8_impl,
    dot_f32_u8_batch_impl,
    u8,
    ld_u8,
    ldm_u8,
    false,
    true
);

// ---------------------------------------------------------------------------------------------
// u8 l2: |a-b| per byte (two saturating subtractions), widened to i16 by unpacking with zero
// (lane order is irrelevant to a sum), squared and summed in pairs into i32 lanes, by
// vpmaddwd + vpaddd or by VNNI's fused vpdpwssd. All sums are modulo 2^32, so the result
// equals the scalar twin's u32 sum exactly whenever that fits in u32 (any dim below 66051).

macro_rules! l2_u8_kernels {
    ($single:ident, $batch:ident, $step:ident, $step1:ident, $feat:literal) => {
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn $single(a: &[u8], b: &[u8]) -> u32 {
            let n = a.len();
            let (ap, bp) = (a.as_ptr() as *const i8, b.as_ptr() as *const i8);
            let (mut lo, mut hi) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            let mut i = 0;
            while i + 64 <= n {
                (lo, hi) = $step(
                    _mm512_loadu_si512(ap.add(i) as _),
                    _mm512_loadu_si512(bp.add(i) as _),
                    lo,
                    hi,
                );
                i += 64;
            }
            if i < n {
                let m = mask64(n - i);
                (lo, hi) = $step(
                    _mm512_maskz_loadu_epi8(m, ap.add(i)),
                    _mm512_maskz_loadu_epi8(m, bp.add(i)),
                    lo,
                    hi,
                );
            }
            _mm512_reduce_add_epi32(_mm512_add_epi32(lo, hi)) as u32
        }

        #[target_feature(enable = $feat)]
        unsafe fn $batch(q: &[u8], rows: &[u8], out: &mut [u32]) {
            let n = q.len();
            let qp = q.as_ptr() as *const i8;
            let main = n & !63;
            let nrows = out.len();
            let tail = (main < n).then(|| mask64(n - main));
            let mut r = 0;
            // Sixteen rows at a time, one accumulator each, one transposing reduction.
            while r + 16 <= nrows {
                let xp = rows.as_ptr().add(r * n) as *const i8;
                let mut acc = [_mm512_setzero_si512(); 16];
                let mut i = 0;
                while i < main {
                    let qv = _mm512_loadu_si512(qp.add(i) as _);
                    for (k, a) in acc.iter_mut().enumerate() {
                        *a = $step1(qv, _mm512_loadu_si512(xp.add(k * n + i) as _), *a);
                    }
                    i += 64;
                }
                if let Some(m) = tail {
                    let qv = _mm512_maskz_loadu_epi8(m, qp.add(main));
                    for (k, a) in acc.iter_mut().enumerate() {
                        *a = $step1(qv, _mm512_maskz_loadu_epi8(m, xp.add(k * n + main)), *a);
                    }
                }
                _mm512_storeu_si512(out.as_mut_ptr().add(r) as _, hsum16_epi32(&acc));
                r += 16;
            }
            while r + 4 <= nrows {
                let xp = rows.as_ptr().add(r * n) as *const i8;
                let mut lo = [_mm512_setzero_si512(); 4];
                let mut hi = [_mm512_setzero_si512(); 4];
                let mut i = 0;
                while i < main {
                    let qv = _mm512_loadu_si512(qp.add(i) as _);
                    for k in 0..4 {
                        let xv = _mm512_loadu_si512(xp.add(k * n + i) as _);
                        (lo[k], hi[k]) = $step(qv, xv, lo[k], hi[k]);
                    }
                    i += 64;
                }
                if let Some(m) = tail {
                    let qv = _mm512_maskz_loadu_epi8(m, qp.add(main));
                    for k in 0..4 {
                        let xv = _mm512_maskz_loadu_epi8(m, xp.add(k * n + main));
                        (lo[k], hi[k]) = $step(qv, xv, lo[k], hi[k]);
                    }
                }
                let s = hsum4_epi32(
                    _mm512_add_epi32(lo[0], hi[0]),
                    _mm512_add_epi32(lo[1], hi[1]),
                    _mm512_add_epi32(lo[2], hi[2]),
                    _mm512_add_epi32(lo[3], hi[3]),
                );
                _mm_storeu_si128(out.as_mut_ptr().add(r) as *mut __m128i, s);
                r += 4;
            }
            while r < nrows {
                out[r] = $single(q, &rows[r * n..(r + 1) * n]);
                r += 1;
            }
        }
    };
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn absdiff_widen(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    let d = _mm512_or_si512(_mm512_subs_epu8(a, b), _mm512_subs_epu8(b, a));
    // even bytes by a mask, odd bytes by a shift: measured faster than unpacks with madd
    (
        _mm512_and_si512(d, _mm512_set1_epi16(0x00FF)),
        _mm512_srli_epi16::<8>(d),
    )
}

/// As `absdiff_widen`, by unpacking with zero: measured faster with vpdpwssd (VNNI).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn absdiff_unpack(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    let d = _mm512_or_si512(_mm512_subs_epu8(a, b), _mm512_subs_epu8(b, a));
    let z = _mm512_setzero_si512();
    (_mm512_unpacklo_epi8(d, z), _mm512_unpackhi_epi8(d, z))
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn step_madd(a: __m512i, b: __m512i, lo: __m512i, hi: __m512i) -> (__m512i, __m512i) {
    let (dl, dh) = absdiff_widen(a, b);
    (
        _mm512_add_epi32(lo, _mm512_madd_epi16(dl, dl)),
        _mm512_add_epi32(hi, _mm512_madd_epi16(dh, dh)),
    )
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn step_vnni(a: __m512i, b: __m512i, lo: __m512i, hi: __m512i) -> (__m512i, __m512i) {
    let (dl, dh) = absdiff_unpack(a, b);
    (
        _mm512_dpwssd_epi32(lo, dl, dl),
        _mm512_dpwssd_epi32(hi, dh, dh),
    )
}

/// One accumulator per row: acc + sum of squared differences (lanes of pairs).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn step1_madd(a: __m512i, b: __m512i, acc: __m512i) -> __m512i {
    let (dl, dh) = absdiff_widen(a, b);
    _mm512_add_epi32(
        acc,
        _mm512_add_epi32(_mm512_madd_epi16(dl, dl), _mm512_madd_epi16(dh, dh)),
    )
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn step1_vnni(a: __m512i, b: __m512i, acc: __m512i) -> __m512i {
    let (dl, dh) = absdiff_unpack(a, b);
    _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(acc, dl, dl), dh, dh)
}

l2_u8_kernels!(
    l2_u8_madd_impl,
    l2_u8_batch_madd_impl,
    step_madd,
    step1_madd,
    "avx512f,avx512bw,avx512vl"
);
l2_u8_kernels!(
    l2_u8_vnni_impl,
    l2_u8_batch_vnni_impl,
    step_vnni,
    step1_vnni,
    "avx512f,avx512bw,avx512vl,avx512vnni"
);

// ---------------------------------------------------------------------------------------------
// Integer dot products with VNNI: per 64 dims one vpdpbusd (row bytes unsigned, query bytes
// signed, four products summed into each i32 lane). `dots_vnni` serves both
/// `scalar::argmin_score` compiled for AVX-512 (one 16-lane compare and two blends a step).
#[target_feature(enable = "avx512f")]
unsafe fn argmin_score_impl(dots: &[f32], norms: &[f32], ip: bool) -> (u32, f32) {
    super::scalar::argmin_score(dots, norms, ip)
}

fn argmin_score(dots: &[f32], norms: &[f32], ip: bool) -> (u32, f32) {
    // SAFETY: this table is only handed out when the CPU has AVX-512F (kernels_for).
    unsafe { argmin_score_impl(dots, norms, ip) }
}

// `dot_i8_u8_batch` (query already i8) and `l2_u8_batch_pre` (u8 query shifted to i8:
// q - 128 == q ^ 0x80, see `Kernels::l2_u8_batch_pre`).

use super::sq_norm;

/// The dot of one row with the query bytes xor `flip`, taken as i8.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_vnni(q: &[u8], flip: i8, x: &[u8]) -> i32 {
    let n = q.len();
    let (qp, xp) = (q.as_ptr() as *const i8, x.as_ptr() as *const i8);
    let off = _mm512_set1_epi8(flip);
    let mut acc = _mm512_setzero_si512();
    let mut i = 0;
    while i + 64 <= n {
        let qv = _mm512_xor_si512(_mm512_loadu_si512(qp.add(i) as _), off);
        acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(xp.add(i) as _), qv);
        i += 64;
    }
    if i < n {
        // masked-off lanes: x = 0, so their products vanish whatever the query byte is
        let m = mask64(n - i);
        let qv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, qp.add(i)), off);
        acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_loadu_epi8(m, xp.add(i)), qv);
    }
    _mm512_reduce_add_epi32(acc)
}

/// The dot accumulators of `R` consecutive rows of `n` bytes at `xp` against the query bytes at
/// `qp` xor `off`: `main` bytes in full 64-byte loads, the rest (if any) through the `tail` mask.
/// Lane sums are left to the caller, which reduces all `R` at once.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dpbusd_rows<const R: usize>(
    qp: *const i8,
    off: __m512i,
    xp: *const i8,
    n: usize,
    main: usize,
    tail: Option<__mmask64>,
) -> [__m512i; R] {
    let mut acc = [_mm512_setzero_si512(); R];
    let mut i = 0;
    while i < main {
        let qv = _mm512_xor_si512(_mm512_loadu_si512(qp.add(i) as _), off);
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm512_dpbusd_epi32(*a, _mm512_loadu_si512(xp.add(k * n + i) as _), qv);
        }
        i += 64;
    }
    if let Some(m) = tail {
        let qv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, qp.add(main)), off);
        for (k, a) in acc.iter_mut().enumerate() {
            let xv = _mm512_maskz_loadu_epi8(m, xp.add(k * n + main));
            *a = _mm512_dpbusd_epi32(*a, xv, qv);
        }
    }
    acc
}

/// `out[r]` = the dot of row r with the query bytes xor `flip`, taken as i8; or, with `PRE`,
/// `qn + terms[r] - 2 * dot` (the rewritten l2, modulo 2^32), folded into the stores.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dots_vnni<const PRE: bool>(
    q: &[u8],
    flip: i8,
    rows: &[u8],
    terms: &[i32],
    qn: u32,
    out: &mut [i32],
) {
    let n = q.len();
    let qp = q.as_ptr() as *const i8;
    let off = _mm512_set1_epi8(flip);
    let main = n & !63;
    let nrows = out.len();
    let tail = (main < n).then(|| mask64(n - main));
    let mut r = 0;
    // Sixteen rows at a time: one transposing reduction yields their sixteen dots in one
    // vector, which costs far less per row than reducing each accumulator alone (at dim 128
    // a row is only two vpdpbusd, so the reduction is most of the work).
    while r + 16 <= nrows {
        let acc = dpbusd_rows::<16>(
            qp,
            off,
            rows.as_ptr().add(r * n) as *const i8,
            n,
            main,
            tail,
        );
        let mut v = hsum16_epi32(&acc);
        if PRE {
            let t = _mm512_loadu_si512(terms.as_ptr().add(r) as _);
            let base = _mm512_add_epi32(_mm512_set1_epi32(qn as i32), t);
            v = _mm512_sub_epi32(base, _mm512_slli_epi32::<1>(v));
        }
        _mm512_storeu_si512(out.as_mut_ptr().add(r) as _, v);
        r += 16;
    }
    while r + 4 <= nrows {
        let acc = dpbusd_rows::<4>(
            qp,
            off,
            rows.as_ptr().add(r * n) as *const i8,
            n,
            main,
            tail,
        );
        let mut v = hsum4_epi32(acc[0], acc[1], acc[2], acc[3]);
        if PRE {
            let t = _mm_loadu_si128(terms.as_ptr().add(r) as *const __m128i);
            let base = _mm_add_epi32(_mm_set1_epi32(qn as i32), t);
            v = _mm_sub_epi32(base, _mm_slli_epi32::<1>(v));
        }
        _mm_storeu_si128(out.as_mut_ptr().add(r) as *mut __m128i, v);
        r += 4;
    }
    while r < nrows {
        let dot = dot_vnni(q, flip, &rows[r * n..(r + 1) * n]);
        out[r] = if PRE {
            finish_pre(qn, terms[r], dot) as i32
        } else {
            dot
        };
        r += 1;
    }
}

/// sum(q^2) + term - 2 * dot, modulo 2^32: exact whenever the distance fits in u32.
#[inline]
fn finish_pre(qn: u32, term: i32, dot: i32) -> u32 {
    qn.wrapping_add(term as u32)
        .wrapping_sub((dot as u32).wrapping_mul(2))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn l2_u8_batch_pre_vnni_impl(q: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    let qn = sq_norm(q);
    dots_vnni::<true>(q, -128, rows, terms, qn, bytemuck::cast_slice_mut(out));
}

fn dot_i8_u8_batch_vnni(q: &[i8], rows: &[u8], out: &mut [i32]) {
    check_batch(q.len(), rows.len(), out.len());
    // SAFETY: lengths checked above; AVX512_VNNI is only handed out after
    // is_x86_feature_detected! confirmed avx512f/bw/vl and avx512vnni (kernels::kernels_for).
    unsafe { dots_vnni::<false>(bytemuck::cast_slice(q), 0, rows, &[], 0, out) }
}

fn l2_u8_batch_pre_vnni(q: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    check_batch(q.len(), rows.len(), out.len());
    assert_eq!(
        terms.len(),
        out.len(),
        "{} row terms for {} rows",
        terms.len(),
        out.len()
    );
    // SAFETY: lengths checked above; AVX512_VNNI is only handed out after
    // is_x86_feature_detected! confirmed avx512f/bw/vl and avx512vnni (kernels::kernels_for).
    unsafe { l2_u8_batch_pre_vnni_impl(q, rows, terms, out) }
}

/// `l2_u8_batch_pre_below`: sixteen rows at a time as in `dots_vnni`, their distances
/// converted to f32 and compared with `thr` in one vector, and only the rows that pass packed
/// (`vpcompressd` in a register, then a masked store: the memory form is slow on Zen 4) to
/// `pos` / `dist`. The last `nrows % 16` rows go through `dots_vnni` and the scalar test.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn l2_u8_batch_pre_below_impl(
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    let n = q.len();
    let qn = sq_norm(q);
    let qp = q.as_ptr() as *const i8;
    let off = _mm512_set1_epi8(-128);
    let main = n & !63;
    let nrows = terms.len();
    let tail = (main < n).then(|| mask64(n - main));
    let thr_v = _mm512_set1_ps(thr);
    let qn_v = _mm512_set1_epi32(qn as i32);
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let (pp, dp) = (pos.as_mut_ptr() as *mut i32, dist.as_mut_ptr() as *mut i32);
    let mut cnt = 0usize;
    let mut r = 0;
    while r + 16 <= nrows {
        let acc = dpbusd_rows::<16>(
            qp,
            off,
            rows.as_ptr().add(r * n) as *const i8,
            n,
            main,
            tail,
        );
        let v = hsum16_epi32(&acc);
        let t = _mm512_loadu_si512(terms.as_ptr().add(r) as _);
        let d = _mm512_sub_epi32(_mm512_add_epi32(qn_v, t), _mm512_slli_epi32::<1>(v));
        let m = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(_mm512_cvtepu32_ps(d), thr_v);
        if m != 0 {
            let c = m.count_ones() as usize;
            let keep = ((1u32 << c) - 1) as __mmask16;
            let at = _mm512_add_epi32(_mm512_set1_epi32(r as i32), iota);
            _mm512_mask_storeu_epi32(dp.add(cnt), keep, _mm512_maskz_compress_epi32(m, d));
            _mm512_mask_storeu_epi32(pp.add(cnt), keep, _mm512_maskz_compress_epi32(m, at));
            cnt += c;
        }
        r += 16;
    }
    if r < nrows {
        let mut buf = [0i32; 16];
        let left = nrows - r;
        dots_vnni::<true>(q, -128, &rows[r * n..], &terms[r..], qn, &mut buf[..left]);
        for (j, &d) in buf[..left].iter().enumerate() {
            let d = d as u32;
            if d as f32 <= thr {
                pos[cnt] = (r + j) as u32;
                dist[cnt] = d;
                cnt += 1;
            }
        }
    }
    cnt
}

fn l2_u8_batch_pre_below_vnni(
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    super::check_below(q.len(), rows.len(), terms.len(), pos.len(), dist.len());
    // SAFETY: lengths checked above (rows = dim x terms, both outputs hold a value per row,
    // and the packed stores never pass the count of rows); AVX512_VNNI is only handed out
    // after is_x86_feature_detected! confirmed avx512f/bw/vl and avx512vnni.
    unsafe { l2_u8_batch_pre_below_impl(q, rows, terms, thr, pos, dist) }
}

// ---------------------------------------------------------------------------------------------
// Conversions (round to nearest even, as `half`).

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn f32_to_f16_impl(src: &[f32], dst: &mut [f16]) {
    const R: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    let n = src.len();
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i + 16 <= n {
        let h = _mm512_cvtps_ph::<R>(_mm512_loadu_ps(s.add(i)));
        _mm256_storeu_si256(d.add(i) as *mut __m256i, h);
        i += 16;
    }
    if i < n {
        let m = mask16(n - i);
        let h = _mm512_cvtps_ph::<R>(_mm512_maskz_loadu_ps(m, s.add(i)));
        _mm256_mask_storeu_epi16(d.add(i) as *mut i16, m, h);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn f16_to_f32_impl(src: &[f16], dst: &mut [f32]) {
    let n = src.len();
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i + 16 <= n {
        _mm512_storeu_ps(d.add(i), ld_f16(s.add(i)));
        i += 16;
    }
    if i < n {
        let m = mask16(n - i);
        _mm512_mask_storeu_ps(d.add(i), m, ldm_f16(s.add(i), m));
    }
}

// ---------------------------------------------------------------------------------------------
// Safe wrappers: the length checks keep every (unmasked) pointer read above inside its slice.

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

macro_rules! wrap {
    (pair $name:ident, $imp:ident, $a:ty, $b:ty, $r:ty) => {
        fn $name(a: &[$a], b: &[$b]) -> $r {
            check_pair(a.len(), b.len());
            // SAFETY: lengths checked above; the tables holding this wrapper are only handed
            // out after is_x86_feature_detected! confirmed every feature $imp enables
            // (kernels::kernels_for / available_tables).
            unsafe { $imp(a, b) }
        }
    };
    (batch $name:ident, $imp:ident, $a:ty, $b:ty, $r:ty) => {
        fn $name(q: &[$a], rows: &[$b], out: &mut [$r]) {
            check_batch(q.len(), rows.len(), out.len());
            // SAFETY: lengths checked above; the tables holding this wrapper are only handed
            // out after is_x86_feature_detected! confirmed every feature $imp enables
            // (kernels::kernels_for / available_tables).
            unsafe { $imp(q, rows, out) }
        }
    };
}

wrap!(pair l2_f32, l2_f32_impl, f32, f32, f32);
wrap!(pair dot_f32, dot_f32_impl, f32, f32, f32);
wrap!(pair l2_f32_f16, l2_f32_f16_impl, f32, f16, f32);
wrap!(pair dot_f32_f16, dot_f32_f16_impl, f32, f16, f32);
wrap!(pair l2_u8_madd, l2_u8_madd_impl, u8, u8, u32);
wrap!(pair l2_u8_vnni, l2_u8_vnni_impl, u8, u8, u32);
wrap!(pair dot_f32_u8, dot_f32_u8_impl, f32, u8, f32);
wrap!(batch l2_f32_batch, l2_f32_batch_impl, f32, f32, f32);
wrap!(batch dot_f32_batch, dot_f32_batch_impl, f32, f32, f32);
wrap!(batch l2_f32_f16_batch, l2_f32_f16_batch_impl, f32, f16, f32);
wrap!(batch dot_f32_f16_batch, dot_f32_f16_batch_impl, f32, f16, f32);
wrap!(batch l2_u8_batch_madd, l2_u8_batch_madd_impl, u8, u8, u32);
wrap!(batch l2_u8_batch_vnni, l2_u8_batch_vnni_impl, u8, u8, u32);
wrap!(batch dot_f32_u8_batch, dot_f32_u8_batch_impl, f32, u8, f32);

fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    check_pair(src.len(), dst.len());
    // SAFETY: lengths checked; the table is handed out only after the feature check.
    unsafe { f32_to_f16_impl(src, dst) }
}

fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    check_pair(src.len(), dst.len());
    // SAFETY: lengths checked; the table is handed out only after the feature check.
    unsafe { f16_to_f32_impl(src, dst) }
}
