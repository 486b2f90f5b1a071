//! The engine's defaults and rules for callers that choose parameters before an index exists
//! (the benchmark's sweeps, the faiss peers' nlist): read from `vdb_core`, never copied.

use pyo3::prelude::*;
use vdb_core::{defaults, pool, prefilter_applies, validate, Metric, Storage};

use crate::arrays::count;
use crate::errors::to_py;

/// The nlist an index trained on `n` vectors uses when given none: round(4 sqrt(n)), in 1..=n.
#[pyfunction]
pub fn default_nlist(n: i64) -> PyResult<usize> {
    Ok(defaults::default_nlist(count("n", n, 0)?))
}

/// Raises InvalidInput unless `rerank` is 0 (the u8 results alone) or >= k, as a search would.
#[pyfunction]
pub fn check_rerank(rerank: i64, k: i64) -> PyResult<()> {
    validate::rerank(count("rerank", rerank, 0)?, count("k", k, 1)?).map_err(to_py)
}

/// Whether an index of this dim, metric and storage has the 4-bit prefilter, so that
/// `search(.., reorder=R)` is accepted. Raises InvalidInput for an unknown metric or storage.
#[pyfunction]
pub fn supports_reorder(dim: i64, metric: &str, storage: &str) -> PyResult<bool> {
    let dim = count("dim", dim, 1)?;
    let metric = Metric::parse(metric).map_err(to_py)?;
    let storage = Storage::parse(storage).map_err(to_py)?;
    Ok(prefilter_applies(dim, metric, storage))
}

/// The most threads a call accepts (`threads=`): more is refused with InvalidInput.
#[pyfunction]
pub fn max_threads() -> usize {
    pool::MAX_THREADS
}
