//! Micro-benchmarks of every kernel x SIMD table at dim 128, plus a memory-bandwidth probe.
//!
//! A small hand-rolled harness (`harness = false`, no dev-dependencies: criterion would add
//! dozens of crates to every `cargo test` in CI). Each case runs in many short samples (40 of
//! 3 ms by default: shorter than a scheduler slice, so on a shared machine some samples run
//! undisturbed); the best sample is reported, with the median beside it.
//!
//! Usage: `cargo bench -p vdb-core --bench kernels -- [FILTER...] [--quick] [--dim N]
//! [--samples N] [--sample-ms MS]`. On a busy machine prefer many short samples (e.g.
//! `--samples 60 --sample-ms 2`): the best of them is the one no other process interrupted.
//! Names read like "l2_u8_batch(avx512+vnni)". ns/vec is per scored row; GB/s counts the row
//! bytes read (the query stays in cache); "x scalar" is the speed-up over the scalar twin
//! measured in the same run.

use half::f16;
use std::hint::black_box;
use std::time::{Duration, Instant};
use vdb_core::kernels::{self, available_tables, Kernels};

const ROWS: usize = 1024;

struct Opts {
    filters: Vec<String>,
    dim: usize,
    sample: Duration,
    samples: usize,
    bandwidth_mib: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        filters: vec![],
        dim: 128,
        sample: Duration::from_millis(3),
        samples: 40,
        bandwidth_mib: 512,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--quick" => {
                o.sample = Duration::from_millis(2);
                o.samples = 10;
                o.bandwidth_mib = 128;
            }
            "--samples" => {
                o.samples = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--samples needs a positive integer");
            }
            "--sample-ms" => {
                let ms: u64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--sample-ms needs a positive integer");
                o.sample = Duration::from_millis(ms);
            }
            "--dim" => {
                o.dim = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--dim needs a positive integer");
            }
            s if s.starts_with("--") => {} // libtest-style flags cargo may pass
            s => o.filters.push(s.to_string()),
        }
    }
    o
}

/// Runs `f` (which scores `per_call` rows) for `o.samples` samples of about `o.sample` each;
/// returns (best, median) nanoseconds per row.
fn time_it(o: &Opts, per_call: usize, mut f: impl FnMut()) -> (f64, f64) {
    // calibrate: calls per sample
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed() < o.sample / 4 {
        f();
        calls += 1;
    }
    let calls = (calls * 4).max(1);
    let mut per_row: Vec<f64> = (0..o.samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_nanos() as f64 / (calls as f64 * per_call as f64)
        })
        .collect();
    per_row.sort_by(|a, b| a.total_cmp(b));
    (per_row[0], per_row[per_row.len() / 2])
}

struct Data {
    q32: Vec<f32>,
    r32: Vec<f32>,
    r16: Vec<f16>,
    q8: Vec<u8>,
    r8: Vec<u8>,
    terms: Vec<i32>,
    qi8: Vec<i8>,
}

fn data(dim: usize) -> Data {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let r32: Vec<f32> = (0..dim * ROWS).map(|_| (next() % 256) as f32).collect();
    let r8: Vec<u8> = (0..dim * ROWS).map(|_| (next() % 256) as u8).collect();
    Data {
        qi8: (0..dim).map(|_| (next() % 256) as u8 as i8).collect(),
        terms: r8
            .chunks_exact(dim)
            .map(kernels::scalar::u8_row_term)
            .collect(),
        r8,
        q32: (0..dim).map(|_| (next() % 256) as f32).collect(),
        r16: r32.iter().map(|&x| f16::from_f32(x)).collect(),
        q8: (0..dim).map(|_| (next() % 256) as u8).collect(),
        r32,
    }
}

/// Output buffers the cases write into.
struct Bufs {
    out32: Vec<f32>,
    outu: Vec<u32>,
    outi: Vec<i32>,
    conv16: Vec<f16>,
    conv32: Vec<f32>,
}

struct Row {
    name: String,
    ns: f64,
    median: f64,
    bytes_per_row: usize,
    scalar_ns: Option<f64>,
}

fn print_row(r: &Row) {
    let gbs = r.bytes_per_row as f64 / r.ns;
    let speedup = r
        .scalar_ns
        .map(|s| format!("{:>8.2}x", s / r.ns))
        .unwrap_or_else(|| format!("{:>9}", "-"));
    println!(
        "{:<34} {:>9.2} {:>9.2} {:>9.2} {}",
        r.name, r.ns, r.median, gbs, speedup
    );
}

fn bench_table(o: &Opts, k: &Kernels, d: &Data, scalar: &mut Vec<(String, f64)>) {
    let dim = o.dim;
    let mut b = Bufs {
        out32: vec![0f32; ROWS],
        outu: vec![0u32; ROWS],
        outi: vec![0i32; ROWS],
        conv16: vec![f16::ZERO; dim * ROWS],
        conv32: vec![0f32; dim * ROWS],
    };
    type Case<'a> = (&'static str, usize, Box<dyn Fn(&mut Bufs) + 'a>);
    let cases: Vec<Case> = vec![
        (
            "l2_f32",
            4,
            Box::new(|_: &mut Bufs| {
                for r in d.r32.chunks_exact(dim) {
                    black_box((k.l2_f32)(black_box(&d.q32), r));
                }
            }),
        ),
        (
            "dot_f32",
            4,
            Box::new(|_: &mut Bufs| {
                for r in d.r32.chunks_exact(dim) {
                    black_box((k.dot_f32)(black_box(&d.q32), r));
                }
            }),
        ),
        (
            "l2_f32_f16",
            2,
            Box::new(|_: &mut Bufs| {
                for r in d.r16.chunks_exact(dim) {
                    black_box((k.l2_f32_f16)(black_box(&d.q32), r));
                }
            }),
        ),
        (
            "dot_f32_f16",
            2,
            Box::new(|_: &mut Bufs| {
                for r in d.r16.chunks_exact(dim) {
                    black_box((k.dot_f32_f16)(black_box(&d.q32), r));
                }
            }),
        ),
        (
            "l2_u8",
            1,
            Box::new(|_: &mut Bufs| {
                for r in d.r8.chunks_exact(dim) {
                    black_box((k.l2_u8)(black_box(&d.q8), r));
                }
            }),
        ),
        (
            "dot_f32_u8",
            1,
            Box::new(|_: &mut Bufs| {
                for r in d.r8.chunks_exact(dim) {
                    black_box((k.dot_f32_u8)(black_box(&d.q32), r));
                }
            }),
        ),
        (
            "l2_f32_batch",
            4,
            Box::new(|b: &mut Bufs| (k.l2_f32_batch)(black_box(&d.q32), &d.r32, &mut b.out32)),
        ),
        (
            "dot_f32_batch",
            4,
            Box::new(|b: &mut Bufs| (k.dot_f32_batch)(black_box(&d.q32), &d.r32, &mut b.out32)),
        ),
        (
            "l2_f32_f16_batch",
            2,
            Box::new(|b: &mut Bufs| (k.l2_f32_f16_batch)(black_box(&d.q32), &d.r16, &mut b.out32)),
        ),
        (
            "dot_f32_f16_batch",
            2,
            Box::new(|b: &mut Bufs| (k.dot_f32_f16_batch)(black_box(&d.q32), &d.r16, &mut b.out32)),
        ),
        (
            "l2_u8_batch",
            1,
            Box::new(|b: &mut Bufs| (k.l2_u8_batch)(black_box(&d.q8), &d.r8, &mut b.outu)),
        ),
        (
            "l2_u8_batch_pre",
            1,
            Box::new(|b: &mut Bufs| {
                (k.l2_u8_batch_pre)(black_box(&d.q8), &d.r8, &d.terms, &mut b.outu)
            }),
        ),
        (
            "dot_i8_u8_batch",
            1,
            Box::new(|b: &mut Bufs| (k.dot_i8_u8_batch)(black_box(&d.qi8), &d.r8, &mut b.outi)),
        ),
        (
            "dot_f32_u8_batch",
            1,
            Box::new(|b: &mut Bufs| (k.dot_f32_u8_batch)(black_box(&d.q32), &d.r8, &mut b.out32)),
        ),
        (
            "f32_to_f16",
            4,
            Box::new(|b: &mut Bufs| (k.f32_to_f16)(black_box(&d.r32), &mut b.conv16)),
        ),
        (
            "f16_to_f32",
            2,
            Box::new(|b: &mut Bufs| (k.f16_to_f32)(black_box(&d.r16), &mut b.conv32)),
        ),
    ];
    for (kernel, elem_bytes, f) in cases {
        let name = format!("{kernel}({})", k.name);
        if !o.filters.is_empty() && !o.filters.iter().any(|p| name.contains(p.as_str())) {
            continue;
        }
        let (ns, median) = time_it(o, ROWS, || f(&mut b));
        let scalar_ns = scalar.iter().find(|(n, _)| n == kernel).map(|(_, t)| *t);
        if k.level == kernels::SimdLevel::Scalar {
            scalar.push((kernel.to_string(), ns));
        }
        print_row(&Row {
            name,
            ns,
            median,
            bytes_per_row: elem_bytes * dim,
            scalar_ns,
        });
    }
}

/// The 4-bit prefilter's scan (`fs_below`, and `fs_below_many` for 2 and 4 queries over the same
/// rows) on `ROWS` rows of random codes, tables of random entries up to `pq4::ENTRY_MAX`, each
/// query's threshold at the 5% quantile of its sums (about the share that passes in a real
/// scan), so the emission of passing rows is timed too. ns/vec is per row and query; GB/s counts
/// the codes (dim / 4 bytes a row) once per query.
fn bench_fs(o: &Opts, k: &Kernels, scalar: &mut Vec<(String, f64)>) {
    let dim = o.dim;
    if !dim.is_multiple_of(4) {
        return;
    }
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let lut_len = dim / 4 * 64;
    let packed: Vec<u8> = (0..ROWS / 32 * (dim / 4) * 32).map(|_| next() as u8).collect();
    let luts: Vec<Vec<u8>> = (0..kernels::FS_MANY)
        .map(|_| (0..lut_len).map(|_| (next() % 128) as u8).collect())
        .collect();
    let (mut pos, mut dist) = (vec![0u32; ROWS * kernels::FS_MANY], vec![0u32; ROWS * kernels::FS_MANY]);
    let thrs: Vec<u32> = luts
        .iter()
        .map(|l| {
            let n = (k.fs_below)(&packed, ROWS, l, u32::MAX, &mut pos, &mut dist);
            let mut d = dist[..n].to_vec();
            d.sort_unstable();
            d[ROWS / 20]
        })
        .collect();
    let mut counts = [0usize; kernels::FS_MANY];
    for g in [1usize, 2, 4] {
        let kernel = if g == 1 { "fs_below".to_string() } else { format!("fs_below_many({g} q)") };
        let name = format!("{kernel}({})", k.name);
        if !o.filters.is_empty() && !o.filters.iter().any(|p| name.contains(p.as_str())) {
            continue;
        }
        let refs: Vec<&[u8]> = luts[..g].iter().map(|l| l.as_slice()).collect();
        let (ns, median) = time_it(o, ROWS * g, || {
            if g == 1 {
                black_box((k.fs_below)(black_box(&packed), ROWS, refs[0], thrs[0], &mut pos, &mut dist));
            } else {
                (k.fs_below_many)(black_box(&packed), ROWS, &refs, &thrs[..g], &mut pos, &mut dist, &mut counts);
                black_box(&counts);
            }
        });
        let scalar_ns = scalar.iter().find(|(n, _)| *n == kernel).map(|(_, t)| *t);
        if k.level == kernels::SimdLevel::Scalar {
            scalar.push((kernel, ns));
        }
        print_row(&Row { name, ns, median, bytes_per_row: dim / 4, scalar_ns });
    }
}

/// Streaming-read bandwidth: `threads` threads each sum their share of a large buffer.
fn read_bandwidth(buf: &[u64], threads: usize) -> f64 {
    let chunk = buf.len().div_ceil(threads);
    let t = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = buf
            .chunks(chunk)
            .map(|c| {
                s.spawn(move || {
                    let mut acc = [0u64; 8];
                    for block in c.chunks_exact(8) {
                        for (a, v) in acc.iter_mut().zip(block) {
                            *a = a.wrapping_add(*v);
                        }
                    }
                    acc.iter().fold(0u64, |x, y| x.wrapping_add(*y))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .fold(0, u64::wrapping_add)
    });
    black_box(total);
    (buf.len() * 8) as f64 / t.elapsed().as_nanos() as f64
}

fn bandwidth(o: &Opts) {
    let words = o.bandwidth_mib * (1 << 20) / 8;
    let buf: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "\nmemory bandwidth probe ({} MiB streaming read, best of 5):",
        o.bandwidth_mib
    );
    for threads in [1, cores.min(2)]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let best = (0..5)
            .map(|_| read_bandwidth(&buf, threads))
            .fold(0f64, f64::max);
        println!("  read, {threads} thread(s): {best:>7.2} GB/s");
    }
    // The IVF prescore's real access pattern: the active table's u8 batch over rows far out of
    // cache, in blocks the size of an inverted list.
    let dim = o.dim;
    let bytes: &[u8] = bytemuck::cast_slice(&buf);
    let nrows = bytes.len() / dim;
    let q: Vec<u8> = (0..dim).map(|i| (i * 37 % 256) as u8).collect();
    let k = kernels::kernels();
    let mut out = vec![0u32; 256];
    let block = 256 * dim;
    let scanned = (nrows / 256 * block) as f64;
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            for rows in bytes[..nrows * dim].chunks_exact(block) {
                (k.l2_u8_batch)(&q, rows, &mut out);
                black_box(&out);
            }
            scanned / t.elapsed().as_nanos() as f64
        })
        .fold(0f64, f64::max);
    println!(
        "  l2_u8_batch({}) over {} MiB, 1 thread: {best:>7.2} GB/s",
        k.name, o.bandwidth_mib
    );
    let terms: Vec<i32> = bytes[..nrows * dim]
        .chunks_exact(dim)
        .map(k.u8_row_term)
        .collect();
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            for (rows, terms) in bytes[..nrows * dim]
                .chunks_exact(block)
                .zip(terms.chunks_exact(256))
            {
                (k.l2_u8_batch_pre)(&q, rows, terms, &mut out);
                black_box(&out);
            }
            // the row terms are read too
            (scanned + (terms.len() * 4) as f64) / t.elapsed().as_nanos() as f64
        })
        .fold(0f64, f64::max);
    println!(
        "  l2_u8_batch_pre({}) over {} MiB (+ row terms), 1 thread: {best:>7.2} GB/s",
        k.name, o.bandwidth_mib
    );
    // Batch mode: 8 queries that probe the same lists. Scanning list by list and scoring all
    // the queries while the list is in cache reads memory once instead of 8 times.
    let nq = 8;
    let qs: Vec<u8> = (0..nq * dim).map(|i| (i * 29 % 256) as u8).collect();
    let mut outs = vec![0u32; 256 * nq];
    let blocks = || {
        bytes[..nrows * dim]
            .chunks_exact(block)
            .zip(terms.chunks_exact(256))
    };
    let per_query = (0..3)
        .map(|_| {
            let t = Instant::now();
            for qj in qs.chunks_exact(dim) {
                for (rows, terms) in blocks() {
                    (k.l2_u8_batch_pre)(qj, rows, terms, &mut out);
                    black_box(&out);
                }
            }
            t.elapsed().as_nanos() as f64 / (nq * nrows) as f64
        })
        .fold(f64::MAX, f64::min);
    let per_list = (0..3)
        .map(|_| {
            let t = Instant::now();
            for (rows, terms) in blocks() {
                for (qj, o) in qs.chunks_exact(dim).zip(outs.chunks_exact_mut(256)) {
                    (k.l2_u8_batch_pre)(qj, rows, terms, o);
                }
                black_box(&outs);
            }
            t.elapsed().as_nanos() as f64 / (nq * nrows) as f64
        })
        .fold(f64::MAX, f64::min);
    println!(
        "  {nq} queries x {} MiB, l2_u8_batch_pre: query by query {per_query:.2} ns, \
         list by list (lists of 256 rows) {per_list:.2} ns per (query, row)",
        o.bandwidth_mib
    );
}

/// The rerank's access pattern: f16 rows gathered at random from far out of cache, scored one
/// by one, with the rows `ahead` candidates later prefetched (0: no prefetch).
fn rerank_gather(o: &Opts) {
    let dim = o.dim;
    let nrows = o.bandwidth_mib * (1 << 20) / (2 * dim);
    let rows: Vec<f16> = (0..nrows * dim)
        .map(|i| f16::from_f32((i % 251) as f32))
        .collect();
    let q: Vec<f32> = (0..dim).map(|i| (i % 13) as f32).collect();
    let k = kernels::kernels();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let cands: Vec<usize> = (0..1 << 16)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % nrows as u64) as usize
        })
        .collect();
    println!(
        "\nrerank gather probe: l2_f32_f16({}) on rows picked at random from {} MiB:",
        k.name, o.bandwidth_mib
    );
    for ahead in [0usize, 2, 4, 8, 16] {
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                let mut acc = 0f32;
                for (i, &c) in cands.iter().enumerate() {
                    if ahead > 0 {
                        if let Some(&next) = cands.get(i + ahead) {
                            kernels::prefetch(&rows[next * dim..(next + 1) * dim]);
                        }
                    }
                    acc += (k.l2_f32_f16)(&q, &rows[c * dim..(c + 1) * dim]);
                }
                black_box(acc);
                t.elapsed().as_nanos() as f64 / cands.len() as f64
            })
            .fold(f64::MAX, f64::min);
        println!("  prefetch {ahead:>2} ahead: {best:>7.1} ns per candidate");
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    let o = opts();
    let tables = available_tables();
    println!(
        "vdb-core kernels bench: cpu {:?}, detected {}, tables [{}], dim {}, {} rows per batch",
        cpu_model(),
        kernels::detected_level(),
        tables.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
        o.dim,
        ROWS
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9}",
        "kernel(table)", "ns/vec", "median", "GB/s", "x scalar"
    );
    let d = data(o.dim);
    let mut scalar = vec![];
    for k in &tables {
        bench_table(&o, k, &d, &mut scalar);
    }
    let mut scalar_fs = vec![];
    for k in &tables {
        bench_fs(&o, k, &mut scalar_fs);
    }
    if o.filters.is_empty() || o.filters.iter().any(|f| f == "bandwidth") {
        bandwidth(&o);
    }
    if o.filters.is_empty() || o.filters.iter().any(|f| f == "rerank") {
        rerank_gather(&o);
    }
}
