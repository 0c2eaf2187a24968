//! How much memory a checkpoint's conversions will own ([`SafetensorsWeights::converted_bytes`]),
//! from the tensor headers alone, before anything is converted: so that a command can refuse a
//! load that would not fit (with the figures) instead of being killed halfway through it.
//!
//! The rules are `decode`'s and `experts`' (which tensors are used in
//! place from the maps and what each conversion makes); the test
//! `converted_bytes_are_what_loading_owns` checks the two against each other.

use super::{map_name, tensors, Mapped, SafetensorsWeights};
use crate::model::WeightBytes;
use crate::safetensors::{StDtype, TensorDtype, TensorInfo};
use crate::weights::policy::{Fp4Policy, Fp8Policy, HalfPolicy, StOptions};
use tensors::Role;

impl SafetensorsWeights {
    /// Bytes of memory this provider's conversions own once every tensor of the model has
    /// been asked for (FP8 expansions, the stacked experts, 1-D half-precision vectors as
    /// F32, I64 id tables as I32); everything else is used in place from the shards' maps.
    pub fn converted_bytes(&self) -> u64 {
        self.converted_bytes_with(&self.opts)
    }

    /// [`Self::converted_bytes`] under other conversion choices (for messages: what
    /// `--st-weights q8_0` would take).
    pub fn converted_bytes_with(&self, opts: &StOptions) -> u64 {
        self.names
            .iter()
            .map(|gguf| match map_name(gguf) {
                Some(Mapped::Tensor(off)) => self
                    .model
                    .tensor(&off)
                    .map_or(0, |t| owned(gguf, t, opts).unwrap_or(0)),
                // paged experts live in the expert cache's budget
                Some(Mapped::Experts { .. }) if self.paged.contains_key(gguf) => 0,
                Some(Mapped::Experts { layer, w }) => {
                    let first = format!("layers.{layer}.ffn.experts.0.{w}.weight");
                    self.model.tensor(&first).map_or(0, |t| {
                        decoded_as(gguf, t, opts, true).map_or(0, |(_, owned)| owned)
                            * self.n_expert as u64
                    })
                }
                None => 0,
            })
            .sum()
    }
}

/// Bytes owned by the conversion of one (non-expert) tensor: its decoded size if it is
/// converted, 0 if it is used in place (FP8 in place: its f32 tile scales).
fn owned(gguf: &str, t: &TensorInfo, opts: &StOptions) -> Option<u64> {
    decoded(gguf, t, opts).map(|(_, owned)| owned)
}

/// Bytes of one tensor as the graph uses it, and the bytes its conversion owns (0 for one
/// used in place from the map) (`None`: a dtype or shape loading refuses; it is reported
/// then).
fn decoded(gguf: &str, t: &TensorInfo, opts: &StOptions) -> Option<(u64, u64)> {
    decoded_as(gguf, t, opts, false)
}

/// [`decoded`] for one matrix of an expert stack (`stacked`: FP8 is converted, never used
/// in place, and the stack is a copy; FP4 under [`Fp4Policy::InPlace`] is not stacked).
fn decoded_as(gguf: &str, t: &TensorInfo, opts: &StOptions, stacked: bool) -> Option<(u64, u64)> {
    let TensorDtype::Known(dtype) = t.dtype else {
        return None;
    };
    let n: u64 = t.shape.iter().product();
    let converted = |b: u64| (b, b);
    let in_place = |b: u64| (b, 0);
    if gguf.ends_with("tid2eid.weight") {
        return Some(if dtype == StDtype::I32 {
            in_place(4 * n)
        } else {
            converted(4 * n)
        });
    }
    let vector = t.shape.len() <= 1;
    let fp4 = matches!(dtype, StDtype::I8 | StDtype::U8 | StDtype::F4);
    let (bytes, owned) = match dtype {
        StDtype::F32 => in_place(4 * n),
        StDtype::F16 | StDtype::BF16 if vector || opts.half == HalfPolicy::F32 => converted(4 * n),
        StDtype::F16 | StDtype::BF16 => in_place(2 * n),
        StDtype::F8_E4M3 => {
            let k = *t.shape.last()?;
            match opts.fp8 {
                Fp8Policy::Q8_0 if k % 32 == 0 => converted(n / 32 * 34),
                // the codes from the map; only their tile scales are owned, as f32
                Fp8Policy::InPlace if !stacked => {
                    let tiles: u64 = t.shape.iter().map(|&d| d.div_ceil(128)).product();
                    (n, 4 * tiles)
                }
                _ => converted(4 * n),
            }
        }
        StDtype::I8 | StDtype::U8 | StDtype::F4 => {
            // packed bytes hold two values each (F4: one per element)
            let values = if dtype == StDtype::F4 { n } else { 2 * n };
            match opts.fp4 {
                // an expert stack's FP4 from the maps (see `checkpoint_inplace.rs`)
                Fp4Policy::InPlace if stacked => in_place(values / 32 * 17),
                Fp4Policy::Mxfp4 | Fp4Policy::InPlace => converted(values / 32 * 17),
                Fp4Policy::F32 => converted(4 * values),
            }
        }
        _ => return None,
    };
    // a stack is a copy of its experts, except FP4 ones used in place
    Some(if stacked && !(fp4 && opts.fp4 == Fp4Policy::InPlace) {
        (bytes, bytes)
    } else {
        (bytes, owned)
    })
}

impl SafetensorsWeights {
    /// Every weight's bytes as the graph uses them (in place, converted, or paged at their
    /// converted size): in all, and per decode token (`n_used` of each expert stack's
    /// experts, one row of the token embedding). A checkpoint's bytes on disk differ (FP4
    /// nibbles and scales apart, FP8 before its expansion); these are what memory holds.
    pub fn weight_bytes(&self, n_used: usize) -> WeightBytes {
        let e = self.n_expert.max(1) as u64;
        let mut b = WeightBytes {
            total: 0,
            per_token: 0,
            per_token_loaded: 0,
        };
        for gguf in &self.names {
            let role = tensors::parse(gguf).map(|p| p.0.role());
            let bytes = match map_name(gguf) {
                Some(Mapped::Tensor(off)) => self.model.tensor(&off).map_or(0, |t| {
                    let rows = t.shape.first().copied().unwrap_or(1).max(1);
                    let n = decoded(gguf, t, &self.opts).map_or(0, |(b, _)| b);
                    if role == Some(Role::Embedding) {
                        b.per_token += n / rows;
                    } else {
                        b.per_token += n;
                    }
                    n
                }),
                Some(Mapped::Experts { layer, w }) => {
                    let first = format!("layers.{layer}.ffn.experts.0.{w}.weight");
                    let one = self.model.tensor(&first).map_or(0, |t| {
                        decoded_as(gguf, t, &self.opts, true).map_or(0, |(b, _)| b)
                    });
                    b.per_token += one * n_used as u64;
                    one * e
                }
                None => 0,
            };
            b.total += bytes;
        }
        b.per_token_loaded = b.per_token;
        b
    }
}
