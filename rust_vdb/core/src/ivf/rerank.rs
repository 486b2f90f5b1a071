//! The last stage of a search: each query's candidates rescored with their f16 vectors (or
//! their u8 distances decoded), cut to the best k and written out.

use super::probe::RowRef;
use super::{IvfIndex, SearchParams, Storage};
use crate::flat::write_row;
use crate::kernels::Kernels;
use crate::search_stats::SearchStats;
use crate::topk::{Hit, Reservoir, TopK};

/// Rerank reads this many candidates ahead (about 4 ahead hides most of the random f16 reads).
const RERANK_PREFETCH: usize = 4;

/// The rerank's per-thread buffers: one query's candidates best first, its k best, and
/// those best first.
#[derive(Default)]
pub(super) struct RerankBufs {
    best: TopK<()>,
    cand_sorted: Vec<Hit<RowRef>>,
    best_sorted: Vec<Hit<()>>,
}

impl IvfIndex {
    /// Writes the k best of each of the block's queries `qblock` to `out_d` / `out_i` (k per
    /// query) from the prescore's `heaps`: queries marked in `rerank_q` rescore their
    /// candidates with f16, the others keep their prescore (u8 distances scaled back, or the
    /// f16 / f32 scores themselves).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rerank_topk(
        &self,
        kern: &Kernels,
        p: &SearchParams,
        qblock: &[f32],
        heaps: &mut [Reservoir<RowRef>],
        rerank_q: &[bool],
        s: &mut RerankBufs,
        out_d: &mut [f32],
        out_i: &mut [i64],
        stats: &mut SearchStats,
    ) {
        let (dim, k) = (self.dim, p.k);
        let sim = self.metric.is_similarity();
        let scale = match (self.storage, self.sq.as_ref()) {
            (Storage::U8F16, Some(sq)) if !sim => sq.l2_scale(),
            _ => 1.0,
        };
        for (qi, (heap, &rerank)) in heaps.iter_mut().zip(rerank_q).enumerate() {
            heap.drain_sorted(&mut s.cand_sorted);
            s.best.reset(k);
            if rerank {
                // Rescore in storage order (list, row): neighbouring rows, fewer misses.
                s.cand_sorted.sort_unstable_by_key(|h| h.payload);
                let q = &qblock[qi * dim..(qi + 1) * dim];
                let row_of = |at: RowRef| {
                    let j = at.row();
                    &self.lists[at.list()].vf16[j * dim..(j + 1) * dim]
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
    }
}
