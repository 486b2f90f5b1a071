//! What `GET /stats` answers.

use serde::Serialize;

use crate::build::BuildReport;
use crate::engine::Phase;
use crate::settings::Settings;

/// The server's state, its build and its counters.
#[derive(Serialize)]
pub struct Stats {
    pub state: Phase,
    /// Held: in the index plus buffered.
    pub vectors: usize,
    pub indexed: usize,
    pub buffered: usize,
    pub dim: Option<usize>,
    pub nlist: Option<usize>,
    pub metric: Option<&'static str>,
    pub storage: Option<&'static str>,
    pub index_bytes: usize,
    pub build: BuildReport,
    /// Builds started (a failed build is retried by the next search).
    pub builds: u64,
    /// The settings every search uses (None until ready).
    pub search: Option<Settings>,
    pub recall_target: Option<f64>,
    pub simd: &'static str,
    pub queries: u64,
    /// Searches whose probed lists held fewer than top_k rows, repeated over every list.
    pub widened: u64,
    /// Requests answered with a 4xx.
    pub rejected: u64,
    pub search_on: &'static str,
    pub max_body_bytes: usize,
}
