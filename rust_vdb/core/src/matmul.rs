//! The one dense product the engine needs: every row of A against every row of B.

/// `out[i * n + j] = <a_i, b_j>` for the `m` rows of `a` and the `n` rows of `b` (`k` values
/// each, row-major); `out` holds at least `m * n` values and is overwritten.
///
/// Through the `gemm` crate (runtime-dispatched AVX-512 / AVX2+FMA / NEON / scalar kernels), on
/// the calling thread: callers parallelise over blocks themselves, so a block's result never
/// depends on the thread count.
pub fn dots_abt(a: &[f32], b: &[f32], k: usize, out: &mut [f32]) {
    let m = a.len().checked_div(k).unwrap_or(0);
    let n = b.len().checked_div(k).unwrap_or(0);
    assert_eq!(
        a.len(),
        m * k,
        "a holds {} values, not a multiple of k={k}",
        a.len()
    );
    assert_eq!(
        b.len(),
        n * k,
        "b holds {} values, not a multiple of k={k}",
        b.len()
    );
    assert!(
        out.len() >= m * n,
        "out holds {} values, needs {m} x {n}",
        out.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: a is m x k row-major (column stride 1, row stride k); b read as its transpose
    // (k x n: element (p, j) at b[j * k + p]); out is m x n row-major; the asserts above keep
    // every access in bounds. With read_dst false, out's old values are never read.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            k as isize,
            1,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_naive_product() {
        let mut rng = crate::rng::Rng::new(11);
        for (m, n, k) in [
            (1, 1, 1),
            (3, 5, 7),
            (17, 33, 128),
            (130, 7, 3),
            (64, 200, 65),
        ] {
            let a: Vec<f32> = (0..m * k).map(|_| rng.below(255) as f32 - 127.0).collect();
            let b: Vec<f32> = (0..n * k).map(|_| rng.below(255) as f32 - 127.0).collect();
            let mut out = vec![f32::NAN; m * n + 3];
            dots_abt(&a, &b, k, &mut out);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum();
                    assert_eq!(out[i * n + j], want, "({m},{n},{k}) at ({i},{j})");
                }
            }
            assert!(out[m * n..].iter().all(|v| v.is_nan()), "wrote past m x n");
        }
    }
}
