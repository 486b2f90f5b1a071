//! `--recall-target`: the search settings picked at the build from a sample of the inserted
//! vectors. Up to `QUERIES` of them are searched as queries, one per call as the server runs
//! them, against their exact 10 nearest by brute force (the query's own id left out of both);
//! the first rung of `ladder` whose smallest nprobe reaches the target plus `MARGIN` wins.

use serde::Serialize;
use vdb_core::error::{never_interrupt, Interrupt};
use vdb_core::rng::Rng;
use vdb_core::{FlatIndex, IvfIndex, Metric, Tuning, VdbError};

use crate::config::SearchFlags;
use crate::settings::{self, Settings, DEFAULT_PROBE_RATIO, DEFAULT_REORDER};

/// Sampled inserted vectors searched as queries.
pub const QUERIES: usize = 500;
/// Recall the sample must exceed the target by: the sampling error of recall@10 over 500
/// queries is about 0.003 near 0.95.
pub const MARGIN: f64 = 0.005;
/// Neighbours scored per query.
const K: usize = 10;
/// Base rows per brute-force block (a block is copied into a `FlatIndex`).
const EXACT_BLOCK: usize = 65_536;
/// Seed offset of the query sample (distinct from the training sample's).
const SAMPLE_SEED: u64 = 0x5eed_7e57;

/// What the tuning measured.
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    pub target: f64,
    pub margin: f64,
    pub queries: usize,
    pub k: usize,
    /// recall@10 of the chosen settings on the sample.
    pub sample_recall: f64,
    pub target_met: bool,
    /// Every setting tried: (nprobe, reorder, probe ratio, recall).
    pub tried: Vec<(usize, usize, f32, f64)>,
    pub seconds: f64,
}

impl TuneReport {
    pub fn describe(&self, s: &Settings) -> String {
        let verdict = if self.target_met {
            format!(
                "reaches the target {} + margin {}",
                self.target, self.margin
            )
        } else {
            format!(
                "WARNING: no setting reached the target {} + margin {}; serving the best found",
                self.target, self.margin
            )
        };
        format!(
            "recall target: nprobe {}, reorder {}, probe ratio {}: recall@{} {:.4} on {} sampled \
             inserted vectors ({verdict}; {} settings tried in {:.2} s)",
            s.nprobe,
            s.reorder,
            s.probe_ratio,
            self.k,
            self.sample_recall,
            self.queries,
            self.tried.len(),
            self.seconds
        )
    }
}

/// The (reorder, probe ratio) pairs tried in order: the single-query defaults first, then more
/// candidates kept, then the plain u8 scan (its recall at nprobe = nlist is the index's best).
fn ladder(index: &IvfIndex, flags: &SearchFlags) -> Vec<(usize, f32)> {
    let prefilter = settings::has_prefilter(index);
    let ratio_ok = index.metric() != Metric::Ip;
    let mut rungs = vec![];
    if prefilter {
        rungs.push((DEFAULT_REORDER, DEFAULT_PROBE_RATIO));
        rungs.push((2 * DEFAULT_REORDER, DEFAULT_PROBE_RATIO));
        rungs.push((4 * DEFAULT_REORDER, 0.0));
    }
    if ratio_ok {
        rungs.push((0, DEFAULT_PROBE_RATIO));
    }
    rungs.push((0, 0.0));
    let mut out: Vec<(usize, f32)> = rungs
        .into_iter()
        .map(|(r, p)| {
            (
                flags.reorder.unwrap_or(r),
                flags.probe_ratio.unwrap_or(if ratio_ok { p } else { 0.0 }),
            )
        })
        .collect();
    out.dedup();
    out
}

/// Picks the settings (module comment). Flags given are kept as given.
pub fn tune(
    index: &IvfIndex,
    vectors: &[f32],
    ids: &[i64],
    target: f64,
    flags: &SearchFlags,
    seed: u64,
    interrupt: Interrupt,
) -> Result<(Settings, TuneReport), VdbError> {
    let t0 = std::time::Instant::now();
    let dim = index.dim();
    let n = ids.len();
    let k = K.min(n.saturating_sub(1));
    let base = settings::defaults(index, flags);
    let mut report = TuneReport {
        target,
        margin: MARGIN,
        queries: 0,
        k,
        sample_recall: 0.0,
        target_met: false,
        tried: vec![],
        seconds: 0.0,
    };
    if k == 0 {
        return Ok((base, report));
    }
    let rows = Rng::new(seed ^ SAMPLE_SEED).sample_indices(n, QUERIES.min(n));
    let queries: Vec<f32> = rows
        .iter()
        .flat_map(|&r| vectors[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    let own: Vec<i64> = rows.iter().map(|&r| ids[r]).collect();
    report.queries = rows.len();
    let truth = exact_neighbours(&queries, &rows, vectors, ids, dim, k, interrupt)?;
    let nlist = index.nlist().unwrap_or(1);
    let need = target + MARGIN;
    let mut best: Option<(f64, Settings)> = None;
    for (reorder, probe_ratio) in ladder(index, flags) {
        let mut measure = |nprobe: usize| -> Result<f64, VdbError> {
            let s = Settings {
                nprobe,
                reorder,
                probe_ratio,
                ..base
            };
            let r = recall(index, &s, &queries, &own, &truth, k, interrupt)?;
            report.tried.push((nprobe, reorder, probe_ratio, r));
            if best.as_ref().is_none_or(|(b, _)| r > *b) {
                best = Some((r, s));
            }
            Ok(r)
        };
        let found = match flags.nprobe {
            Some(p) => {
                let p = p.min(nlist);
                (measure(p)? >= need).then_some(p)
            }
            None => smallest_nprobe(nlist, need, &mut measure)?,
        };
        if let Some(nprobe) = found {
            let s = Settings {
                nprobe,
                reorder,
                probe_ratio,
                ..base
            };
            let r = report
                .tried
                .iter()
                .rev()
                .find(|t| t.0 == nprobe && t.1 == reorder && t.2 == probe_ratio)
                .map_or(0.0, |t| t.3);
            report.sample_recall = r;
            report.target_met = true;
            report.seconds = t0.elapsed().as_secs_f64();
            return Ok((s, report));
        }
    }
    let (r, s) = best.unwrap_or((0.0, base));
    report.sample_recall = r;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok((s, report))
}

/// The smallest nprobe in 1..=nlist whose recall reaches `need` (recall grows with nprobe):
/// doubling, then bisection. None when even nlist falls short.
fn smallest_nprobe(
    nlist: usize,
    need: f64,
    measure: &mut impl FnMut(usize) -> Result<f64, VdbError>,
) -> Result<Option<usize>, VdbError> {
    let mut lo = 0; // largest nprobe known to fall short
    let mut p = 1;
    let hi = loop {
        let r = measure(p)?;
        if r >= need {
            break p;
        }
        lo = p;
        if p == nlist {
            return Ok(None);
        }
        p = (p * 2).min(nlist);
    };
    let mut hi = hi;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if measure(mid)? >= need {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

/// Mean recall@k of `s` over the queries: each searched alone (k + 1 results, its own id
/// dropped), across the cores.
fn recall(
    index: &IvfIndex,
    s: &Settings,
    queries: &[f32],
    own: &[i64],
    truth: &[Vec<i64>],
    k: usize,
    interrupt: Interrupt,
) -> Result<f64, VdbError> {
    interrupt()?;
    let dim = index.dim();
    let nq = own.len();
    let kk = (k + 1).min(index.ntotal());
    let tuning = Tuning {
        reorder: Some(if s.reorder > 0 { s.reorder.max(kk) } else { 0 }),
        probe_ratio: Some(s.probe_ratio),
    };
    let rerank = s.rerank.map(|r| if r > 0 { r.max(kk) } else { 0 });
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(nq.max(1));
    let per = nq.div_ceil(threads);
    let hits: Result<Vec<usize>, VdbError> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let lo = (t * per).min(nq);
                let hi = ((t + 1) * per).min(nq);
                scope.spawn(move || -> Result<usize, VdbError> {
                    let mut hits = 0;
                    for q in lo..hi {
                        let (_, got, _) = index.search_with(
                            &queries[q * dim..(q + 1) * dim],
                            kk,
                            Some(s.nprobe),
                            rerank,
                            tuning,
                            Some(1),
                            &never_interrupt,
                        )?;
                        let got = got.iter().filter(|&&i| i != own[q] && i >= 0).take(k);
                        hits += got.filter(|i| truth[q].contains(i)).count();
                    }
                    Ok(hits)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a recall thread panicked"))
            .collect()
    });
    Ok(hits?.iter().sum::<usize>() as f64 / (nq * k) as f64)
}

/// The exact k nearest ids of each query row, its own row left out: brute force over blocks
/// of the base.
fn exact_neighbours(
    queries: &[f32],
    rows: &[usize],
    vectors: &[f32],
    ids: &[i64],
    dim: usize,
    k: usize,
    interrupt: Interrupt,
) -> Result<Vec<Vec<i64>>, VdbError> {
    let nq = rows.len();
    let n = ids.len();
    let kk = k + 1;
    // Per query: (distance, base row) candidates, kept to the best kk.
    let mut best: Vec<Vec<(f32, usize)>> = vec![Vec::with_capacity(2 * kk); nq];
    for start in (0..n).step_by(EXACT_BLOCK) {
        interrupt()?;
        let end = (start + EXACT_BLOCK).min(n);
        let mut flat = FlatIndex::new(dim, Metric::L2)?;
        flat.add(&vectors[start * dim..end * dim])?;
        let kb = kk.min(end - start);
        let (d, i, _) = flat.search(queries, kb, None, &never_interrupt)?;
        for q in 0..nq {
            let c = &mut best[q];
            for j in 0..kb {
                let r = i[q * kb + j];
                if r >= 0 {
                    c.push((d[q * kb + j], start + r as usize));
                }
            }
            c.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            c.truncate(kk);
        }
    }
    Ok(best
        .into_iter()
        .zip(rows)
        .map(|(c, &own)| {
            c.into_iter()
                .filter(|&(_, r)| r != own)
                .take(k)
                .map(|(_, r)| ids[r])
                .collect()
        })
        .collect())
}

/// The vectors an index keeps at full width, with their ids, list by list: what `tune` samples
/// and scores against when the server starts from a saved index (f16-stored values are the
/// inserted ones rounded to f16: exact for SIFT's integers). Every storage keeps them.
pub fn stored_vectors(index: &IvfIndex) -> (Vec<f32>, Vec<i64>) {
    let dim = index.dim();
    let n = index.ntotal();
    let (mut vectors, mut ids) = (Vec::with_capacity(n * dim), Vec::with_capacity(n));
    for list in index.lists() {
        ids.extend(list.ids.iter());
        if list.vf32.is_empty() {
            vectors.extend(list.vf16.iter().map(|h| h.to_f32()));
        } else {
            vectors.extend_from_slice(&list.vf32);
        }
    }
    (vectors, ids)
}
