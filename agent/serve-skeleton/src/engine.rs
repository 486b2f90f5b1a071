//! The engine: where vectors are stored and searched. This file (and any module under
//! src/engine/) is the part a model rewrites; src/main.rs and src/api.rs call only the four
//! methods below, and check every request before it gets here (finite values, one dimension,
//! top_k >= 1, a search only once vectors are held).
//!
//! As given it is correct and deliberately naive: an exact brute-force scan of every stored
//! vector for each query, one scalar squared-L2 loop per vector on the request's thread, a
//! sorted insertion list for the top k. Everything fast is left to build.

use std::collections::HashSet;
use std::sync::RwLock;

/// Every vector held, row-major, with its id.
struct Store {
    dim: usize,
    ids: Vec<u64>,
    data: Vec<f32>,
    seen: HashSet<u64>,
}

pub struct Engine {
    store: RwLock<Store>,
}

/// Squared Euclidean distance, the plain scalar loop.
fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for i in 0..a.len() {
        let d = a[i] - b[i];
        sum += d * d;
    }
    sum
}

/// Insert (dist, id) into `best`, kept sorted by (distance, id) and at most `k` long.
fn push_top_k(best: &mut Vec<(f32, u64)>, k: usize, dist: f32, id: u64) {
    if best.len() == k {
        let (worst_d, worst_id) = best[k - 1];
        if dist > worst_d || (dist == worst_d && id > worst_id) {
            return;
        }
        best.pop();
    }
    let pos = best
        .iter()
        .position(|&(d, i)| dist < d || (dist == d && id < i))
        .unwrap_or(best.len());
    best.insert(pos, (dist, id));
}

impl Engine {
    pub fn new() -> Self {
        Engine { store: RwLock::new(Store { dim: 0, ids: Vec::new(), data: Vec::new(), seen: HashSet::new() }) }
    }

    /// The dimension of the vectors held; None before the first insert.
    pub fn dim(&self) -> Option<usize> {
        let s = self.store.read().unwrap();
        if s.ids.is_empty() { None } else { Some(s.dim) }
    }

    /// Store a batch (all of one dimension, checked by the caller); returns how many were added.
    /// An id already held, or given twice in the batch, refuses the whole batch.
    pub fn insert(&self, items: Vec<(u64, Vec<f32>)>) -> Result<usize, String> {
        let mut s = self.store.write().unwrap();
        let mut batch = HashSet::with_capacity(items.len());
        for (id, _) in &items {
            if s.seen.contains(id) || !batch.insert(*id) {
                return Err(format!("id {id} is already held (ids must be unique)"));
            }
        }
        if let Some((_, v)) = items.first() {
            if s.ids.is_empty() {
                s.dim = v.len();
            }
        }
        let n = items.len();
        for (id, v) in items {
            s.ids.push(id);
            s.seen.insert(id);
            s.data.extend_from_slice(&v);
        }
        Ok(n)
    }

    /// The `top_k` nearest vectors to `query` (of the engine's dimension) as (id, Euclidean
    /// distance), closest first, ties to the smaller id; fewer when fewer are held.
    pub fn search(&self, query: &[f32], top_k: usize) -> Vec<(u64, f32)> {
        let s = self.store.read().unwrap();
        let mut best: Vec<(f32, u64)> = Vec::with_capacity(top_k + 1);
        for (row, &id) in s.ids.iter().enumerate() {
            let v = &s.data[row * s.dim..(row + 1) * s.dim];
            push_top_k(&mut best, top_k, l2_squared(query, v), id);
        }
        best.into_iter().map(|(d, id)| (id, d.sqrt())).collect()
    }
}
