//! Distance metrics: L2 (squared), inner product, cosine (= normalise, then inner product).

use std::borrow::Cow;

use crate::error::{Result, VdbError};

/// How vectors are compared. Internally every search minimises a *score*: the squared L2
/// distance, or the negated inner product for `Ip` and `Cosine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    L2,
    Ip,
    Cosine,
}

impl Metric {
    pub const NAMES: [&'static str; 3] = ["l2", "ip", "cosine"];

    pub fn name(self) -> &'static str {
        match self {
            Metric::L2 => "l2",
            Metric::Ip => "ip",
            Metric::Cosine => "cosine",
        }
    }

    pub fn parse(s: &str) -> Result<Metric> {
        match s {
            "l2" => Ok(Metric::L2),
            "ip" => Ok(Metric::Ip),
            "cosine" => Ok(Metric::Cosine),
            _ => Err(VdbError::InvalidInput(format!(
                "unknown metric {s:?}; expected one of \"l2\", \"ip\", \"cosine\""
            ))),
        }
    }

    /// True when the search ranks by inner product (after normalisation for cosine).
    pub fn is_similarity(self) -> bool {
        !matches!(self, Metric::L2)
    }

    /// The value reported to users for an internal score: squared L2, or the similarity.
    #[inline]
    pub fn score_to_distance(self, score: f32) -> f32 {
        if self.is_similarity() {
            -score
        } else {
            score
        }
    }

    /// The padding distance of a missing result (worst possible).
    pub fn pad_distance(self) -> f32 {
        if self.is_similarity() {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        }
    }

    /// Rows of `dim` as this metric compares them: a normalised copy for cosine, else `x`.
    pub fn prepare_rows(self, x: &[f32], dim: usize) -> Cow<'_, [f32]> {
        if self == Metric::Cosine {
            let mut v = x.to_vec();
            normalize_rows(&mut v, dim);
            Cow::Owned(v)
        } else {
            Cow::Borrowed(x)
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Metric::L2 => 0,
            Metric::Ip => 1,
            Metric::Cosine => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<Metric> {
        match c {
            0 => Some(Metric::L2),
            1 => Some(Metric::Ip),
            2 => Some(Metric::Cosine),
            _ => None,
        }
    }
}

/// Scales each row of `data` (rows of `dim`) to unit L2 norm in place; zero rows stay zero.
pub fn normalize_rows(data: &mut [f32], dim: usize) {
    for row in data.chunks_exact_mut(dim) {
        let n: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n.is_finite() && n >= NORM_F32_MIN {
            let inv = 1.0 / n;
            row.iter_mut().for_each(|x| *x *= inv);
        } else {
            // The squares overflowed f32 (components ~1e19 and up) or fell below its normal
            // range (~1e-19 and down): in f64, or such a row became zeros (a zero vector) or
            // lost its direction, though cosine does not depend on the length.
            let n = row.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            if n > 0.0 {
                row.iter_mut().for_each(|x| *x = (*x as f64 / n) as f32);
            }
        }
    }
}

/// Norms from here up were summed from squares within f32's normal range.
const NORM_F32_MIN: f32 = 1e-18;

#[cfg(test)]
mod tests {
    use super::Metric;
    use std::borrow::Cow;

    #[test]
    fn prepare_rows_normalises_a_copy_for_cosine_only() {
        let x = [3.0f32, 4.0, 0.0, 0.0];
        let c = Metric::Cosine.prepare_rows(&x, 2);
        assert!(matches!(c, Cow::Owned(_)));
        assert_eq!(&*c, &[0.6, 0.8, 0.0, 0.0]);
        for m in [Metric::L2, Metric::Ip] {
            assert!(matches!(m.prepare_rows(&x, 2), Cow::Borrowed(_)));
        }
    }
}
