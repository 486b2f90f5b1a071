//! The one error type of the engine; the Python binding maps each variant to its exception.

use thiserror::Error;

/// Everything that can go wrong in vdb-core. Messages say what was wrong and what was expected.
#[derive(Debug, Error)]
pub enum VdbError {
    /// Bad argument or data: wrong dimension, NaN/inf, k out of range, unknown metric...
    #[error("{0}")]
    InvalidInput(String),
    /// The index cannot do this yet (search or add before train).
    #[error("{0}")]
    NotReady(String),
    /// A file that is truncated, foreign, of an unknown version or fails its checksum.
    #[error("{0}")]
    CorruptFile(String),
    /// An I/O error, with the path it concerns.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A long call was cancelled by its caller (Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T, E = VdbError> = std::result::Result<T, E>;

/// Shorthand for `Err(VdbError::InvalidInput(format!(...)))`.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        Err($crate::error::VdbError::InvalidInput(format!($($arg)*)))
    };
}

/// A caller-supplied check run between chunks of a long call: `Err` stops the call
/// (typically `VdbError::Interrupted`), leaving the index unchanged.
pub type Interrupt<'a> = &'a (dyn Fn() -> Result<()> + Sync);

/// An `Interrupt` that never interrupts.
pub fn never_interrupt() -> Result<()> {
    Ok(())
}

/// Queries a search runs between two interrupt checks, per thread: a batch block's size
/// (`ivf::search`'s SCAN_BLOCK) at most, tens of milliseconds of work.
pub(crate) const INTERRUPT_EVERY: usize = 2048;

/// Runs `f` on the queries `per` at a time (`INTERRUPT_EVERY` per thread), each chunk with its rows of the
/// distance and id outputs (`k` per query), checking `interrupt` between chunks only: a call
/// of one chunk never re-takes the interpreter.
#[allow(clippy::too_many_arguments)]
pub(crate) fn each_interrupt_chunk(
    queries: &[f32],
    per: usize,
    dim: usize,
    d: &mut [f32],
    ids: &mut [i64],
    k: usize,
    interrupt: Interrupt,
    mut f: impl FnMut(&[f32], &mut [f32], &mut [i64]) -> Result<()>,
) -> Result<()> {
    for (ci, ((qs, dd), ii)) in queries
        .chunks(per * dim)
        .zip(d.chunks_mut(per * k))
        .zip(ids.chunks_mut(per * k))
        .enumerate()
    {
        if ci > 0 {
            interrupt()?;
        }
        f(qs, dd, ii)?;
    }
    Ok(())
}
