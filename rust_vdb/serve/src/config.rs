//! What a server is started with: where it listens, how it builds the index, how it searches.

use std::path::PathBuf;

/// How the server builds its index and answers searches. Every `Option` left `None` takes the
/// default named in its comment.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub host: String,
    /// 0: any free port.
    pub port: u16,
    /// Fixes the dimension before the first insert (None: the first insert fixes it).
    pub dim: Option<usize>,
    /// Lists of the index (None: `vdb_core::defaults::default_nlist(n)` of the n vectors held
    /// at the build).
    pub nlist: Option<usize>,
    /// Seeds the training sample, k-means and the recall-target sample.
    pub seed: u64,
    /// The search settings; with `recall_target` set, those left None are chosen at the build.
    pub search: SearchFlags,
    /// Pick nprobe (and reorder / probe ratio) at the build so that recall@10 on a sample of the
    /// inserted vectors reaches this.
    pub recall_target: Option<f64>,
    /// Start from this saved index when it exists; otherwise save the built index there.
    pub index: Option<PathBuf>,
    /// Largest request body accepted, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// Threads of the async runtime (None: one per core).
    pub workers: Option<usize>,
    /// Where a search runs: on tokio's blocking pool (default), or on the async worker that
    /// received it.
    pub search_on: SearchOn,
    /// Say the build and its parameters on stdout.
    pub log: bool,
}

/// Search settings as given on the command line (None: chosen by the server).
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchFlags {
    pub nprobe: Option<usize>,
    /// None: the engine's default (64, or none for exact codes).
    pub rerank: Option<usize>,
    /// 0: off.
    pub reorder: Option<usize>,
    /// 0: off.
    pub probe_ratio: Option<f32>,
    /// Threads one request's search may use (default 1).
    pub threads: Option<usize>,
}

/// Where a search request runs (`benchmarks/perf/serve_search_on.py` measures both). Blocking
/// is the default: the hand-off adds a few tens of microseconds to the median, but a worker
/// that runs a search serves no other connection's I/O meanwhile, which showed in the tail
/// (p99) of Handler and, on a heavily loaded machine, in its QPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchOn {
    /// In the async handler itself: no hand-off, but the worker serves no other connection
    /// while the search (~0.05-0.2 ms) runs.
    Handler,
    /// On tokio's blocking pool (`spawn_blocking`): a hand-off to another thread and back.
    Blocking,
}

impl SearchOn {
    pub fn parse(s: &str) -> Result<SearchOn, String> {
        match s {
            "handler" => Ok(SearchOn::Handler),
            "blocking" => Ok(SearchOn::Blocking),
            _ => Err(format!(
                "search_on={s:?}: expected \"handler\" or \"blocking\""
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SearchOn::Handler => "handler",
            SearchOn::Blocking => "blocking",
        }
    }
}

/// The default body limit: a bulk insert of 1,000 128-d vectors is ~1 MB of JSON.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 8080,
            dim: None,
            nlist: None,
            seed: 0,
            search: SearchFlags::default(),
            recall_target: None,
            index: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            workers: None,
            search_on: SearchOn::Blocking,
            log: false,
        }
    }
}

impl ServeConfig {
    /// Refuses settings no build could use, before the server starts.
    pub fn check(&self) -> Result<(), String> {
        if self.dim == Some(0) {
            return Err("dim=0: expected dim >= 1".into());
        }
        if self.nlist == Some(0) {
            return Err("nlist=0: expected nlist >= 1".into());
        }
        if self.search.nprobe == Some(0) {
            return Err("nprobe=0: expected nprobe >= 1".into());
        }
        if self.search.threads == Some(0) {
            return Err("threads=0: expected threads >= 1".into());
        }
        if let Some(r) = self.search.probe_ratio {
            if !(r == 0.0 || (r.is_finite() && r >= 1.0)) {
                return Err(format!("probe_ratio={r}: expected 0 (off) or a ratio >= 1"));
            }
        }
        if let Some(t) = self.recall_target {
            if !(t > 0.0 && t < 1.0) {
                return Err(format!(
                    "recall_target={t}: expected a recall between 0 and 1 (e.g. 0.95)"
                ));
            }
        }
        if self.max_body_bytes == 0 {
            return Err("max_body_bytes=0: expected a positive limit".into());
        }
        if self.workers == Some(0) {
            return Err("workers=0: expected workers >= 1".into());
        }
        Ok(())
    }
}
