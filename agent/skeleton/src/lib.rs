//! naive_vdb: a correct but deliberately slow vector index (exact brute-force scalar scan)
//! exposing the `IvfIndex` interface the vdbbench agent harness drives. It is the starting
//! point of the from-scratch experiment: everything fast is left for the model to build.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Exact nearest-neighbour search under squared L2 distance, one vector at a time.
#[pyclass(module = "naive_vdb")]
struct IvfIndex {
    dim: usize,
    /// Row-major base vectors, `ntotal * dim` floats.
    data: Vec<f32>,
    trained: bool,
}

/// Squared Euclidean distance, the plain scalar loop.
fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for i in 0..a.len() {
        let d = a[i] - b[i];
        sum += d * d;
    }
    sum
}

/// Insert (dist, id) into `best`, kept sorted by (distance, id) and at most `k` long.
fn push_top_k(best: &mut Vec<(f32, i64)>, k: usize, dist: f32, id: i64) {
    if best.len() == k {
        let (worst_d, worst_id) = best[k - 1];
        if dist > worst_d || (dist == worst_d && id > worst_id) {
            return;
        }
        best.pop();
    }
    let pos = best
        .iter()
        .position(|&(d, i)| dist < d || (dist == d && id < i))
        .unwrap_or(best.len());
    best.insert(pos, (dist, id));
}

impl IvfIndex {
    /// Borrow a C-contiguous float32 (n, dim) array as a flat slice, or say what was wrong.
    fn rows<'a>(&self, x: &'a PyReadonlyArray2<'_, f32>, what: &str) -> PyResult<&'a [f32]> {
        let shape = x.shape();
        if shape[1] != self.dim {
            return Err(PyValueError::new_err(format!(
                "{what} has dimension {}, expected {} (the index's dim)",
                shape[1], self.dim
            )));
        }
        let flat = x.as_slice().map_err(|_| {
            PyValueError::new_err(format!("{what} must be a C-contiguous float32 array"))
        })?;
        if flat.iter().any(|v| !v.is_finite()) {
            return Err(PyValueError::new_err(format!("{what} contains NaN or inf")));
        }
        Ok(flat)
    }
}

#[pymethods]
impl IvfIndex {
    /// `IvfIndex(dim, **kwargs)`: extra build arguments (nlist, metric...) are accepted and
    /// ignored, since a brute-force scan has nothing to tune.
    #[new]
    #[pyo3(signature = (dim, **_kwargs))]
    fn new(dim: usize, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        if dim == 0 {
            return Err(PyValueError::new_err("dim must be >= 1, got 0"));
        }
        Ok(IvfIndex { dim, data: Vec::new(), trained: false })
    }

    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    #[getter]
    fn ntotal(&self) -> usize {
        self.data.len() / self.dim
    }

    /// Nothing to learn for an exact scan; the input is only checked.
    fn train(&mut self, x: PyReadonlyArray2<'_, f32>) -> PyResult<()> {
        self.rows(&x, "training data")?;
        self.trained = true;
        Ok(())
    }

    /// Append vectors; they get ids ntotal, ntotal + 1, ...
    fn add(&mut self, x: PyReadonlyArray2<'_, f32>) -> PyResult<()> {
        if !self.trained {
            return Err(PyRuntimeError::new_err("add() called before train()"));
        }
        let flat = self.rows(&x, "base vectors")?;
        self.data.extend_from_slice(flat);
        Ok(())
    }

    /// Exact k nearest neighbours of each query: (D float32 (nq, k) squared L2, I int64 (nq, k)),
    /// best first, ties to the smaller id. Extra keyword arguments (nprobe...) are ignored.
    #[pyo3(signature = (queries, k = 10, **_kwargs))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        k: usize,
        _kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>)> {
        let ntotal = self.ntotal();
        if ntotal == 0 {
            return Err(PyRuntimeError::new_err("search() called on an empty index: add() vectors first"));
        }
        if k == 0 || k > ntotal {
            return Err(PyValueError::new_err(format!(
                "k must be in 1..={ntotal} (the number of indexed vectors), got {k}"
            )));
        }
        let q = self.rows(&queries, "queries")?;
        let nq = q.len() / self.dim;
        let mut distances = Vec::with_capacity(nq * k);
        let mut ids = Vec::with_capacity(nq * k);
        let mut best: Vec<(f32, i64)> = Vec::with_capacity(k);
        for query in q.chunks_exact(self.dim) {
            best.clear();
            for (id, vector) in self.data.chunks_exact(self.dim).enumerate() {
                push_top_k(&mut best, k, l2_squared(query, vector), id as i64);
            }
            for &(d, i) in &best {
                distances.push(d);
                ids.push(i);
            }
        }
        let d = Array2::from_shape_vec((nq, k), distances)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let i = Array2::from_shape_vec((nq, k), ids)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok((d.into_pyarray(py), i.into_pyarray(py)))
    }
}

#[pymodule]
fn naive_vdb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IvfIndex>()?;
    Ok(())
}
