//! Per-stage counters and timings of the last search call (what `profile` reports).

/// Work and time per stage, summed over the queries of one call. Stage seconds are summed
/// over threads (CPU seconds, so they add up to about `threads * wall_s`); `wall_s` is the
/// elapsed time of the whole call. A single query split over threads times its scan on the
/// calling thread (wall seconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchStats {
    pub nq: u64,
    pub threads: u64,
    /// Query preparation and query-to-centroid scoring, selection of the nprobe lists.
    pub routing_s: f64,
    /// Scanning the probed lists: u8 codes for "u8+f16", f16/f32 vectors otherwise (the
    /// kernel calls and the bounded-heap pushes).
    pub prescore_s: f64,
    /// Rescoring the best `rerank` u8 candidates with their f16 vectors.
    pub rerank_s: f64,
    /// Final sort of the k best and writing the results.
    pub topk_s: f64,
    pub wall_s: f64,
    pub lists_probed: u64,
    /// Centroids (and super-centroids) scored by routing: nlist per query when every centroid
    /// is scored, fewer through two-level routing (`route.rs`).
    pub centroids_scored: u64,
    pub codes_scanned: u64,
    /// Split u8 codes (`ivf::CodeSplit`): the tails read, those of the rows whose heads passed
    /// the threshold, and every row's in a batch's query tiles.
    pub tails_read: u64,
    pub candidates_reranked: u64,
    /// Bytes the search read: centroids for routing (f32 once per matrix-product block, f16
    /// per query otherwise), the scanned rows (u8 code, or with split codes its head, + l2
    /// term; or f16 / f32 vector), the tails read (+ their terms) and the f16 rows of reranked
    /// candidates. Logical bytes: a batch re-reads cached lists.
    pub bytes_scanned: u64,
}

impl SearchStats {
    pub fn merge(&mut self, o: &SearchStats) {
        self.nq += o.nq;
        self.threads = self.threads.max(o.threads);
        self.routing_s += o.routing_s;
        self.prescore_s += o.prescore_s;
        self.rerank_s += o.rerank_s;
        self.topk_s += o.topk_s;
        self.lists_probed += o.lists_probed;
        self.centroids_scored += o.centroids_scored;
        self.codes_scanned += o.codes_scanned;
        self.tails_read += o.tails_read;
        self.candidates_reranked += o.candidates_reranked;
        self.bytes_scanned += o.bytes_scanned;
    }

    /// (name, value) pairs, in a stable order, for the bindings.
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("nq", self.nq as f64),
            ("threads", self.threads as f64),
            ("routing_s", self.routing_s),
            ("prescore_s", self.prescore_s),
            ("rerank_s", self.rerank_s),
            ("topk_s", self.topk_s),
            ("wall_s", self.wall_s),
            ("lists_probed", self.lists_probed as f64),
            ("centroids_scored", self.centroids_scored as f64),
            ("codes_scanned", self.codes_scanned as f64),
            ("tails_read", self.tails_read as f64),
            ("candidates_reranked", self.candidates_reranked as f64),
            ("bytes_scanned", self.bytes_scanned as f64),
        ]
    }
}
