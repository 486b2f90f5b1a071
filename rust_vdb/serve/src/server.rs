//! A running server: its own tokio runtime and threads, a handle to ask for stats and to stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ServeConfig;
use crate::engine::{Engine, Stats};
use crate::routes::router;

/// How long `stop` lets open requests finish before the runtime is dropped.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A server listening on its own runtime threads; `stop` (or dropping it) shuts it down.
pub struct ServerHandle {
    addr: SocketAddr,
    engine: Arc<Engine>,
    runtime: Option<Runtime>,
    shutdown: watch::Sender<bool>,
    /// Ends when the server has stopped serving.
    serving: Option<JoinHandle<std::io::Result<()>>>,
    /// Flips to true once `serving` ended.
    stopped: watch::Receiver<bool>,
}

impl ServerHandle {
    /// Binds `cfg.host:cfg.port` and serves; returns once listening (or with why not).
    pub fn start(cfg: ServeConfig) -> Result<ServerHandle, String> {
        let engine = Arc::new(Engine::new(cfg)?);
        let cfg = engine.config();
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        rt.enable_all().thread_name("vdb-serve");
        if let Some(w) = cfg.workers {
            rt.worker_threads(w);
        }
        let runtime = rt
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let listener = std::net::TcpListener::bind((cfg.host.as_str(), cfg.port))
            .map_err(|e| format!("cannot listen on {}:{}: {e}", cfg.host, cfg.port))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen on {}:{}: {e}", cfg.host, cfg.port))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (shutdown, mut on_shutdown) = watch::channel(false);
        let (stopped_tx, stopped) = watch::channel(false);
        let app = router(engine.clone());
        let serving = runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let result = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = on_shutdown.wait_for(|&s| s).await;
                })
                .await;
            let _ = stopped_tx.send(true);
            result
        });
        Ok(ServerHandle {
            addr,
            engine,
            runtime: Some(runtime),
            shutdown,
            serving: Some(serving),
            stopped,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Whether the server has stopped serving.
    pub fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }

    /// Blocks until the server stops or `timeout` passes (None: no limit); true if stopped.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let Some(rt) = &self.runtime else {
            return true;
        };
        let mut stopped = self.stopped.clone();
        rt.block_on(async move {
            let done = stopped.wait_for(|&s| s);
            match timeout {
                Some(t) => tokio::time::timeout(t, done).await.is_ok(),
                None => done.await.is_ok(),
            }
        })
    }

    /// Stops accepting, lets open requests finish (up to a few seconds), stops a build in
    /// progress, and ends the runtime's threads. Idempotent.
    pub fn stop(&mut self) -> Result<(), String> {
        self.engine.stop_building();
        let _ = self.shutdown.send(true);
        let mut result = Ok(());
        if let (Some(rt), Some(serving)) = (&self.runtime, self.serving.take()) {
            result = match rt.block_on(async { tokio::time::timeout(STOP_GRACE, serving).await }) {
                Ok(Ok(Ok(()))) | Err(_) => Ok(()),
                Ok(Ok(Err(e))) => Err(format!("the server stopped with an error: {e}")),
                Ok(Err(e)) => Err(format!("the server task failed: {e}")),
            };
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        result
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
