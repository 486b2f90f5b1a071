//! The one dense product the engine needs: every row of A against every row of B.

/// `out[i * n + j] = <a_i, b_j>` for the `m` rows of `a` and the `n` rows of `b` (`k` values
/// each, row-major); `out` holds at least `m * n` values and is overwritten.
///
/// Through the `gemm` crates' f32 kernels (runtime-dispatched AVX-512 / AVX2+FMA / NEON /
/// scalar), on the calling thread: callers parallelise over blocks themselves, so a block's
/// result never depends on the thread count.
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
    // `gemm::gemm`'s own first step, so the products are its bits: where out's column stride
    // (1) is the smaller, the transposed problem, out^T (n x m, column stride n) = b (n x k) .
    // a^T (k x m); then the f32 kernel it dispatches to.
    let (rows, cols, dst_cs, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs) = if n > 1 {
        (n, m, n as isize, 1, b.as_ptr(), 1, k as isize, a.as_ptr(), k as isize, 1)
    } else {
        (m, n, 1, n as isize, a.as_ptr(), 1, k as isize, b.as_ptr(), k as isize, 1)
    };
    // SAFETY: a is m x k and b is n x k, row-major (element (i, p) at [i * k + p]), read through
    // the strides above as a, a^T, b or b^T; out is m x n row-major, written as out or out^T;
    // the asserts above keep every access in bounds. With read_dst false, out's old values are
    // never read.
    unsafe {
        gemm_f32::gemm::f32::get_gemm_fn()(
            rows,
            cols,
            k,
            out.as_mut_ptr(),
            dst_cs,
            dst_rs,
            false,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm_common::Parallelism::None,
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
