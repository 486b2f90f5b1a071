//! The SIMD levels, what this CPU offers (detected once), and the table searches use now:
//! the best level available under the cap (`VDBBENCH_SIMD`, or `set_level_cap` at run time).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

#[cfg(target_arch = "aarch64")]
use super::neon;
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512};
use super::{Kernels, SCALAR};

/// A SIMD level, ordered from least to most capable on its architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    Scalar,
    Neon,
    Avx2,
    Avx512Bw,
    Avx512Vnni,
    Avx512Amx,
}

impl SimdLevel {
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Neon => "neon",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512Bw => "avx512bw",
            SimdLevel::Avx512Vnni => "avx512vnni",
            SimdLevel::Avx512Amx => "avx512amx",
        }
    }

    pub fn parse(s: &str) -> Option<SimdLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(SimdLevel::Scalar),
            "neon" => Some(SimdLevel::Neon),
            "avx2" => Some(SimdLevel::Avx2),
            "avx512bw" => Some(SimdLevel::Avx512Bw),
            "avx512vnni" => Some(SimdLevel::Avx512Vnni),
            // the best AVX-512 table the CPU has: a cap at the top one
            "avx512" | "avx512amx" => Some(SimdLevel::Avx512Amx),
            _ => None,
        }
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------------------------
// Detection (once) and the tables this CPU may run.

/// What the CPU offers, detected once. (Each architecture reads only its own fields.)
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
struct Cpu {
    avx2: bool,
    avx512: bool,
    vnni: bool,
    amx: bool,
    neon: bool,
}

fn cpu() -> Cpu {
    static CPU: OnceLock<Cpu> = OnceLock::new();
    *CPU.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Cpu {
    let avx2 = is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c");
    let avx512 = avx2
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl");
    let vnni = avx512 && is_x86_feature_detected!("avx512vnni");
    let amx = vnni && amx_granted();
    Cpu {
        avx2,
        avx512,
        vnni,
        amx,
        neon: false,
    }
}

/// Whether the CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25) and the OS
/// lets this process use the tile registers: Linux enables them per process on request
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, which also fails when the kernel
/// does not support AMX). Other systems: no AMX. (`is_x86_feature_detected!` does not take
/// the AMX features on stable Rust.)
#[cfg(target_arch = "x86_64")]
fn amx_granted() -> bool {
    // (CPUID leaf 7 exists on every CPU with AVX-512, which the caller checked.)
    let l7 = std::arch::x86_64::__cpuid_count(7, 0);
    if (l7.edx >> 24) & 3 != 3 {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with this request only changes the process's permitted xstate.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

#[cfg(target_arch = "aarch64")]
fn detect() -> Cpu {
    // NEON (Advanced SIMD) is part of the aarch64 baseline.
    Cpu {
        avx2: false,
        avx512: false,
        vnni: false,
        amx: false,
        neon: true,
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Cpu {
    Cpu {
        avx2: false,
        avx512: false,
        vnni: false,
        amx: false,
        neon: false,
    }
}

/// The kernel table of `level`, if this CPU supports it.
pub fn kernels_for(level: SimdLevel) -> Option<&'static Kernels> {
    let c = cpu();
    match level {
        SimdLevel::Scalar => Some(&SCALAR),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 if c.avx2 => Some(&avx2::AVX2),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512Amx if c.amx => Some(&avx512::AVX512_AMX),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512Vnni if c.vnni => Some(&avx512::AVX512_VNNI),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512Bw if c.avx512 => Some(&avx512::AVX512),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon if c.neon => Some(&neon::NEON),
        _ => {
            let _ = c;
            None
        }
    }
}

/// Every table this CPU can run, scalar first, including variants that share a level (e.g.
/// "avx512" without and "avx512+vnni" with VNNI). For parity tests and benchmarks.
pub fn available_tables() -> Vec<&'static Kernels> {
    let c = cpu();
    let mut v: Vec<&'static Kernels> = vec![&SCALAR];
    #[cfg(target_arch = "x86_64")]
    {
        if c.avx2 {
            v.push(&avx2::AVX2);
        }
        if c.avx512 {
            v.push(&avx512::AVX512);
        }
        if c.vnni {
            v.push(&avx512::AVX512_VNNI);
        }
        if c.amx {
            v.push(&avx512::AVX512_AMX);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if c.neon {
            v.push(&neon::NEON);
        }
    }
    let _ = c;
    v
}

/// Every level this CPU can run, scalar first.
pub fn available_levels() -> Vec<SimdLevel> {
    [
        SimdLevel::Scalar,
        SimdLevel::Neon,
        SimdLevel::Avx2,
        SimdLevel::Avx512Bw,
        SimdLevel::Avx512Vnni,
        SimdLevel::Avx512Amx,
    ]
    .into_iter()
    .filter(|l| kernels_for(*l).is_some())
    .collect()
}

/// The level a name asks for when set at run time (`set_level_cap`): as `SimdLevel::parse`, but
/// "avx512" is the best AVX-512 level this CPU has (the lowest one, unavailable, when it has
/// none), so asking for it works on machines with and without VNNI or AMX.
pub fn level_named(s: &str) -> Option<SimdLevel> {
    if s.trim().eq_ignore_ascii_case("avx512") {
        let best = available_levels()
            .into_iter()
            .rfind(|l| *l >= SimdLevel::Avx512Bw);
        return Some(best.unwrap_or(SimdLevel::Avx512Bw));
    }
    SimdLevel::parse(s)
}

/// The best level this CPU has, ignoring every cap.
pub fn detected_level() -> SimdLevel {
    *available_levels()
        .last()
        .expect("scalar is always available")
}

/// The cap from `VDBBENCH_SIMD`, read once: `Ok(None)` when unset or empty, `Ok(Some(level))`
/// for a known name, `Err(message)` for anything else (then no cap applies, and the message
/// has been printed once on stderr).
pub fn env_cap() -> Result<Option<SimdLevel>, String> {
    static ENV: OnceLock<Result<Option<SimdLevel>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let raw = match std::env::var("VDBBENCH_SIMD") {
            Ok(s) => s,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(s)) => s.to_string_lossy().into_owned(),
        };
        if raw.trim().is_empty() {
            return Ok(None);
        }
        match SimdLevel::parse(&raw) {
            Some(l) => Ok(Some(l)),
            None => {
                let msg = format!(
                    "VDBBENCH_SIMD={raw:?} is not a SIMD level (expected one of scalar, avx2, \
                     avx512bw, avx512vnni, avx512amx, avx512, neon); ignoring it and using the detected level {}",
                    detected_level()
                );
                eprintln!("vdbbench: warning: {msg}");
                Err(msg)
            }
        }
    })
    .clone()
}

/// The best available level not above `cap`.
fn best_under(cap: Option<SimdLevel>) -> SimdLevel {
    available_levels()
        .into_iter()
        .rfind(|l| cap.is_none_or(|c| *l <= c))
        .unwrap_or(SimdLevel::Scalar)
}

/// The level used when no run-time cap is set: the detected level under the env cap.
fn default_level() -> SimdLevel {
    best_under(env_cap().unwrap_or(None))
}

const UNSET: u8 = u8::MAX;
static ACTIVE: AtomicU8 = AtomicU8::new(UNSET);

fn encode(level: SimdLevel) -> u8 {
    level as u8
}

fn decode(v: u8) -> SimdLevel {
    match v {
        0 => SimdLevel::Scalar,
        1 => SimdLevel::Neon,
        2 => SimdLevel::Avx2,
        3 => SimdLevel::Avx512Bw,
        4 => SimdLevel::Avx512Vnni,
        _ => SimdLevel::Avx512Amx,
    }
}

/// Caps the active level at run time (overriding `VDBBENCH_SIMD`), for every thread of the
/// process. `Some(level)` makes `level` active and returns it, or returns `Err` when this CPU
/// cannot run it; `None` removes the run-time cap and returns the level then active (the
/// detected one, under the env cap).
pub fn set_level_cap(cap: Option<SimdLevel>) -> Result<SimdLevel, String> {
    let level = match cap {
        None => default_level(),
        Some(l) if kernels_for(l).is_some() => l,
        Some(l) => {
            let have: Vec<&str> = available_levels().iter().map(|l| l.name()).collect();
            return Err(format!(
                "SIMD level {l} is not available on this CPU (available: {})",
                have.join(", ")
            ));
        }
    };
    ACTIVE.store(encode(level), Ordering::Relaxed);
    Ok(level)
}

/// The level `kernels()` hands out now.
pub fn active_level() -> SimdLevel {
    match ACTIVE.load(Ordering::Relaxed) {
        UNSET => {
            let l = default_level();
            // Another thread may have set a cap meanwhile: keep theirs.
            let _ = ACTIVE.compare_exchange(UNSET, encode(l), Ordering::Relaxed, Ordering::Relaxed);
            decode(ACTIVE.load(Ordering::Relaxed))
        }
        v => decode(v),
    }
}

/// The table searches use now: the best available level under the cap. Cheap (an atomic load
/// and a match over static tables), so callers may fetch it per batch.
#[inline]
pub fn kernels() -> &'static Kernels {
    let level = active_level();
    // Only levels that passed `kernels_for` are ever stored in ACTIVE.
    kernels_for(level).unwrap_or(&SCALAR)
}
