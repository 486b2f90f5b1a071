//! The `IvfIndex` Python class: a thin wrapper of `vdb_core::IvfIndex`.

use std::path::PathBuf;
use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use vdb_core::{Metric, Storage, Tuning};

use crate::arrays;
use crate::call::detached;
use crate::errors::to_py;
use crate::stats::LastStats;

/// An inverted-file index: k-means lists, storage "f32", "f16" or "u8+f16".
#[pyclass(frozen, module = "vdbbench._rust_vdb")]
pub struct IvfIndex {
    inner: RwLock<vdb_core::IvfIndex>,
    last_stats: LastStats,
    /// Fixed at construction: read without the lock.
    dim: usize,
}

impl IvfIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, vdb_core::IvfIndex> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
    /// Runs `f` under the read lock with the interpreter released: a thread holding the
    /// interpreter never waits on the lock, so a writer that briefly re-takes the
    /// interpreter (to check for Ctrl-C) cannot deadlock with it.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&vdb_core::IvfIndex) -> R + Send) -> R {
        py.detach(|| f(&self.read()))
    }
    fn wrap(inner: vdb_core::IvfIndex) -> Self {
        let dim = inner.dim();
        IvfIndex {
            inner: RwLock::new(inner),
            last_stats: LastStats::default(),
            dim,
        }
    }
}

fn opt_count(name: &str, v: Option<i64>, min: i64) -> PyResult<Option<usize>> {
    v.map(|v| arrays::count(name, v, min)).transpose()
}

#[pymethods]
impl IvfIndex {
    #[new]
    #[pyo3(signature = (dim, nlist = None, metric = "l2", storage = "u8+f16", seed = 0))]
    fn new(dim: i64, nlist: Option<i64>, metric: &str, storage: &str, seed: u64) -> PyResult<Self> {
        let dim = arrays::count("dim", dim, 1)?;
        let nlist = opt_count("nlist", nlist, 1)?;
        let metric = Metric::parse(metric).map_err(to_py)?;
        let storage = Storage::parse(storage).map_err(to_py)?;
        let inner = vdb_core::IvfIndex::new(dim, nlist, metric, storage, seed).map_err(to_py)?;
        Ok(Self::wrap(inner))
    }

    /// k-means on `x` (n, dim): the coarse centroids and, for "u8+f16", the u8 quantizer.
    #[pyo3(signature = (x, threads = None))]
    fn train(&self, py: Python<'_>, x: &Bound<'_, PyAny>, threads: Option<i64>) -> PyResult<()> {
        let dim = self.dim;
        let x = arrays::matrix(x, dim, "training vectors")?;
        let threads = opt_count("threads", threads, 1)?;
        let xs = x.as_slice()?;
        detached(py, |interrupt| {
            // Train a copy: the index is swapped only when training succeeded.
            let mut fresh = self.read().clone();
            fresh.train(xs, threads, interrupt)?;
            let mut w = self.inner.write().unwrap_or_else(|p| p.into_inner());
            if w.ntotal() > 0 {
                return Err(vdb_core::VdbError::InvalidInput(format!(
                    "this index already holds {} vectors; train a new IvfIndex instead of retraining",
                    w.ntotal()
                )));
            }
            *w = fresh;
            Ok(())
        })
    }

    /// Adds `x` (n, dim) with ids ntotal..ntotal+n, or with `ids` (n,) int64 >= 0.
    #[pyo3(signature = (x, ids = None, threads = None))]
    fn add(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        threads: Option<i64>,
    ) -> PyResult<()> {
        let dim = self.dim;
        let x = arrays::matrix(x, dim, "vectors")?;
        let n = x.as_slice()?.len() / dim;
        let ids = ids.map(|i| arrays::ids(i, n)).transpose()?;
        let threads = opt_count("threads", threads, 1)?;
        let xs = x.as_slice()?;
        let id_slice = match &ids {
            Some(a) => Some(a.as_slice()?),
            None => None,
        };
        detached(py, |interrupt| {
            self.inner
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .add(xs, id_slice, threads, interrupt)
        })
    }

    /// (D, I), float32 and int64 arrays of shape (nq, k), best first.
    #[pyo3(signature = (queries, k = 10, nprobe = None, rerank = None, threads = None, reorder = None, probe_ratio = None))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        nprobe: Option<i64>,
        rerank: Option<i64>,
        threads: Option<i64>,
        reorder: Option<i64>,
        probe_ratio: Option<f64>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let dim = self.dim;
        let q = arrays::matrix(queries, dim, "queries")?;
        let k = arrays::count("k", k, 1)?;
        let nprobe = opt_count("nprobe", nprobe, 0)?;
        let rerank = opt_count("rerank", rerank, 0)?;
        let threads = opt_count("threads", threads, 1)?;
        let tuning = Tuning {
            reorder: opt_count("reorder", reorder, 0)?,
            probe_ratio: probe_ratio.map(arrays::ratio).transpose()?,
        };
        let qs = q.as_slice()?;
        let nq = qs.len() / dim;
        let (d, i, s) = detached(py, |interrupt| {
            self.read()
                .search_with(qs, k, nprobe, rerank, tuning, threads, interrupt)
        })?;
        self.last_stats.set(s);
        arrays::results(py, nq, k, d, i)
    }

    /// Per-stage counts and seconds of the last search, or None before any search.
    fn last_search_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.last_stats.to_py(py)
    }

    /// Writes the index to `path` (a temporary file renamed into place).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        detached(py, |_| vdb_core::persist::save(&self.read(), &path))
    }

    /// Reads an index written by `save`; refuses truncated, foreign or corrupted files.
    #[classmethod]
    fn load(_cls: &Bound<'_, PyType>, py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = detached(py, |_| vdb_core::persist::load(&path))?;
        Ok(Self::wrap(inner))
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
    fn nlist(&self, py: Python<'_>) -> Option<usize> {
        self.with(py, |f| f.nlist())
    }
    #[getter]
    fn metric(&self, py: Python<'_>) -> &'static str {
        self.with(py, |f| f.metric().name())
    }
    #[getter]
    fn storage(&self, py: Python<'_>) -> &'static str {
        self.with(py, |f| f.storage().name())
    }
    #[getter]
    fn seed(&self, py: Python<'_>) -> u64 {
        self.with(py, |f| f.seed())
    }
    #[getter]
    fn is_trained(&self, py: Python<'_>) -> bool {
        self.with(py, |f| f.is_trained())
    }
    #[getter]
    fn bytes(&self, py: Python<'_>) -> usize {
        self.with(py, |f| f.bytes())
    }

    /// Sizes of the inverted lists (nlist entries; empty before training).
    fn list_sizes(&self, py: Python<'_>) -> Vec<usize> {
        self.with(py, |f| f.lists().iter().map(|l| l.len()).collect())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.with(py, |f| f.ntotal())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.with(py, Self::describe)
    }
}

impl IvfIndex {
    fn describe(f: &vdb_core::IvfIndex) -> String {
        let nlist = f.nlist().map_or("None".to_string(), |n| n.to_string());
        format!(
            "IvfIndex(dim={}, nlist={}, metric={:?}, storage={:?}, seed={}, ntotal={}, trained={})",
            f.dim(),
            nlist,
            f.metric().name(),
            f.storage().name(),
            f.seed(),
            f.ntotal(),
            if f.is_trained() { "True" } else { "False" }
        )
    }
}
