//! Checks of request values, and the errors the engine answers with.

use axum::http::StatusCode;
use vdb_core::validate::F16_OVERFLOW;
use vdb_core::VdbError;

use crate::api::ApiError;

/// The message of a caught panic.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

pub fn item_name(bulk: bool, i: usize) -> String {
    if bulk {
        format!("vectors[{i}]")
    } else {
        "vector".to_string()
    }
}

/// Finite and within f16's range (the index keeps an f16 copy of every vector).
pub fn check_values(v: &[f32], what: &str) -> Result<(), ApiError> {
    if let Some(p) = v
        .iter()
        .position(|x| !x.is_finite() || x.abs() >= F16_OVERFLOW)
    {
        let why = if v[p].is_finite() {
            "outside +-65504, the range of the f16 copy the index keeps"
        } else {
            "expected finite values"
        };
        return Err(ApiError::bad_request(format!(
            "{what}: value {} at position {p}: {why}",
            v[p]
        )));
    }
    Ok(())
}

pub fn nothing_inserted() -> ApiError {
    ApiError::conflict("no vectors inserted yet: insert vectors before searching or building")
}

pub fn engine_error(e: VdbError) -> ApiError {
    match e {
        VdbError::InvalidInput(m) => ApiError::bad_request(m),
        VdbError::NotReady(m) => ApiError::conflict(m),
        e => ApiError::internal(e.to_string()),
    }
}

/// A build that failed: too few vectors for the lists asked for is the caller's to fix (insert
/// more), shutdown is 503, anything else 500.
pub fn build_error(e: VdbError) -> ApiError {
    match e {
        VdbError::InvalidInput(m) | VdbError::NotReady(m) => {
            ApiError::conflict(format!("the index cannot be built yet: {m}"))
        }
        VdbError::Interrupted => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the build was stopped: the server is shutting down",
        ),
        e => ApiError::internal(format!("the build failed: {e}")),
    }
}
