//! The wire format: request and response bodies of the harness's API, and errors as JSON.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::AppState;

#[derive(Deserialize)]
pub struct InsertRequest {
    /// u64 on the wire as the harness sends it; ids above i64::MAX are refused.
    pub id: u64,
    pub vector: Vec<f32>,
}

#[derive(Deserialize)]
pub struct BulkInsertRequest {
    pub vectors: Vec<InsertRequest>,
}

#[derive(Deserialize)]
pub struct SearchRequest {
    pub vector: Vec<f32>,
    pub top_k: u64,
}

#[derive(Serialize)]
pub struct Status {
    pub status: &'static str,
}

#[derive(Serialize)]
pub struct BulkInserted {
    pub status: &'static str,
    pub inserted: usize,
}

#[derive(Serialize)]
pub struct Hit {
    pub id: i64,
    /// The engine's distance (squared L2 for "l2"), as the f32 it computed.
    pub distance: f32,
}

#[derive(Serialize)]
pub struct SearchResponse {
    pub results: Vec<Hit>,
}

/// A refused or failed request: its status and what was wrong, answered as `{"error": ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: &self.message,
            }),
        )
            .into_response()
    }
}

/// A JSON request body, read whatever its Content-Type (clients such as `curl -d` send
/// form types); every failure is an `ApiError`: 413 over the body limit, 400 for text that is
/// not JSON, 422 for JSON of the wrong shape or types.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            let status = r.status();
            let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!(
                    "request body is over the server's limit of {} bytes (--max-body-mb)",
                    state.config().max_body_bytes
                )
            } else {
                format!("could not read the request body: {}", r.body_text())
            };
            ApiError::new(status, message)
        })?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| {
            use serde_json::error::Category;
            let status = match e.classify() {
                Category::Data => StatusCode::UNPROCESSABLE_ENTITY,
                _ => StatusCode::BAD_REQUEST,
            };
            ApiError::new(status, format!("invalid JSON body: {e}"))
        })
    }
}
