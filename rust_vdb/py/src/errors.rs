//! The Python exception hierarchy and the one mapping from `vdb_core::VdbError` to it.
//!
//! `InvalidInput` is both a `VdbError` and a `ValueError` (likewise NotReady/RuntimeError,
//! CorruptFile/OSError). `create_exception!` takes one base only, so the classes are built
//! at module init with `type(name, bases, namespace)`.

use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use vdb_core::VdbError;

struct Classes {
    base: Py<PyType>,
    invalid_input: Py<PyType>,
    not_ready: Py<PyType>,
    corrupt_file: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn make_class<'py>(
    py: Python<'py>,
    name: &str,
    doc: &str,
    bases: Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__module__", "vdbbench._rust_vdb")?;
    ns.set_item("__doc__", doc)?;
    let ty = py.get_type::<PyType>().call1((name, bases, ns))?;
    Ok(ty.cast_into::<PyType>()?)
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let base = make_class(
            py,
            "VdbError",
            "Base class of every error raised by the vdbbench engine.",
            PyTuple::new(py, [py.get_type::<PyException>()])?,
        )?;
        let sub = |name: &str, doc: &str, other: Bound<'_, PyType>| -> PyResult<Py<PyType>> {
            let bases = PyTuple::new(py, [base.clone(), other])?;
            Ok(make_class(py, name, doc, bases)?.unbind())
        };
        Ok(Classes {
            invalid_input: sub(
                "InvalidInput",
                "Wrong dimension, dtype or layout, NaN/inf, k, nprobe or rerank out of range.",
                py.get_type::<PyValueError>(),
            )?,
            not_ready: sub(
                "NotReady",
                "The index cannot do this yet: search or add before train.",
                py.get_type::<PyRuntimeError>(),
            )?,
            corrupt_file: sub(
                "CorruptFile",
                "A truncated, foreign, unknown-version or checksum-failing index file.",
                py.get_type::<PyOSError>(),
            )?,
            base: base.unbind(),
        })
    })
}

/// Adds the four classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let c = classes(py)?;
    m.add("VdbError", c.base.bind(py))?;
    m.add("InvalidInput", c.invalid_input.bind(py))?;
    m.add("NotReady", c.not_ready.bind(py))?;
    m.add("CorruptFile", c.corrupt_file.bind(py))?;
    Ok(())
}

fn raise(py: Python<'_>, pick: impl Fn(&Classes) -> &Py<PyType>, msg: String) -> PyErr {
    match classes(py) {
        Ok(c) => PyErr::from_type(pick(c).bind(py).clone(), msg),
        Err(e) => e,
    }
}

/// THE mapping from engine errors to Python exceptions.
pub fn to_py(e: VdbError) -> PyErr {
    Python::attach(|py| match e {
        VdbError::InvalidInput(m) => raise(py, |c| &c.invalid_input, m),
        VdbError::NotReady(m) => raise(py, |c| &c.not_ready, m),
        VdbError::CorruptFile(m) => raise(py, |c| &c.corrupt_file, m),
        // OSError(errno, message) builds the errno's subclass (FileNotFoundError, ...).
        VdbError::Io { context, source } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, format!("{context}: {source}"))),
            None => PyOSError::new_err(format!("{context}: {source}")),
        },
        VdbError::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
    })
}

/// An `InvalidInput` raised by the binding's own argument checks.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    to_py(VdbError::InvalidInput(msg.into()))
}
