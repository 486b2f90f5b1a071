//! u8 prescore streamed from memory vs from cache: ns per row of `l2_u8_batch_pre` over lists
//! of `LIST` rows spread across a buffer far larger than the caches (what one query per call
//! does at 1M), and over the same lists again and again (what a batch does).
//!
//! Usage: cargo bench -p vdb-core --bench stream_scan [-- MIB]
//! Variants, by environment: HUGE=1 backs the codes with transparent huge pages (madvise);
//! PF_KIB=N prefetches the first N KiB of the next list before each list; INTER=1 prefetches
//! the next list 16 rows at a time, interleaved with the current list's blocks; WAYS=N scans N
//! lists together, 16 rows of each in turn (more streams in flight on one core).
use std::time::Instant;
use vdb_core::kernels::kernels;

const DIM: usize = 128;
const LIST: usize = 256;

fn main() {
    let mib: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(256);
    let rows = mib * (1 << 20) / DIM;
    let mut codes: Vec<u8> = Vec::with_capacity(rows * DIM);
    if std::env::var("HUGE").is_ok() {
        let p = codes.as_mut_ptr() as usize;
        let a = (p + (2 << 20) - 1) & !((2 << 20) - 1);
        // SAFETY: [a, p + rows * DIM) lies inside `codes`' allocation (a is p rounded up to
        // 2 MiB, the buffer is hundreds of MiB); madvise only advises, it touches no memory.
        let r = unsafe {
            libc::madvise(
                a as *mut libc::c_void,
                rows * DIM - (a - p),
                libc::MADV_HUGEPAGE,
            )
        };
        eprintln!("madvise {r}");
    }
    codes.extend((0..rows * DIM).map(|i| ((i * 2654435761usize) >> 7) as u8));
    let terms: Vec<i32> = codes
        .chunks_exact(DIM)
        .map(vdb_core::kernels::scalar::u8_row_term)
        .collect();
    let q: Vec<u8> = (0..DIM).map(|i| (i * 7) as u8).collect();
    let k = kernels();
    let mut out = vec![0u32; LIST];
    let nlists = rows / LIST;
    let mut sink = 0u64;
    let pf_kib: usize = std::env::var("PF_KIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut scan = |order: &mut dyn Iterator<Item = usize>| {
        let order: Vec<usize> = order.collect();
        let t = Instant::now();
        let mut n = 0;
        for (i, &l) in order.iter().enumerate() {
            if pf_kib > 0 {
                if let Some(&next) = order.get(i + 1) {
                    let p = codes[next * LIST * DIM..].as_ptr();
                    let mut o = 0;
                    while o < (pf_kib * 1024).min(LIST * DIM) {
                        // SAFETY: o < LIST * DIM keeps p + o inside list `next`'s codes; a prefetch
                        // never faults.
                        unsafe {
                            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                                p.add(o) as *const i8,
                            )
                        };
                        o += 64;
                    }
                    let tp = terms[next * LIST..].as_ptr() as *const u8;
                    let mut o = 0;
                    while o < LIST * 4 {
                        // SAFETY: o < LIST * 4 keeps tp + o inside list `next`'s terms; a prefetch
                        // never faults.
                        unsafe {
                            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                                tp.add(o) as *const i8,
                            )
                        };
                        o += 64;
                    }
                }
            }
            let r = l * LIST;
            if let Some(ways) = std::env::var("WAYS")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
            {
                // Interleave WAYS lists 16 rows at a time: lists i, i+1, .. scanned together.
                if i % ways != 0 {
                    continue;
                }
                let group: Vec<usize> = order[i..(i + ways).min(order.len())].to_vec();
                for c in 0..LIST / 16 {
                    for &g in &group {
                        let rr = g * LIST + c * 16;
                        (k.l2_u8_batch_pre)(
                            &q,
                            &codes[rr * DIM..(rr + 16) * DIM],
                            &terms[rr..rr + 16],
                            &mut out[c * 16..c * 16 + 16],
                        );
                    }
                }
                n += LIST * group.len();
                continue;
            }
            if std::env::var("INTER").is_ok() {
                let next = order.get(i + 1).copied().unwrap_or(l);
                for c in 0..LIST / 16 {
                    let p = codes[next * LIST * DIM + c * 16 * DIM..].as_ptr();
                    let mut o = 0;
                    while o < 16 * DIM {
                        // SAFETY: o < 16 * DIM keeps p + o inside block c of list `next`'s codes; a
                        // prefetch never faults.
                        unsafe {
                            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                                p.add(o) as *const i8,
                            )
                        };
                        o += 64;
                    }
                    let rr = r + c * 16;
                    (k.l2_u8_batch_pre)(
                        &q,
                        &codes[rr * DIM..(rr + 16) * DIM],
                        &terms[rr..rr + 16],
                        &mut out[c * 16..c * 16 + 16],
                    );
                }
            } else {
                (k.l2_u8_batch_pre)(
                    &q,
                    &codes[r * DIM..(r + LIST) * DIM],
                    &terms[r..r + LIST],
                    &mut out,
                );
            }
            sink = sink.wrapping_add(out[3] as u64);
            n += LIST;
        }
        t.elapsed().as_secs_f64() * 1e9 / n as f64
    };
    for round in 0..3 {
        let seq = scan(&mut (0..nlists));
        let mut x = 12345usize;
        let mut rnd = (0..nlists).map(move |_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % nlists
        });
        let random = scan(&mut rnd);
        let hot = scan(&mut (0..nlists).map(|i| i % 16));
        println!("round {round}: {mib} MiB, ns/row: sequential lists {seq:.2}, random lists {random:.2}, 16 hot lists {hot:.2}");
    }
    println!("(checksum {sink})");
    for l in std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap()
        .lines()
    {
        if l.contains("AnonHuge") {
            println!("{l}");
        }
    }
}
