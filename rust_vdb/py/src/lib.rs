//! The `vdbbench._rust_vdb` extension module: registers the binding types.

// Every unsafe block says why it is sound (this crate has none today).
#![warn(clippy::undocumented_unsafe_blocks)]

mod arrays;
mod call;
mod defaults;
mod errors;
mod flat;
mod ivf;
mod stats;

use pyo3::prelude::*;
use vdb_core::kernels;

/// The SIMD level searches use now ("scalar", "avx2", "avx512bw", "avx512vnni", "avx512amx", "neon").
#[pyfunction]
fn simd_level() -> &'static str {
    kernels::active_level().name()
}

/// Every SIMD level this CPU can run, scalar first.
#[pyfunction]
fn available_simd_levels() -> Vec<&'static str> {
    kernels::available_levels()
        .into_iter()
        .map(|l| l.name())
        .collect()
}

/// Caps the SIMD level for the whole process (None: back to the detected level under
/// VDBBENCH_SIMD); returns the level now active. For tests and benchmarks.
#[pyfunction]
#[pyo3(signature = (level))]
fn set_simd_level(level: Option<&str>) -> PyResult<&'static str> {
    let cap = match level {
        None => None,
        Some(s) => Some(kernels::level_named(s).ok_or_else(|| {
            errors::invalid(format!(
                "unknown SIMD level {s:?}; expected one of scalar, avx2, avx512bw, avx512vnni, \
                 avx512amx, avx512 (the best AVX-512 level), neon"
            ))
        })?),
    };
    kernels::set_level_cap(cap)
        .map(|l| l.name())
        .map_err(errors::invalid)
}

#[pymodule]
fn _rust_vdb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "__doc__",
        "vdbbench engine (Rust): FlatIndex, IvfIndex, errors, SIMD level, defaults.",
    )?;
    errors::register(m)?;
    m.add_class::<flat::FlatIndex>()?;
    m.add_class::<ivf::IvfIndex>()?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(available_simd_levels, m)?)?;
    m.add_function(wrap_pyfunction!(set_simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::default_nlist, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::check_rerank, m)?)?;
    Ok(())
}
