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

/// Runs `work` on the calling thread and, at once, on `helpers` threads of the pool for
/// `threads`, and returns what each run returned (the caller's first). `work` should pull its
/// items from a shared counter, so any run may take any item.
///
/// The caller never waits for a helper to wake up: a helper that has not started by the time
/// the caller's own run returns is abandoned and never calls `work` (waking a pool thread
/// costs 15-50 µs on a virtual machine, as much as a whole single-query scan saves). A helper
/// that did start is waited for, even when the caller's own run panics. A panic in any run is
/// re-raised on the caller once every started helper has finished.
pub fn run_shared<R: Send + 'static>(
    helpers: usize,
    threads: Option<usize>,
    work: &(dyn Fn() -> R + Sync),
) -> Result<Vec<R>> {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicU8, Ordering};

    const PENDING: u8 = 0;
    const RUNNING: u8 = 1;
    const DONE: u8 = 2;
    const ABANDONED: u8 = 3;
    type Outcome<R> = std::thread::Result<R>;
    struct Slot<R> {
        state: AtomicU8,
        out: Mutex<Option<Outcome<R>>>,
    }
    /// `work` with its lifetime erased: only dereferenced between a helper's PENDING ->
    /// RUNNING and its DONE, and the caller does not return before DONE once RUNNING began.
    struct WorkPtr<R>(*const (dyn Fn() -> R + Sync + 'static));
    // SAFETY: the pointee is Sync, and the protocol above keeps it alive while it is used.
    unsafe impl<R> Send for WorkPtr<R> {}

    let pool = match threads {
        Some(n) => Some(pool(n)?),
        None => None,
    };
    let slots: Vec<Arc<Slot<R>>> = (0..helpers)
        .map(|_| {
            Arc::new(Slot {
                state: AtomicU8::new(PENDING),
                out: Mutex::new(None),
            })
        })
        .collect();
    // SAFETY: lifetime erasure only; see WorkPtr.
    let erased: *const (dyn Fn() -> R + Sync + 'static) = unsafe { std::mem::transmute(work) };
    for slot in &slots {
        let slot = slot.clone();
        let ptr = WorkPtr(erased);
        let job = move || {
            let ptr = ptr;
            if slot
                .state
                .compare_exchange(PENDING, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return; // abandoned: the caller may already be gone
            }
            // SAFETY: RUNNING was claimed, so the caller waits for DONE before returning.
            let out = catch_unwind(AssertUnwindSafe(|| unsafe { (*ptr.0)() }));
            *slot.out.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            slot.state.store(DONE, Ordering::Release);
        };
        match &pool {
            Some(p) => p.spawn(job),
            None => rayon::spawn(job),
        }
    }
    // The caller's own run may panic too: the helpers that started must still be waited for
    // before unwinding frees what `work` borrows.
    let mine = catch_unwind(AssertUnwindSafe(work));
    let mut results = Vec::with_capacity(helpers + 1);
    let mut helper_panic = None;
    for slot in &slots {
        if slot
            .state
            .compare_exchange(PENDING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            continue;
        }
        while slot.state.load(Ordering::Acquire) != DONE {
            std::hint::spin_loop();
        }
        match slot.out.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(Ok(r)) => results.push(r),
            Some(Err(panic)) => helper_panic = helper_panic.or(Some(panic)),
            None => {}
        }
    }
    match (mine, helper_panic) {
        (Err(panic), _) | (Ok(_), Some(panic)) => resume_unwind(panic),
        (Ok(r), None) => {
            results.insert(0, r);
            Ok(results)
        }
    }
}
