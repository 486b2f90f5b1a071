//! vdb-core: the vdbbench engine. Pure Rust; the Python bindings live in `rust_vdb/py`.

pub mod kernels;
