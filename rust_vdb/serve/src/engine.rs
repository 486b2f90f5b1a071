//! The server's state: inserted vectors are buffered until the one build, then the index
//! answers searches and takes further inserts into its lists.
//!
//! Phases: empty (nothing inserted) -> buffering -> building -> ready. A failed build goes back
//! to buffering with every vector kept. Locks: `store` guards the ids and the buffer and is
//! taken before `index`; the move to ready happens under `store`, so an insert either lands in
//! the buffer the build drains or goes to the ready index, never between.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use vdb_core::{IvfIndex, Tuning, VdbError};

use crate::api::{ApiError, Hit, InsertRequest};
use crate::build::{self, BuildReport};
pub use crate::checks::panic_text;
use crate::checks::{build_error, check_values, engine_error, item_name, nothing_inserted};
use crate::config::ServeConfig;
use crate::settings::{self, Settings};
pub use crate::stats::Stats;

pub type AppState = Arc<Engine>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Empty,
    Buffering,
    Building,
    Ready,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Empty,
            1 => Phase::Buffering,
            2 => Phase::Building,
            _ => Phase::Ready,
        }
    }
}

/// Ids taken and vectors not yet in the index.
#[derive(Default)]
struct Store {
    dim: Option<usize>,
    /// Every id accepted so far (buffered or in the index).
    ids: HashSet<i64>,
    /// Buffered rows of `dim` values and their ids.
    vectors: Vec<f32>,
    row_ids: Vec<i64>,
}

/// Vectors checked and accepted by `Engine::accept`.
pub enum Accepted {
    /// Kept in the buffer until the build.
    Buffered(usize),
    /// To be added to the ready index (`Engine::add_to_index`), off the async workers.
    ForIndex(Batch),
}

pub struct Batch {
    vectors: Vec<f32>,
    ids: Vec<i64>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[derive(Default)]
struct Counters {
    queries: AtomicU64,
    /// Searches repeated over every list because the probed ones held fewer than top_k rows.
    widened: AtomicU64,
    rejected: AtomicU64,
    builds: AtomicU64,
    /// Vectors added to the ready index since it was saved or loaded (`--index`): saved at stop.
    unsaved: AtomicU64,
}

/// What `Engine::save_added` did, said in one line.
#[derive(Debug, Clone, PartialEq)]
pub enum SaveAtStop {
    Saved(String),
    /// Inserts were buffered and never built: there is no index to save them in.
    NotBuilt(String),
    Failed(String),
}

pub struct Engine {
    cfg: ServeConfig,
    phase: AtomicU8,
    store: Mutex<Store>,
    /// Some once ready.
    index: RwLock<Option<IvfIndex>>,
    /// The search settings, fixed when the index becomes ready.
    settings: OnceLock<Settings>,
    /// Held for the whole build (moved into its blocking task): one build at a time, and
    /// searches that arrive meanwhile wait for it.
    build_lock: Arc<tokio::sync::Mutex<()>>,
    report: Mutex<BuildReport>,
    counters: Counters,
    /// Set on shutdown: a build in progress stops at its next check.
    stopping: AtomicBool,
}

impl Engine {
    /// A new engine; with `cfg.index` naming an existing file, ready at once with that index.
    /// Refuses bad settings (`InvalidInput`) and an index file it cannot read.
    pub fn new(cfg: ServeConfig) -> Result<Engine, VdbError> {
        cfg.check().map_err(VdbError::InvalidInput)?;
        if let Some(dim) = cfg.dim {
            settings::check_reorder_flag(&cfg.search, dim)
                .map_err(|e| VdbError::InvalidInput(e.message))?;
        }
        let engine = Engine {
            cfg,
            phase: AtomicU8::new(Phase::Empty as u8),
            store: Mutex::new(Store::default()),
            index: RwLock::new(None),
            settings: OnceLock::new(),
            build_lock: Arc::new(tokio::sync::Mutex::new(())),
            report: Mutex::new(BuildReport::default()),
            counters: Counters::default(),
            stopping: AtomicBool::new(false),
        };
        if let Some(path) = engine.cfg.index.clone().filter(|p| p.exists()) {
            engine.start_from(&path)?;
        }
        {
            let mut store = engine.store.lock();
            store.dim = store.dim.or(engine.cfg.dim);
        }
        Ok(engine)
    }

    fn start_from(&self, path: &std::path::Path) -> Result<(), VdbError> {
        let t0 = Instant::now();
        let index = vdb_core::persist::load(path)?;
        if let Some(dim) = self.cfg.dim.filter(|&d| d != index.dim()) {
            return vdb_core::invalid!(
                "--dim {dim} but the index in {} has dim {}",
                path.display(),
                index.dim()
            );
        }
        settings::check_reorder_flag(&self.cfg.search, index.dim())
            .map_err(|e| VdbError::InvalidInput(e.message))?;
        let chosen = match self.cfg.recall_target {
            // measured on the vectors the file holds, as a build measures on the inserted ones
            Some(target) => {
                let (vectors, ids) = crate::tune::stored_vectors(&index);
                let (s, t) = crate::tune::tune(
                    &index,
                    &vectors,
                    &ids,
                    target,
                    &self.cfg.search,
                    self.cfg.seed,
                    &vdb_core::error::never_interrupt,
                )?;
                if self.cfg.log {
                    println!(
                        "vdbbench serve: {} (from the index file's vectors)",
                        t.describe(&s)
                    );
                }
                self.report.lock().tune = Some(t);
                s
            }
            None => settings::defaults(&index, &self.cfg.search),
        };
        let mut store = self.store.lock();
        store.dim = Some(index.dim());
        store.ids = index.lists().iter().flat_map(|l| l.ids.iter()).collect();
        {
            let mut r = self.report.lock();
            r.loaded_from = Some(path.display().to_string());
            r.load_s = Some(t0.elapsed().as_secs_f64());
            r.nlist = index.nlist();
        }
        if self.cfg.log {
            println!(
                "loaded {} vectors of dim {} from {} ({:.2} s); search: {}",
                index.ntotal(),
                index.dim(),
                path.display(),
                t0.elapsed().as_secs_f64(),
                chosen.describe()
            );
        }
        let _ = self.settings.set(chosen);
        *self.index.write() = Some(index);
        self.phase.store(Phase::Ready as u8, Ordering::Release);
        Ok(())
    }

    pub fn config(&self) -> &ServeConfig {
        &self.cfg
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Asks a build in progress to stop (shutdown).
    pub fn stop_building(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub fn count_rejected(&self) {
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks `items` (ids, dimension, values) and takes them: into the buffer before the
    /// index is ready, else as a batch for `add_to_index`. Nothing is taken when any item is
    /// refused.
    pub fn accept(&self, items: Vec<InsertRequest>, bulk: bool) -> Result<Accepted, ApiError> {
        let mut store = self.store.lock();
        let n = items.len();
        let Some(first) = items.first() else {
            return Ok(Accepted::Buffered(0));
        };
        let dim = match store.dim {
            Some(d) => d,
            None => {
                if first.vector.is_empty() {
                    return Err(ApiError::bad_request(format!(
                        "{}: an empty vector; expected at least one value",
                        item_name(bulk, 0)
                    )));
                }
                settings::check_reorder_flag(&self.cfg.search, first.vector.len())?;
                first.vector.len()
            }
        };
        let mut seen = HashSet::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        for (i, item) in items.iter().enumerate() {
            let what = item_name(bulk, i);
            let id = i64::try_from(item.id).map_err(|_| {
                ApiError::bad_request(format!(
                    "{what}: id {} is above the largest id this server keeps ({})",
                    item.id,
                    i64::MAX
                ))
            })?;
            if item.vector.len() != dim {
                return Err(ApiError::bad_request(format!(
                    "{what}: vector has {} values; this server holds vectors of dim {dim}",
                    item.vector.len()
                )));
            }
            check_values(&item.vector, &what)?;
            if store.ids.contains(&id) {
                return Err(ApiError::conflict(format!(
                    "{what}: id {id} was inserted before; ids must be unique"
                )));
            }
            if !seen.insert(id) {
                return Err(ApiError::bad_request(format!(
                    "{what}: id {id} is given twice in this request; ids must be unique"
                )));
            }
            ids.push(id);
        }
        store.dim = Some(dim);
        store.ids.extend(ids.iter().copied());
        let mut vectors = Vec::with_capacity(n * dim);
        for item in items {
            vectors.extend_from_slice(&item.vector);
        }
        if self.phase() == Phase::Ready {
            return Ok(Accepted::ForIndex(Batch { vectors, ids }));
        }
        store.vectors.extend_from_slice(&vectors);
        store.row_ids.extend_from_slice(&ids);
        if self.phase() == Phase::Empty {
            self.phase.store(Phase::Buffering as u8, Ordering::Release);
        }
        Ok(Accepted::Buffered(n))
    }

    /// Adds a batch taken by `accept` to the ready index (blocking: run off the async workers).
    /// On failure its ids are released again.
    pub fn add_to_index(&self, batch: Batch) -> Result<usize, ApiError> {
        let n = batch.len();
        let result = match self.index.write().as_mut() {
            Some(index) => index
                .add(
                    &batch.vectors,
                    Some(&batch.ids),
                    Some(1),
                    &vdb_core::error::never_interrupt,
                )
                .map_err(engine_error),
            None => Err(ApiError::internal("the index is not ready")),
        };
        if result.is_err() {
            let mut store = self.store.lock();
            for id in &batch.ids {
                store.ids.remove(id);
            }
        } else {
            self.counters.unsaved.fetch_add(n as u64, Ordering::Relaxed);
        }
        result.map(|_| n)
    }

    /// With `--index FILE`: saves the index again when vectors were added to it since it was
    /// built or loaded (what `stop` calls, so accepted inserts outlive the server), and says
    /// what happened; None when there is nothing to save. Inserts still buffered (no build
    /// yet) have no index to go into, and the message says so.
    pub fn save_added(&self) -> Option<SaveAtStop> {
        let path = self.cfg.index.as_ref()?;
        let buffered = self.store.lock().row_ids.len();
        let guard = self.index.read();
        let Some(index) = guard.as_ref() else {
            return (buffered > 0).then(|| {
                SaveAtStop::NotBuilt(format!(
                    "{buffered} inserted vectors were never built (no search or POST /build came): \
                     not saved to {}",
                    path.display()
                ))
            });
        };
        let added = self.counters.unsaved.swap(0, Ordering::Relaxed);
        if added == 0 {
            return None;
        }
        let t0 = Instant::now();
        Some(match vdb_core::persist::save(index, path) {
            Ok(()) => SaveAtStop::Saved(format!(
                "saved the index with the {added} vectors added since its build or load to {} \
                 ({:.2} s)",
                path.display(),
                t0.elapsed().as_secs_f64()
            )),
            Err(e) => {
                self.counters.unsaved.fetch_add(added, Ordering::Relaxed);
                SaveAtStop::Failed(format!(
                    "could not save the {added} vectors added since the build to {}: {e}",
                    path.display()
                ))
            }
        })
    }

    /// Builds the index unless it is ready; concurrent callers wait for the one build.
    pub async fn ensure_ready(self: &Arc<Self>) -> Result<(), ApiError> {
        if self.phase() == Phase::Ready {
            return Ok(());
        }
        let guard = self.build_lock.clone().lock_owned().await;
        match self.phase() {
            Phase::Ready => return Ok(()),
            Phase::Empty => return Err(nothing_inserted()),
            _ => {}
        }
        let me = self.clone();
        // The guard goes with the build: should this request go away, the build still runs to
        // its end under the lock, and the next caller finds it ready.
        tokio::task::spawn_blocking(move || {
            let _guard = guard;
            me.build()
        })
        .await
        .map_err(|e| ApiError::internal(format!("the build failed: {e}")))?
    }

    /// The build itself (blocking).
    fn build(&self) -> Result<(), ApiError> {
        let (dim, vectors, row_ids) = {
            let mut store = self.store.lock();
            let Some(dim) = store.dim else {
                return Err(nothing_inserted());
            };
            self.phase.store(Phase::Building as u8, Ordering::Release);
            (
                dim,
                std::mem::take(&mut store.vectors),
                std::mem::take(&mut store.row_ids),
            )
        };
        self.counters.builds.fetch_add(1, Ordering::Relaxed);
        let interrupt = || -> vdb_core::Result<()> {
            if self.stopping.load(Ordering::Relaxed) {
                Err(VdbError::Interrupted)
            } else {
                Ok(())
            }
        };
        // A panic in the build is a bug; it is answered like a failed build, the vectors kept.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            build::build(&self.cfg, dim, &vectors, &row_ids, &interrupt)
        }))
        .unwrap_or_else(|p| {
            Err(VdbError::Io {
                context: "the build panicked".into(),
                source: std::io::Error::other(panic_text(&*p)),
            })
        });
        let (mut index, report, chosen) = match built {
            Ok(b) => b,
            Err(e) => {
                // Back to buffering, the vectors before any inserted meanwhile.
                let mut store = self.store.lock();
                let mut v = vectors;
                v.extend_from_slice(&store.vectors);
                store.vectors = v;
                let mut ids = row_ids;
                ids.extend_from_slice(&store.row_ids);
                store.row_ids = ids;
                self.phase.store(Phase::Buffering as u8, Ordering::Release);
                return Err(build_error(e));
            }
        };
        drop(vectors);
        drop(row_ids);
        *self.report.lock() = report;
        let mut store = self.store.lock();
        if !store.row_ids.is_empty() {
            let v = std::mem::take(&mut store.vectors);
            let ids = std::mem::take(&mut store.row_ids);
            if let Err(e) = index.add(&v, Some(&ids), None, &vdb_core::error::never_interrupt) {
                // Checked at insert: reaching here is a bug; those ids are given back.
                for id in &ids {
                    store.ids.remove(id);
                }
                eprintln!(
                    "vdbbench serve: {} vectors inserted during the build were not added: {e}",
                    ids.len()
                );
            }
        }
        let _ = self.settings.set(chosen);
        *self.index.write() = Some(index);
        self.phase.store(Phase::Ready as u8, Ordering::Release);
        Ok(())
    }

    /// Refuses a search that no build could answer (wrong dimension, bad values, top_k out of
    /// range of the vectors held) before it would start the build.
    pub fn check_search(&self, query: &[f32], top_k: u64) -> Result<(), ApiError> {
        let (dim, held) = {
            let store = self.store.lock();
            (store.dim, store.ids.len())
        };
        if held == 0 {
            return Err(nothing_inserted());
        }
        if let Some(dim) = dim.filter(|&d| d != query.len()) {
            return Err(ApiError::bad_request(format!(
                "vector has {} values; this server holds vectors of dim {dim}",
                query.len()
            )));
        }
        check_values(query, "vector")?;
        if top_k == 0 || top_k > held as u64 {
            return Err(ApiError::bad_request(format!(
                "top_k={top_k}: expected 1 <= top_k <= {held} (the vectors this server holds)"
            )));
        }
        Ok(())
    }

    /// The `top_k` nearest of `query`, best first (the index must be ready).
    pub fn search(&self, query: &[f32], top_k: u64) -> Result<Vec<Hit>, ApiError> {
        let guard = self.index.read();
        let (Some(index), Some(s)) = (guard.as_ref(), self.settings.get()) else {
            return Err(ApiError::internal("search before the index is ready"));
        };
        if query.len() != index.dim() {
            return Err(ApiError::bad_request(format!(
                "vector has {} values; this server holds vectors of dim {}",
                query.len(),
                index.dim()
            )));
        }
        check_values(query, "vector")?;
        let n = index.ntotal();
        if top_k == 0 || top_k > n as u64 {
            return Err(ApiError::bad_request(format!(
                "top_k={top_k}: expected 1 <= top_k <= {n} (the vectors this server holds)"
            )));
        }
        let k = top_k as usize;
        let tuning = Tuning {
            // reorder and rerank keep at least k candidates.
            reorder: Some(if s.reorder > 0 { s.reorder.max(k) } else { 0 }),
            probe_ratio: Some(s.probe_ratio),
        };
        let rerank = s.rerank.map(|r| if r > 0 { r.max(k) } else { 0 });
        let run = |nprobe: usize, tuning: Tuning| {
            index
                .search_with(
                    query,
                    k,
                    Some(nprobe),
                    rerank,
                    tuning,
                    Some(s.threads),
                    &vdb_core::error::never_interrupt,
                )
                .map_err(engine_error)
        };
        let (mut d, mut ids, _) = run(s.nprobe, tuning)?;
        if ids.contains(&-1) {
            // Fewer than top_k rows in the lists probed (a small index, or a query far from
            // most lists): every list is scanned, so the answer holds top_k results.
            let all = index.nlist().unwrap_or(s.nprobe);
            (d, ids, _) = run(
                all,
                Tuning {
                    probe_ratio: Some(0.0),
                    ..tuning
                },
            )?;
            self.counters.widened.fetch_add(1, Ordering::Relaxed);
        }
        drop(guard);
        self.counters.queries.fetch_add(1, Ordering::Relaxed);
        Ok(ids
            .into_iter()
            .zip(d)
            .filter(|&(id, _)| id >= 0)
            .map(|(id, distance)| Hit { id, distance })
            .collect())
    }

    /// Vectors held: in the index and in the buffer.
    pub fn held(&self) -> usize {
        let buffered = self.store.lock().row_ids.len();
        buffered + self.index.read().as_ref().map_or(0, IvfIndex::ntotal)
    }

    pub fn stats(&self) -> Stats {
        let (dim, buffered) = {
            let s = self.store.lock();
            (s.dim, s.row_ids.len())
        };
        let (indexed, nlist, metric, storage, bytes) = match self.index.read().as_ref() {
            Some(i) => (
                i.ntotal(),
                i.nlist(),
                Some(i.metric().name()),
                Some(i.storage().name()),
                i.bytes(),
            ),
            None => (0, None, None, None, 0),
        };
        Stats {
            state: self.phase(),
            vectors: indexed + buffered,
            indexed,
            buffered,
            dim,
            nlist,
            metric,
            storage,
            index_bytes: bytes,
            build: self.report.lock().clone(),
            builds: self.counters.builds.load(Ordering::Relaxed),
            search: self.settings.get().copied(),
            recall_target: self.cfg.recall_target,
            simd: vdb_core::kernels::active_level().name(),
            queries: self.counters.queries.load(Ordering::Relaxed),
            widened: self.counters.widened.load(Ordering::Relaxed),
            rejected: self.counters.rejected.load(Ordering::Relaxed),
            search_on: self.cfg.search_on.name(),
            max_body_bytes: self.cfg.max_body_bytes,
        }
    }
}
