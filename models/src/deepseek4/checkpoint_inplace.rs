//! An official checkpoint's FP4 routed experts used in place ([`Fp4Policy::InPlace`], the
//! default): nothing is stacked or converted at load. Each layer's stack is declared as
//! address space that reads as zeros ([`crate::files::zero_reservation`]) with an
//! [`ExpertSource`] ([`MappedFp4`]) that hands MUL_MAT_ID each expert's code and scale
//! tensors straight from the shards' maps ([`graph::ExpertLayout::Fp4Split`]); MUL_MAT_ID
//! converts the few rows of each work item to MXFP4 just before its kernels read them, with
//! the conversion loading uses, so the logits are the stacked copy's bit for bit. Memory
//! after load is the non-expert weights; the experts' pages are the OS's to keep or drop,
//! as with a GGUF's memory map.
//!
//! Checks: every expert's tensors are checked from the headers at open
//! ([`SafetensorsWeights::expert_recipes`], shared with the stacked copy and the cache); an
//! expert's scales are checked for the E8M0 NaN byte the first time it is used (reading
//! every scale at load would page in 1/17 of the experts), and an expert that fails gives
//! NaN rows and an error naming its tensor ([`InPlaceErrors`], reported by the session
//! after the step).
//!
//! [`Fp4Policy::InPlace`]: crate::weights::policy::Fp4Policy::InPlace

use super::paged::PagedStack;
use super::{unsupported, SafetensorsWeights};
use crate::files::Mapping;
use crate::weights::ForwardError;
use graph::{ExpertBytes, ExpertSource, Pinned};
use quant::DType;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// The first error met by experts used in place (an expert whose scales hold the NaN byte),
/// kept for the session to report after the step whose rows it made NaN.
#[derive(Debug, Default)]
pub struct InPlaceErrors(Mutex<Option<String>>);

impl InPlaceErrors {
    /// Takes the error, if any.
    pub fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
    fn set(&self, why: String) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(why);
    }
}

/// One tensor in a shard's map.
#[derive(Debug, Clone)]
struct Part {
    map: Arc<Mapping>,
    offset: usize,
    len: usize,
}

impl Part {
    fn bytes(&self) -> &[u8] {
        &self.map[self.offset..self.offset + self.len]
    }
    fn pinned(&self) -> (ExpertBytes, usize, usize) {
        (self.map.clone() as ExpertBytes, self.offset, self.len)
    }
}

/// Expert states in [`MappedFp4::state`].
const NEW: u8 = 0;
/// Requested once: its pages were asked for ahead.
const ASKED: u8 = 1;
/// Its scales checked and fit to use.
const CHECKED: u8 = 2;
/// Its scales hold the NaN byte.
const BAD: u8 = 3;

/// One layer's expert tensor used in place: each expert's codes and scales in the maps.
pub(super) struct MappedFp4 {
    /// The stack's GGUF name and expert 0's scale tensor's name pattern (for errors).
    gguf: String,
    /// Per expert: its codes, its scales, and the scale tensor's file and name.
    experts: Vec<(Part, Part, String)>,
    /// Per expert: [`NEW`], [`ASKED`], [`CHECKED`] or [`BAD`].
    state: Vec<AtomicU8>,
    errors: Arc<InPlaceErrors>,
}

impl std::fmt::Debug for MappedFp4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MappedFp4({}, {} experts)",
            self.gguf,
            self.experts.len()
        )
    }
}

impl ExpertSource for MappedFp4 {
    /// The first request of an expert asks the kernel for its pages in large reads, so a
    /// first use is not a run of 4 KiB faults.
    fn request(&self, experts: &[u32]) {
        for &e in experts {
            let Some(((codes, scales, _), st)) =
                self.experts.get(e as usize).zip(self.state.get(e as usize))
            else {
                continue;
            };
            if st
                .compare_exchange(NEW, ASKED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                codes.map.will_need(codes.offset, codes.len);
                scales.map.will_need(scales.offset, scales.len);
            }
        }
    }

    fn prefetch(&self, experts: &[u32]) {
        self.request(experts);
    }

    fn pin(&self, e: usize) -> Option<Pinned> {
        let (codes, scales, name) = self.experts.get(e)?;
        let st = self.state.get(e)?;
        match st.load(Ordering::Acquire) {
            CHECKED => {}
            BAD => return None,
            _ => {
                if let Some(i) = scales.bytes().iter().position(|&b| b == 0xFF) {
                    st.store(BAD, Ordering::Release);
                    self.errors.set(format!(
                        "{name} (expert {e} of '{}'): scale entry {i} is the E8M0 NaN byte 0xFF",
                        self.gguf
                    ));
                    return None;
                }
                st.store(CHECKED, Ordering::Release);
            }
        }
        Pinned::fp4_split(e, codes.pinned(), scales.pinned())
    }
}

impl SafetensorsWeights {
    /// The FP4 expert stack `layers.{layer}.ffn.experts.*.{w}.weight` used in place, as
    /// MXFP4 `{in, out, E}` whose experts come from their own tensors; `None` where the
    /// checkpoint has no such experts or they are not FP4 (those are stacked).
    pub(super) fn in_place_stack(
        &self,
        gguf: &str,
        layer: usize,
        w: &str,
    ) -> Result<Option<PagedStack>, ForwardError> {
        let Some(list) = self.expert_recipes(gguf, layer, w)? else {
            return Ok(None);
        };
        if list[0].0.dtype != DType::MXFP4 {
            return Ok(None);
        }
        let part = |t: &crate::safetensors::TensorInfo| Part {
            map: self.maps[t.shard].clone(),
            offset: t.file_offset as usize,
            len: t.byte_len() as usize,
        };
        let mut experts = Vec::with_capacity(list.len());
        for (_, tensors) in &list {
            let [codes, scales] = tensors[..] else {
                return Err(unsupported(
                    gguf,
                    &tensors[0].name,
                    "FP4 expert without its own scale tensor",
                ));
            };
            let shard = self.model.shards()[scales.shard].path().display();
            experts.push((
                part(codes),
                part(scales),
                format!("{shard}: '{}'", scales.name),
            ));
        }
        let mut ne = list[0].0.ne.clone();
        ne.push(list.len());
        let src = MappedFp4 {
            gguf: gguf.to_string(),
            state: (0..experts.len()).map(|_| AtomicU8::new(NEW)).collect(),
            experts,
            errors: self.in_place_errors.clone(),
        };
        Ok(Some(PagedStack {
            dtype: DType::MXFP4,
            ne,
            src: Arc::new(src),
        }))
    }

    /// The errors of the FP4 experts used in place (shared with each layer's source).
    pub fn in_place_errors(&self) -> Arc<InPlaceErrors> {
        self.in_place_errors.clone()
    }
}
