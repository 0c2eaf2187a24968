//! Routed-expert weights that are not all in memory: an [`ExpertSource`] makes an expert's
//! bytes resident when a MUL_MAT_ID node needs them (read from disk into a RAM-budgeted
//! cache) and keeps them there while a [`Pinned`] handle is alive.
//!
//! A weight node whose [`crate::WeightData`] carries a source is still a whole tensor to the
//! planner (its bytes, a memory map, stay valid), but MUL_MAT_ID takes each expert's bytes
//! from the source instead of from the map, so the map's pages of routed experts are never
//! touched. A source may also hand out an expert in another layout ([`ExpertLayout`]): an
//! official checkpoint's FP4 experts are used in place from their own code and scale tensors.

/// Where a MUL_MAT_ID weight's experts come from when they are paged (one source per weight
/// tensor of shape `{K, N, E}`; an expert is one `{K, N}` slice of `nb[2]` bytes).
pub trait ExpertSource: Send + Sync + std::fmt::Debug {
    /// The node is about to use `experts` (increasing, distinct): start reading the missing
    /// ones (and those of the tensors the source shares a layer with). Called once per node
    /// run, by one thread; a [`ExpertSource::pin`] of an expert not yet requested asks for
    /// it itself.
    fn request(&self, experts: &[u32]);
    /// A guess (EXPERT_PREFETCH): read `experts` (increasing, distinct) ahead where the
    /// budget has room, without counting them as used.
    fn prefetch(&self, experts: &[u32]);
    /// The bytes of expert `e`, waiting until they are resident. `None` when they could not
    /// be read (the source keeps the error for its owner to report after the run; the
    /// kernel writes NaN for those rows).
    fn pin(&self, e: usize) -> Option<Pinned>;
}

/// Shared bytes that hold a pinned expert.
pub type ExpertBytes = std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A range of shared bytes.
struct Span {
    buf: ExpertBytes,
    at: usize,
    len: usize,
}

impl Span {
    fn new(buf: ExpertBytes, at: usize, len: usize) -> Option<Span> {
        let end = at.checked_add(len)?;
        ((*buf).as_ref().len() >= end).then_some(Span { buf, at, len })
    }
    fn bytes(&self) -> &[u8] {
        &(*self.buf).as_ref()[self.at..self.at + self.len]
    }
}

/// How a pinned expert's bytes are laid out.
#[derive(Debug, Clone, Copy)]
pub enum ExpertLayout<'a> {
    /// In the weight tensor's own layout (`nb[2]` bytes).
    Stacked(&'a [u8]),
    /// An MXFP4 stack's expert as an official DeepSeek checkpoint stores it, used in place:
    /// `codes` are `N` rows of `K/2` bytes (column 2i in the low nibble of byte i, 2i + 1 in
    /// the high one) and `scales` `N` rows of `K/32` E8M0 bytes, in tensors of their own.
    /// MUL_MAT_ID converts a few rows at a time to MXFP4 (`quant::fp8::fp4_ds_blocks_to_mxfp4`,
    /// the conversion loading uses) just before its kernels read them.
    Fp4Split {
        /// The FP4 codes.
        codes: &'a [u8],
        /// The per-32 E8M0 scales.
        scales: &'a [u8],
    },
}

/// What a [`Pinned`] holds.
enum Held {
    Stacked(Span),
    Fp4Split { codes: Span, scales: Span },
}

/// Expert `e`'s bytes, kept alive by this handle (a source does not reuse memory that a
/// handle still holds, and counts such an expert as in use).
pub struct Pinned {
    e: usize,
    held: Held,
}

impl Pinned {
    /// Expert `e` at `buf[at..at + len]`; `None` if the range is outside `buf`.
    pub fn new(e: usize, buf: ExpertBytes, at: usize, len: usize) -> Option<Pinned> {
        Some(Pinned {
            e,
            held: Held::Stacked(Span::new(buf, at, len)?),
        })
    }
    /// Expert `e` of an MXFP4 stack in the official FP4 layout ([`ExpertLayout::Fp4Split`]):
    /// its codes and scales, each `(buffer, offset, length)`; `None` if a range is outside
    /// its buffer.
    pub fn fp4_split(
        e: usize,
        codes: (ExpertBytes, usize, usize),
        scales: (ExpertBytes, usize, usize),
    ) -> Option<Pinned> {
        Some(Pinned {
            e,
            held: Held::Fp4Split {
                codes: Span::new(codes.0, codes.1, codes.2)?,
                scales: Span::new(scales.0, scales.1, scales.2)?,
            },
        })
    }
    /// The expert.
    pub fn expert(&self) -> usize {
        self.e
    }
    /// The expert's bytes and their layout.
    pub fn layout(&self) -> ExpertLayout<'_> {
        match &self.held {
            Held::Stacked(s) => ExpertLayout::Stacked(s.bytes()),
            Held::Fp4Split { codes, scales } => ExpertLayout::Fp4Split {
                codes: codes.bytes(),
                scales: scales.bytes(),
            },
        }
    }
    /// The expert's bytes in the weight tensor's layout (`nb[2]` bytes); `None` for an
    /// expert in another layout.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self.layout() {
            ExpertLayout::Stacked(b) => Some(b),
            ExpertLayout::Fp4Split { .. } => None,
        }
    }
}
