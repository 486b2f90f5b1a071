//! `last_search_stats()` as a Python dict.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use vdb_core::SearchStats;

pub fn to_dict<'py>(py: Python<'py>, s: &SearchStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, v) in s.fields() {
        if name.ends_with("_s") {
            d.set_item(name, v)?;
        } else {
            d.set_item(name, v as u64)?;
        }
    }
    Ok(d)
}
