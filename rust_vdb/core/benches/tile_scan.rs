//! The batch prescore's tile kernel (`l2_u8_tile_below`) over lists of split u8 codes: ns per
//! row visit (one list row scored against a tile of queries) with the lists hot in cache,
//! streamed from memory in address order (one arena per block, lists back to back), and
//! streamed from lists in separate allocations visited in order (how the index holds them).
//!
//! Usage: cargo bench -p vdb-core --bench tile_scan [-- MIB]
//! Environment: NQ=queries per tile (default 13, what a 1,000-query batch at 1M nprobe 52
//! gives a list), PASS=share of rows under the thresholds (default 0: the kernel alone),
//! HUGE=1 backs the arena and the per-list allocations with transparent huge pages.
use std::time::Instant;
use vdb_core::kernels::kernels;

const HEAD: usize = 64;
const TAIL: usize = 64;
const LIST: usize = 250;

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Lists {
    heads: Vec<Vec<u8>>,
    tails: Vec<Vec<u8>>,
    terms: Vec<Vec<i32>>,
    tterms: Vec<Vec<i32>>,
}

fn main() {
    let mib: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(256);
    let nq = env("NQ", 13.0) as usize;
    let pass = env("PASS", 0.0);
    let k = kernels();
    let nlists = mib * (1 << 20) / ((HEAD + TAIL) * LIST);
    let mut x = 0x9E37_79B9u32;
    let mut byte = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x >> 24) as u8
    };
    // arena: every list's block back to back
    let ah: Vec<u8> = (0..nlists * LIST * HEAD).map(|_| byte()).collect();
    let at: Vec<u8> = (0..nlists * LIST * TAIL).map(|_| byte()).collect();
    let term = k.u8_row_term;
    if std::env::var("HUGE").is_ok() {
        // the arena blocks backed by transparent huge pages (what `hugepages::advise` asks)
        for (p, len) in [
            (ah.as_ptr() as usize, ah.len()),
            (at.as_ptr() as usize, at.len()),
        ] {
            let a = (p + (2 << 20) - 1) & !((2 << 20) - 1);
            // SAFETY: [a, p + len) lies inside the live Vec (a is p rounded up to 2 MiB, the
            // arenas are far larger); madvise only advises the kernel, it touches no memory.
            unsafe {
                libc::madvise(a as *mut libc::c_void, len - (a - p), libc::MADV_HUGEPAGE);
                libc::madvise(
                    a as *mut libc::c_void,
                    len - (a - p),
                    25, /* MADV_COLLAPSE */
                );
            }
        }
    }
    let aterms: Vec<i32> = ah.chunks_exact(HEAD).map(term).collect();
    let atterms: Vec<i32> = at.chunks_exact(TAIL).map(term).collect();
    // separate allocations, interleaved like per-list Vecs with their f16 vectors between
    let mut sep = Lists {
        heads: vec![],
        tails: vec![],
        terms: vec![],
        tterms: vec![],
    };
    let mut f16s = Vec::new();
    for l in 0..nlists {
        let r = l * LIST..(l + 1) * LIST;
        sep.heads.push(ah[r.start * HEAD..r.end * HEAD].to_vec());
        sep.tails.push(at[r.start * TAIL..r.end * TAIL].to_vec());
        sep.terms.push(aterms[r.clone()].to_vec());
        sep.tterms.push(atterms[r].to_vec());
        f16s.push(vec![1u16; LIST * (HEAD + TAIL)]);
    }
    if std::env::var("HUGE").is_ok() {
        // the per-list allocations as the index advises them (`hugepages::advise`)
        let mut bufs: Vec<(usize, usize)> = Vec::new();
        for l in 0..nlists {
            bufs.push((sep.heads[l].as_ptr() as usize, sep.heads[l].len()));
            bufs.push((sep.tails[l].as_ptr() as usize, sep.tails[l].len()));
            bufs.push((sep.terms[l].as_ptr() as usize, sep.terms[l].len() * 4));
            bufs.push((sep.tterms[l].as_ptr() as usize, sep.tterms[l].len() * 4));
            bufs.push((f16s[l].as_ptr() as usize, f16s[l].len() * 2));
        }
        vdb_core::hugepages::advise(&mut bufs);
    }
    let qs: Vec<u8> = (0..nq * (HEAD + TAIL)).map(|_| byte()).collect();
    // thresholds at the PASS quantile of the first list's distances
    let thrs: Vec<f32> = (0..nq)
        .map(|j| {
            if pass <= 0.0 {
                return -1.0;
            }
            let q = &qs[j * (HEAD + TAIL)..(j + 1) * (HEAD + TAIL)];
            let mut d: Vec<u32> = (0..LIST)
                .map(|r| {
                    let mut row = ah[r * HEAD..(r + 1) * HEAD].to_vec();
                    row.extend_from_slice(&at[r * TAIL..(r + 1) * TAIL]);
                    (k.l2_u8)(q, &row)
                })
                .collect();
            d.sort_unstable();
            d[((LIST as f64 * pass) as usize).min(LIST - 1)] as f32
        })
        .collect();
    println!(
        "{} ({nq} queries a tile, pass {pass}), {nlists} lists of {LIST} rows",
        k.name
    );
    let hot: Vec<usize> = (0..nlists).map(|i| i % 8).collect();
    let all: Vec<usize> = (0..nlists).collect();
    let slice = |l: usize| {
        let r = l * LIST..(l + 1) * LIST;
        (
            &ah[r.start * HEAD..r.end * HEAD],
            &aterms[r.clone()],
            &at[r.start * TAIL..r.end * TAIL],
            &atterms[r],
        )
    };
    // The arena again, 16 bytes past a 64-byte boundary (where malloc may put a list's Vec):
    // every 64-byte row then straddles two cache lines.
    let shifted = |v: &[u8]| -> (Vec<u8>, usize) {
        let mut b = vec![0u8; v.len() + 128];
        let at = (64 - (b.as_ptr() as usize % 64)) % 64 + 16;
        b[at..at + v.len()].copy_from_slice(v);
        (b, at)
    };
    let (mh, mho) = shifted(&ah);
    let (mt, mto) = shifted(&at);
    let misaligned = |l: usize| {
        let r = l * LIST..(l + 1) * LIST;
        (
            &mh[mho + r.start * HEAD..mho + r.end * HEAD],
            &aterms[r.clone()],
            &mt[mto + r.start * TAIL..mto + r.end * TAIL],
            &atterms[r],
        )
    };
    let mut kept = 0;
    let only = std::env::var("ONLY").unwrap_or_default();
    if only == "hot" {
        for _ in 0..20 {
            kept += run("hot (8 lists again and again)", &slice, &hot, &qs, &thrs);
        }
        return;
    }
    kept += run("hot (8 lists again and again)", &slice, &hot, &qs, &thrs);
    kept += run(
        "hot, rows across cache lines",
        &misaligned,
        &hot,
        &qs,
        &thrs,
    );
    kept += run("arena, lists in address order", &slice, &all, &qs, &thrs);
    kept += run(
        "arena, rows across cache lines",
        &misaligned,
        &all,
        &qs,
        &thrs,
    );
    let own = |l: usize| {
        (
            &sep.heads[l][..],
            &sep.terms[l][..],
            &sep.tails[l][..],
            &sep.tterms[l][..],
        )
    };
    kept += run("own allocations, in list order", &own, &all, &qs, &thrs);
    println!("(kept {kept}, {} f16 lists)", f16s.len());
}

type Blocks<'a> = (&'a [u8], &'a [i32], &'a [u8], &'a [i32]);

/// Best of three passes over `order`; prints ns per row visit, returns the rows kept.
fn run<'a>(
    label: &str,
    lists: &dyn Fn(usize) -> Blocks<'a>,
    order: &[usize],
    qs: &[u8],
    thrs: &[f32],
) -> u64 {
    let k = kernels();
    let nq = thrs.len();
    let (mut pos, mut dist, mut counts) =
        (vec![0u32; 16 * LIST], vec![0u32; 16 * LIST], [0u32; 16]);
    let mut kept = 0u64;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for &l in order {
            let (h, th, t, tt) = lists(l);
            (k.l2_u8_tile_below)(qs, h, th, t, tt, thrs, &mut pos, &mut dist, &mut counts);
            kept += counts[..nq].iter().map(|&c| c as u64).sum::<u64>();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    let visits = (order.len() * LIST) as f64;
    println!(
        "{label:<34} {:6.2} ns/row visit  ({:5.1} GB/s of codes)",
        best / visits * 1e9,
        visits * (HEAD + TAIL) as f64 / best / 1e9
    );
    kept
}
