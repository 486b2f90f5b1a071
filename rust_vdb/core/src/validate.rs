//! Input checks shared by the indexes: shapes, finiteness, k. Run before anything mutates.

use crate::error::{Result, VdbError};

/// Number of rows of a row-major matrix of `dim` columns; refuses a ragged length.
pub fn rows(data: &[f32], dim: usize, what: &str) -> Result<usize> {
    if dim == 0 || !data.len().is_multiple_of(dim) {
        return Err(VdbError::InvalidInput(format!(
            "{what}: {} values do not form rows of dim={dim}",
            data.len()
        )));
    }
    Ok(data.len() / dim)
}

/// Refuses NaN and infinities, naming the first offending row and column.
pub fn finite(data: &[f32], dim: usize, what: &str) -> Result<()> {
    // Fast path: a sum of |x| is finite iff every value is (no overflow to inf at f64).
    let ok = data
        .chunks(4096)
        .all(|c| c.iter().map(|v| v.abs() as f64).sum::<f64>().is_finite());
    if ok {
        return Ok(());
    }
    let pos = data.iter().position(|v| !v.is_finite()).unwrap_or(0);
    Err(VdbError::InvalidInput(format!(
        "{what} contains {} at row {}, column {}; expected finite values",
        data[pos],
        pos / dim.max(1),
        pos % dim.max(1)
    )))
}

/// The smallest magnitude that rounds to an infinite f16 (f16's largest value is 65504).
pub const F16_OVERFLOW: f32 = 65520.0;

/// Refuses values an f16 copy cannot hold (they would be stored as infinities, and every
/// distance to them be inf), naming the first offending row and column; `why` says what is
/// kept as f16, `or` any other way out than scaling the data down.
pub fn f16_range(data: &[f32], dim: usize, what: &str, why: &str, or: &str) -> Result<()> {
    let Some(pos) = data.iter().position(|v| v.abs() >= F16_OVERFLOW) else {
        return Ok(());
    };
    Err(VdbError::InvalidInput(format!(
        "{what} contains {} at row {}, column {}: {why} as f16, whose values lie within \
         +-65504; scale the data down{or}",
        data[pos],
        pos / dim.max(1),
        pos % dim.max(1)
    )))
}

/// Checks the dimension of a matrix given as (rows, cols).
pub fn dim_matches(cols: usize, dim: usize, what: &str) -> Result<()> {
    if cols != dim {
        return Err(VdbError::InvalidInput(format!(
            "{what} has dimension {cols}; this index expects dim={dim}"
        )));
    }
    Ok(())
}

/// 1 <= k <= ntotal.
pub fn k(k: usize, ntotal: usize) -> Result<()> {
    if k == 0 {
        return Err(VdbError::InvalidInput("k=0: expected k >= 1".into()));
    }
    if k > ntotal {
        return Err(VdbError::InvalidInput(format!(
            "k={k} exceeds the {ntotal} vectors in the index; expected 1 <= k <= ntotal"
        )));
    }
    Ok(())
}

/// The rerank rule: 0 (the u8 results alone) or at least k.
pub fn rerank(rerank: usize, k: usize) -> Result<()> {
    if rerank > 0 && rerank < k {
        return Err(VdbError::InvalidInput(format!(
            "rerank={rerank} is below k={k}; expected 0 (u8 results alone) or rerank >= k"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::error::never_interrupt;
    use crate::{IvfIndex, Metric, Storage};

    /// `rerank` (what Python checks before a sweep) refuses exactly what a search refuses.
    #[test]
    fn the_rerank_rule_is_the_one_searches_apply() {
        let x: Vec<f32> = (0..64 * 4).map(|i| (i * 37 % 101) as f32).collect();
        let mut idx = IvfIndex::new(4, Some(2), Metric::L2, Storage::U8F16, 0).unwrap();
        idx.train(&x, None, &never_interrupt).unwrap();
        idx.add(&x, None, None, &never_interrupt).unwrap();
        for k in [1, 5, 10] {
            for r in [0, 1, 4, 5, 9, 10, 64] {
                let rule = super::rerank(r, k).map_err(|e| e.to_string());
                let search = idx
                    .params(k, None, Some(r))
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                assert_eq!(rule, search, "rerank {r} k {k}");
            }
        }
    }
}
