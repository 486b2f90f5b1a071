//! vdb-core: the vdbbench engine. Pure Rust; the Python bindings live in `rust_vdb/py`.

// Every unsafe block says why it is sound (CI denies this lint for benches and tests too).
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod centroid_codes;
pub mod defaults;
pub mod error;
pub mod flat;
pub mod hugepages;
pub mod ivf;
pub mod kernels;
pub mod kmeans;
pub mod matmul;
pub mod metric;
pub mod persist;
pub mod pool;
pub mod pq4;
pub mod probe_ratio;
pub mod quant;
pub mod rng;
pub mod route;
pub mod search_stats;
pub mod sharing;
pub mod topk;
pub mod validate;

pub use error::{Result, VdbError};
pub use flat::FlatIndex;
pub use ivf::{prefilter_applies, IvfIndex, Storage, Tuning};
pub use metric::Metric;
pub use search_stats::SearchStats;
