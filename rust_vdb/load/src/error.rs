//! What can go wrong between the client and a server.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LoadError {
    /// The server answered with a status other than 2xx.
    #[error("{endpoint}: HTTP {status}: {body}")]
    Status {
        endpoint: String,
        status: u16,
        body: String,
    },
    /// No answer: connection refused or reset, or the request timed out.
    #[error("{endpoint}: {message}")]
    Transport { endpoint: String, message: String },
    /// A 2xx answer whose body is not what the API says.
    #[error("{endpoint}: unexpected answer: {message}")]
    Protocol { endpoint: String, message: String },
    /// Arguments the caller got wrong (shapes, counts).
    #[error("{0}")]
    Invalid(String),
    /// Stopped by the caller (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

/// A short, printable piece of a response body for error messages.
pub(crate) fn snippet(body: &str) -> String {
    let body = body.trim();
    if body.chars().count() <= 300 {
        body.to_string()
    } else {
        let cut: String = body.chars().take(300).collect();
        format!("{cut}...")
    }
}
