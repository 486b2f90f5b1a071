//! The HTTP load client (`vdb_load`) for Python: numpy in, numpy out, the interpreter released
//! while requests run, Ctrl-C stopping the clients.

use std::sync::Mutex;
use std::time::Duration;

use numpy::ndarray::{Array1, Array2};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vdb_load::{LoadError, QueryPlan};

use crate::errors::invalid;

fn to_py(e: LoadError) -> PyErr {
    match e {
        LoadError::Invalid(m) => invalid(m),
        LoadError::Transport { .. } => PyConnectionError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

fn timeout(seconds: f64) -> PyResult<Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(PyValueError::new_err(format!("timeout_s={seconds}: expected > 0")));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Runs `f` without the interpreter, giving it a check that re-attaches to run Python's signal
/// handlers; the exception a handler raised (KeyboardInterrupt) is what the call raises.
fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(&(dyn Fn() -> Result<(), LoadError> + Sync)) -> Result<T, LoadError> + Send,
) -> PyResult<T> {
    let pending: Mutex<Option<PyErr>> = Mutex::new(None);
    let check = || -> Result<(), LoadError> {
        Python::attach(|py| py.check_signals()).map_err(|e| {
            *pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            LoadError::Interrupted
        })
    };
    match py.detach(|| f(&check)) {
        Ok(v) => Ok(v),
        Err(LoadError::Interrupted) => Err(pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| to_py(LoadError::Interrupted))),
        Err(e) => Err(to_py(e)),
    }
}

/// POST /bulk_insert of `vectors` (n, dim) float32 with `ids` (n,) uint64, `batch` rows a
/// request; returns the sum of the server's `inserted`.
#[pyfunction]
#[pyo3(signature = (url, vectors, ids, batch = 1000, timeout_s = 600.0))]
pub fn http_bulk_insert(
    py: Python<'_>,
    url: &str,
    vectors: PyReadonlyArray2<'_, f32>,
    ids: PyReadonlyArray1<'_, u64>,
    batch: usize,
    timeout_s: f64,
) -> PyResult<u64> {
    let dim = vectors.shape()[1];
    let xs = vectors.as_slice()?;
    let ids = ids.as_slice()?;
    let t = timeout(timeout_s)?;
    detached(py, |interrupt| {
        vdb_load::bulk_insert(url, xs, dim, ids, batch, t, &mut |_| interrupt())
    })
}

/// The concurrent query run of `vdb_load::run_queries`: `queries` (nq, dim) float32, `order`
/// (m,) uint64 rows in issue order. Returns a dict: ids (m, top_k) int64, distances (m, top_k)
/// float64, latency_s (m,), wall_s, errors, first_error, warmup_errors.
#[pyfunction]
#[pyo3(signature = (url, queries, order, top_k = 10, clients = 4, warmup = 0, timeout_s = 30.0))]
#[allow(clippy::too_many_arguments)]
pub fn http_query<'py>(
    py: Python<'py>,
    url: &str,
    queries: PyReadonlyArray2<'py, f32>,
    order: PyReadonlyArray1<'py, u64>,
    top_k: u32,
    clients: usize,
    warmup: usize,
    timeout_s: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let dim = queries.shape()[1];
    let qs = queries.as_slice()?;
    let order: Vec<usize> = order.as_slice()?.iter().map(|&r| r as usize).collect();
    let plan = QueryPlan {
        url,
        queries: qs,
        dim,
        top_k,
        clients,
        warmup,
        order: &order,
        timeout: timeout(timeout_s)?,
    };
    let run = detached(py, |interrupt| vdb_load::run_queries(&plan, interrupt))?;
    let (m, k) = (order.len(), top_k as usize);
    let out = PyDict::new(py);
    let ids = Array2::from_shape_vec((m, k), run.ids).map_err(|e| invalid(e.to_string()))?;
    let dists = Array2::from_shape_vec((m, k), run.distances).map_err(|e| invalid(e.to_string()))?;
    out.set_item("ids", ids.into_pyarray(py))?;
    out.set_item("distances", dists.into_pyarray(py))?;
    out.set_item("latency_s", Array1::from_vec(run.latency_s).into_pyarray(py))?;
    out.set_item("wall_s", run.wall_s)?;
    out.set_item("errors", run.errors)?;
    out.set_item("first_error", run.first_error)?;
    out.set_item("warmup_errors", run.warmup_errors)?;
    Ok(out)
}

/// A server on 127.0.0.1 that answers every request at once with ten fixed hits: the client's
/// own ceiling.
#[pyclass(module = "vdbbench._rust_vdb")]
pub struct NullServer {
    inner: Mutex<vdb_load::NullServer>,
    port: u16,
}

#[pymethods]
impl NullServer {
    #[new]
    #[pyo3(signature = (port = 0))]
    fn new(port: u16) -> PyResult<Self> {
        let inner = vdb_load::NullServer::start(port)
            .map_err(|e| PyConnectionError::new_err(format!("cannot listen on port {port}: {e}")))?;
        let port = inner.port();
        Ok(NullServer { inner: Mutex::new(inner), port })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    #[getter]
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn stop(&self, py: Python<'_>) {
        py.detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).stop());
    }
}
