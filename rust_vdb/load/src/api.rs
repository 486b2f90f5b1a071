//! The JSON bodies of the API, as the seed harness's client sends and reads them.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
pub struct InsertItem<'a> {
    pub id: u64,
    pub vector: &'a [f32],
}

#[derive(Serialize)]
pub struct BulkInsert<'a> {
    pub vectors: Vec<InsertItem<'a>>,
}

#[derive(Deserialize)]
pub struct BulkInsertAnswer {
    pub inserted: u64,
}

#[derive(Serialize)]
pub struct Search<'a> {
    pub vector: &'a [f32],
    pub top_k: u32,
}

#[derive(Deserialize)]
pub struct Hit {
    pub id: u64,
    /// Servers disagree on what a distance is (squared or not); it is kept, never scored.
    #[serde(default = "nan")]
    pub distance: f64,
}

fn nan() -> f64 {
    f64::NAN
}

#[derive(Deserialize)]
pub struct SearchAnswer {
    pub results: Vec<Hit>,
}

/// `base` + `/path`, without a doubled slash.
pub fn endpoint(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}
