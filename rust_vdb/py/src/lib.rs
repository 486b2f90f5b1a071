//! The `vdbbench._rust_vdb` extension module: registers the binding types.

// Every unsafe block says why it is sound (this crate has none today).
#![warn(clippy::undocumented_unsafe_blocks)]

mod arrays;
mod call;
mod defaults;
mod errors;
mod flat;
mod ivf;
mod load;
mod serve;
mod stats;

use pyo3::prelude::*;
use vdb_core::{kernels, sharing};

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

/// Whether one query per call shares its lists with helper threads, for the whole process:
/// "auto" (the default: as the machine allows, not beside other processes' work), "always"
/// (whenever a helper is free) or "never". With `policy` None only reads it. Returns the
/// policy now in force.
#[pyfunction]
#[pyo3(signature = (policy=None))]
fn single_query_sharing(policy: Option<&str>) -> PyResult<&'static str> {
    if let Some(p) = policy {
        sharing::set_policy(match p {
            "auto" => sharing::Sharing::Auto,
            "always" => sharing::Sharing::Always,
            "never" => sharing::Sharing::Never,
            _ => {
                return Err(errors::invalid(format!(
                    "unknown sharing policy {p:?}; expected \"auto\", \"always\" or \"never\""
                )))
            }
        });
    }
    Ok(match sharing::policy() {
        sharing::Sharing::Auto => "auto",
        sharing::Sharing::Always => "always",
        sharing::Sharing::Never => "never",
    })
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
        "vdbbench engine (Rust): FlatIndex, IvfIndex, Server (HTTP), errors, SIMD level, defaults.",
    )?;
    errors::register(m)?;
    m.add_class::<flat::FlatIndex>()?;
    m.add_class::<ivf::IvfIndex>()?;
    m.add_class::<load::NullServer>()?;
    m.add_function(wrap_pyfunction!(load::http_bulk_insert, m)?)?;
    m.add_function(wrap_pyfunction!(load::http_query, m)?)?;
    m.add_class::<serve::Server>()?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(available_simd_levels, m)?)?;
    m.add_function(wrap_pyfunction!(set_simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(single_query_sharing, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::default_nlist, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::check_rerank, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::supports_reorder, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::max_threads, m)?)?;
    Ok(())
}
