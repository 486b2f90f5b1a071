//! FlatIndex: exact search over f32 vectors, the reference every other index is tested against.

use rayon::prelude::*;

use crate::error::{each_interrupt_chunk, Interrupt, Result};
use crate::kernels::kernels;
use crate::metric::{normalize_rows, Metric};
use crate::pool;
use crate::search_stats::SearchStats;
use crate::topk::{Hit, TopK};
use crate::validate;

/// Queries per parallel task, and base rows scored per kernel call (a block stays in cache
/// while the task's queries run over it).
const QUERY_BLOCK: usize = 16;
const BASE_BLOCK: usize = 2048;

#[derive(Clone, Debug)]
pub struct FlatIndex {
    dim: usize,
    metric: Metric,
    data: Vec<f32>,
}

impl FlatIndex {
    pub fn new(dim: usize, metric: Metric) -> Result<FlatIndex> {
        if dim == 0 {
            return crate::invalid!("dim=0: expected dim >= 1");
        }
        Ok(FlatIndex {
            dim,
            metric,
            data: Vec::new(),
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn metric(&self) -> Metric {
        self.metric
    }
    pub fn ntotal(&self) -> usize {
        self.data.len() / self.dim
    }
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }
    /// The stored rows (normalised for cosine).
    pub fn vectors(&self) -> &[f32] {
        &self.data
    }

    /// Appends rows; they get ids ntotal..ntotal+n.
    pub fn add(&mut self, x: &[f32]) -> Result<()> {
        validate::rows(x, self.dim, "vectors")?;
        validate::finite(x, self.dim, "vectors")?;
        let start = self.data.len();
        self.data.extend_from_slice(x);
        if self.metric == Metric::Cosine {
            normalize_rows(&mut self.data[start..], self.dim);
        }
        Ok(())
    }

    /// The k nearest rows of each query: (distances, ids), nq * k each, best first.
    pub fn search(
        &self,
        queries: &[f32],
        k: usize,
        threads: Option<usize>,
        interrupt: Interrupt,
    ) -> Result<(Vec<f32>, Vec<i64>, SearchStats)> {
        let dim = self.dim;
        let nq = validate::rows(queries, dim, "queries")?;
        validate::finite(queries, dim, "queries")?;
        validate::k(k, self.ntotal())?;
        pool::check_threads(threads)?;
        let t0 = std::time::Instant::now();
        let mut d = vec![0f32; nq * k];
        let mut ids = vec![0i64; nq * k];
        let mut q = queries.to_vec();
        if self.metric == Metric::Cosine {
            normalize_rows(&mut q, dim);
        }
        let run = |qs: &[f32], dd: &mut [f32], ii: &mut [i64]| {
            if qs.len() / dim <= 1 || threads == Some(1) {
                self.search_block(qs, k, dd, ii);
            } else {
                qs.par_chunks(QUERY_BLOCK * dim)
                    .zip(dd.par_chunks_mut(QUERY_BLOCK * k))
                    .zip(ii.par_chunks_mut(QUERY_BLOCK * k))
                    .for_each(|((qs, dd), ii)| self.search_block(qs, k, dd, ii));
            }
        };
        each_interrupt_chunk(
            &q,
            crate::error::INTERRUPT_EVERY,
            dim,
            &mut d,
            &mut ids,
            k,
            interrupt,
            |qs, dd, ii| {
                if threads == Some(1) || qs.len() == dim {
                    run(qs, dd, ii);
                    Ok(())
                } else {
                    pool::install(threads, || run(qs, dd, ii))
                }
            },
        )?;
        let stats = SearchStats {
            nq: nq as u64,
            threads: pool::effective_threads(threads).min(nq.max(1)) as u64,
            prescore_s: t0.elapsed().as_secs_f64(),
            wall_s: t0.elapsed().as_secs_f64(),
            codes_scanned: (nq * self.ntotal()) as u64,
            ..Default::default()
        };
        Ok((d, ids, stats))
    }

    /// Exact search of a few queries, the base scanned in cache-sized blocks.
    fn search_block(&self, qs: &[f32], k: usize, out_d: &mut [f32], out_i: &mut [i64]) {
        let dim = self.dim;
        let kern = kernels();
        let batch = if self.metric.is_similarity() {
            kern.dot_f32_batch
        } else {
            kern.l2_f32_batch
        };
        let neg = self.metric.is_similarity();
        let nq = qs.len() / dim;
        let mut heaps: Vec<TopK<()>> = (0..nq).map(|_| TopK::new(k)).collect();
        let mut buf = vec![0f32; BASE_BLOCK];
        for (b, block) in self.data.chunks(BASE_BLOCK * dim).enumerate() {
            let rows = block.len() / dim;
            let base_id = (b * BASE_BLOCK) as i64;
            for (qi, heap) in heaps.iter_mut().enumerate() {
                let out = &mut buf[..rows];
                batch(&qs[qi * dim..(qi + 1) * dim], block, out);
                let mut thr = heap.threshold();
                for (j, &s) in out.iter().enumerate() {
                    let s = if neg { -s } else { s };
                    if s <= thr {
                        heap.push(s, base_id + j as i64, ());
                        thr = heap.threshold();
                    }
                }
            }
        }
        let mut sorted: Vec<Hit<()>> = Vec::with_capacity(k);
        for (qi, heap) in heaps.iter_mut().enumerate() {
            heap.drain_sorted(&mut sorted);
            write_row(
                self.metric,
                &sorted,
                &mut out_d[qi * k..(qi + 1) * k],
                &mut out_i[qi * k..(qi + 1) * k],
            );
        }
    }
}

/// Writes one result row: distances in user units, ids, padding with -1 past the hits.
pub(crate) fn write_row<P: Copy>(metric: Metric, hits: &[Hit<P>], d: &mut [f32], ids: &mut [i64]) {
    for j in 0..d.len() {
        if let Some(h) = hits.get(j) {
            d[j] = metric.score_to_distance(h.score);
            ids[j] = h.id;
        } else {
            d[j] = metric.pad_distance();
            ids[j] = -1;
        }
    }
}
