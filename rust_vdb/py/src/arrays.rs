//! numpy <-> slices: zero-copy for float32 C-contiguous input, one documented conversion
//! otherwise, clear InvalidInput errors for what cannot be converted.

use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use crate::errors::invalid;

fn shape_str(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// Whether a numpy array's data is aligned for its dtype (a view at an odd byte offset of a
/// buffer is not, and cannot be read as a slice).
fn aligned(a: &Bound<'_, PyAny>) -> PyResult<bool> {
    a.getattr("flags")?.getattr("aligned")?.extract()
}

/// `a` itself when aligned, else an aligned copy (`ascontiguousarray` keeps a misaligned
/// array that already has the dtype and order asked for).
fn realigned(a: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    if aligned(&a)? {
        Ok(a)
    } else {
        a.call_method0("copy")
    }
}

/// A 2-D float32 C-contiguous view of `obj` with `dim` columns.
///
/// float32 C-contiguous aligned arrays are used in place. Other real dtypes (float64,
/// float16, integers) and other layouts (a misaligned view too) are converted once to float32
/// C order; bool, complex, object and string data are refused.
pub fn matrix<'py>(
    obj: &Bound<'py, PyAny>,
    dim: usize,
    what: &str,
) -> PyResult<PyReadonlyArray2<'py, f32>> {
    let py = obj.py();
    let arr = match obj.cast::<PyArray2<f32>>() {
        // (the alignment read from the pointer: no Python call on the hot path)
        Ok(a) if a.is_c_contiguous() && a.data().is_aligned() => a.clone(),
        _ => {
            let np = py.import("numpy")?;
            let a = np.call_method1("asarray", (obj,)).map_err(|e| {
                invalid(format!(
                    "{what} must be a numpy array of shape (n, {dim}): {e}"
                ))
            })?;
            let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
            let dtype = a.getattr("dtype")?.str()?.to_string();
            if !matches!(kind.as_str(), "f" | "i" | "u") {
                return Err(invalid(format!(
                    "{what} has dtype {dtype}; expected float32 (other real dtypes are converted)"
                )));
            }
            let ndim: usize = a.getattr("ndim")?.extract()?;
            if ndim != 2 {
                let shape: Vec<usize> = a.getattr("shape")?.extract()?;
                return Err(invalid(format!(
                    "{what} has shape {}; expected a 2-D array (n, {dim}) (one vector: x[None, :])",
                    shape_str(&shape)
                )));
            }
            let c = np.call_method1("ascontiguousarray", (a, np.getattr("float32")?))?;
            realigned(c)?.cast_into::<PyArray2<f32>>()?
        }
    };
    let shape = arr.shape();
    if shape[1] != dim {
        return Err(invalid(format!(
            "{what} has shape {}; this index expects dim={dim} columns",
            shape_str(shape)
        )));
    }
    Ok(arr.readonly())
}

/// A 1-D int64 view of `ids` with `n` entries (other integer dtypes are converted once).
pub fn ids<'py>(obj: &Bound<'py, PyAny>, n: usize) -> PyResult<PyReadonlyArray1<'py, i64>> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let a = np.call_method1("asarray", (obj,)).map_err(|e| {
        invalid(format!(
            "ids must be a 1-D integer array of length {n}: {e}"
        ))
    })?;
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    if !matches!(kind.as_str(), "i" | "u") {
        let dtype = a.getattr("dtype")?.str()?.to_string();
        return Err(invalid(format!(
            "ids has dtype {dtype}; expected integers (int64)"
        )));
    }
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    if shape.len() != 1 || shape[0] != n {
        return Err(invalid(format!(
            "ids has shape {}; expected ({n},), one id per vector",
            shape_str(&shape)
        )));
    }
    if kind == "u" {
        let too_big: bool = a.call_method0("max")?.gt(i64::MAX as u64)?;
        if too_big {
            return Err(invalid(
                "ids exceed the int64 range; expected 0 <= id < 2**63",
            ));
        }
    }
    let c = np.call_method1("ascontiguousarray", (a, np.getattr("int64")?))?;
    Ok(realigned(c)?.cast_into::<numpy::PyArray1<i64>>()?.readonly())
}

/// A non-negative count argument (k, nprobe, rerank, threads) checked with its name.
pub fn count(name: &str, v: i64, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(invalid(format!("{name}={v}: expected {name} >= {min}")));
    }
    Ok(v as usize)
}

/// `probe_ratio` as the engine's f32, refused here while it is still the caller's f64: the
/// cast alone turned 1e-300 into 0 (off, where below 1 is refused), 0.99999999 into 1, and
/// a finite 1e300 into inf (refused). A finite ratio above f32::MAX is f32::MAX (all lists).
pub fn ratio(r: f64) -> PyResult<f32> {
    if r != 0.0 && !(r.is_finite() && r >= 1.0) {
        return Err(invalid(format!(
            "probe_ratio={r:?}: expected 0 (off) or a finite ratio >= 1"
        )));
    }
    Ok(r.min(f32::MAX as f64) as f32)
}

/// (D, I) as numpy arrays of shape (nq, k), handing over the vectors without a copy.
pub fn results<'py>(
    py: Python<'py>,
    nq: usize,
    k: usize,
    d: Vec<f32>,
    ids: Vec<i64>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let d = Array2::from_shape_vec((nq, k), d).map_err(|e| invalid(e.to_string()))?;
    let i = Array2::from_shape_vec((nq, k), ids).map_err(|e| invalid(e.to_string()))?;
    Ok((d.into_pyarray(py).into_any(), i.into_pyarray(py).into_any()))
}
