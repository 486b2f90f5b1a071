//! Best-effort transparent huge pages for memory the scans stream through.
//!
//! An index's lists are many small buffers (32 KiB of codes per list at 1M), each in its own
//! allocation, so neither the allocator nor the kernel backs them with huge pages by itself.
//! One query reads ~50 random lists; with 4 KiB pages every list costs TLB misses (nested page
//! walks in a VM). Advising the stretches the lists occupy backs them with 2 MiB pages where
//! the kernel allows it, which removes most of those misses.

const HUGE: usize = 2 << 20;

/// The 2 MiB-aligned stretches covered by `buffers` (address, length): buffers less than 2 MiB
/// apart form one stretch; only whole aligned huge pages inside a stretch are returned, as
/// (address, length), ascending.
pub fn stretches(buffers: &mut Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    buffers.retain(|&(_, len)| len > 0);
    buffers.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    while i < buffers.len() {
        let (lo, mut hi) = (buffers[i].0, buffers[i].0 + buffers[i].1);
        i += 1;
        while i < buffers.len() && buffers[i].0 <= hi + HUGE {
            hi = hi.max(buffers[i].0 + buffers[i].1);
            i += 1;
        }
        let (a, b) = (lo.next_multiple_of(HUGE), hi / HUGE * HUGE);
        if b > a {
            out.push((a, b - a));
        }
    }
    out
}

/// Asks Linux to back the `stretches` of `buffers` with transparent huge pages now
/// (MADV_COLLAPSE, Linux 6.1+) and on later faults (MADV_HUGEPAGE). Never changes contents;
/// errors (older kernels, THP disabled) are ignored. A no-op off Linux, and when the
/// environment sets `VDBBENCH_HUGEPAGES=0` (read once per process).
pub fn advise(buffers: &mut Vec<(usize, usize)>) {
    if !enabled() {
        return;
    }
    for (addr, len) in stretches(buffers) {
        advise_range(addr, len);
    }
}

/// False when `VDBBENCH_HUGEPAGES` is `0` (to measure without the advice, or to avoid it).
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("VDBBENCH_HUGEPAGES").map_or(true, |v| v.trim() != "0"))
}

#[cfg(target_os = "linux")]
fn advise_range(addr: usize, len: usize) {
    const MADV_COLLAPSE: libc::c_int = 25;
    // SAFETY: madvise with these advices never changes the contents of mapped memory nor
    // unmaps it; addresses inside the range that are not mapped only make it return ENOMEM.
    unsafe {
        libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        libc::madvise(addr as *mut libc::c_void, len, MADV_COLLAPSE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_range(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_buffers_merge_and_only_whole_aligned_pages_are_kept() {
        let m = HUGE;
        let mut b = vec![
            (10 * m + 100, m), // with the next: one stretch 10m+100 .. 13m+5
            (11 * m + 200, 2 * m - 195),
            (0, 0),          // empty: dropped
            (40 * m + 1, m), // alone, shorter than an aligned page: nothing
            (50 * m, 3 * m), // exactly three pages
        ];
        assert_eq!(stretches(&mut b), vec![(11 * m, 2 * m), (50 * m, 3 * m)]);
        assert!(stretches(&mut vec![]).is_empty());
    }

    #[test]
    fn advising_a_live_buffer_keeps_its_contents() {
        let v: Vec<u8> = (0..6 * HUGE).map(|i| (i % 251) as u8).collect();
        advise(&mut vec![(v.as_ptr() as usize, v.len())]);
        assert!(v.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
    }
}
