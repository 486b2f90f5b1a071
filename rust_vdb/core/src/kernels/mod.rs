//! Distance kernels: one table of functions per SIMD level, chosen at run time.
//!
//! Every kernel has a scalar twin (`scalar.rs`), the reference the SIMD paths are tested
//! against. The active level is the best the CPU has, capped by the environment variable
//! `VDBBENCH_SIMD=scalar|avx2|avx512|neon` (read on first use) or by `set_level_cap`.
//!
//! Conventions: `l2_*` is the squared Euclidean distance; `dot_*` the inner product. `*_batch`
//! scores one query against `out.len()` contiguous rows of `q.len()` values each.

pub mod scalar;

use half::f16;

/// A SIMD level, ordered from least to most capable on its architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    Scalar,
    Neon,
    Avx2,
    Avx512,
}

impl SimdLevel {
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Neon => "neon",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }

    pub fn parse(s: &str) -> Option<SimdLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(SimdLevel::Scalar),
            "neon" => Some(SimdLevel::Neon),
            "avx2" => Some(SimdLevel::Avx2),
            "avx512" => Some(SimdLevel::Avx512),
            _ => None,
        }
    }
}

/// The kernels of one SIMD level.
pub struct Kernels {
    pub level: SimdLevel,
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
}

pub static SCALAR: Kernels = Kernels {
    level: SimdLevel::Scalar,
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
};

/// The kernel table of `level`, if this CPU supports it.
pub fn kernels_for(level: SimdLevel) -> Option<&'static Kernels> {
    match level {
        SimdLevel::Scalar => Some(&SCALAR),
        _ => None, // SIMD tables: see the architecture modules
    }
}

/// Every level this CPU can run, scalar first.
pub fn available_levels() -> Vec<SimdLevel> {
    [SimdLevel::Scalar, SimdLevel::Neon, SimdLevel::Avx2, SimdLevel::Avx512]
        .into_iter()
        .filter(|l| kernels_for(*l).is_some())
        .collect()
}

/// The table searches use now: the best available level under the cap.
pub fn kernels() -> &'static Kernels {
    &SCALAR
}
