//! The `vdbbench._rust_vdb` extension module: registers the binding types.

use pyo3::prelude::*;

#[pymodule]
fn _rust_vdb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__doc__", "vdbbench engine (Rust)")?;
    Ok(())
}
