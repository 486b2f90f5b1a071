//! The fixed half of the served skeleton: the HTTP server (axum on tokio) that routes the three
//! endpoints of the vector-db-bench API to the engine. Not editable by the model.
//!
//! PORT (default 8080) is the port it listens on, on all interfaces.

mod api;
mod engine;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::post;
use axum::Router;

/// Largest request body accepted: a bulk insert of 1,000 vectors of 128 floats written as JSON
/// is 1-2 MB; axum's default limit (2 MB) would refuse a batch of long decimal floats.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

#[tokio::main]
async fn main() {
    let port: u16 = match std::env::var("PORT") {
        Ok(text) => match text.parse() {
            Ok(p) => p,
            Err(_) => {
                eprintln!("PORT={text:?} is not a port number");
                std::process::exit(2);
            }
        },
        Err(_) => 8080,
    };
    let engine = Arc::new(engine::Engine::new());
    let app = Router::new()
        .route("/insert", post(api::insert))
        .route("/bulk_insert", post(api::bulk_insert))
        .route("/search", post(api::search))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(engine);
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("serve_skeleton listening on {addr}");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
}
