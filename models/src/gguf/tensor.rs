//! Tensor descriptors ([`TensorInfo`]) and the checked shape → byte-size computation shared by
//! the reader and the writer.
//!
//! Every step is checked (`shared/spec/hostile-inputs.md` §0.2): each dimension must fit in
//! `i64` (ggml stores `int64_t ne[4]`), the element count is a checked product that must stay
//! ≤ `i64::MAX`, the row length `ne[0]` must be a whole number of blocks, and the byte size is
//! `row_bytes(ne[0]) × ne[1] × ne[2] × ne[3]`, again checked. `n_dims` must be 1..=4: llama.cpp
//! writes at least one dimension for every tensor (`ggml_n_dims` ≥ 1), so `n_dims = 0` is
//! refused rather than read as a scalar.

use quant::{DType, QuantError};

/// Most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// One tensor of a (possibly split) GGUF file, fully validated at open time.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// Tensor name, unique across all shards.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape in GGUF order: `ne[0]` is the innermost (row) dimension; 1..=4 entries.
    pub ne: Vec<u64>,
    /// Offset of the data relative to its shard's data section (a multiple of the alignment).
    pub offset: u64,
    /// Size of the data in bytes.
    pub n_bytes: u64,
    /// Index of the shard holding the data (0 for unsplit files).
    pub shard: usize,
}

impl TensorInfo {
    /// Number of elements (the product of `ne`; checked at parse time, so it cannot overflow).
    pub fn n_elements(&self) -> u64 {
        self.ne
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .unwrap_or(u64::MAX)
    }

    /// Number of dimensions as stored in the file.
    pub fn n_dims(&self) -> usize {
        self.ne.len()
    }
}

/// Why a shape is refused (mapped to a [`GgufError`](super::GgufError) with context by the
/// caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShapeError {
    /// `n_dims` outside 1..=4.
    Dims(usize),
    /// Dimension `dim` exceeds `i64::MAX`.
    Dim { dim: usize, value: u64 },
    /// The element count overflows `i64`.
    ElementOverflow,
    /// `ne[0]` is not a multiple of the block size.
    Row { ne0: u64, block: u64 },
    /// The byte size exceeds `i64::MAX`.
    ByteOverflow,
}

/// The byte size of a tensor of `dtype` and shape `ne`, fully checked (≤ `i64::MAX`).
pub(crate) fn tensor_nbytes(dtype: DType, ne: &[u64]) -> Result<u64, ShapeError> {
    if ne.is_empty() || ne.len() > MAX_DIMS {
        return Err(ShapeError::Dims(ne.len()));
    }
    let max_dim = i64::MAX.unsigned_abs();
    for (dim, &value) in ne.iter().enumerate() {
        if value > max_dim {
            return Err(ShapeError::Dim { dim, value });
        }
    }
    let elements = ne
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or(ShapeError::ElementOverflow)?;
    if elements > max_dim {
        return Err(ShapeError::ElementOverflow);
    }
    let ne0 = ne.first().copied().unwrap_or(0);
    let row = dtype.row_bytes(ne0).map_err(|e| match e {
        QuantError::RowNotMultiple { block, .. } => ShapeError::Row {
            ne0,
            block: u64::try_from(block).unwrap_or(u64::MAX),
        },
        _ => ShapeError::ByteOverflow,
    })?;
    let bytes = ne
        .iter()
        .skip(1)
        .try_fold(row, |a, &d| a.checked_mul(d))
        .ok_or(ShapeError::ByteOverflow)?;
    // No file (off_t) can hold more than i64::MAX bytes; refusing larger sizes here also keeps
    // every later `offset + size + padding` sum far from u64 wraparound.
    if bytes > max_dim {
        return Err(ShapeError::ByteOverflow);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(tensor_nbytes(DType::F32, &[4, 3]), Ok(48));
        assert_eq!(tensor_nbytes(DType::Q4_K, &[512, 2]), Ok(2 * 2 * 144));
        assert_eq!(tensor_nbytes(DType::F32, &[0, 7]), Ok(0));
        assert_eq!(tensor_nbytes(DType::F32, &[]), Err(ShapeError::Dims(0)));
        assert_eq!(tensor_nbytes(DType::F32, &[1; 5]), Err(ShapeError::Dims(5)));
        assert_eq!(
            tensor_nbytes(DType::Q4_0, &[33]),
            Err(ShapeError::Row { ne0: 33, block: 32 })
        );
        assert_eq!(
            tensor_nbytes(DType::F32, &[1 << 32, 1 << 32]),
            Err(ShapeError::ElementOverflow)
        );
        // Element count fits in i64 but the byte size does not (GGML_PAD wrap shape).
        assert_eq!(
            tensor_nbytes(DType::F32, &[4, (1 << 30) - 1, (1 << 30) + 1, 1]),
            Err(ShapeError::ByteOverflow)
        );
    }
}
