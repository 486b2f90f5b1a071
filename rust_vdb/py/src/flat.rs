//! The `FlatIndex` Python class: exact search, a thin wrapper of `vdb_core::FlatIndex`.

use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use vdb_core::Metric;

use crate::arrays;
use crate::call::detached;
use crate::errors::to_py;
use crate::stats::LastStats;

/// Exact (brute-force) search over float32 vectors; the reference the IVF index is tested
/// against. Metrics "l2" (squared distances), "ip" and "cosine" (similarities).
#[pyclass(frozen, module = "vdbbench._rust_vdb")]
pub struct FlatIndex {
    inner: RwLock<vdb_core::FlatIndex>,
    last_stats: LastStats,
    /// Fixed at construction: read without the lock.
    dim: usize,
    metric: Metric,
}

impl FlatIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, vdb_core::FlatIndex> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
    /// Runs `f` under the read lock with the interpreter released (see IvfIndex::with).
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&vdb_core::FlatIndex) -> R + Send) -> R {
        py.detach(|| f(&self.read()))
    }
}

#[pymethods]
impl FlatIndex {
    #[new]
    #[pyo3(signature = (dim, metric = "l2"))]
    fn new(dim: i64, metric: &str) -> PyResult<Self> {
        let dim = arrays::count("dim", dim, 1)?;
        let metric = Metric::parse(metric).map_err(to_py)?;
        let inner = vdb_core::FlatIndex::new(dim, metric).map_err(to_py)?;
        Ok(FlatIndex {
            inner: RwLock::new(inner),
            last_stats: LastStats::default(),
            dim,
            metric,
        })
    }

    /// Appends vectors (ids continue from ntotal).
    fn add(&self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<()> {
        let dim = self.dim;
        let x = arrays::matrix(x, dim, "vectors")?;
        let xs = x.as_slice()?;
        detached(py, |_| {
            self.inner
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .add(xs)
        })
    }

    #[pyo3(signature = (queries, k = 10, threads = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        threads: Option<i64>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let dim = self.dim;
        let q = arrays::matrix(queries, dim, "queries")?;
        let k = arrays::count("k", k, 1)?;
        let threads = threads
            .map(|t| arrays::count("threads", t, 1))
            .transpose()?;
        let qs = q.as_slice()?;
        let nq = qs.len() / dim;
        let (d, i, s) = detached(py, |interrupt| {
            self.read().search(qs, k, threads, interrupt)
        })?;
        self.last_stats.set(s);
        arrays::results(py, nq, k, d, i)
    }

    /// Per-stage counts and seconds of the last search, or None before any search.
    fn last_search_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.last_stats.to_py(py)
    }

    #[getter]
    fn ntotal(&self, py: Python<'_>) -> usize {
        self.with(py, |f| f.ntotal())
    }
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }
    #[getter]
    fn metric(&self) -> &'static str {
        self.metric.name()
    }
    #[getter]
    fn is_trained(&self) -> bool {
        true
    }
    #[getter]
    fn bytes(&self, py: Python<'_>) -> usize {
        self.with(py, |f| f.bytes())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.with(py, |f| f.ntotal())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let n = self.with(py, |f| f.ntotal());
        format!(
            "FlatIndex(dim={}, metric={:?}, ntotal={})",
            self.dim,
            self.metric.name(),
            n
        )
    }
}
