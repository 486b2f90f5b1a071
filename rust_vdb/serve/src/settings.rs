//! The search settings every request uses: the flags where given, else defaults chosen for one
//! query per request.
//!
//! The defaults follow the engine's single-query headline (README): the 4-bit prefilter with
//! `reorder` 100, probe ratio 1.4, and the engine's default nprobe (1.6% of the lists, at least
//! 32: 64 of 4,000 lists at 1M), a little above the 1.45-1.5% that reached recall@10 0.95 on
//! real SIFT descriptors there. One thread per request: concurrent requests fill the cores.

use serde::Serialize;
use vdb_core::defaults::default_nprobe;
use vdb_core::{prefilter_applies, IvfIndex, Metric, Storage};

use crate::api::ApiError;
use crate::config::SearchFlags;

/// `reorder` where the prefilter exists and none is given.
pub const DEFAULT_REORDER: usize = 100;
/// `probe_ratio` for "l2" and "cosine" when none is given.
pub const DEFAULT_PROBE_RATIO: f32 = 1.4;

/// Resolved search settings (0 turns reorder and probe ratio off).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub nprobe: usize,
    /// None: the engine's default.
    pub rerank: Option<usize>,
    pub reorder: usize,
    pub probe_ratio: f32,
    pub threads: usize,
}

impl Settings {
    pub fn describe(&self) -> String {
        let rerank = self
            .rerank
            .map_or("engine default".to_string(), |r| r.to_string());
        format!(
            "nprobe {}, rerank {}, reorder {}, probe ratio {}, {} thread(s) per request",
            self.nprobe,
            rerank,
            if self.reorder == 0 {
                "off".into()
            } else {
                self.reorder.to_string()
            },
            if self.probe_ratio == 0.0 {
                "off".into()
            } else {
                self.probe_ratio.to_string()
            },
            self.threads
        )
    }
}

/// Whether `index` has the 4-bit prefilter `reorder` needs.
pub fn has_prefilter(index: &IvfIndex) -> bool {
    prefilter_applies(index.dim(), index.metric(), index.storage())
}

/// The flags where given, else the defaults (module comment); nprobe at most nlist.
pub fn defaults(index: &IvfIndex, flags: &SearchFlags) -> Settings {
    let nlist = index.nlist().unwrap_or(1).max(1);
    let reorder = flags.reorder.unwrap_or(if has_prefilter(index) {
        DEFAULT_REORDER
    } else {
        0
    });
    let probe_ratio = flags
        .probe_ratio
        .unwrap_or(if index.metric() == Metric::Ip {
            0.0
        } else {
            DEFAULT_PROBE_RATIO
        });
    Settings {
        nprobe: flags
            .nprobe
            .unwrap_or_else(|| default_nprobe(nlist))
            .min(nlist),
        rerank: flags.rerank,
        reorder,
        probe_ratio,
        threads: flags.threads.unwrap_or(1),
    }
}

/// Refuses a `--reorder` the index this server builds ("l2", "u8+f16" at `dim`) cannot use.
pub fn check_reorder_flag(flags: &SearchFlags, dim: usize) -> Result<(), ApiError> {
    match flags.reorder {
        Some(r) if r > 0 && !prefilter_applies(dim, Metric::L2, Storage::U8F16) => {
            Err(ApiError::bad_request(format!(
                "this server was started with reorder {r}, which needs the 4-bit prefilter: a dim \
                 that is a multiple of 4 in 8..=1032, not {dim}; restart it without --reorder"
            )))
        }
        _ => Ok(()),
    }
}
