//! Routed-expert weights that are not all in memory: an [`ExpertSource`] makes an expert's
//! bytes resident when a MUL_MAT_ID node needs them (read from disk into a RAM-budgeted
//! cache) and keeps them there while a [`Pinned`] handle is alive.
//!
//! A weight node whose [`crate::WeightData`] carries a source is still a whole tensor to the
//! planner (its bytes, a memory map, stay valid), but MUL_MAT_ID takes each expert's bytes
//! from the source instead of from the map, so the map's pages of routed experts are never
//! touched.

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

/// Expert `e`'s bytes, kept alive by this handle (a source does not reuse memory that a
/// handle still holds, and counts such an expert as in use).
pub struct Pinned {
    e: usize,
    buf: ExpertBytes,
    at: usize,
    len: usize,
}

impl Pinned {
    /// Expert `e` at `buf[at..at + len]`; `None` if the range is outside `buf`.
    pub fn new(e: usize, buf: ExpertBytes, at: usize, len: usize) -> Option<Pinned> {
        let end = at.checked_add(len)?;
        ((*buf).as_ref().len() >= end).then_some(Pinned { e, buf, at, len })
    }
    /// The expert.
    pub fn expert(&self) -> usize {
        self.e
    }
    /// The expert's bytes (`nb[2]` of the weight tensor).
    pub fn bytes(&self) -> &[u8] {
        &(*self.buf).as_ref()[self.at..self.at + self.len]
    }
}
