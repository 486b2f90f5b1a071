//! vdb-serve: the vdbbench engine behind the HTTP JSON API of the KCORES vector-db-bench
//! harness (`POST /insert`, `/bulk_insert`, `/search`), plus `/build`, `/stats`, `/health`.
//! The engine (`vdb-core`) knows nothing of HTTP; this crate only wraps it.

pub mod api;
pub mod build;
pub mod checks;
pub mod config;
pub mod engine;
pub mod routes;
pub mod server;
pub mod settings;
pub mod stats;
pub mod tune;

pub use config::{SearchFlags, SearchOn, ServeConfig};
pub use engine::{Engine, Phase, Stats};
pub use routes::router;
pub use server::ServerHandle;
