//! The one helper for long calls: releases the interpreter, turns Ctrl-C into
//! KeyboardInterrupt between chunks, and maps engine errors to Python exceptions.

use std::sync::Mutex;

use pyo3::prelude::*;
use vdb_core::VdbError;

use crate::errors::to_py;

/// Runs `f` without the interpreter. `f` gets an interrupt check to call between chunks: it
/// briefly re-attaches to run Python's signal handlers and stops `f` if one raised.
pub fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&(dyn Fn() -> vdb_core::Result<()> + Sync)) -> vdb_core::Result<T> + Send,
{
    let pending: Mutex<Option<PyErr>> = Mutex::new(None);
    let check = || -> vdb_core::Result<()> {
        Python::attach(|py| py.check_signals()).map_err(|e| {
            *pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            VdbError::Interrupted
        })
    };
    let result = py.detach(|| f(&check));
    match result {
        Ok(v) => Ok(v),
        Err(VdbError::Interrupted) => {
            let e = pending.lock().unwrap_or_else(|p| p.into_inner()).take();
            Err(e.unwrap_or_else(|| to_py(VdbError::Interrupted)))
        }
        Err(e) => Err(to_py(e)),
    }
}
