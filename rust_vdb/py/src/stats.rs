//! `last_search_stats()`: the stats of an index's last search, kept for Python as a dict.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use vdb_core::SearchStats;

/// The stats of an index's last search (None before any), shared by every index class.
#[derive(Default)]
pub struct LastStats(Mutex<Option<SearchStats>>);

impl LastStats {
    pub fn set(&self, s: SearchStats) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
    }

    /// The last search's per-stage counts and seconds, or None before any search.
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        s.map(|s| to_dict(py, &s)).transpose()
    }
}

pub fn to_dict<'py>(py: Python<'py>, s: &SearchStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, v) in s.fields() {
        if name.ends_with("_s") {
            d.set_item(name, v)?;
        } else {
            d.set_item(name, v as u64)?;
        }
    }
    // {stage: {timer: seconds}}, below the stage seconds
    let timers = PyDict::new(py);
    for (stage, named) in s.timers.by_stage() {
        let t = PyDict::new(py);
        for (name, v) in named {
            t.set_item(name, v)?;
        }
        timers.set_item(stage, t)?;
    }
    d.set_item("timers", timers)?;
    Ok(d)
}
