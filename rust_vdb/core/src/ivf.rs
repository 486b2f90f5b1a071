//! IvfIndex: k-means coarse lists holding ids, u8 codes and f16 (or f32) vectors contiguously;
//! search = route to nprobe lists -> scan (u8 prescore, or f16/f32) -> f16 rerank -> top k.

use std::cell::RefCell;
use std::time::Instant;

use half::f16;
use rayon::prelude::*;

use crate::error::{Interrupt, Result, VdbError};
use crate::flat::write_row;
use crate::kernels::{kernels, Kernels};
use crate::kmeans::{self, KMeansParams};
use crate::metric::{normalize_rows, Metric};
use crate::pool;
use crate::quant::Sq8;
use crate::search_stats::SearchStats;
use crate::topk::{Hit, TopK};
use crate::validate;

/// Queries per parallel task: also the block routed by one matrix product.
const QUERY_BLOCK: usize = 32;
/// Blocks with fewer queries route query by query with the kernels (a matrix product packs
/// every centroid first, which only pays off over several queries).
const ROUTE_GEMM_MIN: usize = 4;
/// Queries (or added vectors) between two interrupt checks.
const INTERRUPT_EVERY: usize = 1024;
/// The `nprobe` used when the caller gives none (clamped to nlist).
pub const DEFAULT_NPROBE: usize = 32;
/// The `rerank` used when the caller gives none: max(DEFAULT_RERANK, k).
pub const DEFAULT_RERANK: usize = 64;

/// What the inverted lists keep per vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    /// f32 vectors, exact scan.
    F32,
    /// f16 vectors (half the bytes), scanned with an f32 query.
    F16,
    /// u8 codes scanned first, the best `rerank` rescored with their f16 vectors.
    U8F16,
}

impl Storage {
    pub fn name(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
            Storage::U8F16 => "u8+f16",
        }
    }

    pub fn parse(s: &str) -> Result<Storage> {
        match s {
            "f32" => Ok(Storage::F32),
            "f16" => Ok(Storage::F16),
            "u8+f16" => Ok(Storage::U8F16),
            _ => Err(VdbError::InvalidInput(format!(
                "unknown storage {s:?}; expected one of \"f32\", \"f16\", \"u8+f16\""
            ))),
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Storage::F32 => 0,
            Storage::F16 => 1,
            Storage::U8F16 => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<Storage> {
        match c {
            0 => Some(Storage::F32),
            1 => Some(Storage::F16),
            2 => Some(Storage::U8F16),
            _ => None,
        }
    }
}

/// One inverted list: row i of each block belongs to `ids[i]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InvList {
    pub ids: Vec<i64>,
    /// dim u8 codes per vector ("u8+f16" only).
    pub codes: Vec<u8>,
    /// dim f16 values per vector ("f16" and "u8+f16").
    pub vf16: Vec<f16>,
    /// dim f32 values per vector ("f32" only).
    pub vf32: Vec<f32>,
    /// Per-vector `u8_row_term` of the codes ("u8+f16" with L2): lets the u8 prescore use
    /// `l2_u8_batch_pre` (VNNI). Derived data: recomputed on load, never stored.
    pub terms: Vec<i32>,
}

impl InvList {
    /// Recomputes the derived per-vector terms (after loading).
    pub fn fill_terms(&mut self, dim: usize) {
        self.terms = self
            .codes
            .chunks_exact(dim)
            .map(crate::kernels::scalar::u8_row_term)
            .collect();
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Search parameters after defaults were applied and checked.
#[derive(Clone, Copy, Debug)]
pub struct SearchParams {
    pub k: usize,
    pub nprobe: usize,
    pub rerank: usize,
}

#[derive(Clone, Debug)]
pub struct IvfIndex {
    pub(crate) dim: usize,
    pub(crate) metric: Metric,
    pub(crate) storage: Storage,
    pub(crate) seed: u64,
    /// The nlist asked for at construction (None: chosen from the training set size).
    pub(crate) nlist_request: Option<usize>,
    /// nlist rows of dim (empty until trained).
    pub(crate) centroids: Vec<f32>,
    /// Squared norms of the centroids (derived: routing scores ||c||^2 - 2 <q, c>).
    pub(crate) cnorms: Vec<f32>,
    pub(crate) sq: Option<Sq8>,
    pub(crate) lists: Vec<InvList>,
    pub(crate) ntotal: usize,
}

/// Per-thread buffers reused across queries and calls: a search allocates nothing per query.
#[derive(Default)]
struct Scratch {
    /// A block of (normalised) queries and their inner products with every centroid.
    qblock: Vec<f32>,
    dots: Vec<f32>,
    qcodes: Vec<u8>,
    qscaled: Vec<f32>,
    order: Vec<(f32, u32)>,
    fbuf: Vec<f32>,
    ubuf: Vec<u32>,
    cand: TopK<u64>,
    best: TopK<()>,
    cand_sorted: Vec<Hit<u64>>,
    best_sorted: Vec<Hit<()>>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl IvfIndex {
    pub fn new(
        dim: usize,
        nlist: Option<usize>,
        metric: Metric,
        storage: Storage,
        seed: u64,
    ) -> Result<IvfIndex> {
        if dim == 0 {
            return crate::invalid!("dim=0: expected dim >= 1");
        }
        if nlist == Some(0) {
            return crate::invalid!("nlist=0: expected None (4*sqrt(n_train)) or nlist >= 1");
        }
        Ok(IvfIndex {
            dim,
            metric,
            storage,
            seed,
            nlist_request: nlist,
            centroids: Vec::new(),
            cnorms: Vec::new(),
            sq: None,
            lists: Vec::new(),
            ntotal: 0,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn metric(&self) -> Metric {
        self.metric
    }
    pub fn storage(&self) -> Storage {
        self.storage
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn is_trained(&self) -> bool {
        !self.centroids.is_empty()
    }
    /// The number of lists: the trained count, else the requested one (None before training
    /// when chosen from the data).
    pub fn nlist(&self) -> Option<usize> {
        if self.is_trained() {
            Some(self.lists.len())
        } else {
            self.nlist_request
        }
    }
    pub fn ntotal(&self) -> usize {
        self.ntotal
    }
    pub fn centroids(&self) -> &[f32] {
        &self.centroids
    }
    pub fn lists(&self) -> &[InvList] {
        &self.lists
    }
    pub fn quantizer(&self) -> Option<&Sq8> {
        self.sq.as_ref()
    }

    /// Memory held by codes, vectors, centroids, ids and quantizer tables.
    pub fn bytes(&self) -> usize {
        let lists: usize = self
            .lists
            .iter()
            .map(|l| {
                l.ids.len() * 8
                    + l.codes.len()
                    + l.vf16.len() * 2
                    + l.vf32.len() * 4
                    + l.terms.len() * 4
            })
            .sum();
        let sq = self
            .sq
            .as_ref()
            .map_or(0, |s| (s.vmin.len() + s.step.len()) * 4);
        lists + self.centroids.len() * 4 + sq
    }

    /// nlist for a training set of n vectors: the requested one, else round(4 sqrt(n)).
    pub fn nlist_for(&self, n: usize) -> usize {
        self.nlist_request
            .unwrap_or_else(|| ((4.0 * (n as f64).sqrt()).round() as usize).clamp(1, n.max(1)))
    }

    /// Fits the coarse centroids (and the u8 quantizer) to `x`. Refused once vectors were added.
    pub fn train(&mut self, x: &[f32], threads: Option<usize>, interrupt: Interrupt) -> Result<()> {
        pool::check_threads(threads)?;
        let n = validate::rows(x, self.dim, "training vectors")?;
        validate::finite(x, self.dim, "training vectors")?;
        if self.ntotal > 0 {
            return crate::invalid!(
                "this index already holds {} vectors; train a new IvfIndex instead of retraining",
                self.ntotal
            );
        }
        if n == 0 {
            return crate::invalid!(
                "no training vectors: expected an (n, {}) array with n >= 1",
                self.dim
            );
        }
        let nlist = self.nlist_for(n);
        if nlist > n {
            return crate::invalid!(
                "nlist={nlist} needs at least {nlist} training vectors, got {n}"
            );
        }
        let owned;
        let x = if self.metric == Metric::Cosine {
            let mut v = x.to_vec();
            normalize_rows(&mut v, self.dim);
            owned = v;
            &owned[..]
        } else {
            x
        };
        let mut params = KMeansParams::new(nlist, self.seed);
        params.inner_product = self.metric.is_similarity();
        params.spherical = self.metric == Metric::Cosine;
        params.threads = threads;
        let km = kmeans::kmeans(x, self.dim, &params, interrupt)?;
        let sq = match self.storage {
            Storage::U8F16 => Some(Sq8::train(x, self.dim, self.metric)),
            _ => None,
        };
        // Commit only now: a failed or interrupted training leaves the index as it was.
        self.cnorms = kmeans::row_norms(&km.centroids, self.dim);
        self.centroids = km.centroids;
        self.sq = sq;
        self.lists = vec![InvList::default(); nlist];
        Ok(())
    }

    /// Adds vectors with ids ntotal..ntotal+n, or with the given ids (>= 0).
    pub fn add(
        &mut self,
        x: &[f32],
        ids: Option<&[i64]>,
        threads: Option<usize>,
        interrupt: Interrupt,
    ) -> Result<()> {
        let dim = self.dim;
        pool::check_threads(threads)?;
        let n = validate::rows(x, dim, "vectors")?;
        if !self.is_trained() {
            return Err(VdbError::NotReady(
                "add before train: call train(sample) on this IvfIndex first".into(),
            ));
        }
        validate::finite(x, dim, "vectors")?;
        if let Some(ids) = ids {
            if ids.len() != n {
                return crate::invalid!(
                    "ids has {} entries for {n} vectors; expected one id per vector",
                    ids.len()
                );
            }
            if let Some(p) = ids.iter().position(|&i| i < 0) {
                return crate::invalid!(
                    "ids[{p}] = {} is negative; expected ids >= 0 (-1 marks a missing result)",
                    ids[p]
                );
            }
        }
        if n == 0 {
            return Ok(());
        }
        let owned;
        let x = if self.metric == Metric::Cosine {
            let mut v = x.to_vec();
            normalize_rows(&mut v, dim);
            owned = v;
            &owned[..]
        } else {
            x
        };
        // Assign in interruptible chunks; nothing is mutated before every chunk is done.
        let c_norms = kmeans::row_norms(&self.centroids, dim);
        let mut asg = vec![0u32; n];
        let mut score = vec![0f32; n];
        for ((xs, a), s) in x
            .chunks(INTERRUPT_EVERY * 16 * dim)
            .zip(asg.chunks_mut(INTERRUPT_EVERY * 16))
            .zip(score.chunks_mut(INTERRUPT_EVERY * 16))
        {
            kmeans::assign(
                threads,
                xs,
                &self.centroids,
                &c_norms,
                dim,
                self.metric.is_similarity(),
                a,
                s,
            )?;
            interrupt()?;
        }
        drop(score);
        // Grow the lists: count first so each list reserves once.
        let mut counts = vec![0usize; self.lists.len()];
        for &a in &asg {
            counts[a as usize] += 1;
        }
        let kern = kernels();
        let base_id = self.ntotal as i64;
        for (l, &c) in self.lists.iter_mut().zip(&counts) {
            l.ids.reserve(c);
            match self.storage {
                Storage::F32 => l.vf32.reserve(c * dim),
                Storage::F16 => l.vf16.reserve(c * dim),
                Storage::U8F16 => {
                    l.vf16.reserve(c * dim);
                    l.codes.reserve(c * dim);
                    if !self.metric.is_similarity() {
                        l.terms.reserve(c);
                    }
                }
            }
        }
        let mut codes = vec![0u8; dim];
        let mut halfs = vec![f16::ZERO; dim];
        for (i, (row, &a)) in x.chunks_exact(dim).zip(&asg).enumerate() {
            let l = &mut self.lists[a as usize];
            l.ids.push(ids.map_or(base_id + i as i64, |ids| ids[i]));
            match self.storage {
                Storage::F32 => l.vf32.extend_from_slice(row),
                Storage::F16 => {
                    (kern.f32_to_f16)(row, &mut halfs);
                    l.vf16.extend_from_slice(&halfs);
                }
                Storage::U8F16 => {
                    (kern.f32_to_f16)(row, &mut halfs);
                    l.vf16.extend_from_slice(&halfs);
                    self.sq
                        .as_ref()
                        .expect("u8+f16 index trained without quantizer")
                        .encode(row, &mut codes);
                    l.codes.extend_from_slice(&codes);
                    if !self.metric.is_similarity() {
                        l.terms.push((kern.u8_row_term)(&codes));
                    }
                }
            }
        }
        self.ntotal += n;
        Ok(())
    }

    /// Applies defaults and checks k, nprobe, rerank against this index.
    pub fn params(
        &self,
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
    ) -> Result<SearchParams> {
        if !self.is_trained() {
            return Err(VdbError::NotReady(
                "search before train: call train(sample) and add(vectors) first".into(),
            ));
        }
        validate::k(k, self.ntotal)?;
        let nlist = self.lists.len();
        let nprobe = match nprobe {
            None => DEFAULT_NPROBE.min(nlist),
            Some(p) if p == 0 || p > nlist => {
                return crate::invalid!("nprobe={p} is outside 1..={nlist} (nlist of this index)")
            }
            Some(p) => p,
        };
        let rerank = match rerank {
            None => DEFAULT_RERANK.max(k),
            Some(r) if r > 0 && r < k => {
                return crate::invalid!(
                    "rerank={r} is below k={k}; expected 0 (u8 results alone) or rerank >= k"
                )
            }
            Some(r) => r,
        };
        Ok(SearchParams { k, nprobe, rerank })
    }

    /// The k best of each query: (distances, ids), nq * k each, best first.
    pub fn search(
        &self,
        queries: &[f32],
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
        threads: Option<usize>,
        interrupt: Interrupt,
    ) -> Result<(Vec<f32>, Vec<i64>, SearchStats)> {
        let dim = self.dim;
        let nq = validate::rows(queries, dim, "queries")?;
        let p = self.params(k, nprobe, rerank)?;
        validate::finite(queries, dim, "queries")?;
        pool::check_threads(threads)?;
        let t0 = Instant::now();
        let mut d = vec![0f32; nq * k];
        let mut ids = vec![0i64; nq * k];
        let mut stats = SearchStats::default();
        let sequential = nq <= 1 || threads == Some(1);
        for (ci, ((qs, dd), ii)) in queries
            .chunks(INTERRUPT_EVERY * dim)
            .zip(d.chunks_mut(INTERRUPT_EVERY * k))
            .zip(ids.chunks_mut(INTERRUPT_EVERY * k))
            .enumerate()
        {
            // Between chunks only: a call of one chunk never re-takes the interpreter.
            if ci > 0 {
                interrupt()?;
            }
            let s = if sequential {
                self.search_block(qs, &p, dd, ii)
            } else {
                pool::install(threads, || {
                    qs.par_chunks(QUERY_BLOCK * dim)
                        .zip(dd.par_chunks_mut(QUERY_BLOCK * k))
                        .zip(ii.par_chunks_mut(QUERY_BLOCK * k))
                        .map(|((qs, dd), ii)| self.search_block(qs, &p, dd, ii))
                        .reduce(SearchStats::default, |mut a, b| {
                            a.merge(&b);
                            a
                        })
                })?
            };
            stats.merge(&s);
        }
        stats.threads = if sequential {
            1
        } else {
            pool::effective_threads(threads).min(nq) as u64
        };
        stats.wall_s = t0.elapsed().as_secs_f64();
        Ok((d, ids, stats))
    }

    /// Searches a few queries on the current thread with its scratch buffers.
    fn search_block(
        &self,
        qs: &[f32],
        p: &SearchParams,
        out_d: &mut [f32],
        out_i: &mut [i64],
    ) -> SearchStats {
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let mut stats = SearchStats::default();
            let kern = kernels();
            let (dim, k, nlist) = (self.dim, p.k, self.lists.len());
            let mut qblock = std::mem::take(&mut scratch.qblock);
            let mut dots = std::mem::take(&mut scratch.dots);
            for ((sub, dd), ii) in qs
                .chunks(QUERY_BLOCK * dim)
                .zip(out_d.chunks_mut(QUERY_BLOCK * k))
                .zip(out_i.chunks_mut(QUERY_BLOCK * k))
            {
                let t0 = Instant::now();
                let m = sub.len() / dim;
                qblock.clear();
                qblock.extend_from_slice(sub);
                if self.metric == Metric::Cosine {
                    normalize_rows(&mut qblock, dim);
                }
                dots.resize(m * nlist, 0.0);
                self.centroid_dots(kern, &qblock, m, &mut dots);
                stats.routing_s += t0.elapsed().as_secs_f64();
                for qi in 0..m {
                    self.search_one(
                        kern,
                        &qblock[qi * dim..(qi + 1) * dim],
                        &dots[qi * nlist..(qi + 1) * nlist],
                        p,
                        &mut scratch,
                        &mut stats,
                        &mut dd[qi * k..(qi + 1) * k],
                        &mut ii[qi * k..(qi + 1) * k],
                    );
                }
            }
            scratch.qblock = qblock;
            scratch.dots = dots;
            stats
        })
    }

    /// Inner products of m queries with every centroid (m x nlist): one matrix product for
    /// a block, the dot kernel for a query or two.
    fn centroid_dots(&self, kern: &Kernels, qblock: &[f32], m: usize, dots: &mut [f32]) {
        let (dim, nlist) = (self.dim, self.lists.len());
        if m >= ROUTE_GEMM_MIN {
            // SAFETY: qblock is m x dim row-major, centroids nlist x dim row-major read as
            // their transpose (dim x nlist), dots is m x nlist row-major; lengths match.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    dim,
                    nlist,
                    1.0,
                    qblock.as_ptr(),
                    dim as isize,
                    1,
                    self.centroids.as_ptr(),
                    1,
                    dim as isize,
                    0.0,
                    dots.as_mut_ptr(),
                    nlist as isize,
                    1,
                );
            }
        } else {
            for (q, row) in qblock.chunks_exact(dim).zip(dots.chunks_exact_mut(nlist)) {
                (kern.dot_f32_batch)(q, &self.centroids, row);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn search_one(
        &self,
        kern: &Kernels,
        q: &[f32],
        dots: &[f32],
        p: &SearchParams,
        s: &mut Scratch,
        stats: &mut SearchStats,
        out_d: &mut [f32],
        out_i: &mut [i64],
    ) {
        let dim = self.dim;
        let nlist = self.lists.len();
        let sim = self.metric.is_similarity();
        let t0 = Instant::now();

        // Routing: rank the centroids by ||c||^2 - 2 <q, c> (l2) or -<q, c>, keep the
        // nprobe best (ties to the smaller list).
        s.order.clear();
        if sim {
            s.order
                .extend(dots.iter().enumerate().map(|(i, &d)| (-d, i as u32)));
        } else {
            s.order.extend(
                dots.iter()
                    .zip(&self.cnorms)
                    .enumerate()
                    .map(|(i, (&d, &c))| (c - 2.0 * d, i as u32)),
            );
        }
        let by_score = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if p.nprobe < nlist {
            s.order.select_nth_unstable_by(p.nprobe - 1, by_score);
            s.order.truncate(p.nprobe);
        }
        s.order.sort_unstable_by(by_score);
        let t1 = Instant::now();
        stats.routing_s += (t1 - t0).as_secs_f64();
        stats.lists_probed += p.nprobe as u64;
        stats.nq += 1;

        // Scan.
        let mut t2;
        match self.storage {
            Storage::F32 | Storage::F16 => {
                s.best.reset(p.k);
                for &(_, li) in &s.order {
                    let list = &self.lists[li as usize];
                    let n = list.len();
                    if n == 0 {
                        continue;
                    }
                    s.fbuf.resize(n, 0.0);
                    let out = &mut s.fbuf[..n];
                    match (self.storage, sim) {
                        (Storage::F32, false) => (kern.l2_f32_batch)(q, &list.vf32, out),
                        (Storage::F32, true) => (kern.dot_f32_batch)(q, &list.vf32, out),
                        (_, false) => (kern.l2_f32_f16_batch)(q, &list.vf16, out),
                        (_, true) => (kern.dot_f32_f16_batch)(q, &list.vf16, out),
                    }
                    push_all(&mut s.best, out, &list.ids, sim);
                    stats.codes_scanned += n as u64;
                }
                t2 = Instant::now();
                stats.prescore_s += (t2 - t1).as_secs_f64();
            }
            Storage::U8F16 => {
                let sq = self.sq.as_ref().expect("u8+f16 index without quantizer");
                let ncand = if p.rerank == 0 { p.k } else { p.rerank };
                s.cand.reset(ncand);
                s.qcodes.resize(dim, 0);
                s.qscaled.resize(dim, 0.0);
                let bias = if sim {
                    sq.ip_query(q, &mut s.qscaled)
                } else {
                    0.0
                };
                if !sim {
                    sq.encode(q, &mut s.qcodes);
                }
                for &(_, li) in &s.order {
                    let list = &self.lists[li as usize];
                    let n = list.len();
                    if n == 0 {
                        continue;
                    }
                    let loc = (li as u64) << 32;
                    if sim {
                        s.fbuf.resize(n, 0.0);
                        let out = &mut s.fbuf[..n];
                        (kern.dot_f32_u8_batch)(&s.qscaled, &list.codes, out);
                        let mut thr = s.cand.threshold();
                        for (j, &v) in out.iter().enumerate() {
                            let sc = -(bias + v);
                            if sc <= thr {
                                s.cand.push(sc, list.ids[j], loc | j as u64);
                                thr = s.cand.threshold();
                            }
                        }
                    } else {
                        s.ubuf.resize(n, 0);
                        let out = &mut s.ubuf[..n];
                        (kern.l2_u8_batch_pre)(&s.qcodes, &list.codes, &list.terms, out);
                        let mut thr = s.cand.threshold();
                        for (j, &v) in out.iter().enumerate() {
                            let sc = v as f32;
                            if sc <= thr {
                                s.cand.push(sc, list.ids[j], loc | j as u64);
                                thr = s.cand.threshold();
                            }
                        }
                    }
                    stats.codes_scanned += n as u64;
                }
                t2 = Instant::now();
                stats.prescore_s += (t2 - t1).as_secs_f64();
                s.cand.drain_sorted(&mut s.cand_sorted);
                s.best.reset(p.k);
                if p.rerank == 0 {
                    let scale = if sim { 1.0 } else { sq.l2_scale() };
                    for h in &s.cand_sorted {
                        s.best.push(h.score * scale, h.id, ());
                    }
                } else {
                    // Rescore in storage order (list, row): neighbouring rows, fewer misses.
                    // The result does not depend on the order (the heap breaks ties by id).
                    s.cand_sorted.sort_unstable_by_key(|h| h.payload);
                    for h in &s.cand_sorted {
                        let list = &self.lists[(h.payload >> 32) as usize];
                        let j = (h.payload & 0xFFFF_FFFF) as usize;
                        let v = &list.vf16[j * dim..(j + 1) * dim];
                        let sc = if sim {
                            -(kern.dot_f32_f16)(q, v)
                        } else {
                            (kern.l2_f32_f16)(q, v)
                        };
                        s.best.push(sc, h.id, ());
                    }
                    stats.candidates_reranked += s.cand_sorted.len() as u64;
                    let t3 = Instant::now();
                    stats.rerank_s += (t3 - t2).as_secs_f64();
                    t2 = t3;
                }
            }
        }

        s.best.drain_sorted(&mut s.best_sorted);
        write_row(self.metric, &s.best_sorted, out_d, out_i);
        stats.topk_s += t2.elapsed().as_secs_f64();
    }
}

/// Pushes a list's scores into the heap, skipping those that cannot enter.
#[inline]
fn push_all(heap: &mut TopK<()>, scores: &[f32], ids: &[i64], negate: bool) {
    let mut thr = heap.threshold();
    for (j, &v) in scores.iter().enumerate() {
        let sc = if negate { -v } else { v };
        if sc <= thr {
            heap.push(sc, ids[j], ());
            thr = heap.threshold();
        }
    }
}
