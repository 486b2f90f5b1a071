//! A running server: its own tokio runtime and threads, a handle to ask for stats and to stop.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use vdb_core::VdbError;

use crate::config::ServeConfig;
use crate::engine::{Engine, SaveAtStop, Stats};
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
    /// Set once `serving` ended.
    stopped: StopSignal,
}

/// Set once a server has stopped serving; waited on from any thread, without its runtime.
#[derive(Clone, Default)]
pub struct StopSignal(Arc<(Mutex<bool>, Condvar)>);

impl StopSignal {
    fn set(&self) {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0 .1.notify_all();
    }

    pub fn is_set(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until set or `timeout` passes (None: no limit); true if set.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let guard = self.0 .0.lock().unwrap_or_else(|p| p.into_inner());
        let guard = match timeout {
            Some(t) => {
                self.0
                     .1
                    .wait_timeout_while(guard, t, |s| !*s)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            None => self
                .0
                 .1
                .wait_while(guard, |s| !*s)
                .unwrap_or_else(|p| p.into_inner()),
        };
        *guard
    }
}

impl ServerHandle {
    /// Binds `cfg.host:cfg.port` and serves; returns once listening (or with why not: bad
    /// settings, an unreadable index file, an address in use).
    pub fn start(cfg: ServeConfig) -> Result<ServerHandle, VdbError> {
        let engine = Arc::new(Engine::new(cfg)?);
        let cfg = engine.config();
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        rt.enable_all().thread_name("vdb-serve");
        if let Some(w) = cfg.workers {
            rt.worker_threads(w);
        }
        let runtime = rt
            .build()
            .map_err(io("cannot start the async runtime".into()))?;
        let at = format!("cannot listen on {}:{}", cfg.host, cfg.port);
        let listener =
            std::net::TcpListener::bind((cfg.host.as_str(), cfg.port)).map_err(io(at.clone()))?;
        listener.set_nonblocking(true).map_err(io(at.clone()))?;
        let addr = listener.local_addr().map_err(io(at))?;
        let (shutdown, mut on_shutdown) = watch::channel(false);
        let stopped = StopSignal::default();
        let stopped_tx = stopped.clone();
        let app = router(engine.clone());
        let serving = runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let result = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = on_shutdown.wait_for(|&s| s).await;
                })
                .await;
            stopped_tx.set();
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

    /// The stats as GET /stats answers them.
    pub fn stats_json(&self) -> String {
        serde_json::to_string(&self.engine.stats())
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Whether the server has stopped serving.
    pub fn is_stopped(&self) -> bool {
        self.stopped.is_set()
    }

    /// Blocks until the server stops or `timeout` passes (None: no limit); true if stopped.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        self.stopped.wait(timeout)
    }

    /// What `wait` waits on, to wait without holding the handle.
    pub fn stop_signal(&self) -> StopSignal {
        self.stopped.clone()
    }

    /// Stops accepting, lets open requests finish (up to a few seconds), stops a build in
    /// progress, and ends the runtime's threads. Idempotent.
    pub fn stop(&mut self) -> Result<(), String> {
        let first = self.runtime.is_some();
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
        // no request runs now: what was accepted into the index goes back to its file
        match first.then(|| self.engine.save_added()).flatten() {
            Some(SaveAtStop::Saved(said)) if self.engine.config().log => {
                println!("vdbbench serve: {said}")
            }
            Some(SaveAtStop::NotBuilt(said)) => eprintln!("vdbbench serve: {said}"),
            Some(SaveAtStop::Failed(why)) => {
                eprintln!("vdbbench serve: {why}");
                if result.is_ok() {
                    result = Err(why);
                }
            }
            _ => {}
        }
        self.stopped.set();
        result
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> VdbError {
    move |source| VdbError::Io { context, source }
}
