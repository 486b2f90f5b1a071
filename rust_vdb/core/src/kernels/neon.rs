//! NEON kernels (aarch64), the `Neon` table. Parity-tested against the scalar twins under
//! qemu-user emulation (`tests/aarch64-qemu.sh`); never run or timed on aarch64 hardware.
//!
//! Kept minimal on purpose: f32 l2/dot and u8 l2 (and their batches) use NEON; the f16 and
//! f32-u8 kernels, the prescore's batch and tile kernels and the conversions are the scalar
//! twins, so an aarch64 machine runs correct but unoptimized code for most of a search.

use super::{scalar, Kernels, SimdLevel};
use std::arch::aarch64::*;

pub static NEON: Kernels = Kernels {
    level: SimdLevel::Neon,
    name: "neon",
    l2_f32,
    dot_f32,
    l2_u8,
    l2_f32_batch,
    dot_f32_batch,
    l2_u8_batch,
    ..super::SCALAR
};

#[target_feature(enable = "neon")]
unsafe fn f32_impl<const L2: bool>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len();
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    let mut acc0 = vdupq_n_f32(0.0);
    let mut acc1 = vdupq_n_f32(0.0);
    let mut i = 0;
    while i + 8 <= n {
        let (x0, y0) = (vld1q_f32(ap.add(i)), vld1q_f32(bp.add(i)));
        let (x1, y1) = (vld1q_f32(ap.add(i + 4)), vld1q_f32(bp.add(i + 4)));
        if L2 {
            let (d0, d1) = (vsubq_f32(x0, y0), vsubq_f32(x1, y1));
            acc0 = vfmaq_f32(acc0, d0, d0);
            acc1 = vfmaq_f32(acc1, d1, d1);
        } else {
            acc0 = vfmaq_f32(acc0, x0, y0);
            acc1 = vfmaq_f32(acc1, x1, y1);
        }
        i += 8;
    }
    let tail = if L2 {
        scalar::l2_f32(&a[i..], &b[i..])
    } else {
        scalar::dot_f32(&a[i..], &b[i..])
    };
    vaddvq_f32(vaddq_f32(acc0, acc1)) + tail
}

#[target_feature(enable = "neon")]
unsafe fn l2_u8_impl(a: &[u8], b: &[u8]) -> u32 {
    let n = a.len();
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    let mut acc = vdupq_n_u32(0);
    let mut i = 0;
    while i + 16 <= n {
        let d = vabdq_u8(vld1q_u8(ap.add(i)), vld1q_u8(bp.add(i)));
        acc = vpadalq_u16(acc, vmull_u8(vget_low_u8(d), vget_low_u8(d)));
        acc = vpadalq_u16(acc, vmull_high_u8(d, d));
        i += 16;
    }
    vaddvq_u32(acc).wrapping_add(scalar::l2_u8(&a[i..], &b[i..]))
}

fn check_pair(a: usize, b: usize) {
    assert_eq!(a, b, "kernel operands differ in length: {a} vs {b}");
}

fn check_batch(dim: usize, rows: usize, nout: usize) {
    assert_eq!(
        rows,
        dim * nout,
        "batch rows hold {rows} values, expected dim {dim} x {nout} rows"
    );
}

fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
    check_pair(a.len(), b.len());
    // SAFETY: lengths checked; NEON is part of the aarch64 baseline.
    unsafe { f32_impl::<true>(a, b) }
}

fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    check_pair(a.len(), b.len());
    // SAFETY: lengths checked; NEON is part of the aarch64 baseline.
    unsafe { f32_impl::<false>(a, b) }
}

fn l2_u8(a: &[u8], b: &[u8]) -> u32 {
    check_pair(a.len(), b.len());
    // SAFETY: lengths checked; NEON is part of the aarch64 baseline.
    unsafe { l2_u8_impl(a, b) }
}

fn l2_f32_batch(q: &[f32], rows: &[f32], out: &mut [f32]) {
    check_batch(q.len(), rows.len(), out.len());
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len().max(1))) {
        *o = l2_f32(q, row);
    }
}

fn dot_f32_batch(q: &[f32], rows: &[f32], out: &mut [f32]) {
    check_batch(q.len(), rows.len(), out.len());
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len().max(1))) {
        *o = dot_f32(q, row);
    }
}

fn l2_u8_batch(q: &[u8], rows: &[u8], out: &mut [u32]) {
    check_batch(q.len(), rows.len(), out.len());
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len().max(1))) {
        *o = l2_u8(q, row);
    }
}
