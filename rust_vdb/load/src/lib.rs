//! vdb-load: the client side of a served benchmark. Drives any server that speaks the seed
//! harness's API (`POST /bulk_insert`, `POST /search`) from Rust threads, so the client is not
//! what limits the QPS it reports; `NullServer` answers at once, to measure that ceiling.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod api;
pub mod error;
pub mod insert;
pub mod null_server;
pub mod queries;

pub use error::LoadError;
pub use insert::bulk_insert;
pub use null_server::NullServer;
pub use queries::{run_queries, QueryPlan, QueryRun};
