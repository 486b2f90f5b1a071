//! Defaults shared by the index and its routing: the `nlist`, `nprobe` and `rerank` a search
//! uses when the caller gives none.

/// The `nprobe` used when the caller gives none: at least this many lists (clamped to nlist)...
pub const DEFAULT_NPROBE: usize = 32;
/// ...and at least this fraction of them: recall@10 >= 0.95 on SIFT-like data needs 1.3-1.7% of
/// round(4 sqrt(n)) lists at 1M (docs/real-sift.md), while below ~640k vectors the floor of 32 already
/// covers more than 1.6%.
pub const DEFAULT_NPROBE_FRACTION: f64 = 0.016;
/// The `rerank` used when the caller gives none: max(DEFAULT_RERANK, k), except for L2
/// queries of a u8+f16 index whose codes are exact (see `IvfIndex::codes_exact`).
pub const DEFAULT_RERANK: usize = 64;

/// The default `nprobe` for an index of `nlist` lists.
pub fn default_nprobe(nlist: usize) -> usize {
    let by_fraction = (nlist as f64 * DEFAULT_NPROBE_FRACTION).ceil() as usize;
    DEFAULT_NPROBE.max(by_fraction).min(nlist).max(1)
}

/// The default `nlist` for a training set of `n` vectors: round(4 sqrt(n)), within 1..=n.
pub fn default_nlist(n: usize) -> usize {
    ((4.0 * (n as f64).sqrt()).round() as usize).clamp(1, n.max(1))
}
