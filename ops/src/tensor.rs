//! Kernel-side views of tensor bytes: [`TensorRef`] for sources (shared, read-only) and
//! [`TensorMut`] for the destination, which several threads write concurrently — each thread
//! only the rows the executor assigned to it ([`crate::KernelCx::my_rows`] or claimed chunks).

use graph::TensorDesc;
use quant::DType;
use std::marker::PhantomData;

/// A read-only tensor: descriptor plus the bytes it spans.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// Layout.
    pub desc: TensorDesc,
    bytes: &'a [u8],
}

impl<'a> TensorRef<'a> {
    /// View `bytes` as `desc`. `bytes` must span at least `desc.nbytes()` (checked by the
    /// planner; a short slice is a bug and panics here rather than reading out of bounds).
    pub fn new(desc: TensorDesc, bytes: &'a [u8]) -> TensorRef<'a> {
        assert!(
            bytes.len() >= desc.nbytes(),
            "tensor view shorter than its descriptor"
        );
        TensorRef { desc, bytes }
    }
    /// All bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Bytes of flat row `r` (dimension 0 must be contiguous).
    pub fn row_bytes(&self, r: usize) -> &'a [u8] {
        let off = self.desc.flat_row_offset(r);
        &self.bytes[off..off + self.desc.row_bytes()]
    }
    /// Row `r` as f32 (f32 tensors with contiguous rows).
    pub fn row_f32(&self, r: usize) -> &'a [f32] {
        bytemuck::cast_slice(self.row_bytes(r))
    }
    /// The whole tensor as i32 (contiguous I32 tensors).
    pub fn i32s(&self) -> &'a [i32] {
        bytemuck::cast_slice(&self.bytes[..self.desc.nbytes()])
    }
    /// Element `(i0, i1, i2, i3)` of a float tensor (F32/F16/BF16) with any strides.
    pub fn get(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        let d = &self.desc;
        let off = i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        let b = &self.bytes[off..];
        match d.dtype {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::F16 => quant::scalar::f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            DType::BF16 => quant::scalar::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
            t => panic!("get() on {t}: graph validation should have rejected this"),
        }
    }
    /// Element at flat row `r`, column `i0`.
    pub fn get_flat(&self, i0: usize, r: usize) -> f32 {
        let (i1, i2, i3) = split_row(&self.desc, r);
        self.get(i0, i1, i2, i3)
    }
    /// Row `r` converted to f32 into `out` (any dtype with a dequantizer, any row strides).
    pub fn row_to_f32(&self, r: usize, out: &mut [f32]) {
        if self.desc.rows_contiguous() {
            if let Some(f) = self.desc.dtype.info().dequantize {
                f(self.row_bytes(r), out);
                return;
            }
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.get_flat(i, r);
        }
    }
}

/// Split a flat row index into `(i1, i2, i3)`.
pub fn split_row(d: &TensorDesc, r: usize) -> (usize, usize, usize) {
    (
        r % d.ne[1],
        (r / d.ne[1]) % d.ne[2],
        r / (d.ne[1] * d.ne[2]),
    )
}

/// The destination tensor of a node, written concurrently by the executor's threads.
///
/// Contract: during one node, each row is written by at most one thread, and no thread reads
/// a row another thread writes. Kernels uphold it by writing only rows from
/// [`crate::KernelCx::my_rows`] or from chunks they claimed from the node's atomic counter.
#[derive(Debug)]
pub struct TensorMut<'a> {
    /// Layout (always contiguous for op outputs).
    pub desc: TensorDesc,
    ptr: *mut u8,
    len: usize,
    _p: PhantomData<&'a mut [u8]>,
}

// SAFETY: TensorMut is a pointer to a buffer the executor keeps alive for the node; threads
// write disjoint rows (the contract above), so sharing it between threads is sound.
unsafe impl Send for TensorMut<'_> {}
// SAFETY: as above.
unsafe impl Sync for TensorMut<'_> {}

impl<'a> TensorMut<'a> {
    /// Wrap a destination buffer.
    pub fn new(desc: TensorDesc, bytes: &'a mut [u8]) -> TensorMut<'a> {
        assert!(
            bytes.len() >= desc.nbytes(),
            "destination shorter than its descriptor"
        );
        TensorMut {
            desc,
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            _p: PhantomData,
        }
    }
    /// Wrap a raw destination pointer (used by the executor for arena buffers).
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for writes for `'a`, 4-byte aligned, and not accessed by
    /// anything else than the node's kernel during the node.
    pub unsafe fn from_raw(desc: TensorDesc, ptr: *mut u8, len: usize) -> TensorMut<'a> {
        assert!(
            len >= desc.nbytes(),
            "destination shorter than its descriptor"
        );
        TensorMut {
            desc,
            ptr,
            len,
            _p: PhantomData,
        }
    }
    /// Mutable bytes of flat row `r`. See the type's contract.
    #[allow(clippy::mut_from_ref)]
    pub fn row_bytes_mut(&self, r: usize) -> &mut [u8] {
        let off = self.desc.flat_row_offset(r);
        let n = self.desc.row_bytes();
        assert!(off + n <= self.len, "row {r} outside destination");
        // SAFETY: in bounds (checked above); rows are disjoint byte ranges and each row is
        // handed to exactly one thread per node (type contract), so no aliasing &mut exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), n) }
    }
    /// Mutable f32 row `r`.
    #[allow(clippy::mut_from_ref)]
    pub fn row_f32_mut(&self, r: usize) -> &mut [f32] {
        bytemuck::cast_slice_mut(self.row_bytes_mut(r))
    }
    /// Mutable i32 row `r`.
    #[allow(clippy::mut_from_ref)]
    pub fn row_i32_mut(&self, r: usize) -> &mut [i32] {
        bytemuck::cast_slice_mut(self.row_bytes_mut(r))
    }
    /// Read-only view of the destination (for tests, after the node finished).
    pub fn as_ref(&self) -> TensorRef<'_> {
        // SAFETY: ptr..ptr+len is valid (constructor contract) and no thread writes while the
        // caller holds this view (it is only used after the node completed).
        let b = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        TensorRef::new(self.desc, b)
    }
}

impl TensorMut<'_> {
    /// Mutable f32 rows `r..r + n` of one matrix as one slice, for F32 rows of one element
    /// stored back to back (a SUM_ROWS output `{1, D, T}`): one offset computation instead of
    /// one per row. See the type's contract.
    #[allow(clippy::mut_from_ref)]
    pub fn unit_rows_f32_mut(&self, r: usize, n: usize) -> &mut [f32] {
        let d = &self.desc;
        assert!(d.dtype == DType::F32 && d.ne[0] == 1 && d.nb[1] == 4);
        assert!(r % d.ne[1] + n <= d.ne[1], "rows {r}+{n} cross a matrix");
        let off = d.flat_row_offset(r);
        assert!(off + 4 * n <= self.len, "row {r} outside destination");
        // SAFETY: in bounds (checked); the rows are within one matrix (checked), so they are
        // the contiguous bytes off..off + 4n, owned by one thread for this node (type
        // contract), so the &mut does not alias another thread's.
        let b = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), 4 * n) };
        bytemuck::cast_slice_mut(b)
    }
    /// Mutable f32 elements `cols` of row `r`. Threads may write disjoint column ranges of
    /// the same row (matmul splits by output column); see the type's contract.
    #[allow(clippy::mut_from_ref)]
    pub fn row_range_f32_mut(&self, r: usize, cols: std::ops::Range<usize>) -> &mut [f32] {
        assert!(
            self.desc.dtype == DType::F32 && cols.end <= self.desc.ne[0] && cols.start <= cols.end
        );
        let off = self.desc.flat_row_offset(r) + cols.start * 4;
        let n = (cols.end - cols.start) * 4;
        assert!(off + n <= self.len, "row {r} outside destination");
        // SAFETY: in bounds (checked); the column range is owned by one thread for this node
        // (type contract), so the &mut does not alias another thread's.
        let b = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), n) };
        bytemuck::cast_slice_mut(b)
    }
}
