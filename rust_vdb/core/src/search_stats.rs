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
    /// Named timers below the stages.
    pub timers: Timers,
}

/// Seconds of the parts of the stages, summed over threads as the stage seconds are. Each is
/// read once per block, sub-block, tile of queries or query's whole scan, never per row, so
/// the clock reads cost next to nothing; a part a search does not take stays 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timers {
    /// Routing: scoring the centroids (flat routing's matrix products; two-level routing's
    /// groups and candidates, where each query's choice of lists is made as well) ...
    pub route_score_s: f64,
    /// ... flat routing's choice of each query's nprobe best lists ...
    pub route_select_s: f64,
    /// ... and ordering the block's probes by list (each query's nearest list on the way).
    pub route_order_s: f64,
    /// Prescore: the queries' u8 codes, rerank choice and heaps.
    pub prescore_prepare_s: f64,
    /// The batch's bounds from each query's nearest list (`seed_bounds`).
    pub prescore_seed_bounds_s: f64,
    /// The batch's tiles: the kernel scoring every row of a list for a tile of queries
    /// (heads and tails, the threshold test inside) ...
    pub prescore_tiles_s: f64,
    /// ... and offering the rows a tile kept to the queries' heaps.
    pub prescore_tile_offers_s: f64,
    /// The batch's queries of runs too short for a tile, each scanned alone (heads, then the
    /// tails of the rows that pass and their offers to its heap).
    pub prescore_short_runs_s: f64,
    /// One query's scan of its lists (the calling thread's share when shared with helpers),
    /// or a batch scanned query by query (f16 / f32 storage, inner product).
    pub prescore_lists_s: f64,
    /// Merging the heaps of a single query's scan shared between threads.
    pub prescore_merge_s: f64,
}

impl Timers {
    fn merge(&mut self, o: &Timers) {
        self.route_score_s += o.route_score_s;
        self.route_select_s += o.route_select_s;
        self.route_order_s += o.route_order_s;
        self.prescore_prepare_s += o.prescore_prepare_s;
        self.prescore_seed_bounds_s += o.prescore_seed_bounds_s;
        self.prescore_tiles_s += o.prescore_tiles_s;
        self.prescore_tile_offers_s += o.prescore_tile_offers_s;
        self.prescore_short_runs_s += o.prescore_short_runs_s;
        self.prescore_lists_s += o.prescore_lists_s;
        self.prescore_merge_s += o.prescore_merge_s;
    }

    /// (stage, [(timer, seconds)]) in a stable order, for the bindings.
    pub fn by_stage(&self) -> Vec<(&'static str, Vec<(&'static str, f64)>)> {
        vec![
            (
                "routing",
                vec![
                    ("score", self.route_score_s),
                    ("select", self.route_select_s),
                    ("order", self.route_order_s),
                ],
            ),
            (
                "prescore",
                vec![
                    ("prepare", self.prescore_prepare_s),
                    ("seed_bounds", self.prescore_seed_bounds_s),
                    ("tiles", self.prescore_tiles_s),
                    ("tile_offers", self.prescore_tile_offers_s),
                    ("short_runs", self.prescore_short_runs_s),
                    ("lists", self.prescore_lists_s),
                    ("merge", self.prescore_merge_s),
                ],
            ),
        ]
    }
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
        self.timers.merge(&o.timers);
    }

    /// (name, value) pairs, in a stable order, for the bindings (the timers apart: `timers`).
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
