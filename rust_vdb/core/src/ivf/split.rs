//! The two-part u8 codes of an "l2" u8+f16 index: each list keeps its rows' codes as a head
//! block (the `head` dims of largest variance, in that order) and a tail block (the others).
//!
//! An l2 distance is a sum over dims, so the head's distance is a lower bound of the whole
//! code's: the scan scores every row's head, and reads the tail of only the rows whose head
//! distance is already at or under the heap's threshold (the others cannot enter it). The
//! candidates, their distances and the order they reach the heap are the same as scoring
//! whole codes. On synth-sift-1m (dim 128, head 64: 82% of the variance) 5.2% of the rows
//! scanned at nprobe 52 need their tail, so a scan reads 67 bytes of codes per row instead
//! of 128 (`benchmarks/results/perf-split-codes.md`).
//!
//! The split is derived, never stored: files hold whole codes in dim order, and the dims are
//! ranked again from the codes at load (from the training sample's codes at train). Which dims
//! go first changes only how many tails are read, never a result.

/// The dim order of the split codes and the width of the head.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeSplit {
    /// Stored position p holds dim `order[p]`: the head is `order[..head]`.
    pub order: Vec<usize>,
    pub head: usize,
}

impl CodeSplit {
    /// The head width for `dim`: half of it, in whole groups of 16 dims; None below 32 dims,
    /// where a row is a fraction of a cache line and there is nothing to save.
    pub fn head_for(dim: usize) -> Option<usize> {
        (dim >= 32).then(|| dim / 2 / 16 * 16)
    }

    /// Ranks the dims of `codes` (rows of `dim` u8 codes) by variance, largest first (ties to
    /// the smaller dim). None where `head_for(dim)` is None.
    pub fn from_codes<'a>(rows: impl Iterator<Item = &'a [u8]>, dim: usize) -> Option<CodeSplit> {
        let head = Self::head_for(dim)?;
        let (mut sum, mut sq, mut n) = (vec![0u64; dim], vec![0u64; dim], 0u64);
        for row in rows {
            for (d, &v) in row.iter().enumerate() {
                sum[d] += v as u64;
                sq[d] += v as u64 * v as u64;
            }
            n += 1;
        }
        let var: Vec<f64> = (0..dim)
            .map(|d| {
                let n = n.max(1) as f64;
                let mean = sum[d] as f64 / n;
                sq[d] as f64 / n - mean * mean
            })
            .collect();
        let mut order: Vec<usize> = (0..dim).collect();
        order.sort_by(|&a, &b| var[b].total_cmp(&var[a]).then(a.cmp(&b)));
        Some(CodeSplit { order, head })
    }

    pub fn tail(&self) -> usize {
        self.order.len() - self.head
    }

    /// One row's codes in dim order into its head and tail parts.
    pub fn split_row(&self, code: &[u8], head: &mut [u8], tail: &mut [u8]) {
        let (h, t) = self.order.split_at(self.head);
        for (o, &d) in head.iter_mut().zip(h) {
            *o = code[d];
        }
        for (o, &d) in tail.iter_mut().zip(t) {
            *o = code[d];
        }
    }

    /// The inverse of `split_row`.
    pub fn join_row(&self, head: &[u8], tail: &[u8], code: &mut [u8]) {
        for (&v, &d) in head.iter().chain(tail).zip(&self.order) {
            code[d] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CodeSplit;

    #[test]
    fn ranks_dims_by_variance_and_round_trips_rows() {
        // dim 32: dims 5 and 17 vary most, the others not at all.
        let rows: Vec<Vec<u8>> = (0..10u8)
            .map(|i| {
                let mut r = vec![7u8; 32];
                r[5] = i * 20;
                r[17] = i * 3;
                r
            })
            .collect();
        let s = CodeSplit::from_codes(rows.iter().map(|r| &r[..]), 32).unwrap();
        assert_eq!(s.head, 16);
        assert_eq!(&s.order[..3], &[5, 17, 0]);
        let mut sorted = s.order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..32).collect::<Vec<_>>());
        let (mut h, mut t, mut back) = (vec![0u8; 16], vec![0u8; 16], vec![0u8; 32]);
        s.split_row(&rows[3], &mut h, &mut t);
        assert_eq!((h[0], h[1]), (60, 9));
        s.join_row(&h, &t, &mut back);
        assert_eq!(back, rows[3]);
        assert_eq!(CodeSplit::head_for(31), None);
        assert_eq!(CodeSplit::head_for(128), Some(64));
        assert_eq!(CodeSplit::head_for(100), Some(48));
    }
}
