//! Tensor descriptors: element type, `ne[4]` element counts and `nb[4]` byte strides, exactly
//! ggml's model. `ne[0]` is the innermost (fastest) dimension; `nb[0]` is the size of one
//! element (or one block for quantized types) and `nb[1]` the size of a row.

use crate::error::GraphError;
use quant::DType;

/// Describes the layout of a tensor's bytes. It owns no data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension, innermost first (ggml `ne`). Unused dimensions are 1.
    pub ne: [usize; 4],
    /// Byte stride per dimension (ggml `nb`). For quantized types `nb[0]` is the block size in
    /// bytes and dimension 0 must be contiguous.
    pub nb: [usize; 4],
}

impl TensorDesc {
    /// A contiguous tensor of shape `ne` (innermost first; fewer than 4 dims are padded with 1).
    pub fn new(dtype: DType, ne: &[usize]) -> Result<TensorDesc, GraphError> {
        if ne.is_empty() || ne.len() > 4 {
            return Err(crate::error::shape_err(
                "tensor",
                format!("{} dims (1 to 4 allowed)", ne.len()),
            ));
        }
        let mut n = [1usize; 4];
        n[..ne.len()].copy_from_slice(ne);
        let row = dtype.row_bytes(n[0] as u64)?;
        let row = usize::try_from(row).map_err(|_| GraphError::Overflow(format!("{ne:?}")))?;
        let mut nb = [dtype.type_size(), row, 0, 0];
        for i in 2..4 {
            nb[i] = nb[i - 1]
                .checked_mul(n[i - 1])
                .ok_or_else(|| GraphError::Overflow(format!("{ne:?}")))?;
        }
        nb[3]
            .checked_mul(n[3])
            .ok_or_else(|| GraphError::Overflow(format!("{ne:?}")))?;
        Ok(TensorDesc { dtype, ne: n, nb })
    }

    /// Contiguous f32 tensor (panics never: f32 has block size 1; overflow is an error).
    pub fn f32(ne: &[usize]) -> Result<TensorDesc, GraphError> {
        TensorDesc::new(DType::F32, ne)
    }

    /// Total number of elements.
    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }
    /// Number of rows (`ne[1]·ne[2]·ne[3]`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }
    /// Bytes of one contiguous row of `ne[0]` elements.
    pub fn row_bytes(&self) -> usize {
        self.ne[0] / self.dtype.block_size() * self.dtype.type_size()
    }
    /// Bytes spanned from the first to one past the last byte (ggml `ggml_nbytes`).
    pub fn nbytes(&self) -> usize {
        if self.nelements() == 0 {
            return 0;
        }
        let mut n = self.row_bytes();
        for i in 1..4 {
            n += (self.ne[i] - 1) * self.nb[i];
        }
        n
    }
    /// True when the bytes are densely packed in index order.
    pub fn is_contiguous(&self) -> bool {
        let c = TensorDesc::new(self.dtype, &self.ne);
        matches!(c, Ok(c) if (0..4).all(|i| self.ne[i] == 1 || c.nb[i] == self.nb[i]))
    }
    /// True when each row (dimension 0) is contiguous.
    pub fn rows_contiguous(&self) -> bool {
        self.nb[0] == self.dtype.type_size()
    }
    /// Byte offset of row `(i1, i2, i3)`.
    pub fn row_offset(&self, i1: usize, i2: usize, i3: usize) -> usize {
        i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3]
    }
    /// Byte offset of the flat row index `r` (row-major over dims 1..3).
    pub fn flat_row_offset(&self, r: usize) -> usize {
        // the rows of the first matrix (every row of a 2-D tensor) need no division: the
        // general form's four divisions were 40% of the Q8_0 tile driver's own time in a
        // 512-token prompt chunk (it asks once per tile and column)
        if r < self.ne[1] {
            return r * self.nb[1];
        }
        let i1 = r % self.ne[1];
        let i2 = (r / self.ne[1]) % self.ne[2];
        let i3 = r / (self.ne[1] * self.ne[2]);
        self.row_offset(i1, i2, i3)
    }
    /// Same shape (all four `ne`).
    pub fn same_shape(&self, o: &TensorDesc) -> bool {
        self.ne == o.ne
    }
    /// Shape as a short string, e.g. `f32{4096,4,7}` (trailing 1s dropped).
    pub fn shape_str(&self) -> String {
        let mut k = 4;
        while k > 1 && self.ne[k - 1] == 1 {
            k -= 1;
        }
        let dims: Vec<String> = self.ne[..k].iter().map(|n| n.to_string()).collect();
        format!(
            "{}{{{}}}",
            self.dtype.name().to_ascii_lowercase(),
            dims.join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_sizes() {
        let t = TensorDesc::new(DType::Q4_K, &[512, 3]).unwrap();
        assert_eq!(t.nb, [144, 288, 864, 864]);
        assert_eq!(t.nbytes(), 864);
        assert!(t.is_contiguous());
        assert!(TensorDesc::new(DType::Q4_K, &[100]).is_err());
        assert!(TensorDesc::f32(&[usize::MAX / 2, 4]).is_err());
        let f = TensorDesc::f32(&[3, 4, 5]).unwrap();
        assert_eq!(f.flat_row_offset(7), 3 * 12 + 48);
        assert_eq!(f.shape_str(), "f32{3,4,5}");
    }
}
