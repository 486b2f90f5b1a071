//! Thread control: a cached rayon pool per requested thread count for batch calls, and
//! spinning helper threads that share one query's scan with its caller (`run_shared`).

use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Result, VdbError};
use crate::sharing::{self, Sharing};

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

/// How long a shared-query helper spins, waiting for its next job, before it parks. Python
/// calls one query at a time ~240 µs apart at 1M (tens of µs of them between calls), and
/// waking a parked thread costs 15-50 µs on a virtual machine, about what sharing the scan
/// saves: a helper that sleeps between back-to-back queries joins late or not at all. 1 ms
/// covers the gap between such calls with room to spare (the OpenMP runtimes' GOMP_SPINCOUNT
/// and KMP_BLOCKTIME do the same) and bounds what an idle helper burns after the last query.
pub const HELPER_SPIN: Duration = Duration::from_millis(1);

// A helper's `state`; the arrows say who moves it (C: the caller that claimed the helper,
// H: the helper thread). IDLE -C-> POSTED, PARKED -C-> POSTED (and unpark), IDLE -H-> PARKED,
// POSTED -H-> RUNNING -H-> DONE -C-> IDLE, and POSTED -C-> IDLE (abandoned: not started in
// time). One atomic carries it all, so a post and a helper going to sleep cannot miss
// each other: whichever of the two comes second sees the other's value.
const IDLE: u8 = 0;
const PARKED: u8 = 1;
const POSTED: u8 = 2;
const RUNNING: u8 = 3;
const DONE: u8 = 4;

/// A job as the helper sees it: a caller's closure with its lifetime erased. Only called
/// between the helper's POSTED -> RUNNING and its DONE, and a caller does not return while
/// its job is RUNNING, so the closure is alive whenever it is called.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn() + Sync + 'static));
// SAFETY: the pointee is Sync (callable from any thread), and the protocol above keeps it
// alive while a helper holds the pointer.
unsafe impl Send for Job {}

/// A panic's payload, carried from a helper back to its caller.
type Panic = Box<dyn Any + Send>;

/// One helper thread and its mailbox; claimed by at most one caller at a time.
struct Helper {
    claimed: AtomicBool,
    state: AtomicU8,
    /// The posted job in, and its panic (if any) out.
    mailbox: Mutex<(Option<Job>, Option<Panic>)>,
    /// Its thread, once started (None: it could not be).
    thread: OnceLock<Option<Thread>>,
}

/// One helper per core but the caller's, started on first use and kept: more threads than
/// cores would only take turns (and on one core a spinning helper would steal the caller's).
fn helpers() -> &'static [Helper] {
    static HELPERS: OnceLock<Box<[Helper]>> = OnceLock::new();
    HELPERS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (1..cores)
            .map(|_| Helper {
                claimed: AtomicBool::new(false),
                state: AtomicU8::new(IDLE),
                mailbox: Mutex::new((None, None)),
                thread: OnceLock::new(),
            })
            .collect()
    })
}

/// A helper thread's life: run posted jobs; between them spin for HELPER_SPIN, then park
/// until a caller posts (a wake-up, even for a job abandoned meanwhile, starts a new spin:
/// queries are coming again).
fn helper_loop(h: &'static Helper) {
    let mut awake_since = Instant::now();
    let mut spins = 0u32;
    loop {
        if h.state.load(Ordering::Acquire) == POSTED
            && h.state
                .compare_exchange(POSTED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let job = h.mailbox.lock().unwrap_or_else(|e| e.into_inner()).0.take();
            let out = match job {
                // SAFETY: RUNNING was claimed, so the caller waits for DONE before returning
                // and the closure is alive (see Job).
                Some(job) => catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)() })),
                None => Ok(()),
            };
            h.mailbox.lock().unwrap_or_else(|e| e.into_inner()).1 = out.err();
            h.state.store(DONE, Ordering::Release);
            awake_since = Instant::now();
            continue;
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // Reading the clock costs more than a spin: look at it every 64th. On a busy machine
        // (a recent stall) no spin: a spinning helper is one more runnable thread, and the
        // scheduler takes its share from the caller's core.
        if spins & 63 != 0 || (awake_since.elapsed() < HELPER_SPIN && !BACKOFF.busy()) {
            continue;
        }
        if h.state
            .compare_exchange(IDLE, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // park() may return spuriously: sleep on until a caller has moved the state.
            while h.state.load(Ordering::Acquire) == PARKED {
                std::thread::park();
            }
            awake_since = Instant::now();
        }
    }
}

/// Claims a free helper, starting its thread on first use; None when all are taken (or no
/// thread could be started).
fn claim_helper() -> Option<&'static Helper> {
    let h = helpers().iter().find(|h| {
        h.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    })?;
    let started = h.thread.get_or_init(|| {
        std::thread::Builder::new()
            .name("vdb-helper".into())
            .spawn(move || helper_loop(h))
            .ok()
            .map(|j| j.thread().clone())
    });
    if started.is_none() {
        h.claimed.store(false, Ordering::Release);
        return None;
    }
    Some(h)
}

/// A caller that waited longer than this, after its own run, for a helper that had started
/// found it preempted: its core was given to another process for a scheduler slice
/// (milliseconds). A helper that keeps its core finishes its last list within microseconds of
/// the caller.
const STALL: Duration = Duration::from_micros(300);
/// A caller whose wall time exceeds its thread's CPU time by this much during a shared call
/// was taken off its core: often by its own helper, woken onto the caller's core while
/// another process holds the other one, so the two runs take turns instead of sharing.
/// (Descheduling is what costs this much; interrupts and page faults are counted as CPU time
/// or take microseconds.)
const LOST: Duration = Duration::from_micros(50);
/// Shared calls without a stall that lower the backoff level by one (see `Backoff`).
const CLEAN_PER_LEVEL: u32 = 64;
/// After a stall single queries run alone for 2^level ms, at most 2^MAX_LEVEL (about a second).
const MAX_LEVEL: u32 = 10;

/// When single queries stop sharing, on a machine whose cores are busy with other work. A
/// stall costs its caller milliseconds, sharing saves ~0.1 ms a query at 1M, so sharing pays
/// only while fewer than ~1 in 40 shared calls stall: a stall raises the level and the calls
/// of the next 2^level ms run alone; CLEAN_PER_LEVEL shared calls without one lower it. The
/// level therefore climbs where more than 1 in CLEAN_PER_LEVEL calls stall (with one core kept
/// busy, ~2-7% did, and the mean latency of 2 threads fell below one thread's), and on a
/// quiet machine a rare stall costs a couple of unshared calls. The window is time, not a
/// count of calls: how busy the machine is changes with time, and a caller that searches
/// rarely still shares again once its window is over. Relaxed atomics: concurrent callers may
/// race on an update, which only moves a heuristic.
struct Backoff {
    level: AtomicU32,
    clean: AtomicU32,
    /// Nanoseconds after `epoch()` before which calls run alone.
    until_ns: AtomicU64,
}

static BACKOFF: Backoff = Backoff {
    level: AtomicU32::new(0),
    clean: AtomicU32::new(0),
    until_ns: AtomicU64::new(0),
};

/// The instant the backoff's times count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

impl Backoff {
    /// False while the window after a stall lasts.
    fn may_share(&self) -> bool {
        let until = self.until_ns.load(Ordering::Relaxed);
        until == 0 || now_ns() >= until
    }

    /// Whether a stall was seen lately (the level has not yet decayed to 0).
    fn busy(&self) -> bool {
        self.level.load(Ordering::Relaxed) > 0
    }

    /// Records how a shared call went.
    fn record(&self, stalled: bool) {
        if stalled {
            let level = (self.level.load(Ordering::Relaxed) + 1).min(MAX_LEVEL);
            self.level.store(level, Ordering::Relaxed);
            self.clean.store(0, Ordering::Relaxed);
            let window = Duration::from_millis(1 << level).as_nanos() as u64;
            self.until_ns.store(now_ns() + window, Ordering::Relaxed);
        } else if self.clean.fetch_add(1, Ordering::Relaxed) + 1 >= CLEAN_PER_LEVEL {
            self.clean.store(0, Ordering::Relaxed);
            let _ = self
                .level
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1));
        }
    }
}

/// CPU time the calling thread has run (None where the OS has no per-thread clock).
fn thread_cpu() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        sharing::cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// How many of `want` helper threads a single query should share its scan with now, under the
/// process's `sharing::policy`. Auto: none while a recent stall says this machine's cores are
/// busy (`Backoff`), and no more than the cores other processes' work leaves free beside the
/// caller's (`sharing::others`). A query given none scans alone on the one-thread path (its
/// prefetch cursor runs on across lists), not on a split path without helpers.
pub fn helpers_free(want: usize) -> usize {
    let helpers = helpers().len();
    let n = want.min(helpers);
    match sharing::policy() {
        Sharing::Never => 0,
        Sharing::Always => n,
        Sharing::Auto if n == 0 || !BACKOFF.may_share() => 0,
        Sharing::Auto => match sharing::others() {
            Some(others) => n.min(sharing::free_beside_caller(helpers + 1, others)),
            None => n,
        },
    }
}

/// Runs `work` on the calling thread and, at once, on up to `helpers` helper threads (fewer
/// when other callers hold them, none on a single core), and returns what each run returned
/// (the caller's first). `work` should pull its items from shared claims (a counter, or both
/// ends of a range), so any run may take any item.
///
/// The caller never waits for a helper to start: a helper that has not started by the time
/// the caller's own run returns is abandoned and never calls `work`. The helpers spin for
/// HELPER_SPIN after each job, so a call that follows another finds them awake. A helper
/// that did start is waited for, even when the caller's own run panics. A panic in any run
/// is re-raised on the caller once every started helper has finished. A call whose caller
/// waited for a stalled helper is recorded for `helpers_free`.
pub fn run_shared<R: Send>(helpers: usize, work: &(dyn Fn() -> R + Sync)) -> Vec<R> {
    let mut claimed: Vec<&'static Helper> = Vec::with_capacity(helpers);
    while claimed.len() < helpers {
        match claim_helper() {
            Some(h) => claimed.push(h),
            None => break,
        }
    }
    // Each helper's run leaves its result here (any order: only the caller's must be first).
    let theirs = Mutex::new(Vec::with_capacity(claimed.len()));
    let job = || {
        let r = work();
        theirs.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    };
    let job: &(dyn Fn() + Sync) = &job;
    // SAFETY: lifetime erasure only; a helper calls it only while this call waits (see Job).
    let job = Job(unsafe { std::mem::transmute::<_, *const (dyn Fn() + Sync + 'static)>(job) });
    for h in &claimed {
        h.mailbox.lock().unwrap_or_else(|e| e.into_inner()).0 = Some(job);
        if h.state.swap(POSTED, Ordering::AcqRel) == PARKED {
            if let Some(Some(t)) = h.thread.get() {
                t.unpark();
            }
        }
    }
    // The caller's own run may panic too: the helpers that started must still be waited for
    // before unwinding frees what `work` borrows.
    let (started, cpu0) = (Instant::now(), thread_cpu());
    let mine = catch_unwind(AssertUnwindSafe(work));
    let mine_done = Instant::now();
    let (mut helper_panic, mut waited, mut ran) = (None, false, false);
    for h in claimed {
        let abandoned = h
            .state
            .compare_exchange(POSTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if !abandoned {
            ran = true;
            while h.state.load(Ordering::Acquire) != DONE {
                std::hint::spin_loop();
            }
            waited |= mine_done.elapsed() > STALL;
            let panic = h.mailbox.lock().unwrap_or_else(|e| e.into_inner()).1.take();
            helper_panic = helper_panic.or(panic);
            h.state.store(IDLE, Ordering::Release);
        }
        h.mailbox.lock().unwrap_or_else(|e| e.into_inner()).0 = None;
        h.claimed.store(false, Ordering::Release);
    }
    if ran {
        // The caller itself lost its core for a while (another runnable thread took it): on
        // a machine that busy the helper is as likely to be taken off mid-query.
        let lost = match (cpu0, thread_cpu()) {
            (Some(a), Some(b)) => started.elapsed().saturating_sub(b.saturating_sub(a)) > LOST,
            _ => false,
        };
        BACKOFF.record(waited || lost);
    }
    match (mine, helper_panic) {
        (Err(panic), _) | (Ok(_), Some(panic)) => resume_unwind(panic),
        (Ok(r), None) => {
            let mut results = theirs.into_inner().unwrap_or_else(|e| e.into_inner());
            results.insert(0, r);
            results
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::MutexGuard;

    /// The tests share the process's helpers and watch their states: one test at a time.
    fn serial() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every started helper has parked (they must, HELPER_SPIN after their last
    /// job); false on a single core, where there are no helpers to test.
    fn all_parked() -> bool {
        run_shared(1, &|| ()); // starts a helper if none has been yet
        let t0 = Instant::now();
        while !helpers().iter().all(|h| {
            h.thread.get().is_none_or(|t| t.is_none()) || h.state.load(Ordering::Acquire) == PARKED
        }) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "a helper never parked"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        !helpers().is_empty()
    }

    /// Runs `work` with one helper, the caller's own run holding back until the helper has
    /// started (so it cannot be abandoned); `work` gets whether it runs on the helper.
    fn with_started_helper<R: Send>(work: impl Fn(bool) -> R + Sync) -> Vec<R> {
        let started = AtomicBool::new(false);
        let caller = std::thread::current().id();
        run_shared(1, &|| {
            if std::thread::current().id() == caller {
                // The pool tests run one at a time (serial), so a helper is free; a bound
                // turns a broken hand-off into a failure instead of a hang.
                let t0 = Instant::now();
                while !started.load(Ordering::Acquire) {
                    assert!(
                        t0.elapsed() < Duration::from_secs(10),
                        "the helper never started"
                    );
                    std::hint::spin_loop();
                }
                work(false)
            } else {
                started.store(true, Ordering::Release);
                work(true)
            }
        })
    }

    #[test]
    fn a_parked_helper_is_abandoned_and_never_runs_the_job_later() {
        let _g = serial();
        static HELPER_RUNS: AtomicUsize = AtomicUsize::new(0);
        let caller = std::thread::current().id();
        let work = || {
            if std::thread::current().id() != caller {
                HELPER_RUNS.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Waking a parked thread takes microseconds and the caller's run nothing, so most
        // calls abandon their helper; but on a busy machine the woken helper can preempt its
        // caller every time. Calls go on until a few were abandoned, for up to 10 s.
        let (mut abandoned, t0) = (0, Instant::now());
        while abandoned < 5 && t0.elapsed() < Duration::from_secs(10) {
            if !all_parked() {
                return;
            }
            let before = HELPER_RUNS.load(Ordering::SeqCst);
            let runs = run_shared(1, &work).len();
            abandoned += (runs == 1) as usize;
            std::thread::sleep(Duration::from_millis(2));
            assert_eq!(HELPER_RUNS.load(Ordering::SeqCst) - before, runs - 1);
        }
        if abandoned == 0 {
            eprintln!(
                "NOT EXERCISED: every helper started before its caller returned (a busy machine)"
            );
        }
    }

    #[test]
    fn a_panic_on_either_side_reaches_the_caller_after_the_helper_finished() {
        let _g = serial();
        if !all_parked() {
            return;
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            with_started_helper(|on_helper| {
                if on_helper {
                    panic!("helper failed");
                }
            })
        }));
        let msg = r.expect_err("a helper's panic must reach the caller");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"helper failed"));
        // The helper thread lives on and runs the next job.
        assert_eq!(
            with_started_helper(|on_helper| on_helper),
            vec![false, true]
        );
        // The caller panics while the helper still runs: the helper finishes first (it
        // reads the caller's stack).
        let finished = AtomicBool::new(false);
        let r = catch_unwind(AssertUnwindSafe(|| {
            with_started_helper(|on_helper| {
                if on_helper {
                    std::thread::sleep(Duration::from_millis(50));
                    finished.store(true, Ordering::Release);
                } else {
                    panic!("caller failed");
                }
            })
        }));
        assert!(r.is_err());
        assert!(
            finished.load(Ordering::Acquire),
            "unwound before the helper finished"
        );
    }

    #[test]
    fn after_a_stall_calls_run_alone_longer_the_more_stalls_there_are() {
        let b = Backoff {
            level: AtomicU32::new(0),
            clean: AtomicU32::new(0),
            until_ns: AtomicU64::new(0),
        };
        // what is left of the window, in ms
        let left =
            |b: &Backoff| b.until_ns.load(Ordering::Relaxed).saturating_sub(now_ns()) as f64 / 1e6;
        assert!(b.may_share(), "sharing is allowed until a stall");
        b.record(true);
        assert!(
            !b.may_share() && left(&b) <= 2.0,
            "the first stall: 2 ms alone"
        );
        std::thread::sleep(Duration::from_millis(3));
        assert!(b.may_share(), "the window is over");
        b.record(true);
        b.record(true);
        assert!(
            !b.may_share() && left(&b) > 4.0 && left(&b) <= 8.0,
            "the third in a row: 8 ms"
        );
        for _ in 0..20 {
            b.record(true);
        }
        let cap = (1u64 << MAX_LEVEL) as f64;
        assert!(left(&b) > cap / 2.0 && left(&b) <= cap, "capped");
        assert!(b.busy());
        // Shares without a stall bring it down one level per CLEAN_PER_LEVEL.
        for _ in 0..(MAX_LEVEL - 1) * CLEAN_PER_LEVEL {
            b.record(false);
        }
        assert_eq!(b.level.load(Ordering::Relaxed), 1);
        b.record(true);
        assert!(
            left(&b) > 2.0 && left(&b) <= 4.0,
            "a stall after that: level 2, 4 ms"
        );
        for _ in 0..2 * CLEAN_PER_LEVEL {
            b.record(false);
        }
        assert!(!b.busy(), "back to level 0: helpers spin again");
    }

    #[test]
    fn many_concurrent_callers_each_take_every_item_once() {
        let _g = serial();
        let cores = helpers().len() + 1;
        std::thread::scope(|sc| {
            for _ in 0..6 {
                sc.spawn(|| {
                    for _ in 0..300 {
                        let next = AtomicUsize::new(0);
                        let work = || {
                            let mut mine = Vec::new();
                            while let i @ 0..64 = next.fetch_add(1, Ordering::Relaxed) {
                                mine.push(i);
                            }
                            mine
                        };
                        let runs = run_shared(3, &work);
                        assert!((1..=cores.min(4)).contains(&runs.len()));
                        let mut all: Vec<usize> = runs.into_iter().flatten().collect();
                        all.sort_unstable();
                        assert_eq!(all, (0..64).collect::<Vec<_>>());
                    }
                });
            }
        });
        // Every claim was given back.
        assert!(helpers().iter().all(|h| !h.claimed.load(Ordering::Acquire)));
    }
}
