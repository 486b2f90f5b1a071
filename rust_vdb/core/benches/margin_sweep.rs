//! The measurement behind `route::RECHECK_MARGIN`: for each margin, how many queries probe other
//! lists under u8 routing (`route_with_margin`) than under f16 routing, and the routing time.
//!
//! Usage: `cargo bench -p vdb-core --bench margin_sweep` routes generated clustered data (64-dim
//! integers, 1024 lists); `VDB_INDEX=ivf1m.vdb VDB_QUERIES=q10k.f32` routes the queries (raw
//! little-endian f32, dim of the index) of a saved "l2" "u8+f16" index instead, as in the table
//! "List identity" of benchmarks/results/perf-single-round2.md.

use std::path::Path;
use std::time::Instant;

use half::f16;
use vdb_core::error::never_interrupt;
use vdb_core::kernels::kernels;
use vdb_core::kmeans::{kmeans, KMeansParams};
use vdb_core::quant::Sq8;
use vdb_core::rng::Rng;
use vdb_core::route::{keep_best, RouteBufs, SuperRouting};
use vdb_core::Metric;

/// The routing of a saved index (rebuilt from its centroids and quantizer, as loading does), and
/// its queries.
fn saved(index: &str, queries: &str) -> (SuperRouting, Vec<f32>, usize, usize) {
    let idx = vdb_core::persist::load(Path::new(index)).expect("VDB_INDEX: an index file");
    let sq = idx.quantizer().filter(|_| idx.metric() == Metric::L2);
    let sq = sq.expect("VDB_INDEX: needs an \"l2\" index with \"u8+f16\" storage");
    let (dim, nlist) = (idx.dim(), idx.centroids().len() / idx.dim());
    let r = SuperRouting::build(idx.centroids(), dim, idx.seed(), Some(sq))
        .expect("VDB_INDEX: needs at least route::MIN_NLIST lists");
    let bytes = std::fs::read(queries).expect("VDB_QUERIES: a raw f32 file");
    let qs = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (r, qs, dim, nlist)
}

/// Clustered integers 0..=120 (SIFT-like: the quantizer's step is 1), k-means centroids of
/// 1024 lists, and 5,000 queries between pairs of base rows.
fn generated() -> (SuperRouting, Vec<f32>, usize, usize) {
    let (n, dim, nlist) = (60_000, 64, 1024);
    let mut rng = Rng::new(11);
    let centres: Vec<f32> = (0..256 * dim).map(|_| rng.below(100) as f32).collect();
    let x: Vec<f32> = (0..n)
        .flat_map(|i| (0..dim).map(move |d| (i, d)))
        .map(|(i, d)| (centres[(i % 256) * dim + d] + rng.below(21) as f32).min(120.0))
        .collect();
    let mut p = KMeansParams::new(nlist, 2);
    p.niter = 6;
    let km = kmeans(&x, dim, &p, &never_interrupt).expect("k-means of the generated data");
    let c: Vec<f32> = km
        .centroids
        .iter()
        .map(|&v| f16::from_f32(v).to_f32())
        .collect();
    let sq = Sq8::train(&x, dim, Metric::L2);
    let r = SuperRouting::build(&c, dim, 0, Some(&sq)).expect("1024 lists route in two levels");
    let qs = (0..5_000)
        .flat_map(|i| {
            let (a, b) = ((i * 7919) % n, (i * 104_729 + 1) % n);
            (0..dim).map(move |d| (a * dim + d, b * dim + d))
        })
        .map(|(a, b)| (x[a] + x[b]) * 0.5)
        .collect();
    (r, qs, dim, nlist)
}

fn main() {
    let (r, qs, dim, nlist) = match (std::env::var("VDB_INDEX"), std::env::var("VDB_QUERIES")) {
        (Ok(index), Ok(queries)) => saved(&index, &queries),
        _ => generated(),
    };
    let kern = kernels();
    let nq = qs.len() / dim;
    let (mut b, mut g, mut d, mut order) = (RouteBufs::default(), vec![], vec![], vec![]);
    let sorted_lists = |o: &[(f32, u32)]| {
        let mut l: Vec<u32> = o.iter().map(|x| x.1).collect();
        l.sort_unstable();
        l
    };
    println!(
        "{nq} queries, {nlist} lists, dim {dim}, {} kernels",
        kern.name
    );
    for nprobe in [10usize, 50, 100] {
        let want = SuperRouting::want(nprobe, nlist);
        let t = Instant::now();
        let f16_lists: Vec<Vec<u32>> = qs
            .chunks_exact(dim)
            .map(|q| {
                r.candidates(kern, q, want, false, &mut g, &mut d, &mut order);
                keep_best(&mut order, nprobe);
                sorted_lists(&order)
            })
            .collect();
        let us = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
        println!("nprobe {nprobe} f16 routing: {us:.1} us/query");
        for margin in [0usize, 2, 4, 8, 16, 32, 64] {
            let t = Instant::now();
            let mut differ = 0;
            for (q, want_lists) in qs.chunks_exact(dim).zip(&f16_lists) {
                r.route_with_margin(kern, q, nprobe, margin, want, &mut b, &mut order);
                differ += (sorted_lists(&order) != *want_lists) as usize;
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
            println!(
                "nprobe {nprobe} margin {margin:2}: {differ} of {nq} queries probe other lists \
                 ({us:.1} us/query)"
            );
        }
    }
}
