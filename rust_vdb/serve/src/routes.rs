//! The HTTP routes: the harness's `/insert`, `/bulk_insert`, `/search`, and ours: `/build`,
//! `/stats`, `/health`. Every error is JSON; a panic answers 500 and the server goes on.

use std::any::Any;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_http::catch_panic::CatchPanicLayer;

use crate::api::{
    ApiError, BulkInsertRequest, BulkInserted, InsertRequest, JsonBody, SearchRequest,
    SearchResponse, Status,
};
use crate::config::SearchOn;
use crate::engine::{Accepted, AppState, Stats};

pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .route("/insert", post(insert))
        .route("/bulk_insert", post(bulk_insert))
        .route("/search", post(search))
        .route("/build", post(build))
        .route("/stats", get(stats))
        .route("/health", get(health));
    guarded(routes, state)
}

/// `routes` with what every route gets: JSON 404/405, the body limit, the count of 4xx
/// answers, and a panic answered as 500 JSON.
pub fn guarded(routes: Router<AppState>, state: AppState) -> Router {
    let limit = state.config().max_body_bytes;
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_rejected,
        ))
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

async fn insert(
    State(engine): State<AppState>,
    JsonBody(req): JsonBody<InsertRequest>,
) -> Result<Json<Status>, ApiError> {
    take(&engine, vec![req], false).await?;
    Ok(Json(Status { status: "ok" }))
}

async fn bulk_insert(
    State(engine): State<AppState>,
    JsonBody(req): JsonBody<BulkInsertRequest>,
) -> Result<Json<BulkInserted>, ApiError> {
    let inserted = take(&engine, req.vectors, true).await?;
    Ok(Json(BulkInserted {
        status: "ok",
        inserted,
    }))
}

/// Buffers the items, or adds them to the ready index on the blocking pool.
async fn take(engine: &AppState, items: Vec<InsertRequest>, bulk: bool) -> Result<usize, ApiError> {
    match engine.accept(items, bulk)? {
        Accepted::Buffered(n) => Ok(n),
        Accepted::ForIndex(batch) if batch.is_empty() => Ok(0),
        Accepted::ForIndex(batch) => {
            let e = engine.clone();
            tokio::task::spawn_blocking(move || e.add_to_index(batch))
                .await
                .map_err(|e| ApiError::internal(format!("adding the vectors failed: {e}")))?
        }
    }
}

async fn search(
    State(engine): State<AppState>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    engine.check_search(&req.vector, req.top_k)?;
    engine.ensure_ready().await?;
    let results = match engine.config().search_on {
        SearchOn::Handler => engine.search(&req.vector, req.top_k)?,
        SearchOn::Blocking => {
            let e = engine.clone();
            tokio::task::spawn_blocking(move || e.search(&req.vector, req.top_k))
                .await
                .map_err(|e| ApiError::internal(format!("the search failed: {e}")))??
        }
    };
    Ok(Json(SearchResponse { results }))
}

/// Builds the index now (the first search would otherwise); answers the stats once ready.
async fn build(State(engine): State<AppState>) -> Result<Json<Stats>, ApiError> {
    engine.ensure_ready().await?;
    Ok(Json(engine.stats()))
}

async fn stats(State(engine): State<AppState>) -> Json<Stats> {
    Json(engine.stats())
}

async fn health(State(engine): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "state": engine.phase()}))
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route {} {}; routes: POST /insert, /bulk_insert, /search, /build; GET /stats, /health",
            req.method(),
            req.uri().path()
        ),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

async fn count_rejected(State(engine): State<AppState>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if resp.status().is_client_error() {
        engine.count_rejected();
    }
    resp
}

fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response {
    let what = crate::engine::panic_text(&*err);
    ApiError::internal(format!("internal error (the server goes on): {what}")).into_response()
}
