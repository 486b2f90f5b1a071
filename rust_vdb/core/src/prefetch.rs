//! Software prefetch: a hint that a cache line will be read soon. It never faults and never
//! changes a result; on targets without the instruction it does nothing.

/// Asks for the cache line holding `p` to be brought towards the core.
#[inline(always)]
pub fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it does not dereference `p` and never faults.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetches every cache line of `s`.
#[inline]
pub fn slice<T>(s: &[T]) {
    let bytes = std::mem::size_of_val(s);
    let base = s.as_ptr() as *const u8;
    let mut off = 0;
    while off < bytes {
        line(base.wrapping_add(off));
        off += 64;
    }
    if bytes > 0 {
        // the last line, when `s` does not start on a line boundary
        line(base.wrapping_add(bytes - 1));
    }
}
