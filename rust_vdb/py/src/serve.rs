//! The `Server` Python class: starts `vdb_serve::ServerHandle` (the HTTP server on its own
//! runtime threads) and hands back its port, stats and stop. Conversion only.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyType;
use vdb_serve::{SearchFlags, SearchOn, ServeConfig, ServerHandle};

use crate::arrays;
use crate::errors::{invalid, to_py};

/// The engine behind the KCORES vector-db-bench HTTP JSON API (POST /insert, /bulk_insert,
/// /search, /build; GET /stats, /health), served from Rust threads.
#[pyclass(frozen, module = "vdbbench._rust_vdb")]
pub struct Server {
    handle: Mutex<ServerHandle>,
    host: String,
    port: u16,
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, ServerHandle> {
        self.handle.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn opt(name: &str, v: Option<i64>, min: i64) -> PyResult<Option<usize>> {
    v.map(|v| arrays::count(name, v, min)).transpose()
}

#[pymethods]
impl Server {
    /// Starts listening on host:port (port 0: any free port) and returns once it does.
    #[classmethod]
    #[pyo3(signature = (host = "127.0.0.1", port = 8080, *, dim = None, nlist = None, seed = 0,
        nprobe = None, rerank = None, reorder = None, probe_ratio = None, threads = None,
        recall_target = None, index = None, max_body_mb = 64.0, workers = None,
        search_on = "blocking", log = false))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        host: &str,
        port: i64,
        dim: Option<i64>,
        nlist: Option<i64>,
        seed: u64,
        nprobe: Option<i64>,
        rerank: Option<i64>,
        reorder: Option<i64>,
        probe_ratio: Option<f64>,
        threads: Option<i64>,
        recall_target: Option<f64>,
        index: Option<PathBuf>,
        max_body_mb: f64,
        workers: Option<i64>,
        search_on: &str,
        log: bool,
    ) -> PyResult<Server> {
        let port = u16::try_from(port)
            .map_err(|_| invalid(format!("port={port}: expected 0 (any free port) to 65535")))?;
        if !(max_body_mb.is_finite() && max_body_mb > 0.0) {
            return Err(invalid(format!(
                "max_body_mb={max_body_mb}: expected a positive size in MiB"
            )));
        }
        let cfg = ServeConfig {
            host: host.to_string(),
            port,
            dim: opt("dim", dim, 1)?,
            nlist: opt("nlist", nlist, 1)?,
            seed,
            search: SearchFlags {
                nprobe: opt("nprobe", nprobe, 1)?,
                rerank: opt("rerank", rerank, 0)?,
                reorder: opt("reorder", reorder, 0)?,
                probe_ratio: probe_ratio.map(arrays::ratio).transpose()?,
                threads: opt("threads", threads, 1)?,
            },
            recall_target,
            index,
            max_body_bytes: (max_body_mb * (1u64 << 20) as f64) as usize,
            workers: opt("workers", workers, 1)?,
            search_on: SearchOn::parse(search_on).map_err(invalid)?,
            log,
        };
        let handle = py.detach(|| ServerHandle::start(cfg)).map_err(to_py)?;
        let addr = handle.addr();
        Ok(Server {
            handle: Mutex::new(handle),
            host: addr.ip().to_string(),
            port: addr.port(),
        })
    }

    /// The port it listens on (the one chosen when started with port 0).
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    #[getter]
    fn host(&self) -> &str {
        &self.host
    }

    /// http://host:port
    #[getter]
    fn url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }

    /// What GET /stats answers, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = py.detach(|| self.lock().stats_json());
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Stops it: no new connections, open requests finish (a few seconds at most), a build in
    /// progress stops. Idempotent.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().stop())
            .map_err(pyo3::exceptions::PyRuntimeError::new_err)
    }

    /// Waits until it stops or `timeout` seconds pass (None: no limit); True if stopped.
    /// Ctrl-C is seen only when it returns: wait in short steps to stay interruptible.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = match timeout {
            Some(t) if !(t.is_finite() && t >= 0.0) => {
                return Err(invalid(format!(
                    "timeout={t}: expected seconds >= 0 or None"
                )))
            }
            t => t.map(Duration::from_secs_f64),
        };
        // Waits on a watch channel, not the handle's lock: stop() from another thread goes on.
        let stopped = self.lock().stop_signal();
        Ok(py.detach(|| stopped.wait(t)))
    }

    /// Whether it has stopped serving.
    #[getter]
    fn stopped(&self) -> bool {
        self.lock().is_stopped()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Server(url={:?})", self.url())
    }
}
