//! Typed errors of the quant layer.

use crate::DType;

/// Errors from the type table and the codecs.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantError {
    /// A GGUF type id that ggml never assigned (or that is newer than this build).
    #[error("unknown ggml type id {0}")]
    UnknownTypeId(u32),
    /// A GGUF type id that ggml retired (4, 5, 31–33, 36–38).
    #[error("retired ggml type id {0} (no longer a valid tensor type)")]
    RetiredTypeId(u32),
    /// A row length that is not a whole number of blocks.
    #[error("{dtype}: row of {n} elements is not a multiple of the block size {block}")]
    RowNotMultiple {
        /// The type.
        dtype: DType,
        /// Row length in elements.
        n: u64,
        /// Block size of the type.
        block: usize,
    },
    /// A size computation overflowed.
    #[error("size arithmetic overflowed")]
    Overflow,
    /// The operation is not implemented for this type.
    #[error("{dtype}: {what} is not supported for this type")]
    Unsupported {
        /// The type.
        dtype: DType,
        /// Which operation (`"dequantize"`, `"quantize"`, `"dot"`).
        what: &'static str,
    },
    /// A buffer had the wrong length.
    #[error("{dtype}: {what} buffer has {got} bytes/elements, expected {expected}")]
    Length {
        /// The type.
        dtype: DType,
        /// Which buffer.
        what: &'static str,
        /// Actual length.
        got: usize,
        /// Expected length.
        expected: usize,
    },
}
