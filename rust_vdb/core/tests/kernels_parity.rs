//! Parity of every SIMD kernel table this CPU can run with the scalar twins, on odd dims, and
//! the level controls (`VDBBENCH_SIMD`, `set_level_cap`).

use half::f16;
use vdb_core::kernels::{self, available_tables, Kernels, SimdLevel, FS_MANY, SCALAR};

const DIMS: [usize; 12] = [1, 7, 15, 16, 17, 31, 64, 65, 127, 128, 129, 300];
/// Row counts for the batch kernels: empty, below, at and past the 4- and 16-row blockings.
const NROWS: [usize; 10] = [0, 1, 3, 4, 5, 8, 11, 16, 21, 37];

/// splitmix64: a seeded generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f32(&mut self) -> f32 {
        // uniform in [-1, 1), scaled to a SIFT-like magnitude now and then
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
        if self.next().is_multiple_of(4) {
            u * 200.0
        } else {
            u
        }
    }
    fn u8(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    fn u8s(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
}

fn simd_tables() -> Vec<&'static Kernels> {
    let t: Vec<_> = available_tables()
        .into_iter()
        .filter(|k| k.level != SimdLevel::Scalar)
        .collect();
    eprintln!(
        "SIMD tables under test: {:?}",
        t.iter().map(|k| k.name).collect::<Vec<_>>()
    );
    t
}

/// Both results are sums of `dim` terms in different orders; each is within
/// dim * eps * sum|terms| of the exact value. A lost or doubled term is ~sum/dim, far above.
fn assert_close(what: &str, got: f32, want: f32, abs_terms: f64, dim: usize) {
    let tol = 2.0 * dim as f64 * f32::EPSILON as f64 * abs_terms + 1e-30;
    assert!(
        ((got as f64) - (want as f64)).abs() <= tol,
        "{what}: got {got}, scalar says {want} (tolerance {tol:e})"
    );
}

fn abs_l2_terms(q: &[f32], x: &[f32]) -> f64 {
    q.iter().zip(x).map(|(a, b)| ((a - b) as f64).powi(2)).sum()
}
fn abs_dot_terms(q: &[f32], x: &[f32]) -> f64 {
    q.iter()
        .zip(x)
        .map(|(a, b)| (*a as f64 * *b as f64).abs())
        .sum()
}

fn to_f16(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}
fn f16_as_f32(v: &[f16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}
fn u8_as_f32(v: &[u8]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

#[test]
#[cfg(target_arch = "x86_64")]
fn there_is_something_to_test_on_x86_64() {
    if std::is_x86_feature_detected!("avx2") {
        assert!(available_tables()
            .iter()
            .any(|k| k.level == SimdLevel::Avx2));
    }
}

#[test]
#[cfg(target_arch = "aarch64")]
fn there_is_something_to_test_on_aarch64() {
    if std::arch::is_aarch64_feature_detected!("neon") {
        assert!(available_tables()
            .iter()
            .any(|k| k.level == SimdLevel::Neon));
    }
}

#[test]
fn u8_l2_is_exact() {
    let mut rng = Rng(1);
    for k in simd_tables() {
        for dim in DIMS {
            for _ in 0..20 {
                let (a, b) = (rng.u8s(dim), rng.u8s(dim));
                assert_eq!(
                    (k.l2_u8)(&a, &b),
                    (SCALAR.l2_u8)(&a, &b),
                    "{} dim {dim}",
                    k.name
                );
            }
            // extremes: every term 255^2 (saturating-subtraction and widening edge cases)
            let (z, f) = (vec![0u8; dim], vec![255u8; dim]);
            assert_eq!(
                (k.l2_u8)(&z, &f),
                dim as u32 * 65025,
                "{} dim {dim} 0 vs 255",
                k.name
            );
            assert_eq!(
                (k.l2_u8)(&f, &z),
                dim as u32 * 65025,
                "{} dim {dim} 255 vs 0",
                k.name
            );
            assert_eq!((k.l2_u8)(&f, &f), 0, "{} dim {dim} equal", k.name);
        }
        // a long vector: i32 lanes would overflow as signed, the u32 sum must not
        let dim = 40_000;
        let (z, f) = (vec![0u8; dim], vec![255u8; dim]);
        assert_eq!(
            (k.l2_u8)(&z, &f),
            (SCALAR.l2_u8)(&z, &f),
            "{} dim {dim}",
            k.name
        );
    }
}

#[test]
fn u8_l2_batch_equals_single_and_scalar() {
    let mut rng = Rng(2);
    for k in simd_tables() {
        for dim in DIMS {
            for nrows in NROWS {
                let q = rng.u8s(dim);
                let rows = rng.u8s(dim * nrows);
                let mut got = vec![7u32; nrows];
                let mut want = vec![9u32; nrows];
                (k.l2_u8_batch)(&q, &rows, &mut got);
                (SCALAR.l2_u8_batch)(&q, &rows, &mut want);
                assert_eq!(got, want, "{} dim {dim} nrows {nrows}", k.name);
                for (r, g) in got.iter().enumerate() {
                    assert_eq!(
                        *g,
                        (k.l2_u8)(&q, &rows[r * dim..(r + 1) * dim]),
                        "{} row {r}",
                        k.name
                    );
                }
            }
        }
    }
}

/// Queries whose codes all lie in 64..=191 (routing's half-step codes) take AVX2's
/// `vpmaddubsw` path: the same distances as the scalar table, at the range's edges and with
/// rows of 0 and 255 (the largest products), and a query one code outside the range takes the
/// general path with the same results.
#[test]
fn u8_l2_with_row_terms_is_exact_for_queries_within_i7() {
    let mut rng = Rng(19);
    for k in available_tables() {
        for dim in DIMS.iter().copied().chain([128, 160, 512, 544]) {
            for nrows in NROWS {
                let mut rows = rng.u8s(dim * nrows);
                if nrows > 2 {
                    rows[..dim].fill(0);
                    rows[dim..2 * dim].fill(255);
                }
                let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                let within: Vec<u8> = rng.u8s(dim).iter().map(|&v| 64 + v / 2).collect();
                for q in [within.clone(), vec![64u8; dim], vec![191u8; dim], {
                    let mut out = within.clone();
                    out[dim - 1] = if dim % 2 == 0 { 63 } else { 192 };
                    out
                }] {
                    let mut got = vec![1u32; nrows];
                    let mut want = vec![2u32; nrows];
                    (k.l2_u8_batch_pre)(&q, &rows, &terms, &mut got);
                    (SCALAR.l2_u8_batch)(&q, &rows, &mut want);
                    assert_eq!(got, want, "l2_u8_batch_pre({}) dim {dim} nrows {nrows}", k.name);
                }
            }
        }
    }
}

#[test]
fn u8_l2_with_row_terms_is_exact() {
    let mut rng = Rng(9);
    for k in available_tables() {
        for dim in DIMS {
            for nrows in NROWS {
                let q = rng.u8s(dim);
                let mut rows = rng.u8s(dim * nrows);
                if nrows > 2 {
                    // extremes in a few rows: all 0 and all 255 against any query
                    rows[..dim].fill(0);
                    rows[dim..2 * dim].fill(255);
                }
                let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                let want_terms: Vec<i32> = rows
                    .chunks_exact(dim)
                    .map(|x| (SCALAR.u8_row_term)(x))
                    .collect();
                assert_eq!(terms, want_terms, "u8_row_term({}) dim {dim}", k.name);
                let mut got = vec![1u32; nrows];
                let mut want = vec![2u32; nrows];
                (k.l2_u8_batch_pre)(&q, &rows, &terms, &mut got);
                (SCALAR.l2_u8_batch)(&q, &rows, &mut want);
                assert_eq!(
                    got, want,
                    "l2_u8_batch_pre({}) dim {dim} nrows {nrows}",
                    k.name
                );
            }
            for qv in [0u8, 255] {
                let q = vec![qv; dim];
                let rows: Vec<u8> = [vec![0u8; dim], vec![255u8; dim], vec![128u8; dim]].concat();
                let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                let mut got = [0u32; 3];
                (k.l2_u8_batch_pre)(&q, &rows, &terms, &mut got);
                let d = |a: u8, b: u8| dim as u32 * (a as i32 - b as i32).pow(2) as u32;
                assert_eq!(
                    got,
                    [d(qv, 0), d(qv, 255), d(qv, 128)],
                    "{} dim {dim} q={qv}",
                    k.name
                );
            }
        }
        // long vectors: the i32 dot lanes come close to their range, the u32 distance must not
        // wrap (dim 40000: distance up to 2.6e9, dot down to -1.3e9)
        let dim = 40_000;
        let rows: Vec<u8> = [
            vec![255u8; dim],
            vec![0u8; dim],
            rng.u8s(dim),
            vec![255u8; dim],
        ]
        .concat();
        let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
        for q in [vec![0u8; dim], vec![255u8; dim], rng.u8s(dim)] {
            let mut got = [0u32; 4];
            let mut want = [1u32; 4];
            (k.l2_u8_batch_pre)(&q, &rows, &terms, &mut got);
            (SCALAR.l2_u8_batch)(&q, &rows, &mut want);
            assert_eq!(got, want, "l2_u8_batch_pre({}) dim {dim}", k.name);
        }
        let r = std::panic::catch_unwind(|| {
            (k.l2_u8_batch_pre)(&[1; 16], &[1; 32], &[0; 1], &mut [0; 2])
        });
        assert!(
            r.is_err(),
            "{} l2_u8_batch_pre accepted 1 term for 2 rows",
            k.name
        );
    }
}

#[allow(clippy::too_many_arguments)]
#[test]
fn i8_u8_dot_is_exact() {
    let mut rng = Rng(10);
    for k in simd_tables() {
        for dim in DIMS {
            for nrows in NROWS {
                let q: Vec<i8> = rng.u8s(dim).into_iter().map(|v| v as i8).collect();
                let rows = rng.u8s(dim * nrows);
                let mut got = vec![1i32; nrows];
                let mut want = vec![2i32; nrows];
                (k.dot_i8_u8_batch)(&q, &rows, &mut got);
                (SCALAR.dot_i8_u8_batch)(&q, &rows, &mut want);
                assert_eq!(
                    got, want,
                    "dot_i8_u8_batch({}) dim {dim} nrows {nrows}",
                    k.name
                );
            }
            // extremes: the largest products of both signs
            for qv in [i8::MIN, i8::MAX, -1, 0] {
                let q = vec![qv; dim];
                let rows: Vec<u8> = [vec![0u8; dim], vec![255u8; dim], vec![1u8; dim]].concat();
                let mut got = [7i32; 3];
                (k.dot_i8_u8_batch)(&q, &rows, &mut got);
                let d = dim as i32 * qv as i32;
                assert_eq!(got, [0, d * 255, d], "{} dim {dim} q={qv}", k.name);
            }
        }
        let dim = 40_000;
        let rows: Vec<u8> = [
            vec![255u8; dim],
            rng.u8s(dim),
            vec![0u8; dim],
            vec![255u8; dim],
        ]
        .concat();
        for qv in [i8::MIN, i8::MAX] {
            let q = vec![qv; dim];
            let mut got = [0i32; 4];
            let mut want = [1i32; 4];
            (k.dot_i8_u8_batch)(&q, &rows, &mut got);
            (SCALAR.dot_i8_u8_batch)(&q, &rows, &mut want);
            assert_eq!(got, want, "dot_i8_u8_batch({}) dim {dim} q={qv}", k.name);
            assert_eq!(got[0], qv as i32 * 255 * dim as i32);
        }
        let r = std::panic::catch_unwind(|| (k.dot_i8_u8_batch)(&[1; 16], &[1; 31], &mut [0; 2]));
        assert!(
            r.is_err(),
            "{} dot_i8_u8_batch accepted a short row block",
            k.name
        );
    }
}

/// Checks one f32-query kernel pair (single, batch) of `k` against the scalar twins.
fn check_f32_query<T: Copy>(
    name: &str,
    k: &Kernels,
    single: impl Fn(&Kernels) -> fn(&[f32], &[T]) -> f32,
    batch: impl Fn(&Kernels) -> fn(&[f32], &[T], &mut [f32]),
    gen: impl Fn(&mut Rng, usize) -> Vec<T>,
    as_f32: impl Fn(&[T]) -> Vec<f32>,
    l2: bool,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let terms = |q: &[f32], x: &[f32]| {
        if l2 {
            abs_l2_terms(q, x)
        } else {
            abs_dot_terms(q, x)
        }
    };
    for dim in DIMS {
        for nrows in NROWS {
            let q = rng.f32s(dim);
            let rows = gen(&mut rng, dim * nrows);
            let mut got = vec![f32::NAN; nrows];
            let mut want = vec![f32::NAN; nrows];
            batch(k)(&q, &rows, &mut got);
            batch(&SCALAR)(&q, &rows, &mut want);
            for r in 0..nrows {
                let row = &rows[r * dim..(r + 1) * dim];
                let t = terms(&q, &as_f32(row));
                let what = format!("{name}({}) dim {dim} row {r}/{nrows}", k.name);
                assert_close(&format!("{what} batch"), got[r], want[r], t, dim);
                let one = single(k)(&q, row);
                assert_close(
                    &format!("{what} single"),
                    one,
                    single(&SCALAR)(&q, row),
                    t,
                    dim,
                );
                assert_close(&format!("{what} batch vs single"), got[r], one, t, dim);
            }
        }
    }
}

#[test]
fn f32_kernels_match_scalar() {
    for k in simd_tables() {
        let g = |r: &mut Rng, n| r.f32s(n);
        let id = |v: &[f32]| v.to_vec();
        check_f32_query(
            "l2_f32",
            k,
            |k| k.l2_f32,
            |k| k.l2_f32_batch,
            g,
            id,
            true,
            3,
        );
        check_f32_query(
            "dot_f32",
            k,
            |k| k.dot_f32,
            |k| k.dot_f32_batch,
            g,
            id,
            false,
            4,
        );
    }
}

#[test]
fn f16_kernels_match_scalar() {
    for k in simd_tables() {
        let g = |r: &mut Rng, n| to_f16(&r.f32s(n));
        check_f32_query(
            "l2_f32_f16",
            k,
            |k| k.l2_f32_f16,
            |k| k.l2_f32_f16_batch,
            g,
            f16_as_f32,
            true,
            5,
        );
        check_f32_query(
            "dot_f32_f16",
            k,
            |k| k.dot_f32_f16,
            |k| k.dot_f32_f16_batch,
            g,
            f16_as_f32,
            false,
            6,
        );
    }
}

#[test]
fn f32_u8_dot_matches_scalar() {
    for k in simd_tables() {
        let g = |r: &mut Rng, n| r.u8s(n);
        check_f32_query(
            "dot_f32_u8",
            k,
            |k| k.dot_f32_u8,
            |k| k.dot_f32_u8_batch,
            g,
            u8_as_f32,
            false,
            7,
        );
    }
}

#[test]
fn f16_conversions_are_bit_exact() {
    let mut rng = Rng(8);
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65520.0,
        -65520.0,
        1e10,
        f32::INFINITY,
        f32::NEG_INFINITY,
        6.0e-8,
        2.9e-8,
        3.0e-8,
        1.0e-5,
        -6.1e-5,
        1.0e-10,
        0.1,
        1.0 / 3.0,
        2049.0,
        2051.0,
    ];
    for k in simd_tables() {
        for dim in DIMS {
            let mut src = rng.f32s(dim);
            for (i, s) in specials.iter().enumerate().take(dim) {
                src[(i * 7) % dim] = *s;
            }
            // values of every binade, subnormals included
            for (i, v) in src.iter_mut().enumerate().skip(1).step_by(3) {
                *v *= 2f32.powi((i % 40) as i32 - 30);
            }
            let mut got = vec![f16::from_bits(0x1234); dim];
            let mut want = vec![f16::from_bits(0x4321); dim];
            (k.f32_to_f16)(&src, &mut got);
            (SCALAR.f32_to_f16)(&src, &mut want);
            let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "f32_to_f16({}) dim {dim}", k.name);

            let mut back = vec![1.5f32; dim];
            let mut back_want = vec![2.5f32; dim];
            (k.f16_to_f32)(&got, &mut back);
            (SCALAR.f16_to_f32)(&got, &mut back_want);
            let fb = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                fb(&back),
                fb(&back_want),
                "f16_to_f32({}) dim {dim}",
                k.name
            );
        }
        let mut h = [f16::ZERO; 17];
        (k.f32_to_f16)(&[f32::NAN; 17], &mut h);
        assert!(
            h.iter().all(|x| x.is_nan()),
            "f32_to_f16({}) keeps NaN",
            k.name
        );
    }
}

#[test]
fn zero_dim_and_empty_batches_are_fine() {
    for k in available_tables() {
        assert_eq!((k.l2_f32)(&[], &[]), 0.0);
        assert_eq!((k.l2_u8)(&[], &[]), 0);
        let mut out = [0u32; 3];
        (k.l2_u8_batch)(&[], &[], &mut out);
        assert_eq!(out, [0; 3], "{}", k.name);
    }
}

#[test]
fn prefetch_accepts_any_slice() {
    let v: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    for (a, b) in [(0, 0), (0, 1), (1, 2), (3, 67), (63, 64), (5, 1000)] {
        kernels::prefetch(&v[a..b]);
    }
    let h = vec![f16::ONE; 129];
    kernels::prefetch(&h[1..]);
    kernels::prefetch::<f32>(&[]);
    assert_eq!(v[999], 231, "prefetch changed memory");
}

#[test]
fn mismatched_lengths_panic_instead_of_reading_out_of_bounds() {
    for k in simd_tables() {
        let r = std::panic::catch_unwind(|| (k.l2_f32)(&[1.0; 16], &[1.0; 15]));
        assert!(r.is_err(), "{} l2_f32 accepted lengths 16 vs 15", k.name);
        let r =
            std::panic::catch_unwind(|| (k.l2_u8_batch)(&[1; 64], &[1; 64 * 3 - 1], &mut [0; 3]));
        assert!(
            r.is_err(),
            "{} l2_u8_batch accepted a short row block",
            k.name
        );
        let r = std::panic::catch_unwind(|| (k.f16_to_f32)(&[f16::ONE; 9], &mut [0.0; 8]));
        assert!(r.is_err(), "{} f16_to_f32 accepted lengths 9 vs 8", k.name);
    }
}

/// All run-time cap checks in one test: the cap is process-wide, and tests run in parallel.
#[test]
fn set_level_cap_selects_and_refuses() {
    let levels = kernels::available_levels();
    assert_eq!(levels[0], SimdLevel::Scalar);
    for &l in &levels {
        assert_eq!(kernels::set_level_cap(Some(l)), Ok(l));
        assert_eq!(kernels::active_level(), l);
        assert_eq!(kernels::kernels().level, l);
    }
    for l in [
        SimdLevel::Scalar,
        SimdLevel::Neon,
        SimdLevel::Avx2,
        SimdLevel::Avx512Bw,
        SimdLevel::Avx512Vnni,
        SimdLevel::Avx512Amx,
    ] {
        if !levels.contains(&l) {
            let before = kernels::active_level();
            let err = kernels::set_level_cap(Some(l)).unwrap_err();
            assert!(
                err.contains(l.name()) && err.contains("not available"),
                "{err}"
            );
            assert_eq!(
                kernels::active_level(),
                before,
                "a refused cap changed the level"
            );
        }
    }
    // Removing the cap returns to the detected level under the environment's cap.
    let expected = match kernels::env_cap() {
        Ok(Some(cap)) => *levels.iter().rfind(|l| **l <= cap).unwrap(),
        _ => kernels::detected_level(),
    };
    assert_eq!(kernels::set_level_cap(None), Ok(expected));
    assert_eq!(kernels::active_level(), expected);
    assert_eq!(kernels::kernels().level, expected);
}

/// Run by `env_cap_is_read_at_first_use` in a child process with VDBBENCH_SIMD set.
#[test]
#[ignore = "helper: spawned by env_cap_is_read_at_first_use"]
fn env_probe() {
    println!(
        "ACTIVE={} DETECTED={}",
        kernels::active_level(),
        kernels::detected_level()
    );
}

/// The runner cargo was told to run this target's binaries with
/// (`CARGO_TARGET_<TRIPLE>_RUNNER`, e.g. `qemu-aarch64 -L /`), when the test process has it:
/// the probe, a child of the test, needs it too.
fn runner() -> Vec<String> {
    let arch = std::env::consts::ARCH.to_uppercase();
    std::env::vars()
        .find(|(k, _)| {
            k.starts_with("CARGO_TARGET_") && k.ends_with("_RUNNER") && k.contains(&arch)
        })
        .map(|(_, v)| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

fn probe(env: &str) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match runner().split_first() {
        Some((prog, args)) => {
            let mut c = std::process::Command::new(prog);
            c.args(args).arg(exe);
            c
        }
        None => std::process::Command::new(exe),
    };
    let out = cmd
        .args([
            "env_probe",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VDBBENCH_SIMD", env)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // libtest may print "test env_probe ... " on the same line, before the probe's output.
    let line = stdout
        .lines()
        .find_map(|l| l.find("ACTIVE=").map(|i| l[i..].trim().to_string()))
        .unwrap_or_else(|| panic!("no probe line in {stdout:?}"));
    (line, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn env_cap_is_read_at_first_use() {
    let detected = kernels::detected_level();
    let levels = kernels::available_levels();
    for &l in &levels {
        let (line, err) = probe(l.name());
        assert_eq!(
            line,
            format!("ACTIVE={l} DETECTED={detected}"),
            "VDBBENCH_SIMD={l}"
        );
        assert!(!err.contains("warning"), "{err}");
    }
    // A cap above the CPU is a cap, not a demand: the best level under it runs.
    let (line, _) = probe("AVX512");
    let best = *levels
        .iter()
        .rfind(|l| **l <= SimdLevel::Avx512Amx)
        .unwrap();
    assert_eq!(line, format!("ACTIVE={best} DETECTED={detected}"));
    // Unknown: a one-time warning naming the value, then the detected level.
    let (line, err) = probe("sse9");
    assert_eq!(line, format!("ACTIVE={detected} DETECTED={detected}"));
    assert_eq!(
        err.matches("VDBBENCH_SIMD=\"sse9\" is not a SIMD level")
            .count(),
        1,
        "{err}"
    );
}

#[test]
fn argmin_score_equals_the_scalar_answer_exactly_with_ties_and_infinities() {
    let mut rng = Rng(21);
    for k in simd_tables() {
        for n in [1usize, 5, 15, 16, 17, 31, 32, 100, 1265] {
            for trial in 0..20 {
                // Few distinct values (many ties, which go to the first position) or SIFT-like ones.
                let dots: Vec<f32> = if trial % 2 == 0 {
                    (0..n).map(|_| (rng.next() % 4) as f32 - 1.5).collect()
                } else {
                    rng.f32s(n)
                };
                let mut norms: Vec<f32> = (0..n).map(|_| (rng.next() % 3) as f32).collect();
                if trial == 0 {
                    norms.iter_mut().for_each(|v| *v = f32::INFINITY);
                }
                for ip in [false, true] {
                    let want = (SCALAR.argmin_score)(&dots, &norms, ip);
                    let got = (k.argmin_score)(&dots, &norms, ip);
                    assert_eq!(got.0, want.0, "{} n={n} ip={ip}", k.name);
                    assert_eq!(
                        got.1.to_bits(),
                        want.1.to_bits(),
                        "{} n={n} ip={ip}",
                        k.name
                    );
                }
            }
        }
    }
    // The scalar twin is a plain first-minimum scan.
    let d = [1.0f32, 3.0, 3.0, -2.0];
    assert_eq!((SCALAR.argmin_score)(&d, &[0.0; 4], true), (1, -3.0));
    assert_eq!(
        (SCALAR.argmin_score)(&d, &[5.0, 5.0, 6.0, 0.0], false),
        (1, -1.0)
    );
}

/// The rows `l2_u8_batch_pre_below` must keep: (position, distance) of every row whose exact
/// distance, as f32, is at most `thr`, in row order.
fn below_reference(q: &[u8], rows: &[u8], thr: f32) -> Vec<(u32, u32)> {
    let mut all = vec![0u32; rows.len() / q.len().max(1)];
    (SCALAR.l2_u8_batch)(q, rows, &mut all);
    all.iter()
        .enumerate()
        .filter(|(_, &d)| d as f32 <= thr)
        .map(|(j, &d)| (j as u32, d))
        .collect()
}

#[test]
fn u8_pre_below_keeps_exactly_the_rows_under_the_threshold() {
    let mut rng = Rng(21);
    let mut tables = simd_tables();
    tables.insert(0, &SCALAR);
    let nrows_all: Vec<usize> = NROWS.iter().copied().chain([47, 64, 65, 130]).collect();
    for k in tables {
        for dim in DIMS {
            for &nrows in &nrows_all {
                let q = rng.u8s(dim);
                let mut rows = rng.u8s(dim * nrows);
                if nrows > 3 {
                    rows[..dim].fill(0);
                    rows[dim..2 * dim].fill(255);
                    // a duplicate of the query: distance 0
                    rows[2 * dim..3 * dim].copy_from_slice(&q);
                }
                let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                let mut all = vec![0u32; nrows];
                (SCALAR.l2_u8_batch)(&q, &rows, &mut all);
                let mut sorted = all.clone();
                sorted.sort_unstable();
                // none, all, exactly one distance (ties kept), a median, between two values
                let mut thrs = vec![-1.0f32, f32::INFINITY, 0.0];
                if let Some(&mid) = sorted.get(nrows / 2) {
                    thrs.extend([mid as f32, mid as f32 - 0.5, sorted[0] as f32]);
                }
                for thr in thrs {
                    // outputs longer than needed, pre-filled: nothing past the count may matter
                    let mut pos = vec![u32::MAX; nrows + 3];
                    let mut dist = vec![7u32; nrows + 3];
                    let c = (k.l2_u8_batch_pre_below)(&q, &rows, &terms, thr, &mut pos, &mut dist);
                    let got: Vec<(u32, u32)> = pos[..c]
                        .iter()
                        .copied()
                        .zip(dist[..c].iter().copied())
                        .collect();
                    assert_eq!(
                        got,
                        below_reference(&q, &rows, thr),
                        "l2_u8_batch_pre_below({}) dim {dim} nrows {nrows} thr {thr}",
                        k.name
                    );
                    assert!(
                        pos[nrows..].iter().all(|&p| p == u32::MAX),
                        "wrote past the rows"
                    );
                }
            }
        }
        // distances above 2^24, where several u32 values share one f32: the test is on the f32
        let dim = 1000;
        let rows: Vec<u8> = [vec![255u8; dim], vec![0u8; dim], rng.u8s(dim * 20)].concat();
        let terms: Vec<i32> = rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
        let q = vec![0u8; dim];
        let thr = (dim as u32 * 255 * 255) as f32;
        let (mut pos, mut dist) = (vec![0u32; 22], vec![0u32; 22]);
        let c = (k.l2_u8_batch_pre_below)(&q, &rows, &terms, thr - 1.0, &mut pos, &mut dist);
        let got: Vec<(u32, u32)> = pos[..c]
            .iter()
            .copied()
            .zip(dist[..c].iter().copied())
            .collect();
        assert_eq!(
            got,
            below_reference(&q, &rows, thr - 1.0),
            "{} long rows",
            k.name
        );
        let r = std::panic::catch_unwind(|| {
            (k.l2_u8_batch_pre_below)(&[1; 16], &[1; 32], &[0; 2], 1.0, &mut [0; 1], &mut [0; 2])
        });
        assert!(
            r.is_err(),
            "{} accepted outputs shorter than the rows",
            k.name
        );
    }
}

#[test]
fn u8_tile_below_equals_each_query_alone() {
    let mut rng = Rng(23);
    let mut tables = simd_tables();
    tables.insert(0, &SCALAR);
    let dims: Vec<usize> = DIMS.iter().copied().chain([4, 8, 1000, 1030]).collect();
    for k in tables {
        for &dim in &dims {
            for nrows in [0usize, 1, 3, 4, 5, 7, 16, 33, 130] {
                for nq in [0usize, 1, 2, 5, 6, 8, 9, 15, 16] {
                    let qs = rng.u8s(nq * dim);
                    let mut rows = rng.u8s(dim * nrows);
                    if nrows > 3 && nq > 0 {
                        rows[..dim].fill(0);
                        rows[dim..2 * dim].fill(255);
                        // a duplicate of the first query: distance 0
                        rows[2 * dim..3 * dim].copy_from_slice(&qs[..dim]);
                    }
                    let terms: Vec<i32> =
                        rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                    // per query: none, all, exactly zero, a median, between two values
                    let thrs: Vec<f32> = (0..nq)
                        .map(|j| {
                            let q = &qs[j * dim..(j + 1) * dim];
                            let mut all = vec![0u32; nrows];
                            (SCALAR.l2_u8_batch)(q, &rows, &mut all);
                            all.sort_unstable();
                            let mid = all.get(nrows / 2).map_or(5.0, |&d| d as f32);
                            [-1.0, f32::INFINITY, 0.0, mid, mid - 0.5][(j + nrows) % 5]
                        })
                        .collect();
                    // outputs longer than needed, pre-filled: nothing past a count may matter
                    let mut pos = vec![u32::MAX; nq * nrows + 3];
                    let mut dist = vec![7u32; nq * nrows + 3];
                    let mut counts = vec![99u32; nq + 1];
                    (k.l2_u8_tile_below)(
                        &qs,
                        &rows,
                        &terms,
                        &[],
                        &[],
                        &thrs,
                        &mut pos,
                        &mut dist,
                        &mut counts,
                    );
                    for (j, &thr) in thrs.iter().enumerate() {
                        let q = &qs[j * dim..(j + 1) * dim];
                        let c = counts[j] as usize;
                        let at = j * nrows;
                        let got: Vec<(u32, u32)> = pos[at..at + c]
                            .iter()
                            .copied()
                            .zip(dist[at..at + c].iter().copied())
                            .collect();
                        assert_eq!(
                            got,
                            below_reference(q, &rows, thr),
                            "l2_u8_tile_below({}) dim {dim} nrows {nrows} nq {nq} query {j} thr {thr}",
                            k.name
                        );
                    }
                    assert_eq!(counts[nq], 99, "wrote a count past the tile");
                    assert!(
                        pos[nq * nrows..].iter().all(|&p| p == u32::MAX),
                        "wrote past the tile"
                    );
                }
            }
        }
    }
}

#[test]
fn u8_tile_all_equals_each_query_alone() {
    // Batch routing's kernel: every distance of a tile's queries to the rows, the same bits as
    // `l2_u8_batch_pre` per query, on every table (AMX: whole blocks of sixteen rows, then the
    // rest; widths that are not multiples of 64 take the VNNI path).
    let mut rng = Rng(31);
    let mut tables = simd_tables();
    tables.insert(0, &SCALAR);
    let dims: Vec<usize> = DIMS
        .iter()
        .copied()
        .chain([4, 64, 128, 192, 256, 320])
        .collect();
    for k in tables {
        for &dim in &dims {
            for nrows in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 130] {
                for nq in [1usize, 2, 5, 15, 16] {
                    let qs = rng.u8s(nq * dim);
                    let mut rows = rng.u8s(dim * nrows);
                    if nrows > 2 {
                        rows[..dim].fill(0);
                        rows[dim..2 * dim].fill(255);
                    }
                    let terms: Vec<i32> =
                        rows.chunks_exact(dim).map(|x| (k.u8_row_term)(x)).collect();
                    // longer than needed, pre-filled: nothing past the tile may be written
                    let mut out = vec![7u32; nq * nrows + 5];
                    (k.l2_u8_tile_all)(&qs, &rows, &terms, &mut out);
                    for j in 0..nq {
                        let mut want = vec![0u32; nrows];
                        (SCALAR.l2_u8_batch)(&qs[j * dim..(j + 1) * dim], &rows, &mut want);
                        assert_eq!(
                            &out[j * nrows..(j + 1) * nrows],
                            &want[..],
                            "l2_u8_tile_all({}) dim {dim} nrows {nrows} nq {nq} query {j}",
                            k.name
                        );
                    }
                    assert!(
                        out[nq * nrows..].iter().all(|&v| v == 7),
                        "wrote past the tile"
                    );
                }
            }
        }
    }
}

#[test]
fn u8_tile_below_over_head_and_tail_blocks_equals_whole_rows() {
    // Split codes (`ivf::CodeSplit`): row r is its head block row then its tail block row;
    // every table must keep exactly the rows the whole rows give.
    let mut rng = Rng(29);
    let mut tables = simd_tables();
    tables.insert(0, &SCALAR);
    for k in tables {
        for (h, t) in [
            (16usize, 1usize),
            (16, 17),
            (32, 32),
            (48, 80),
            (64, 64),
            (64, 0),
            (128, 64),
            (64, 192),
        ] {
            let dim = h + t;
            for nrows in [0usize, 1, 15, 16, 17, 33, 64, 130] {
                for nq in [1usize, 2, 7, 16] {
                    let qs = rng.u8s(nq * dim);
                    let whole = rng.u8s(dim * nrows);
                    let (mut head, mut tail) = (Vec::new(), Vec::new());
                    for row in whole.chunks_exact(dim) {
                        head.extend_from_slice(&row[..h]);
                        tail.extend_from_slice(&row[h..]);
                    }
                    let hterms: Vec<i32> =
                        head.chunks_exact(h).map(|x| (k.u8_row_term)(x)).collect();
                    let tterms: Vec<i32> = if t > 0 {
                        tail.chunks_exact(t).map(|x| (k.u8_row_term)(x)).collect()
                    } else {
                        Vec::new()
                    };
                    let thrs: Vec<f32> = (0..nq)
                        .map(|j| {
                            let mut all = vec![0u32; nrows];
                            (SCALAR.l2_u8_batch)(&qs[j * dim..(j + 1) * dim], &whole, &mut all);
                            all.sort_unstable();
                            let mid = all.get(nrows / 3).map_or(5.0, |&d| d as f32);
                            [f32::INFINITY, mid, mid - 0.5, -1.0][j % 4]
                        })
                        .collect();
                    let mut pos = vec![u32::MAX; nq * nrows];
                    let mut dist = vec![7u32; nq * nrows];
                    let mut counts = vec![99u32; nq];
                    (k.l2_u8_tile_below)(
                        &qs,
                        &head,
                        &hterms,
                        &tail,
                        &tterms,
                        &thrs,
                        &mut pos,
                        &mut dist,
                        &mut counts,
                    );
                    for (j, &thr) in thrs.iter().enumerate() {
                        let c = counts[j] as usize;
                        let at = j * nrows;
                        let got: Vec<(u32, u32)> = pos[at..at + c]
                            .iter()
                            .copied()
                            .zip(dist[at..at + c].iter().copied())
                            .collect();
                        assert_eq!(
                            got,
                            below_reference(&qs[j * dim..(j + 1) * dim], &whole, thr),
                            "l2_u8_tile_below({}) head {h} tail {t} nrows {nrows} nq {nq} query {j}",
                            k.name
                        );
                    }
                }
            }
        }
    }
}

/// The prefilter scan's reference: each row's table sum with the kernels' wrapping arithmetic
/// (pairs of entries in u8, their sums in u16), straight from unpacked codes.
fn fs_reference(codes: &[Vec<u8>], lut: &[u8], thr: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (r, code) in codes.iter().enumerate() {
        let mut d = 0u16;
        for (p, two) in code.chunks_exact(2).enumerate() {
            let e = lut[2 * p * 32 + two[0] as usize].wrapping_add(lut[(2 * p + 1) * 32 + two[1] as usize]);
            d = d.wrapping_add(e as u16);
        }
        if d as u32 <= thr {
            out.push((r as u32, d as u32));
        }
    }
    out
}

#[test]
fn fs_below_keeps_exactly_the_rows_under_the_threshold() {
    use vdb_core::pq4::{pack_row, packed_len, FS_BLOCK};
    let mut rng = Rng(33);
    let mut tables = simd_tables();
    tables.insert(0, &SCALAR);
    for k in tables {
        for pairs in [4usize, 8, 64, 130] {
            for nrows in [0usize, 1, 5, 31, 32, 33, 64, 95, 200] {
                // in-contract tables (entries <= 127) and any bytes at all (wrapping sums)
                for wild in [false, true] {
                    let lut: Vec<u8> = (0..pairs)
                        .flat_map(|_| {
                            let e: Vec<u8> = (0..16).map(|_| if wild { rng.u8() } else { rng.u8() >> 1 }).collect();
                            [e.clone(), e].concat()
                        })
                        .collect();
                    let codes: Vec<Vec<u8>> = (0..nrows).map(|_| (0..pairs).map(|_| rng.u8() & 15).collect()).collect();
                    let bb = pairs / 2 * FS_BLOCK;
                    let mut packed = Vec::new();
                    for (r, c) in codes.iter().enumerate() {
                        pack_row(&mut packed, bb, r, c);
                    }
                    assert_eq!(packed.len(), packed_len(nrows, bb));
                    let all = fs_reference(&codes, &lut, u32::MAX);
                    let mut sums: Vec<u32> = all.iter().map(|&(_, d)| d).collect();
                    sums.sort_unstable();
                    let mut thrs = vec![0u32, u32::MAX, 65_535, 70_000];
                    if let Some(&mid) = sums.get(nrows / 2) {
                        thrs.extend([mid, mid.saturating_sub(1), sums[0]]);
                    }
                    for &thr in &thrs {
                        let (mut pos, mut dist) = (vec![0u32; nrows], vec![0u32; nrows]);
                        let c = (k.fs_below)(&packed, nrows, &lut, thr, &mut pos, &mut dist);
                        let got: Vec<(u32, u32)> = pos[..c].iter().copied().zip(dist[..c].iter().copied()).collect();
                        assert_eq!(got, fs_reference(&codes, &lut, thr),
                                   "{} pairs {pairs} rows {nrows} thr {thr} wild {wild}", k.name);
                    }
                    // several queries at once: other tables (a byte rotation of this one's
                    // entries) and thresholds, each query's rows as fs_below gives them
                    for g in 1..=FS_MANY {
                        let luts: Vec<Vec<u8>> = (0..g)
                            .map(|x| lut.iter().map(|&e| if wild { e.rotate_left(x as u32) } else { (e + 17 * x as u8) & 127 }).collect())
                            .collect();
                        let refs: Vec<&[u8]> = luts.iter().map(|l| l.as_slice()).collect();
                        let qthrs: Vec<u32> = (0..g).map(|x| thrs[(x * 3 + nrows) % thrs.len()]).collect();
                        let (mut pos, mut dist) = (vec![0u32; g * nrows], vec![0u32; g * nrows]);
                        let mut counts = [usize::MAX; FS_MANY];
                        (k.fs_below_many)(&packed, nrows, &refs, &qthrs, &mut pos, &mut dist, &mut counts);
                        for x in 0..g {
                            let at = x * nrows..x * nrows + counts[x];
                            let got: Vec<(u32, u32)> = pos[at.clone()].iter().copied().zip(dist[at].iter().copied()).collect();
                            assert_eq!(got, fs_reference(&codes, &luts[x], qthrs[x]),
                                       "{} many {g} query {x} pairs {pairs} rows {nrows} wild {wild}", k.name);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn fs_below_refuses_blocks_that_do_not_fit_the_rows() {
    for k in available_tables() {
        let lut = vec![0u8; 4 * 32];
        let (mut pos, mut dist) = (vec![0u32; 40], vec![0u32; 40]);
        for (packed, n) in [(vec![0u8; 64], 33usize), (vec![0u8; 65], 1)] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (k.fs_below)(&packed, n, &lut, 9, &mut pos, &mut dist)
            }));
            assert!(r.is_err(), "{}: {} bytes for {n} rows", k.name, packed.len());
        }
        // fs_below_many: no query, too many, tables of two lengths, outputs short of g * n
        let (packed, n) = ([0u8; 64], 32usize);
        let short = [0u8; 2 * 32];
        let cases: [(Vec<&[u8]>, usize); 4] = [
            (vec![], 40),
            (vec![&lut[..]; FS_MANY + 1], 40 * (FS_MANY + 1)),
            (vec![&lut[..], &short[..]], 80),
            (vec![&lut[..], &lut[..]], 40),
        ];
        for (luts, room) in cases {
            let thrs = vec![9u32; luts.len()];
            let (mut pos, mut dist) = (vec![0u32; room], vec![0u32; room]);
            let mut counts = [0usize; FS_MANY + 1];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (k.fs_below_many)(&packed, n, &luts, &thrs, &mut pos, &mut dist, &mut counts)
            }));
            assert!(r.is_err(), "{}: {} tables, room {room}", k.name, luts.len());
        }
    }
}

#[test]
fn pq4_tables_are_the_same_bytes_on_every_level() {
    let mut rng = Rng(91);
    for pairs in [4usize, 64, 130] {
        // centroids and queries in the u8 code domain, as the prefilter has them
        let centroids: Vec<f32> = (0..pairs * 32).map(|_| rng.u8() as f32 * 0.97).collect();
        for trial in 0..20 {
            let q: Vec<f32> = if trial == 0 {
                centroids.iter().step_by(16).copied().collect() // values of the centroids themselves
            } else {
                (0..2 * pairs).map(|_| rng.u8() as f32 + rng.f32()).collect()
            };
            let mut want = vec![0u8; pairs * 32];
            (SCALAR.pq4_lut)(&centroids, &q, &mut Vec::new(), &mut want);
            assert!(want.iter().all(|&e| e <= 127) && want.contains(&127), "pairs {pairs}");
            for k in simd_tables() {
                let mut got = vec![0u8; pairs * 32];
                (k.pq4_lut)(&centroids, &q, &mut vec![1.0; 3], &mut got);
                assert_eq!(got, want, "{} pairs {pairs} trial {trial}", k.name);
            }
        }
    }
}
