//! Concurrent clients, one query per request: the measured part of a served benchmark.
//!
//! Each client is an OS thread with one kept-alive connection and one request in flight; the
//! clients take the next query of a shared order until it is exhausted (the seed harness's
//! semaphore of N permits over a shuffled order does the same). Latency runs from the request's
//! first byte to the answer's last; QPS is answered requests over the wall time from the
//! common start to the last answer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::api::{endpoint, Search, SearchAnswer};
use crate::error::{snippet, LoadError};
use crate::insert::{agent, post};

/// What to send: `order` lists query rows (of `queries`, row-major, `dim` columns) in the
/// order they are issued; a row may appear more than once.
pub struct QueryPlan<'a> {
    pub url: &'a str,
    pub queries: &'a [f32],
    pub dim: usize,
    pub top_k: u32,
    pub clients: usize,
    /// Rows 0..warmup (of `queries`, in their own order) sent first by one client, unmeasured.
    pub warmup: usize,
    pub order: &'a [usize],
    pub timeout: Duration,
}

/// What came back, per position of the plan's `order`.
pub struct QueryRun {
    /// `order.len() * top_k` ids, -1 where the server returned fewer or failed.
    pub ids: Vec<i64>,
    /// The server's distances, NaN where absent.
    pub distances: Vec<f64>,
    /// Seconds per request; NaN where it failed.
    pub latency_s: Vec<f64>,
    pub wall_s: f64,
    /// Requests that failed (status, transport or a body that is not the API's).
    pub errors: usize,
    pub first_error: Option<String>,
    pub warmup_errors: usize,
}

struct Answer {
    pos: usize,
    hits: Result<SearchAnswer, LoadError>,
    latency_s: f64,
}

fn search_once(agent: &ureq::Agent, url: &str, q: &[f32], top_k: u32) -> (Result<SearchAnswer, LoadError>, f64) {
    let body = serde_json::to_vec(&Search { vector: q, top_k }).expect("a float slice serializes");
    let t0 = Instant::now();
    let answer = post(agent, url, &body);
    let latency = t0.elapsed().as_secs_f64();
    let parsed = answer.and_then(|text| {
        serde_json::from_str::<SearchAnswer>(&text).map_err(|e| LoadError::Protocol {
            endpoint: url.to_string(),
            message: format!("{e} in {}", snippet(&text)),
        })
    });
    (parsed, latency)
}

fn check(plan: &QueryPlan<'_>) -> Result<usize, LoadError> {
    let invalid = |m: String| Err(LoadError::Invalid(m));
    if plan.dim == 0 || !plan.queries.len().is_multiple_of(plan.dim) {
        return invalid(format!("{} values are not rows of dim {}", plan.queries.len(), plan.dim));
    }
    let nq = plan.queries.len() / plan.dim;
    if plan.clients == 0 || plan.top_k == 0 {
        return invalid(format!(
            "clients and top_k must be >= 1, got clients={} top_k={}",
            plan.clients, plan.top_k
        ));
    }
    if let Some(&bad) = plan.order.iter().find(|&&r| r >= nq) {
        return invalid(format!("order names row {bad}, but there are {nq} queries"));
    }
    Ok(nq)
}

/// Runs the plan. `interrupt` is polled by the calling thread while the clients run; an error
/// from it stops every client after its request in flight and is returned.
pub fn run_queries(
    plan: &QueryPlan<'_>,
    interrupt: &(dyn Fn() -> Result<(), LoadError> + Sync),
) -> Result<QueryRun, LoadError> {
    let nq = check(plan)?;
    let url = endpoint(plan.url, "search");
    let row = |r: usize| &plan.queries[r * plan.dim..(r + 1) * plan.dim];

    let mut warmup_errors = 0;
    if plan.warmup > 0 {
        let a = agent(plan.timeout);
        for r in 0..plan.warmup.min(nq) {
            if search_once(&a, &url, row(r), plan.top_k).0.is_err() {
                warmup_errors += 1;
            }
            if r % 64 == 63 {
                interrupt()?;
            }
        }
    }

    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let running = AtomicUsize::new(plan.clients);
    let start = Barrier::new(plan.clients + 1);
    let finished: Mutex<Option<Instant>> = Mutex::new(None);
    let answers: Mutex<Vec<Answer>> = Mutex::new(Vec::with_capacity(plan.order.len()));
    let mut stopped_by: Option<LoadError> = None;
    let t0 = std::thread::scope(|s| {
        for _ in 0..plan.clients {
            s.spawn(|| {
                let a = agent(plan.timeout);
                let mut mine = Vec::new();
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let pos = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&r) = plan.order.get(pos) else { break };
                    let (hits, latency_s) = search_once(&a, &url, row(r), plan.top_k);
                    mine.push(Answer { pos, hits, latency_s });
                }
                let end = Instant::now();
                {
                    let mut f = finished.lock().unwrap_or_else(|p| p.into_inner());
                    *f = Some(f.map_or(end, |prev| prev.max(end)));
                }
                answers.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
                running.fetch_sub(1, Ordering::Release);
            });
        }
        start.wait();
        let t0 = Instant::now();
        while running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(20));
            if stopped_by.is_none() {
                if let Err(e) = interrupt() {
                    stop.store(true, Ordering::Relaxed);
                    stopped_by = Some(e);
                }
            }
        }
        t0
    });
    if let Some(e) = stopped_by {
        return Err(e);
    }
    let end = finished.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or(t0);
    let k = plan.top_k as usize;
    let n = plan.order.len();
    let mut run = QueryRun {
        ids: vec![-1; n * k],
        distances: vec![f64::NAN; n * k],
        latency_s: vec![f64::NAN; n],
        wall_s: end.saturating_duration_since(t0).as_secs_f64(),
        errors: 0,
        first_error: None,
        warmup_errors,
    };
    let mut answers = answers.into_inner().unwrap_or_else(|p| p.into_inner());
    answers.sort_by_key(|a| a.pos);
    for a in answers {
        match a.hits {
            Ok(found) => {
                run.latency_s[a.pos] = a.latency_s;
                for (j, hit) in found.results.iter().take(k).enumerate() {
                    run.ids[a.pos * k + j] = i64::try_from(hit.id).unwrap_or(-1);
                    run.distances[a.pos * k + j] = hit.distance;
                }
            }
            Err(e) => {
                run.errors += 1;
                if run.first_error.is_none() {
                    run.first_error = Some(e.to_string());
                }
            }
        }
    }
    Ok(run)
}
