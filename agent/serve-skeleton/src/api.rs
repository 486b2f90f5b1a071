//! The fixed request and response types of the API and the handlers that check each request
//! before the engine sees it. Not editable by the model.
//!
//! - `POST /insert {"id", "vector"}` -> `{"status": "ok"}`
//! - `POST /bulk_insert {"vectors": [{"id", "vector"}, ...]}` -> `{"status": "ok", "inserted": n}`
//! - `POST /search {"vector", "top_k"}` -> `{"results": [{"id", "distance"}, ...]}`, closest first
//!
//! Bad input gets a 400 with `{"error": "..."}` and the server keeps serving: an empty or
//! wrong-dimension vector, a non-finite value, top_k 0, an id given twice, a search before any
//! insert. A body that is not the request's JSON gets axum's status for it (400, 415 or 422),
//! with its message in the same `{"error": "..."}` form.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::engine::Engine;

#[derive(Deserialize)]
pub struct InsertRequest {
    pub id: u64,
    pub vector: Vec<f32>,
}

#[derive(Serialize)]
pub struct InsertResponse {
    pub status: &'static str,
}

#[derive(Deserialize)]
pub struct BulkInsertRequest {
    pub vectors: Vec<InsertRequest>,
}

#[derive(Serialize)]
pub struct BulkInsertResponse {
    pub status: &'static str,
    pub inserted: usize,
}

#[derive(Deserialize)]
pub struct SearchRequest {
    pub vector: Vec<f32>,
    pub top_k: u32,
}

#[derive(Serialize)]
pub struct SearchResult {
    pub id: u64,
    pub distance: f64,
}

#[derive(Serialize)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
}

/// A request refused with a 4xx status and a JSON body saying why.
pub struct BadRequest(StatusCode, String);

impl BadRequest {
    fn new(text: impl Into<String>) -> Self {
        BadRequest(StatusCode::BAD_REQUEST, text.into())
    }
}

impl From<JsonRejection> for BadRequest {
    fn from(r: JsonRejection) -> Self {
        BadRequest(r.status(), r.body_text())
    }
}

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

/// The vector is non-empty, finite and of the engine's dimension (once it has one).
fn check_vector(engine: &Engine, v: &[f32], what: &str) -> Result<(), BadRequest> {
    if v.is_empty() {
        return Err(BadRequest::new(format!("{what}: the vector is empty")));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(BadRequest::new(format!("{what}: value {i} is not finite")));
    }
    if let Some(dim) = engine.dim() {
        if v.len() != dim {
            return Err(BadRequest::new(format!("{what}: dimension {} but the vectors held have {dim}", v.len())));
        }
    }
    Ok(())
}

fn check_batch(engine: &Engine, items: &[InsertRequest]) -> Result<(), BadRequest> {
    let first = items.first().map(|r| r.vector.len());
    for (i, r) in items.iter().enumerate() {
        check_vector(engine, &r.vector, &format!("vector {i} (id {})", r.id))?;
        if Some(r.vector.len()) != first {
            return Err(BadRequest::new(format!("vector {i} (id {}): dimension {} differs from the batch's first ({})",
                                          r.id, r.vector.len(), first.unwrap_or(0))));
        }
    }
    Ok(())
}

fn add(engine: &Engine, items: Vec<InsertRequest>) -> Result<usize, BadRequest> {
    check_batch(engine, &items)?;
    let items: Vec<(u64, Vec<f32>)> = items.into_iter().map(|r| (r.id, r.vector)).collect();
    engine.insert(items).map_err(BadRequest::new)
}

pub async fn insert(State(engine): State<Arc<Engine>>, body: Result<Json<InsertRequest>, JsonRejection>)
    -> Result<Json<InsertResponse>, BadRequest> {
    let Json(req) = body?;
    add(&engine, vec![req])?;
    Ok(Json(InsertResponse { status: "ok" }))
}

pub async fn bulk_insert(State(engine): State<Arc<Engine>>, body: Result<Json<BulkInsertRequest>, JsonRejection>)
    -> Result<Json<BulkInsertResponse>, BadRequest> {
    let Json(req) = body?;
    let inserted = add(&engine, req.vectors)?;
    Ok(Json(BulkInsertResponse { status: "ok", inserted }))
}

pub async fn search(State(engine): State<Arc<Engine>>, body: Result<Json<SearchRequest>, JsonRejection>)
    -> Result<Json<SearchResponse>, BadRequest> {
    let Json(req) = body?;
    if engine.dim().is_none() {
        return Err(BadRequest::new("search before any insert: no vectors are held"));
    }
    check_vector(&engine, &req.vector, "query")?;
    if req.top_k == 0 {
        return Err(BadRequest::new("top_k must be at least 1"));
    }
    let results = engine
        .search(&req.vector, req.top_k as usize)
        .into_iter()
        .map(|(id, distance)| SearchResult { id, distance: distance as f64 })
        .collect();
    Ok(Json(SearchResponse { results }))
}
