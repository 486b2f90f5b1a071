//! Input checks shared by the indexes: shapes, finiteness, k. Run before anything mutates.

use crate::error::{Result, VdbError};

/// Number of rows of a row-major matrix of `dim` columns; refuses a ragged length.
pub fn rows(data: &[f32], dim: usize, what: &str) -> Result<usize> {
    if dim == 0 || data.len() % dim != 0 {
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
