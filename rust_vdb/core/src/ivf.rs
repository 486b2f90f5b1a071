//! IvfIndex: k-means coarse lists holding ids, u8 codes and f16 (or f32) vectors contiguously;
//! search = route to nprobe lists -> scan (u8 prescore, or f16/f32) -> f16 rerank -> top k.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
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
use crate::route::SuperRouting;
use crate::search_stats::SearchStats;
use crate::topk::{Hit, Reservoir, TopK};
use crate::validate;

/// Queries routed by one matrix product (the product packs every centroid once per block: 128
/// vs 32 gave 1.11x batch QPS on synth-sift-100k, 256 no more).
const ROUTE_BLOCK: usize = 128;
/// Queries searched together by one task: the lists they share are scanned back to back.
/// Parallel calls use smaller blocks when there are too few queries to keep threads busy.
const SCAN_BLOCK: usize = 1024;
/// Blocks with fewer queries route query by query with the kernels (a matrix product packs
/// every centroid first, which only pays off over several queries).
const ROUTE_GEMM_MIN: usize = 4;
/// Rerank reads this many candidates ahead (kernels.md: ~4 ahead halves the random f16 reads).
const RERANK_PREFETCH: usize = 4;
/// A single query searched with several threads splits its scan across them only when its
/// probed lists hold at least this many vectors (below, the hand-off costs more than it saves).
const SPLIT_MIN_CODES: usize = 2048;
/// Queries (or added vectors) between two interrupt checks.
const INTERRUPT_EVERY: usize = 1024;
/// The `nprobe` used when the caller gives none: at least this many lists (clamped to nlist)...
pub const DEFAULT_NPROBE: usize = 32;
/// ...and at least this fraction of them: recall@10 >= 0.95 on SIFT-like data needs 1.3-1.7% of
/// round(4 sqrt(n)) lists at 1M (DATA_NOTES; replica: nprobe 46 of 4000 gives 0.951, 32 only
/// 0.935, 64 0.964), while below ~640k vectors the floor of 32 already covers more than 1.6%.
pub const DEFAULT_NPROBE_FRACTION: f64 = 0.016;

/// The default `nprobe` for an index of `nlist` lists.
pub fn default_nprobe(nlist: usize) -> usize {
    let by_fraction = (nlist as f64 * DEFAULT_NPROBE_FRACTION).ceil() as usize;
    DEFAULT_NPROBE.max(by_fraction).min(nlist).max(1)
}
/// The `rerank` used when the caller gives none: max(DEFAULT_RERANK, k), except for L2
/// queries of a u8+f16 index whose codes are exact (see `IvfIndex::codes_exact`).
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
    /// rerank was not given and the codes are exact: queries whose own codes are exact skip it.
    pub rerank_auto: bool,
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
    /// The centroids as f16 (derived). Centroids are rounded to f16 values when set, so this
    /// copy holds the same numbers in half the bytes: single-query routing streams it (the
    /// centroid scan is memory-bound there: 2 MB of f32 per query at 1M), batch routing
    /// multiplies the f32 copy.
    pub(crate) centroids_f16: Vec<f16>,
    /// The centroids grouped for two-level routing (derived; None below route::MIN_NLIST
    /// lists and for "ip", where a group's centre says little about its members' products).
    pub(crate) routing: Option<SuperRouting>,
    pub(crate) sq: Option<Sq8>,
    pub(crate) lists: Vec<InvList>,
    pub(crate) ntotal: usize,
    /// u8+f16 with L2: every stored vector's u8 codes decode exactly to its f16 values (integer
    /// data such as SIFT, step 1). The u8 distance of a query whose own codes are exact is then
    /// the f16 distance itself, so the default search skips the rerank for such queries: same
    /// results, none of its scattered f16 reads. Derived: kept up by `add`, recomputed on load.
    pub(crate) codes_exact: bool,
}

/// Per-thread buffers reused across queries and calls: a search allocates nothing per query.
#[derive(Default)]
struct Scratch {
    /// The block's (normalised) queries, and inner products of a sub-block with every centroid.
    qblock: Vec<f32>,
    dots: Vec<f32>,
    order: Vec<(f32, u32)>,
    /// Two-level routing: the groups of one query, best first.
    groups: Vec<(f32, u32)>,
    /// (list << 32 | query) for every probe of the block, sorted: the visiting order.
    probes: Vec<u64>,
    /// Per query: u8 codes (l2) or step-scaled values and offset term (ip) for the prescore.
    qcodes: Vec<u8>,
    /// Per query of the block: whether its u8 candidates are rescored with f16.
    rerank_q: Vec<bool>,
    qscaled: Vec<f32>,
    bias: Vec<f32>,
    fbuf: Vec<f32>,
    ubuf: Vec<u32>,
    /// Per query of the block: the best candidates, payload = (list << 32 | row).
    heaps: Vec<Reservoir<u64>>,
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
            centroids_f16: Vec::new(),
            routing: None,
            sq: None,
            lists: Vec::new(),
            ntotal: 0,
            codes_exact: storage == Storage::U8F16 && metric == Metric::L2,
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

    /// Installs trained or loaded centroids, rounded to f16 values, with their derived data.
    pub(crate) fn set_centroids(&mut self, mut c: Vec<f32>) {
        for v in c.iter_mut() {
            *v = f16::from_f32(*v).to_f32();
        }
        self.cnorms = kmeans::row_norms(&c, self.dim);
        self.centroids_f16 = c.iter().map(|&v| f16::from_f32(v)).collect();
        self.routing = match self.metric {
            Metric::Ip => None,
            _ => SuperRouting::build(&c, self.dim, self.seed),
        };
        self.centroids = c;
    }

    /// Whether the default search may skip the rerank for exactly coded queries (see the field).
    pub fn codes_exact(&self) -> bool {
        self.codes_exact
    }

    /// `codes_exact` from the stored codes and f16 vectors (after loading).
    pub(crate) fn compute_codes_exact(&self) -> bool {
        let (Storage::U8F16, Metric::L2, Some(sq)) = (self.storage, self.metric, self.sq.as_ref())
        else {
            return false;
        };
        let dim = self.dim;
        let mut vals = vec![0f32; dim];
        self.lists.iter().all(|l| {
            l.codes
                .chunks_exact(dim)
                .zip(l.vf16.chunks_exact(dim))
                .all(|(c, h)| {
                    vals.iter_mut().zip(h).for_each(|(v, h)| *v = h.to_f32());
                    sq.is_exact(&vals, c)
                })
        })
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
        let routing = self.routing.as_ref().map_or(0, SuperRouting::bytes);
        lists + self.centroids.len() * 4 + self.centroids_f16.len() * 2 + sq + routing
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
        self.set_centroids(km.centroids);
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
        // Fill the lists one after another, each from its own rows in input order, after
        // reserving every list once in list order. A list's memory is then written front to
        // back, lists in order: pushing rows in input order instead first-touched every list's
        // pages in random order, and single-query scans of such an index ran 1.3-1.5x slower at
        // 1M than after this change (benchmarks/results/perf.md, section 7).
        let nlist = self.lists.len();
        let mut start = vec![0usize; nlist + 1];
        for &a in &asg {
            start[a as usize + 1] += 1;
        }
        for li in 0..nlist {
            start[li + 1] += start[li];
        }
        let mut members = vec![0u32; n];
        let mut next = start.clone();
        for (i, &a) in asg.iter().enumerate() {
            members[next[a as usize]] = i as u32;
            next[a as usize] += 1;
        }
        drop(next);
        let (storage, metric, sq) = (self.storage, self.metric, self.sq.as_ref());
        // The blocks the scan streams first, every list's in one pass (so they lie together,
        // the stretch `advise_huge_pages` collapses), then the ids and the rerank's f16 rows.
        for (li, l) in self.lists.iter_mut().enumerate() {
            let c = start[li + 1] - start[li];
            match storage {
                Storage::F32 => l.vf32.reserve(c * dim),
                Storage::F16 => l.vf16.reserve(c * dim),
                Storage::U8F16 => {
                    l.codes.reserve(c * dim);
                    if !metric.is_similarity() {
                        l.terms.reserve(c);
                    }
                }
            }
        }
        for (li, l) in self.lists.iter_mut().enumerate() {
            let c = start[li + 1] - start[li];
            l.ids.reserve(c);
            if storage == Storage::U8F16 {
                l.vf16.reserve(c * dim);
            }
        }
        let kern = kernels();
        let base_id = self.ntotal as i64;
        // Fills one list; returns whether its new rows' u8 codes (and f16 values) give back
        // the rows exactly.
        let fill = |(codes, halfs): &mut (Vec<u8>, Vec<f16>), (li, l): (usize, &mut InvList)| {
            let mut exact = storage == Storage::U8F16 && metric == Metric::L2;
            for &i in &members[start[li]..start[li + 1]] {
                let i = i as usize;
                let row = &x[i * dim..(i + 1) * dim];
                l.ids.push(ids.map_or(base_id + i as i64, |ids| ids[i]));
                match storage {
                    Storage::F32 => l.vf32.extend_from_slice(row),
                    Storage::F16 => {
                        (kern.f32_to_f16)(row, halfs);
                        l.vf16.extend_from_slice(halfs);
                    }
                    Storage::U8F16 => {
                        let sq = sq.expect("u8+f16 index trained without quantizer");
                        (kern.f32_to_f16)(row, halfs);
                        l.vf16.extend_from_slice(halfs);
                        sq.encode(row, codes);
                        l.codes.extend_from_slice(codes);
                        if !metric.is_similarity() {
                            l.terms.push((kern.u8_row_term)(codes));
                        }
                        exact = exact
                            && sq.is_exact(row, codes)
                            && halfs.iter().zip(row).all(|(h, &v)| h.to_f32() == v);
                    }
                }
            }
            exact
        };
        // Lists are independent: filled in parallel (each thread still writes whole lists).
        let init = || (vec![0u8; dim], vec![f16::ZERO; dim]);
        let exact = if threads == Some(1) {
            let mut buf = init();
            self.lists
                .iter_mut()
                .enumerate()
                .fold(true, |acc, item| fill(&mut buf, item) & acc)
        } else {
            pool::install(threads, || {
                self.lists
                    .par_iter_mut()
                    .enumerate()
                    .with_min_len(16)
                    .map_init(init, fill)
                    .reduce(|| true, |a, b| a && b)
            })?
        };
        self.codes_exact &= exact;
        self.ntotal += n;
        self.advise_huge_pages();
        Ok(())
    }

    /// Asks for transparent huge pages under the blocks the scan streams (best effort,
    /// `hugepages`): u8 codes and their terms, or the f16 / f32 rows. The rerank's scattered
    /// f16 reads gain little from them, and collapsing costs a copy (~1 s for all 400 MB of
    /// a 1M u8+f16 index, a third of that for its codes).
    pub(crate) fn advise_huge_pages(&self) {
        let mut bufs: Vec<(usize, usize)> = self
            .lists
            .iter()
            .flat_map(|l| {
                let f16 = if self.storage == Storage::F16 {
                    l.vf16.len() * 2
                } else {
                    0
                };
                [
                    (l.codes.as_ptr() as usize, l.codes.len()),
                    (l.terms.as_ptr() as usize, l.terms.len() * 4),
                    (l.vf16.as_ptr() as usize, f16),
                    (l.vf32.as_ptr() as usize, l.vf32.len() * 4),
                ]
            })
            .collect();
        crate::hugepages::advise(&mut bufs);
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
            None => default_nprobe(nlist),
            Some(p) if p == 0 || p > nlist => {
                return crate::invalid!("nprobe={p} is outside 1..={nlist} (nlist of this index)")
            }
            Some(p) => p,
        };
        let rerank_auto = rerank.is_none() && self.codes_exact;
        let rerank = match rerank {
            None => DEFAULT_RERANK.max(k),
            Some(r) if r > 0 && r < k => {
                return crate::invalid!(
                    "rerank={r} is below k={k}; expected 0 (u8 results alone) or rerank >= k"
                )
            }
            Some(r) => r,
        };
        Ok(SearchParams {
            k,
            nprobe,
            rerank,
            rerank_auto,
        })
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
        // One block per thread, none larger than SCAN_BLOCK: the larger the block, the more
        // queries share each scan of a list (1024 vs 256 per block: 1.20x batch QPS at 1t).
        let nthreads = if sequential {
            1
        } else {
            pool::effective_threads(threads)
        };
        // A single query may still use several threads: over its lists, not over queries.
        let split = if nq == 1 && threads != Some(1) {
            pool::effective_threads(threads)
        } else {
            1
        };
        let block = nq
            .min(INTERRUPT_EVERY)
            .div_ceil(nthreads)
            .clamp(8, SCAN_BLOCK);
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
                let mut s = SearchStats::default();
                for ((qs, dd), ii) in qs
                    .chunks(SCAN_BLOCK * dim)
                    .zip(dd.chunks_mut(SCAN_BLOCK * k))
                    .zip(ii.chunks_mut(SCAN_BLOCK * k))
                {
                    s.merge(&self.search_block(qs, &p, dd, ii, split, threads));
                }
                s
            } else {
                pool::install(threads, || {
                    qs.par_chunks(block * dim)
                        .zip(dd.par_chunks_mut(block * k))
                        .zip(ii.par_chunks_mut(block * k))
                        .map(|((qs, dd), ii)| self.search_block(qs, &p, dd, ii, 1, None))
                        .reduce(SearchStats::default, |mut a, b| {
                            a.merge(&b);
                            a
                        })
                })?
            };
            stats.merge(&s);
        }
        stats.threads = if sequential {
            stats.threads.max(1)
        } else {
            pool::effective_threads(threads).min(nq) as u64
        };
        stats.wall_s = t0.elapsed().as_secs_f64();
        Ok((d, ids, stats))
    }

    /// Searches a block of queries on the current thread with its scratch buffers: route
    /// every query, then visit the probed lists in list order, scoring each list against all
    /// the block's queries that probe it while its codes are in cache, then rerank per query.
    /// Results do not depend on the visiting order (the heaps order hits by score, then id).
    ///
    /// A block of one query with `split_threads` > 1 scans its lists on that many threads of
    /// the `split_pool` pool when they hold at least SPLIT_MIN_CODES vectors.
    fn search_block(
        &self,
        qs: &[f32],
        p: &SearchParams,
        out_d: &mut [f32],
        out_i: &mut [i64],
        split_threads: usize,
        split_pool: Option<usize>,
    ) -> SearchStats {
        SCRATCH.with(|cell| {
            let mut guard = cell.borrow_mut();
            let s = &mut *guard;
            let mut stats = SearchStats::default();
            let kern = kernels();
            let (dim, k, nlist, nprobe) = (self.dim, p.k, self.lists.len(), p.nprobe);
            let sim = self.metric.is_similarity();
            let m = qs.len() / dim;
            let t0 = Instant::now();

            // 1. Routing, a matrix product per sub-block of queries.
            s.qblock.clear();
            s.qblock.extend_from_slice(qs);
            if self.metric == Metric::Cosine {
                normalize_rows(&mut s.qblock, dim);
            }
            s.probes.clear();
            let two_level = self
                .routing
                .as_ref()
                .filter(|_| SuperRouting::applies(nprobe, nlist));
            if let Some(r) = two_level {
                // Query by query: each scores only the centroids of its nearest groups.
                let want = SuperRouting::want(nprobe, nlist);
                for (qi, q) in s.qblock.chunks_exact(dim).enumerate() {
                    let scored =
                        r.candidates(kern, q, want, sim, &mut s.groups, &mut s.dots, &mut s.order);
                    stats.centroids_scored += scored as u64;
                    // f32 super-centroids, then the f16 centroids of the opened groups
                    let groups = r.groups();
                    stats.bytes_scanned += (groups * 4 * dim + (scored - groups) * 2 * dim) as u64;
                    keep_best(&mut s.order, nprobe);
                    s.probes.extend(
                        s.order
                            .iter()
                            .map(|&(_, li)| ((li as u64) << 32) | qi as u64),
                    );
                }
            } else {
                for (bi, sub) in s.qblock.chunks(ROUTE_BLOCK * dim).enumerate() {
                    let mb = sub.len() / dim;
                    s.dots.resize(mb * nlist, 0.0);
                    self.centroid_dots(kern, sub, mb, &mut s.dots);
                    for qi in 0..mb {
                        let dots = &s.dots[qi * nlist..(qi + 1) * nlist];
                        self.select_lists(dots, nprobe, &mut s.order);
                        let q = (bi * ROUTE_BLOCK + qi) as u64;
                        s.probes
                            .extend(s.order.iter().map(|&(_, li)| ((li as u64) << 32) | q));
                    }
                }
                stats.centroids_scored += (m * nlist) as u64;
                // One f32 copy per matrix-product sub-block, or the f16 copy per query.
                stats.bytes_scanned += if m >= ROUTE_GEMM_MIN {
                    m.div_ceil(ROUTE_BLOCK) * nlist * 4 * dim
                } else {
                    m * nlist * 2 * dim
                } as u64;
            }
            // Visit lists in order; each list's queries follow one another.
            s.probes.sort_unstable();
            let t1 = Instant::now();
            stats.routing_s += (t1 - t0).as_secs_f64();
            stats.lists_probed += (m * nprobe) as u64;
            stats.nq += m as u64;

            // 2. Scan: u8 codes (keeping the best `rerank`), or f16 / f32 vectors (best k).
            let sq = self.sq.as_ref();
            if let (Storage::U8F16, Some(sq)) = (self.storage, sq) {
                if sim {
                    s.qscaled.resize(m * dim, 0.0);
                    s.bias.clear();
                    for (q, sc) in s
                        .qblock
                        .chunks_exact(dim)
                        .zip(s.qscaled.chunks_exact_mut(dim))
                    {
                        s.bias.push(sq.ip_query(q, sc));
                    }
                } else {
                    s.qcodes.resize(m * dim, 0);
                    for (q, c) in s
                        .qblock
                        .chunks_exact(dim)
                        .zip(s.qcodes.chunks_exact_mut(dim))
                    {
                        sq.encode(q, c);
                    }
                }
            }
            // Per query: rerank the best `rerank` u8 candidates, or keep the u8 top k (rerank
            // 0, or the default on exact codes for a query whose own codes are exact).
            let rerank = self.storage == Storage::U8F16 && p.rerank > 0;
            s.rerank_q.clear();
            for qi in 0..m {
                let exact = p.rerank_auto
                    && sq.is_some_and(|sq| {
                        sq.is_exact(
                            &s.qblock[qi * dim..(qi + 1) * dim],
                            &s.qcodes[qi * dim..(qi + 1) * dim],
                        )
                    });
                s.rerank_q.push(rerank && !exact);
            }
            if s.heaps.len() < m {
                s.heaps.resize_with(m, Reservoir::default);
            }
            for (h, &rq) in s.heaps[..m].iter_mut().zip(&s.rerank_q) {
                h.reset(if rq { p.rerank } else { k });
            }
            let split = if m == 1 { split_threads } else { 1 };
            let planned: usize = s
                .probes
                .iter()
                .map(|&v| self.lists[(v >> 32) as usize].len())
                .sum();
            stats.codes_scanned += planned as u64;
            let row_bytes = match (self.storage, sim) {
                (Storage::U8F16, false) => dim + 4, // code + its l2 term
                (Storage::U8F16, true) => dim,
                (Storage::F16, _) => 2 * dim,
                (Storage::F32, _) => 4 * dim,
            };
            stats.bytes_scanned += (planned * row_bytes) as u64;
            let mut parts: Option<Vec<Vec<Hit<u64>>>> = None;
            if split > 1 && planned >= SPLIT_MIN_CODES && s.probes.len() > 1 {
                // One query, several threads: each scans a share of its lists into a heap of
                // its own; the union's best are the same hits a single heap keeps (hits are
                // ordered by score, then id).
                let qv = QueryView::of(dim, &s.qblock, &s.qcodes, &s.qscaled, &s.bias, 0);
                let cap = s.heaps[0].k();
                let probes = &s.probes;
                // Each run takes the next unscanned list: a helper that wakes late takes fewer.
                let next = AtomicUsize::new(0);
                let work = || {
                    let (mut heap, mut ubuf, mut fbuf) = (Reservoir::new(cap), vec![], vec![]);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&visit) = probes.get(i) else { break };
                        let li = (visit >> 32) as usize;
                        self.scan_list(kern, li, &qv, &mut heap, &mut ubuf, &mut fbuf);
                    }
                    let mut hits = Vec::new();
                    heap.drain_sorted(&mut hits);
                    hits
                };
                parts = pool::run_shared(split - 1, split_pool, &work).ok();
            }
            if let Some(parts) = parts {
                let heap = &mut s.heaps[0];
                for h in parts.iter().flatten() {
                    if h.score <= heap.threshold() {
                        heap.push(h.score, h.id, h.payload);
                    }
                }
                stats.threads = parts.len() as u64;
            } else {
                for &visit in &s.probes {
                    let li = (visit >> 32) as usize;
                    let qi = (visit & 0xFFFF_FFFF) as usize;
                    let qv = QueryView::of(dim, &s.qblock, &s.qcodes, &s.qscaled, &s.bias, qi);
                    self.scan_list(kern, li, &qv, &mut s.heaps[qi], &mut s.ubuf, &mut s.fbuf);
                }
            }
            let t2 = Instant::now();
            stats.prescore_s += (t2 - t1).as_secs_f64();

            // 3. Rerank the u8 candidates with f16 (or decode their u8 distances), cut to k.
            let scale = match (self.storage, sq) {
                (Storage::U8F16, Some(sq)) if !sim => sq.l2_scale(),
                _ => 1.0,
            };
            for qi in 0..m {
                s.heaps[qi].drain_sorted(&mut s.cand_sorted);
                s.best.reset(k);
                if s.rerank_q[qi] {
                    // Rescore in storage order (list, row): neighbouring rows, fewer misses.
                    s.cand_sorted.sort_unstable_by_key(|h| h.payload);
                    let q = &s.qblock[qi * dim..(qi + 1) * dim];
                    let row_of = |payload: u64| {
                        let list = &self.lists[(payload >> 32) as usize];
                        let j = (payload & 0xFFFF_FFFF) as usize;
                        &list.vf16[j * dim..(j + 1) * dim]
                    };
                    for (ci, h) in s.cand_sorted.iter().enumerate() {
                        // The reads are scattered: ask for a row a few candidates ahead.
                        if let Some(ahead) = s.cand_sorted.get(ci + RERANK_PREFETCH) {
                            crate::kernels::prefetch(row_of(ahead.payload));
                        }
                        let v = row_of(h.payload);
                        let sc = if sim {
                            -(kern.dot_f32_f16)(q, v)
                        } else {
                            (kern.l2_f32_f16)(q, v)
                        };
                        s.best.push(sc, h.id, ());
                    }
                    stats.candidates_reranked += s.cand_sorted.len() as u64;
                    stats.bytes_scanned += (s.cand_sorted.len() * 2 * dim) as u64;
                } else {
                    for h in &s.cand_sorted {
                        s.best.push(h.score * scale, h.id, ());
                    }
                }
                s.best.drain_sorted(&mut s.best_sorted);
                write_row(
                    self.metric,
                    &s.best_sorted,
                    &mut out_d[qi * k..(qi + 1) * k],
                    &mut out_i[qi * k..(qi + 1) * k],
                );
            }
            let t3 = Instant::now();
            if s.rerank_q.iter().any(|&r| r) {
                stats.rerank_s += (t3 - t2).as_secs_f64();
            } else {
                stats.topk_s += (t3 - t2).as_secs_f64();
            }
            stats
        })
    }

    /// Scores list `li` against one query and offers the rows that can enter to its heap:
    /// u8 codes (l2 through the VNNI-ready terms, ip/cosine through step-scaled values), or
    /// the f16 / f32 vectors themselves. `ubuf`/`fbuf` are reused score buffers.
    fn scan_list(
        &self,
        kern: &Kernels,
        li: usize,
        qv: &QueryView,
        heap: &mut Reservoir<u64>,
        ubuf: &mut Vec<u32>,
        fbuf: &mut Vec<f32>,
    ) {
        let list = &self.lists[li];
        let n = list.len();
        if n == 0 {
            return;
        }
        let loc = (li as u64) << 32;
        match (self.storage, self.metric.is_similarity()) {
            (Storage::U8F16, false) => {
                ubuf.resize(n, 0);
                let out = &mut ubuf[..n];
                (kern.l2_u8_batch_pre)(qv.qcode, &list.codes, &list.terms, out);
                let mut thr = heap.threshold();
                for (j, &v) in out.iter().enumerate() {
                    let sc = v as f32;
                    if sc <= thr {
                        heap.push(sc, list.ids[j], loc | j as u64);
                        thr = heap.threshold();
                    }
                }
            }
            (Storage::U8F16, true) => {
                fbuf.resize(n, 0.0);
                let out = &mut fbuf[..n];
                (kern.dot_f32_u8_batch)(qv.qscaled, &list.codes, out);
                let mut thr = heap.threshold();
                for (j, &v) in out.iter().enumerate() {
                    let sc = -(qv.bias + v);
                    if sc <= thr {
                        heap.push(sc, list.ids[j], loc | j as u64);
                        thr = heap.threshold();
                    }
                }
            }
            (storage, sim) => {
                fbuf.resize(n, 0.0);
                let out = &mut fbuf[..n];
                let q = qv.q;
                match (storage, sim) {
                    (Storage::F32, false) => (kern.l2_f32_batch)(q, &list.vf32, out),
                    (Storage::F32, true) => (kern.dot_f32_batch)(q, &list.vf32, out),
                    (_, false) => (kern.l2_f32_f16_batch)(q, &list.vf16, out),
                    (_, true) => (kern.dot_f32_f16_batch)(q, &list.vf16, out),
                }
                push_all(heap, out, &list.ids, loc, sim);
            }
        }
    }

    /// The nprobe best lists for one query's centroid inner products, best first: by
    /// ||c||^2 - 2 <q, c> (l2) or -<q, c> (ip, cosine), ties to the smaller list.
    fn select_lists(&self, dots: &[f32], nprobe: usize, order: &mut Vec<(f32, u32)>) {
        order.clear();
        if self.metric.is_similarity() {
            order.extend(dots.iter().enumerate().map(|(i, &d)| (-d, i as u32)));
        } else {
            order.extend(
                dots.iter()
                    .zip(&self.cnorms)
                    .enumerate()
                    .map(|(i, (&d, &c))| (c - 2.0 * d, i as u32)),
            );
        }
        keep_best(order, nprobe);
    }

    /// Inner products of m queries with every centroid (m x nlist): one matrix product for
    /// a block, the dot kernel for a query or two.
    fn centroid_dots(&self, kern: &Kernels, qblock: &[f32], m: usize, dots: &mut [f32]) {
        let (dim, nlist) = (self.dim, self.lists.len());
        if m >= ROUTE_GEMM_MIN {
            crate::matmul::dots_abt(
                &qblock[..m * dim],
                &self.centroids,
                dim,
                &mut dots[..m * nlist],
            );
        } else {
            for (q, row) in qblock.chunks_exact(dim).zip(dots.chunks_exact_mut(nlist)) {
                (kern.dot_f32_f16_batch)(q, &self.centroids_f16, row);
            }
        }
    }
}

/// One query as the list scan needs it: the (normalised) f32 query, and for u8 codes its
/// own codes (l2) or step-scaled values and offset (ip, cosine); unused parts are empty.
struct QueryView<'a> {
    q: &'a [f32],
    qcode: &'a [u8],
    qscaled: &'a [f32],
    bias: f32,
}

impl<'a> QueryView<'a> {
    fn of(
        dim: usize,
        qblock: &'a [f32],
        qcodes: &'a [u8],
        qscaled: &'a [f32],
        bias: &[f32],
        qi: usize,
    ) -> Self {
        let row = qi * dim..(qi + 1) * dim;
        QueryView {
            q: &qblock[row.clone()],
            qcode: qcodes.get(row.clone()).unwrap_or(&[]),
            qscaled: qscaled.get(row).unwrap_or(&[]),
            bias: bias.get(qi).copied().unwrap_or(0.0),
        }
    }
}

/// Keeps the `nprobe` best (score, list) pairs, best first; ties go to the smaller list.
pub(crate) fn keep_best(order: &mut Vec<(f32, u32)>, nprobe: usize) {
    let by_score = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if nprobe < order.len() {
        order.select_nth_unstable_by(nprobe - 1, by_score);
        order.truncate(nprobe);
    }
    order.sort_unstable_by(by_score);
}

/// Pushes a list's scores into the heap, skipping those that cannot enter.
#[inline]
fn push_all(heap: &mut Reservoir<u64>, scores: &[f32], ids: &[i64], loc: u64, negate: bool) {
    let mut thr = heap.threshold();
    for (j, &v) in scores.iter().enumerate() {
        let sc = if negate { -v } else { v };
        if sc <= thr {
            heap.push(sc, ids[j], loc | j as u64);
            thr = heap.threshold();
        }
    }
}
