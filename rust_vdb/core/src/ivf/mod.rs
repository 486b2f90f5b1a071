//! IvfIndex: k-means coarse lists holding ids, u8 codes and f16 (or f32) vectors contiguously;
//! search = route to nprobe lists -> scan (u8 prescore, or f16/f32) -> f16 rerank -> top k.
//!
//! This file holds the type, its parameters and accessors; `build` trains and adds, `layout`
//! holds the inverted lists and their memory, `search` runs a search block by block through
//! its stages: routing (`crate::route`), `prescore` (the list scans), `rerank` (rescoring and
//! the top k).

mod build;
mod layout;
mod prefilter;
mod prescore;
mod probe;
mod rerank;
mod search;
mod single;
mod split;

use half::f16;

use crate::defaults::default_nlist;
pub use crate::defaults::{
    default_nprobe, DEFAULT_NPROBE, DEFAULT_NPROBE_FRACTION, DEFAULT_RERANK,
};
use crate::error::{Result, VdbError};
use crate::kmeans;
use crate::metric::Metric;
use crate::pq4::Pq4;
use crate::quant::Sq8;
use crate::route::SuperRouting;
use crate::validate;
pub use layout::{Ids, InvList};
pub use split::CodeSplit;

/// Whether an index of this kind has the 4-bit prefilter (`search(.., reorder)`): "l2" over
/// "u8+f16" storage (its tables are built in the u8 code domain, where code distances are
/// float distances times one step squared) at a dim `Pq4::supports`.
pub fn prefilter_applies(dim: usize, metric: Metric, storage: Storage) -> bool {
    metric == Metric::L2 && storage == Storage::U8F16 && crate::pq4::Pq4::supports(dim)
}

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

/// Search parameters after defaults were applied and checked.
#[derive(Clone, Copy, Debug)]
pub struct SearchParams {
    pub k: usize,
    pub nprobe: usize,
    pub rerank: usize,
    /// rerank was not given and the codes are exact: queries whose own codes are exact skip it.
    pub rerank_auto: bool,
    /// Each query's lists are scanned first through their 4-bit prefilter codes and only its
    /// best `reorder` rows get their u8 distance (`prefilter.rs`; 0: the u8 scan reads every
    /// row's head). Kept at 0 where the index has no prefilter.
    pub reorder: usize,
    /// Each query probes only those of its nprobe lists whose centroid lies within this many
    /// times its nearest centroid's distance, and at least `probe_ratio::min_probe(nprobe)`
    /// (`probe_ratio::within_ratio`); 0: all nprobe.
    pub probe_ratio: f32,
}

/// Search settings beyond k, nprobe and rerank, each off when None.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tuning {
    /// `SearchParams::reorder`.
    pub reorder: Option<usize>,
    /// `SearchParams::probe_ratio`.
    pub probe_ratio: Option<f32>,
}

impl Tuning {
    /// Only a prefilter `reorder`.
    pub fn reorder(reorder: Option<usize>) -> Tuning {
        Tuning {
            reorder,
            ..Tuning::default()
        }
    }
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
    /// copy holds the same numbers in half the bytes: single-query flat routing streams it
    /// (the centroid scan is memory-bound there: 2 MB of f32 per query at 1M), batch routing
    /// multiplies the f32 copy. Empty where two-level routing exists: its grouped f16 copy
    /// serves instead (`route::centroid_dots`).
    pub(crate) centroids_f16: Vec<f16>,
    /// The centroids grouped for two-level routing (derived; None below route::MIN_NLIST
    /// lists and for "ip", where a group's centre says little about its members' products).
    pub(crate) routing: Option<SuperRouting>,
    pub(crate) sq: Option<Sq8>,
    /// The 4-bit prefilter's quantizer ("l2" over u8+f16, dim a multiple of 4): the
    /// single-query scan's first pass where a search asks for one (`SearchParams::reorder`).
    pub(crate) pq: Option<Pq4>,
    /// "l2" over u8+f16 (from 32 dims): the order of the head and tail code blocks (`split`;
    /// derived from the codes at train and load, never stored).
    pub(crate) split: Option<CodeSplit>,
    pub(crate) lists: Vec<InvList>,
    pub(crate) ntotal: usize,
    /// u8+f16 with L2: every stored vector's u8 codes decode exactly to its f16 values (integer
    /// data such as SIFT, step 1). The u8 distance of a query whose own codes are exact is then
    /// the f16 distance itself, so the default search skips the rerank for such queries: same
    /// results, none of its scattered f16 reads. Derived: kept up by `add`, recomputed on load.
    pub(crate) codes_exact: bool,
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
            pq: None,
            split: None,
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

    /// Installs trained or loaded centroids, rounded to f16 values, with their derived data
    /// (after `sq`: "l2" routes over the centroids' u8 codes).
    pub(crate) fn set_centroids(&mut self, mut c: Vec<f32>) {
        for v in c.iter_mut() {
            *v = f16::from_f32(*v).to_f32();
        }
        self.cnorms = kmeans::row_norms(&c, self.dim);
        self.routing = match self.metric {
            Metric::Ip => None,
            Metric::L2 => SuperRouting::build(&c, self.dim, self.seed, self.sq.as_ref()),
            Metric::Cosine => SuperRouting::build(&c, self.dim, self.seed, None),
        };
        // the grouped copy of two-level routing serves one-query flat routing where it exists
        self.centroids_f16 = match self.routing {
            Some(_) => Vec::new(),
            None => c.iter().map(|&v| f16::from_f32(v)).collect(),
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
        let mut code = vec![0u8; dim];
        self.lists.iter().all(|l| {
            (0..l.len()).all(|r| {
                l.code_of(r, dim, self.split.as_ref(), &mut code);
                let h = &l.vf16[r * dim..(r + 1) * dim];
                vals.iter_mut().zip(h).for_each(|(v, h)| *v = h.to_f32());
                sq.is_exact(&vals, &code)
            })
        })
    }

    /// The width of the head code blocks the u8 l2 scan reads first (dim without a split).
    pub(crate) fn head_dims(&self) -> usize {
        self.split.as_ref().map_or(self.dim, |s| s.head)
    }

    /// The dim order of the split u8 codes (None: codes are whole rows in dim order).
    pub fn code_split(&self) -> Option<&CodeSplit> {
        self.split.as_ref()
    }

    /// Memory held by codes, vectors, centroids, ids and quantizer tables.
    pub fn bytes(&self) -> usize {
        let lists: usize = self
            .lists
            .iter()
            .map(|l| {
                l.ids.bytes()
                    + l.codes.len()
                    + l.tail.len()
                    + l.tail_terms.len() * 4
                    + l.vf16.len() * 2
                    + l.vf32.len() * 4
                    + l.terms.len() * 4
                    + l.fs.len()
            })
            .sum();
        let sq = self
            .sq
            .as_ref()
            .map_or(0, |s| (s.vmin.len() + s.step.len()) * 4);
        let routing = self.routing.as_ref().map_or(0, SuperRouting::bytes);
        let pq = self.pq.as_ref().map_or(0, |p| p.centroids.len() * 4);
        lists + pq + self.centroids.len() * 4 + self.centroids_f16.len() * 2 + sq + routing
    }

    /// nlist for a training set of n vectors: the requested one, else round(4 sqrt(n)).
    pub fn nlist_for(&self, n: usize) -> usize {
        self.nlist_request.unwrap_or_else(|| default_nlist(n))
    }

    /// Applies defaults and checks k, nprobe, rerank against this index.
    pub fn params(
        &self,
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
    ) -> Result<SearchParams> {
        self.params_with(k, nprobe, rerank, Tuning::default())
    }

    /// `params` with the `tuning` settings.
    pub fn params_with(
        &self,
        k: usize,
        nprobe: Option<usize>,
        rerank: Option<usize>,
        tuning: Tuning,
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
            Some(r) => {
                crate::validate::rerank(r, k)?;
                // More candidates than the index holds is all of them: a huge rerank would
                // otherwise size the candidate buffers by it (capacity overflow).
                r.min(self.ntotal)
            }
        };
        let probe_ratio = match tuning.probe_ratio {
            None | Some(0.0) => 0.0,
            Some(r) if !(r.is_finite() && r >= 1.0) => {
                return crate::invalid!("probe_ratio={r}: expected 0 (off) or a finite ratio >= 1")
            }
            Some(_) if self.metric == Metric::Ip => {
                return crate::invalid!(
                    "probe_ratio compares distances to centroids, which metric 'ip' does not have: use 'l2' or 'cosine', or leave probe_ratio off"
                )
            }
            Some(r) => r,
        };
        let reorder = match tuning.reorder {
            None | Some(0) => 0,
            Some(r) if r < k => {
                return crate::invalid!("reorder={r} is below k={k}: expected 0 (off) or reorder >= k")
            }
            Some(r) if self.pq.is_none() => {
                return crate::invalid!(
                    "reorder={r}: the 4-bit prefilter exists for metric 'l2' with storage 'u8+f16' at a dim that is a multiple of 4 in 8..=1032; this index is '{}' '{}' at dim {}: leave reorder off",
                    self.metric.name(),
                    self.storage.name(),
                    self.dim
                )
            }
            Some(r) => r.min(self.ntotal), // as rerank: at most every row
        };
        Ok(SearchParams {
            k,
            nprobe,
            rerank,
            rerank_auto,
            reorder,
            probe_ratio,
        })
    }
}
