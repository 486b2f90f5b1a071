//! Thread control for batch calls: a cached rayon pool per requested thread count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Result, VdbError};

/// The most threads a call may ask for (a guard against typos such as threads=10**6).
pub const MAX_THREADS: usize = 1024;

fn pools() -> &'static Mutex<HashMap<usize, Arc<ThreadPool>>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Checks a `threads=` argument: None (all cores) or 1..=MAX_THREADS.
pub fn check_threads(threads: Option<usize>) -> Result<()> {
    match threads {
        Some(0) => Err(VdbError::InvalidInput(
            "threads=0: expected None (all cores) or a count >= 1".into(),
        )),
        Some(t) if t > MAX_THREADS => Err(VdbError::InvalidInput(format!(
            "threads={t}: expected at most {MAX_THREADS}"
        ))),
        _ => Ok(()),
    }
}

/// The pool of exactly `n` threads, built on first use and kept for later calls.
pub fn pool(n: usize) -> Result<Arc<ThreadPool>> {
    check_threads(Some(n))?;
    let mut map = pools().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(&n) {
        return Ok(p.clone());
    }
    let p = ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("vdb-{n}-{i}"))
        .build()
        .map_err(|e| VdbError::InvalidInput(format!("cannot start {n} threads: {e}")))?;
    let p = Arc::new(p);
    map.insert(n, p.clone());
    Ok(p)
}

/// Runs `f` with rayon parallelism capped at `threads` (None: rayon's global pool, one
/// thread per core).
pub fn install<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    match threads {
        None => Ok(f()),
        Some(n) => Ok(pool(n)?.install(f)),
    }
}

/// The number of threads a call with `threads` would use.
pub fn effective_threads(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(rayon::current_num_threads)
}
