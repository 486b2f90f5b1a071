//! Scalar twins of every kernel: the reference for the SIMD paths, and the fallback.

use half::f16;

pub fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn l2_f32_f16(q: &[f32], x: &[f16]) -> f32 {
    debug_assert_eq!(q.len(), x.len());
    q.iter()
        .zip(x)
        .map(|(a, b)| {
            let d = a - b.to_f32();
            d * d
        })
        .sum()
}

pub fn dot_f32_f16(q: &[f32], x: &[f16]) -> f32 {
    debug_assert_eq!(q.len(), x.len());
    q.iter().zip(x).map(|(a, b)| a * b.to_f32()).sum()
}

pub fn l2_u8(a: &[u8], b: &[u8]) -> u32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = x as i32 - y as i32;
            (d * d) as u32
        })
        .sum()
}

pub fn dot_f32_u8(q: &[f32], c: &[u8]) -> f32 {
    debug_assert_eq!(q.len(), c.len());
    q.iter().zip(c).map(|(a, &b)| a * b as f32).sum()
}

fn batch<T, R>(q: &[T], rows: &[impl Copy], out: &mut [R], f: impl Fn(&[T], usize) -> R) {
    let dim = q.len();
    debug_assert_eq!(rows.len(), dim * out.len());
    for (i, o) in out.iter_mut().enumerate() {
        *o = f(q, i * dim);
    }
}

pub fn l2_f32_batch(q: &[f32], rows: &[f32], out: &mut [f32]) {
    batch(q, rows, out, |q, off| l2_f32(q, &rows[off..off + q.len()]))
}

pub fn dot_f32_batch(q: &[f32], rows: &[f32], out: &mut [f32]) {
    batch(q, rows, out, |q, off| dot_f32(q, &rows[off..off + q.len()]))
}

pub fn l2_f32_f16_batch(q: &[f32], rows: &[f16], out: &mut [f32]) {
    batch(q, rows, out, |q, off| {
        l2_f32_f16(q, &rows[off..off + q.len()])
    })
}

pub fn dot_f32_f16_batch(q: &[f32], rows: &[f16], out: &mut [f32]) {
    batch(q, rows, out, |q, off| {
        dot_f32_f16(q, &rows[off..off + q.len()])
    })
}

pub fn l2_u8_batch(q: &[u8], rows: &[u8], out: &mut [u32]) {
    batch(q, rows, out, |q, off| l2_u8(q, &rows[off..off + q.len()]))
}

pub fn u8_row_term(x: &[u8]) -> i32 {
    x.iter().map(|&v| v as i32 * (v as i32 - 256)).sum()
}

/// The reference of the rewritten form the VNNI kernel uses (see `Kernels::l2_u8_batch_pre`),
/// in wrapping u32 arithmetic: exact whenever the true distance fits in u32.
pub fn l2_u8_batch_pre(q: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    let dim = q.len();
    assert_eq!(
        rows.len(),
        dim * out.len(),
        "batch rows hold {} values, expected dim {dim} x {} rows",
        rows.len(),
        out.len()
    );
    assert_eq!(
        terms.len(),
        out.len(),
        "{} row terms for {} rows",
        terms.len(),
        out.len()
    );
    let qn: u32 = q.iter().map(|&v| v as u32 * v as u32).sum();
    for (r, o) in out.iter_mut().enumerate() {
        let x = &rows[r * dim..(r + 1) * dim];
        let dot: i64 = q
            .iter()
            .zip(x)
            .map(|(&a, &b)| (a as i64 - 128) * b as i64)
            .sum();
        *o = qn
            .wrapping_add(terms[r] as u32)
            .wrapping_sub((dot as u32).wrapping_mul(2));
    }
}

/// `l2_u8_batch_pre` keeping the rows whose distance as f32 is at most `thr` (see
/// `Kernels::l2_u8_batch_pre_below`).
pub fn l2_u8_batch_pre_below(
    q: &[u8],
    rows: &[u8],
    terms: &[i32],
    thr: f32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    super::pre_below_via(l2_u8_batch_pre, q, rows, terms, thr, pos, dist)
}

/// `Kernels::fs_below`: each row's table sum, taken as the SIMD tables take it (the two
/// entries of a byte of codes added in u8, those sums in u16, both wrapping).
pub fn fs_below(
    packed: &[u8],
    n: usize,
    lut: &[u8],
    thr: u32,
    pos: &mut [u32],
    dist: &mut [u32],
) -> usize {
    super::check_fs(packed.len(), n, lut.len(), pos.len(), dist.len());
    const B: usize = crate::pq4::FS_BLOCK;
    let quads = lut.len() / 64;
    let mut c = 0;
    for r in 0..n {
        let blk = &packed[(r / B) * quads * B..];
        let mut d = 0u16;
        for p in 0..quads {
            let byte = blk[p * B + r % B];
            let lo = lut[(2 * p) * 32 + (byte & 15) as usize];
            let hi = lut[(2 * p + 1) * 32 + (byte >> 4) as usize];
            d = d.wrapping_add(lo.wrapping_add(hi) as u16);
        }
        if d as u32 <= thr {
            pos[c] = r as u32;
            dist[c] = d as u32;
            c += 1;
        }
    }
    c
}

/// `Kernels::fs_below_many`: `fs_below` for each query in turn.
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
    for (g, (lut, &thr)) in luts.iter().zip(thrs).enumerate() {
        let (p, d) = (&mut pos[g * n..(g + 1) * n], &mut dist[g * n..(g + 1) * n]);
        counts[g] = fs_below(packed, n, lut, thr, p, d);
    }
}

/// `l2_u8_batch_pre` for each query of a tile in turn (see `Kernels::l2_u8_tile_below`).
#[allow(clippy::too_many_arguments)]
pub fn l2_u8_tile_below(
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
    let pre = l2_u8_batch_pre;
    super::tile_below_via(
        pre, qs, rows, terms, tail_rows, tail_terms, thrs, pos, dist, counts,
    )
}

/// `l2_u8_batch_pre` for each query of a tile in turn (see `Kernels::l2_u8_tile_all`).
pub fn l2_u8_tile_all(qs: &[u8], rows: &[u8], terms: &[i32], out: &mut [u32]) {
    super::tile_all_via(l2_u8_batch_pre, qs, rows, terms, out)
}

pub fn dot_i8_u8_batch(q: &[i8], rows: &[u8], out: &mut [i32]) {
    batch(q, rows, out, |q, off| {
        let x = &rows[off..off + q.len()];
        q.iter().zip(x).map(|(&a, &b)| a as i32 * b as i32).sum()
    })
}

pub fn dot_f32_u8_batch(q: &[f32], rows: &[u8], out: &mut [f32]) {
    batch(q, rows, out, |q, off| {
        dot_f32_u8(q, &rows[off..off + q.len()])
    })
}

pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    assert_eq!(src.len(), dst.len(), "conversion operands differ in length");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f16::from_f32(*s);
    }
}

pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "conversion operands differ in length");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

/// The first smallest routing score over `dots` (inner products with the centroids) and its
/// position: score = -dot (`ip`) or norms[j] - 2 dot (l2). Same answer as a plain scan with
/// `<` (ties to the first; 0 when no score is below +inf). Always inlined, so the SIMD tables
/// compile it for their level by calling it from a `target_feature` function.
#[inline(always)]
pub fn argmin_score(dots: &[f32], norms: &[f32], ip: bool) -> (u32, f32) {
    if ip {
        argmin_body::<true>(dots, norms)
    } else {
        argmin_body::<false>(dots, norms)
    }
}

/// `argmin_score` in 16 independent lanes: branch-free, so the compiler vectorises it at
/// whatever level the calling function was compiled for (the branchy scan was 20% of k-means
/// training at 100k).
#[inline(always)]
fn argmin_body<const IP: bool>(dots: &[f32], norms: &[f32]) -> (u32, f32) {
    const LANES: usize = 16;
    debug_assert_eq!(dots.len(), norms.len());
    let score = |d: f32, c: f32| if IP { -d } else { c - 2.0 * d };
    let mut bv = [f32::INFINITY; LANES];
    let mut bi = [u32::MAX; LANES];
    let full = dots.len().min(norms.len()) / LANES * LANES;
    for (ci, (d, c)) in dots[..full]
        .chunks_exact(LANES)
        .zip(norms[..full].chunks_exact(LANES))
        .enumerate()
    {
        for l in 0..LANES {
            let s = score(d[l], c[l]);
            let better = s < bv[l];
            bv[l] = if better { s } else { bv[l] };
            bi[l] = if better {
                (ci * LANES + l) as u32
            } else {
                bi[l]
            };
        }
    }
    let (mut best, mut best_s) = (u32::MAX, f32::INFINITY);
    for l in 0..LANES {
        if bv[l] < best_s || (bv[l] == best_s && bi[l] < best) {
            best_s = bv[l];
            best = bi[l];
        }
    }
    for (j, (&d, &c)) in dots.iter().zip(norms).enumerate().skip(full) {
        let s = score(d, c);
        if s < best_s {
            best_s = s;
            best = j as u32;
        }
    }
    if best == u32::MAX {
        best = 0;
    }
    (best, best_s)
}
