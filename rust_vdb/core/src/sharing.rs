//! When a single query shares its lists' scan with helper threads (`pool::helpers_free`): the
//! process's policy, and how much of the machine other processes are using, read from the
//! kernel's CPU counters (`/proc/stat`, Linux). Sharing pays only where it leaves a helper a
//! core: beside a busy neighbour a helper does not speed a query up, it takes turns with the
//! caller and the neighbour. Where the counters cannot be read, or describe more CPUs than this
//! process may use (a container given some of the host's cores), they say nothing and the
//! pool's stall backoff alone decides.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Whether single queries share their scan with helper threads (`pool::helpers_free`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// As the machine allows: not after a stall, not beyond the cores other work leaves free.
    Auto,
    /// Whenever a helper is free, however busy the machine (parity tests of the shared path).
    Always,
    /// Never: every single query scans on its caller's thread alone.
    Never,
}

/// `Sharing` as a number: 0 Auto, 1 Always, 2 Never.
static SHARING: AtomicU8 = AtomicU8::new(0);

/// The process's sharing policy for single queries.
pub fn policy() -> Sharing {
    match SHARING.load(Ordering::Relaxed) {
        1 => Sharing::Always,
        2 => Sharing::Never,
        _ => Sharing::Auto,
    }
}

/// Sets the process's sharing policy for single queries (`Sharing::Auto` at start).
pub fn set_policy(policy: Sharing) {
    let v = match policy {
        Sharing::Auto => 0,
        Sharing::Always => 1,
        Sharing::Never => 2,
    };
    SHARING.store(v, Ordering::Relaxed);
}

/// How often the counters are read. The kernel counts in ticks (10 ms at the usual USER_HZ of
/// 100), so a window of 100 ms resolves a tenth of a core on 2 cores; a reading costs tens of
/// microseconds, taken by one caller per window.
const WINDOW_NS: u64 = 100_000_000;
/// A window shorter than this many ticks per CPU (a burst of calls right after the last
/// reading cannot make one: windows are at least WINDOW_NS apart) is not used.
const MIN_TICKS_PER_CPU: u64 = 5;
/// `OTHERS_MILLI` before the first window has closed, or where there are no counters.
const UNKNOWN: u32 = u32::MAX;

/// The machine's CPU time in ticks since boot, summed over its CPUs: busy (every state but
/// idle and iowait) and in all, and how many CPUs the sums cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticks {
    pub busy: u64,
    pub total: u64,
    pub cpus: usize,
}

/// Reads the aggregate `cpu` line of `/proc/stat` (user nice system idle iowait irq softirq
/// steal; guest time is inside user and nice already) and counts its `cpuN` lines.
pub fn parse_proc_stat(text: &str) -> Option<Ticks> {
    let mut fields = text.lines().next()?.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let idle = v[3] + v[4];
    let cpus = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(Ticks {
        busy: total - idle,
        total,
        cpus,
    })
}

/// Cores' worth of other processes' work between readings `a` and `b`: the machine's busy
/// time less this process's own CPU time over the window (`own_s`, seconds), divided by the
/// window's length (its ticks per CPU). None for a window too short to say.
pub fn others_cores(a: Ticks, b: Ticks, own_s: f64, ticks_per_s: f64) -> Option<f64> {
    let total = b.total.checked_sub(a.total)?;
    let busy = b.busy.checked_sub(a.busy)?;
    if b.cpus == 0 || total < MIN_TICKS_PER_CPU * b.cpus as u64 || ticks_per_s <= 0.0 {
        return None;
    }
    let window_s = total as f64 / b.cpus as f64 / ticks_per_s;
    let others_s = busy as f64 / ticks_per_s - own_s;
    Some((others_s / window_s).clamp(0.0, b.cpus as f64))
}

/// Helper threads that leave other processes' work its cores: of `cores`, one is the
/// caller's and `others` (cores' worth) are taken; a helper needs a core at least half free.
pub fn free_beside_caller(cores: usize, others: f64) -> usize {
    (cores as f64 - 1.0 - others + 0.5).floor().max(0.0) as usize
}

/// The last reading: the machine's ticks and this process's CPU seconds.
struct Reading {
    ticks: Ticks,
    own_s: f64,
}

static LAST: Mutex<Option<Reading>> = Mutex::new(None);
/// Other processes' work over the last closed window, in thousandths of a core.
static OTHERS_MILLI: AtomicU32 = AtomicU32::new(UNKNOWN);
/// Nanoseconds after `epoch()` at which the next reading is due.
static NEXT_NS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Cores' worth of other processes' work lately (over the last window of about 100 ms, or the
/// time since the previous call if calls are rarer); None where it cannot be known. At most
/// one caller per window reads the counters; the others read the last figure.
pub fn others() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let now = epoch().elapsed().as_nanos() as u64;
        if now >= NEXT_NS.load(Ordering::Relaxed) {
            if let Ok(mut last) = LAST.try_lock() {
                NEXT_NS.store(now + WINDOW_NS, Ordering::Relaxed);
                take_reading(&mut last);
            }
        }
    }
    let milli = OTHERS_MILLI.load(Ordering::Relaxed);
    (milli != UNKNOWN).then(|| milli as f64 / 1000.0)
}

#[cfg(target_os = "linux")]
fn take_reading(last: &mut Option<Reading>) {
    static TICKS_PER_S: OnceLock<Option<f64>> = OnceLock::new();
    // SAFETY: sysconf only reads a configuration value.
    let tps = *TICKS_PER_S.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        t if t > 0 => Some(t as f64),
        _ => None,
    });
    let (Some(tps), Some(own_s)) = (tps, process_cpu_s()) else {
        return;
    };
    let Some(ticks) = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse_proc_stat(&t))
    else {
        return;
    };
    // Counters of more CPUs than this process may run on describe a host it has a part of.
    let usable = std::thread::available_parallelism().map_or(0, |n| n.get());
    if ticks.cpus != usable {
        return;
    }
    match last {
        Some(prev) => {
            if let Some(o) = others_cores(prev.ticks, ticks, own_s - prev.own_s, tps) {
                OTHERS_MILLI.store((o * 1000.0).round() as u32, Ordering::Relaxed);
                *prev = Reading { ticks, own_s };
            }
            // A window too short keeps its start, so the next reading spans more.
        }
        None => *last = Some(Reading { ticks, own_s }),
    }
}

/// CPU time this process has run, every thread (Linux).
#[cfg(target_os = "linux")]
fn process_cpu_s() -> Option<f64> {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID).map(|d| d.as_secs_f64())
}

/// A CPU-time clock of the calling thread or process (`CLOCK_*_CPUTIME_ID`).
#[cfg(target_os = "linux")]
pub(crate) fn cpu_clock(clock: libc::clockid_t) -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  1000 10 200 5000 40 3 7 11 0 0\n\
                        cpu0 500 5 100 2500 20 1 3 5 0 0\n\
                        cpu1 500 5 100 2500 20 2 4 6 0 0\n\
                        intr 12345\nctxt 999\n";

    #[test]
    fn proc_stat_is_read_as_busy_and_total_ticks_of_every_cpu() {
        let t = parse_proc_stat(STAT).unwrap();
        assert_eq!(t.total, 1000 + 10 + 200 + 5000 + 40 + 3 + 7 + 11);
        assert_eq!(t.busy, t.total - 5000 - 40);
        assert_eq!(t.cpus, 2);
        assert_eq!(parse_proc_stat("intr 1\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 x 4 5\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 3\n"), None);
    }

    #[test]
    fn others_work_is_the_machines_busy_time_less_this_process() {
        let a = Ticks {
            busy: 0,
            total: 0,
            cpus: 2,
        };
        // 1 s on 2 CPUs (200 ticks at 100 a second), 150 busy, this process 0.4 s of them.
        let b = Ticks {
            busy: 150,
            total: 200,
            cpus: 2,
        };
        assert!((others_cores(a, b, 0.4, 100.0).unwrap() - 1.1).abs() < 1e-9);
        assert_eq!(
            others_cores(a, b, 5.0, 100.0),
            Some(0.0),
            "never below none"
        );
        let short = Ticks { total: 9, ..b };
        assert_eq!(
            others_cores(a, short, 0.0, 100.0),
            None,
            "a window too short says nothing"
        );
        assert_eq!(
            others_cores(b, a, 0.0, 100.0),
            None,
            "counters going back say nothing"
        );
    }

    #[test]
    fn a_helper_needs_a_core_at_least_half_free_beside_the_caller() {
        assert_eq!(free_beside_caller(2, 0.0), 1);
        assert_eq!(free_beside_caller(2, 0.4), 1);
        assert_eq!(free_beside_caller(2, 0.6), 0);
        assert_eq!(free_beside_caller(2, 1.0), 0);
        assert_eq!(free_beside_caller(2, 2.0), 0);
        assert_eq!(free_beside_caller(8, 2.0), 5);
        assert_eq!(free_beside_caller(1, 0.0), 0);
    }

    /// A process spinning beside this one shows as most of a core of others' work (at least
    /// half: the machine being busier only raises it). Needs a shell and a second core.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_spinning_neighbour_process_is_seen() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let Some(a) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_proc_stat(&t))
        else {
            return;
        };
        if cores < 2 || a.cpus != cores {
            return;
        }
        let Ok(mut child) = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
        else {
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(100)); // the shell starts
        let a = parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap()).unwrap();
        let own0 = process_cpu_s().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        let b = parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap()).unwrap();
        let own = process_cpu_s().unwrap() - own0;
        let _ = child.kill();
        let _ = child.wait();
        // SAFETY: sysconf only reads a configuration value.
        let tps = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let others = others_cores(a, b, own, tps).unwrap();
        assert!(
            others >= 0.5,
            "a spinning process read as {others:.2} cores"
        );
    }
}
