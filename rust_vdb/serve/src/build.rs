//! The one build: k-means on a seeded sample of the inserted vectors, every vector added to
//! its list, the search settings fixed (`--recall-target`: measured, `tune`), the index saved.

use std::time::Instant;

use serde::Serialize;
use vdb_core::defaults::default_nlist;
use vdb_core::error::Interrupt;
use vdb_core::rng::Rng;
use vdb_core::{IvfIndex, Metric, Storage, VdbError};

use crate::config::ServeConfig;
use crate::settings::{self, Settings};
use crate::tune::{self, TuneReport};

/// What the build did, for `GET /stats`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BuildReport {
    pub nlist: Option<usize>,
    /// Vectors k-means was trained on.
    pub train_vectors: Option<usize>,
    pub train_s: Option<f64>,
    pub add_s: Option<f64>,
    /// `--recall-target`: the settings tried and the recall they reached.
    pub tune: Option<TuneReport>,
    pub saved_to: Option<String>,
    pub save_s: Option<f64>,
    /// The index was built but could not be saved (the server serves it all the same).
    pub save_error: Option<String>,
    /// Started from this saved index instead of building.
    pub loaded_from: Option<String>,
    pub load_s: Option<f64>,
}

/// Vectors given to k-means: 64 per list, at least 10,000, at most all n (as the benchmark's
/// `train_sample_size`).
pub fn train_sample_size(n: usize, nlist: usize) -> usize {
    n.min((64 * nlist).max(10_000))
}

/// Builds the index over `vectors` (rows of `dim`) with ids `ids`.
pub fn build(
    cfg: &ServeConfig,
    dim: usize,
    vectors: &[f32],
    ids: &[i64],
    interrupt: Interrupt,
) -> Result<(IvfIndex, BuildReport, Settings), VdbError> {
    let n = ids.len();
    let nlist = cfg.nlist.unwrap_or_else(|| default_nlist(n));
    if nlist > n {
        return Err(VdbError::InvalidInput(format!(
            "nlist={nlist} needs at least {nlist} vectors, and {n} are inserted"
        )));
    }
    let m = train_sample_size(n, nlist);
    let mut report = BuildReport {
        nlist: Some(nlist),
        train_vectors: Some(m),
        ..BuildReport::default()
    };
    if cfg.log {
        println!(
            "vdbbench serve: building: {n} vectors of dim {dim}, nlist {nlist}, k-means on {m} of them (seed {})",
            cfg.seed
        );
    }
    let t0 = Instant::now();
    let sample: Vec<f32>;
    let train_rows = if m < n {
        let rows = Rng::new(cfg.seed).sample_indices(n, m);
        sample = rows
            .iter()
            .flat_map(|&r| vectors[r * dim..(r + 1) * dim].iter().copied())
            .collect();
        &sample[..]
    } else {
        vectors
    };
    let mut index = IvfIndex::new(dim, Some(nlist), Metric::L2, Storage::U8F16, cfg.seed)?;
    index.train(train_rows, None, interrupt)?;
    report.train_s = Some(t0.elapsed().as_secs_f64());
    let t1 = Instant::now();
    index.add(vectors, Some(ids), None, interrupt)?;
    report.add_s = Some(t1.elapsed().as_secs_f64());
    if cfg.log {
        println!(
            "vdbbench serve: built: train {:.2} s, add {:.2} s",
            report.train_s.unwrap_or(0.0),
            report.add_s.unwrap_or(0.0)
        );
    }
    let chosen = match cfg.recall_target {
        Some(target) => {
            let (s, t) = tune::tune(
                &index,
                vectors,
                ids,
                target,
                &cfg.search,
                cfg.seed,
                interrupt,
            )?;
            if cfg.log {
                println!("vdbbench serve: {}", t.describe(&s));
            }
            report.tune = Some(t);
            s
        }
        None => settings::defaults(&index, &cfg.search),
    };
    if cfg.log {
        println!("vdbbench serve: search: {}", chosen.describe());
    }
    if let Some(path) = &cfg.index {
        let t2 = Instant::now();
        match vdb_core::persist::save(&index, path) {
            Ok(()) => {
                report.saved_to = Some(path.display().to_string());
                report.save_s = Some(t2.elapsed().as_secs_f64());
                if cfg.log {
                    println!("vdbbench serve: saved the index to {}", path.display());
                }
            }
            Err(e) => {
                eprintln!("vdbbench serve: could not save the index: {e}");
                report.save_error = Some(e.to_string());
            }
        }
    }
    Ok((index, report, chosen))
}
