//! The official DeepSeek-V4 safetensors checkpoint as a [`Weights`] provider: the forward
//! builder asks for llama.cpp's GGUF names (spec §3), this module finds the official tensor
//! (`blk.N.attn_q_a.weight` → `layers.N.attn.wq_a.weight`, …, see [`official_name`]) and
//! hands it to the graph in the GGUF layout.
//!
//! # Layout
//!
//! A PyTorch `[out, in]` row-major tensor is byte for byte the GGUF tensor `{in, out}` (the
//! shape is just reversed), so most tensors need no conversion at all.
//!
//! # What is used in place and what is converted
//!
//! * **Zero-copy** (a [`WeightData`] over the shard's read-only memory map, kept alive by an
//!   `Arc` exactly as [`crate::weights::GgufWeights`] does): every F32 tensor, every BF16/F16 tensor of
//!   rank ≥ 2 (embedding, LM head, router, compressor and indexer projections, and the dense
//!   projections of a BF16 checkpoint), and I32 hash-routing tables. A tensor whose data is not
//!   aligned to its element size in the file (possible only in a hand-made file; writers align
//!   them) is copied instead, because the kernels view f32/i32 rows as typed slices.
//! * **1-D BF16/F16 tensors** (the RMSNorm weights) become F32, as llama.cpp's converter does
//!   — the graph's norm takes an f32 weight. A few KB per layer.
//! * **I64 `tid2eid`** (the real checkpoint's type) becomes I32; every entry (also of an I32
//!   table) is checked to be an expert id in `0..n_expert`.
//! * **FP8 dense weights** (`….weight` F8_E4M3 + `….scale` F8_E8M0 or raw U8 E8M0 bytes,
//!   128×128 tiles, or a DeepSeek-V3-style f32 `….weight_scale_inv` / f32 `….scale`) follow
//!   the [`Fp8Policy`]: [`Fp8Policy::InPlace`] (default) uses the codes from the map with their
//!   tile scales (as f32) riding on the weight (see "Block-scaled weights" in
//!   `docs/design.md`); [`Fp8Policy::F32`] dequantizes them exactly with
//!   [`quant::fp8::dequant_fp8_blocked`] (4 bytes per weight); [`Fp8Policy::Q8_0`] then applies ggml's
//!   reference Q8_0 quantizer, the conversion llama.cpp's converter makes (≈1.06 bytes per
//!   weight, lossy ≈0.5% rms; a matrix whose input dimension is not a multiple of 32 stays
//!   F32).
//! * **Routed experts** — the official per-expert `layers.N.ffn.experts.E.{w1,w3,w2}.weight`
//!   are the GGUF stacks `blk.N.ffn_{gate,up,down}_exps.weight` `{in, out, E}` (w1 = gate,
//!   w3 = up, w2 = down). FP4 experts (I8 `[out, in/2]` two e2m1 codes per byte, low nibble =
//!   even column, + E8M0 `[out, in/32]` scales; also a safetensors `F4` tensor `[out, in]`
//!   with the same packing) are an MXFP4 stack under [`Fp4Policy::InPlace`] (default) used
//!   in place: each expert's tensors are read from the maps and MUL_MAT_ID converts a few
//!   rows at a time (`checkpoint_inplace.rs`). Otherwise (BF16/F16/F32 or FP8 experts,
//!   [`Fp4Policy::Mxfp4`] or [`Fp4Policy::F32`]) the experts are copied into one stack at load,
//!   FP4 repacked **losslessly** into MXFP4 blocks with [`quant::fp8::fp4_ds_to_mxfp4`] (the same
//!   conversion MUL_MAT_ID makes in place) or dequantized, FP8 per the [`Fp8Policy`]. With an
//!   expert cache they are read from disk when used (`checkpoint_paged.rs`).
//!
//! # Numerics
//!
//! MXFP4, Q8_0 and BF16 weights make the matmul kernels round the activations (to Q8_0, Q8_0
//! and BF16 respectively), as llama.cpp does. To compute everything in fp32, as the
//! transformers reference does, use [`StOptions::fp32`]: every matrix becomes F32 (BF16
//! upcast, FP4 dequantized; all exact), at 2–8× the memory.
//!
//! Errors name the GGUF tensor and the checkpoint tensor: a dtype this provider cannot use
//! ([`ForwardError::Unsupported`]), a shape that does not fit (scale grids, packed FP4
//! widths, experts of different shapes: [`ForwardError::Shape`]), or a scale / expert that is
//! absent ([`ForwardError::Missing`]).

#[path = "checkpoint_inplace.rs"]
mod inplace;
pub use inplace::InPlaceErrors;
#[path = "checkpoint_memory.rs"]
mod memory;
#[path = "checkpoint_paged.rs"]
mod paged;
#[path = "checkpoint_recipe.rs"]
mod recipe;

use super::hparams::{Hparams, HparamsError};
use super::tensors::{self, official_name, Official};
use crate::safetensors::{SafetensorsError, SafetensorsModel, StDtype, TensorDtype, TensorInfo};
use crate::weights::policy::{Fp4Policy, Fp8Policy, HalfPolicy, StOptions};
use crate::weights::{ForwardError, Weights};
use graph::{Graph, NodeKind, TensorDesc, TensorId, WeightData};
use quant::DType;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Errors while opening a checkpoint with [`SafetensorsWeights::open`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StOpenError {
    /// The safetensors files or index.
    #[error(transparent)]
    Safetensors(#[from] SafetensorsError),
    /// A file could not be read or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `config.json` is unusable.
    #[error(transparent)]
    Hparams(#[from] HparamsError),
    /// A tensor has no place in the model `config.json` describes.
    #[error("{}: tensor '{name}' {why}", path.display())]
    Misplaced {
        /// The shard holding it.
        path: PathBuf,
        /// The checkpoint tensor.
        name: String,
        /// Why it has no place.
        why: String,
    },
    /// A shard changed size between being validated and being mapped again.
    #[error("{}: file changed while being opened ({validated} bytes validated, {mapped} mapped)", path.display())]
    Changed {
        /// The shard.
        path: PathBuf,
        /// Length when validated.
        validated: u64,
        /// Length when mapped here.
        mapped: u64,
    },
}

/// What a GGUF name is in the official checkpoint (from the tensor table).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mapped {
    /// One tensor.
    Tensor(String),
    /// The stack of `layers.{layer}.ffn.experts.E.{w}.weight` over all experts E.
    Experts { layer: usize, w: &'static str },
}

fn map_name(gguf: &str) -> Option<Mapped> {
    let (t, layer) = tensors::parse(gguf)?;
    Some(match (t.official(), layer) {
        (Official::Name(n), None) => Mapped::Tensor(n.to_string()),
        (Official::Name(n), Some(l)) => Mapped::Tensor(format!("layers.{l}.{n}")),
        (Official::Experts(w), l) => Mapped::Experts {
            layer: l.unwrap_or(0),
            w,
        },
    })
}

/// An owned buffer, 8-byte aligned (the kernels view f32 / i32 rows as typed slices).
struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        Aligned {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }
    fn from_bytes(b: &[u8]) -> Aligned {
        let mut a = Aligned::zeroed(b.len());
        a.bytes_mut().copy_from_slice(b);
        a
    }
}

impl AsRef<[u8]> for Aligned {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

type Owner = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Where a decoded tensor's bytes are.
enum Data {
    /// In a shard's mapping, used in place.
    Mapped {
        shard: usize,
        offset: usize,
        len: usize,
    },
    /// Converted into an owned buffer.
    Owned(Owner),
    /// Routed experts read through the expert cache (see `checkpoint_paged.rs`).
    Paged(Arc<dyn graph::ExpertSource>),
}

/// A checkpoint tensor in the GGUF layout.
struct Decoded {
    dtype: DType,
    /// GGUF order.
    ne: Vec<usize>,
    data: Data,
    /// The tile scales of FP8 codes used in place.
    scales: Option<Arc<graph::BlockScales>>,
}

/// The tensors of an official DeepSeek-V4 checkpoint (single file, shards + index, or a
/// directory), registered lazily in the graph under their GGUF names. See the module docs.
pub struct SafetensorsWeights {
    model: SafetensorsModel,
    /// One read-only mapping per shard, shared with every zero-copy [`WeightData`].
    maps: Vec<Arc<crate::files::Mapping>>,
    n_expert: usize,
    opts: StOptions,
    /// Every tensor handed out so far (converted once, shared by all graphs).
    loaded: HashMap<String, (TensorDesc, WeightData)>,
    /// The GGUF names of every tensor the model has (for [`Self::converted_bytes`]).
    names: Vec<String>,
    /// Bytes of the conversions made so far.
    owned: u64,
    /// Expert stacks read through the expert cache, by GGUF name.
    paged: HashMap<String, paged::PagedStack>,
    /// The errors of FP4 experts used in place.
    in_place_errors: Arc<inplace::InPlaceErrors>,
}

impl std::fmt::Debug for SafetensorsWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsWeights")
            .field("path", &self.model.path())
            .field("tensors", &self.model.len())
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// `config.json` beside a checkpoint path (the directory itself, or the file's directory).
fn config_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("config.json")
    } else {
        path.parent().unwrap_or(Path::new(".")).join("config.json")
    }
}

fn unsupported(gguf: &str, off: &str, what: impl std::fmt::Display) -> ForwardError {
    ForwardError::Unsupported(format!("tensor '{gguf}' (checkpoint '{off}'): {what}"))
}

fn reversed(shape: &[u64]) -> Vec<usize> {
    if shape.is_empty() {
        return vec![1];
    }
    shape.iter().rev().map(|&d| d as usize).collect()
}

impl SafetensorsWeights {
    /// Open a checkpoint (a directory, a `model.safetensors.index.json` or a `.safetensors`
    /// file) with the default [`StOptions`], and read the `config.json` beside it.
    pub fn open(path: impl AsRef<Path>) -> Result<(SafetensorsWeights, Hparams), StOpenError> {
        Self::open_with(path, StOptions::default())
    }

    /// [`SafetensorsWeights::open`] with explicit conversion choices.
    pub fn open_with(
        path: impl AsRef<Path>,
        opts: StOptions,
    ) -> Result<(SafetensorsWeights, Hparams), StOpenError> {
        let path = path.as_ref();
        let model = SafetensorsModel::open(path)?;
        let cfg = config_path(path);
        let text = crate::files::read_text_capped(&cfg, crate::files::CONFIG_CAP, "config.json")
            .map_err(|source| StOpenError::Io {
                path: cfg.clone(),
                source,
            })?;
        let hp = Hparams::from_config_json(&text, &cfg.display().to_string())?;
        let w = Self::new(model, &hp, opts)?;
        Ok((w, hp))
    }

    /// Wrap an opened checkpoint; `hp` gives the expert count (for stacking and for checking
    /// `tid2eid`).
    pub fn new(
        model: SafetensorsModel,
        hp: &Hparams,
        opts: StOptions,
    ) -> Result<SafetensorsWeights, StOpenError> {
        // nothing goes unused silently: a layer past the last is an error (the `mtp.*`
        // next-token-prediction block is documented as not run)
        for sh in model.shards() {
            for t in sh.tensors() {
                let layer = t
                    .name
                    .strip_prefix("layers.")
                    .and_then(|r| r.split_once('.'))
                    .map(|(n, _)| n.parse::<usize>());
                if let Some(l) = layer {
                    let why = match l {
                        Ok(l) if l < hp.n_layer => continue,
                        Ok(l) => {
                            format!("is in layer {l}, but config.json has {} layers", hp.n_layer)
                        }
                        Err(_) => "has no layer number".into(),
                    };
                    return Err(StOpenError::Misplaced {
                        path: sh.path().to_path_buf(),
                        name: t.name.clone(),
                        why,
                    });
                }
            }
        }
        let mut maps = Vec::with_capacity(model.shards().len());
        for s in model.shards() {
            let path = s.path();
            let io = |source| StOpenError::Io {
                path: path.to_path_buf(),
                source,
            };
            let file = crate::files::open_regular(path).map_err(io)?;
            // a checkpoint must not be truncated or modified while mapped (see
            // `files::map_readonly`)
            let map = crate::files::map_readonly(&file, path).map_err(io)?;
            if map.len() as u64 != s.file_len() {
                return Err(StOpenError::Changed {
                    path: path.to_path_buf(),
                    validated: s.file_len(),
                    mapped: map.len() as u64,
                });
            }
            maps.push(Arc::new(map));
        }
        Ok(SafetensorsWeights {
            model,
            maps,
            n_expert: hp.n_expert,
            opts,
            loaded: HashMap::new(),
            names: tensors::all(hp).into_iter().map(|s| s.name).collect(),
            owned: 0,
            paged: HashMap::new(),
            in_place_errors: Arc::default(),
        })
    }

    /// Bytes of the conversions made so far (every tensor asked for: [`Self::converted_bytes`]).
    pub fn owned_bytes(&self) -> u64 {
        self.owned
    }

    /// The checkpoint.
    pub fn model(&self) -> &SafetensorsModel {
        &self.model
    }

    /// The conversion choices.
    pub fn options(&self) -> StOptions {
        self.opts
    }

    /// The read-only mapping of shard `i` (in [`SafetensorsModel::shards`] order): zero-copy
    /// weights point into it.
    pub fn mapped(&self, i: usize) -> &[u8] {
        &self.maps[i]
    }

    /// Whether `bytes` lie inside one of the shard mappings (i.e. are used in place).
    pub fn is_mapped(&self, bytes: &[u8]) -> bool {
        let (p, n) = (bytes.as_ptr() as usize, bytes.len());
        self.maps.iter().any(|m| {
            let b = m.as_ptr() as usize;
            p >= b && p + n <= b + m.len()
        })
    }

    /// The bytes of a tensor (validated at open to lie inside its shard).
    fn bytes(&self, t: &TensorInfo) -> &[u8] {
        let start = t.file_offset as usize;
        &self.maps[t.shard][start..start + t.byte_len() as usize]
    }

    fn known_dtype(gguf: &str, t: &TensorInfo) -> Result<StDtype, ForwardError> {
        match &t.dtype {
            TensorDtype::Known(d) => Ok(*d),
            TensorDtype::Unknown(s) => Err(unsupported(
                gguf,
                &t.name,
                format_args!("unknown safetensors dtype '{s}'"),
            )),
        }
    }

    /// In place when aligned to `align` bytes in the file, else an aligned copy.
    fn in_place(&self, t: &TensorInfo, dtype: DType, align: usize) -> Decoded {
        let ne = reversed(&t.shape);
        let data = if (t.file_offset as usize).is_multiple_of(align) {
            Data::Mapped {
                shard: t.shard,
                offset: t.file_offset as usize,
                len: t.byte_len() as usize,
            }
        } else {
            Data::Owned(Arc::new(Aligned::from_bytes(self.bytes(t))))
        };
        Decoded {
            dtype,
            ne,
            data,
            scales: None,
        }
    }

    /// Check a hash-routing table and return it as I32 (in place when it already is).
    fn tid2eid(&self, gguf: &str, t: &TensorInfo, dtype: StDtype) -> Result<Decoded, ForwardError> {
        let b = self.bytes(t);
        let ids: Vec<i64> = match dtype {
            StDtype::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            StDtype::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
            d => {
                return Err(unsupported(
                    gguf,
                    &t.name,
                    format_args!("dtype {d}, expected I32 or I64"),
                ))
            }
        };
        tensors::check_expert_ids(ids.iter().copied(), self.n_expert)
            .map_err(|why| unsupported(gguf, &t.name, why))?;
        if dtype == StDtype::I32 {
            return Ok(self.in_place(t, DType::I32, 4));
        }
        let v: Vec<i32> = ids.iter().map(|&e| e as i32).collect();
        Ok(Decoded {
            dtype: DType::I32,
            ne: reversed(&t.shape),
            data: Data::Owned(Arc::new(Aligned::from_bytes(bytemuck::cast_slice(&v)))),
            scales: None,
        })
    }

    /// A scale tensor beside `off` (`<base>.<suffix>` for the first suffix present).
    fn scale_of(&self, off: &str, suffixes: &[&str]) -> Option<&TensorInfo> {
        let base = off.strip_suffix(".weight").unwrap_or(off);
        suffixes
            .iter()
            .find_map(|s| self.model.tensor(&format!("{base}.{s}")))
    }

    fn check_scale_shape(gguf: &str, s: &TensorInfo, want: [usize; 2]) -> Result<(), ForwardError> {
        let got: Vec<usize> = s.shape.iter().map(|&d| d as usize).collect();
        if got != want {
            return Err(ForwardError::Shape {
                name: format!("{} (scale of '{gguf}')", s.name),
                got: reversed(&s.shape),
                want: vec![want[1], want[0]],
            });
        }
        Ok(())
    }

    /// A converted tensor (FP8, FP4, half-precision vectors or upcasts) in an owned buffer.
    fn converted(&self, gguf: &str, t: &TensorInfo) -> Result<Decoded, ForwardError> {
        let (r, parts) = self.recipe(gguf, t)?;
        let len = r.out_len().map_err(|e| unsupported(gguf, &t.name, e))?;
        let mut out = Aligned::zeroed(len);
        let bytes: Vec<&[u8]> = parts.iter().map(|p| self.bytes(p)).collect();
        r.convert(&bytes, out.bytes_mut())
            .map_err(|e| unsupported(gguf, &t.name, e))?;
        Ok(Decoded {
            dtype: r.dtype,
            ne: r.ne,
            data: Data::Owned(Arc::new(out)),
            scales: None,
        })
    }

    /// One checkpoint tensor in the GGUF layout.
    fn decode(&self, gguf: &str, t: &TensorInfo) -> Result<Decoded, ForwardError> {
        let dtype = Self::known_dtype(gguf, t)?;
        if t.shape.len() > 4 {
            return Err(unsupported(
                gguf,
                &t.name,
                format_args!("{} dimensions (at most 4)", t.shape.len()),
            ));
        }
        if gguf.ends_with("tid2eid.weight") {
            return self.tid2eid(gguf, t, dtype);
        }
        let vector = t.shape.len() <= 1;
        match dtype {
            StDtype::F32 => Ok(self.in_place(t, DType::F32, 4)),
            StDtype::F16 if !vector && self.opts.half == HalfPolicy::ZeroCopy => {
                Ok(self.in_place(t, DType::F16, 2))
            }
            StDtype::BF16 if !vector && self.opts.half == HalfPolicy::ZeroCopy => {
                Ok(self.in_place(t, DType::BF16, 2))
            }
            StDtype::F8_E4M3 if self.opts.fp8 == Fp8Policy::InPlace => self.fp8_in_place(gguf, t),
            _ => self.converted(gguf, t),
        }
    }

    /// The stacked routed experts `{in, out, E}` of one layer (the one copy): each expert
    /// converted by its recipe straight into its slice of the stack.
    fn experts(&self, gguf: &str, layer: usize, w: &str) -> Result<Option<Decoded>, ForwardError> {
        if let Some(p) = self.paged.get(gguf) {
            return Ok(Some(Decoded {
                dtype: p.dtype,
                ne: p.ne.clone(),
                data: Data::Paged(p.src.clone()),
                scales: None,
            }));
        }
        if self.opts.fp4 == Fp4Policy::InPlace {
            if let Some(p) = self.in_place_stack(gguf, layer, w)? {
                return Ok(Some(Decoded {
                    dtype: p.dtype,
                    ne: p.ne,
                    data: Data::Paged(p.src),
                    scales: None,
                }));
            }
        }
        let Some(list) = self.expert_recipes(gguf, layer, w)? else {
            return Ok(None);
        };
        let (first, t0) = (&list[0].0, list[0].1[0]);
        let per = first
            .out_len()
            .map_err(|e| unsupported(gguf, &t0.name, e))?;
        let e_n = list.len();
        let total = per
            .checked_mul(e_n)
            .ok_or_else(|| unsupported(gguf, &t0.name, "expert stack size overflows"))?;
        let mut stack = Aligned::zeroed(total);
        let dst = stack.bytes_mut();
        for (e, (r, tensors)) in list.iter().enumerate() {
            let bytes: Vec<&[u8]> = tensors.iter().map(|t| self.bytes(t)).collect();
            r.convert(&bytes, &mut dst[e * per..(e + 1) * per])
                .map_err(|why| unsupported(gguf, &tensors[0].name, why))?;
        }
        let mut ne = first.ne.clone();
        ne.push(e_n);
        Ok(Some(Decoded {
            dtype: first.dtype,
            ne,
            data: Data::Owned(Arc::new(stack)),
            scales: None,
        }))
    }
}

impl Weights for SafetensorsWeights {
    /// Registers the tensor in `g` under its GGUF name. Conversions are done once per provider
    /// and shared (by `Arc`) with every graph that uses the tensor, so one provider can serve
    /// several graphs (e.g. one per prompt length).
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(id) = g.find(name) {
            if matches!(g.node(id).kind, NodeKind::Weight(_)) {
                return Ok(Some(id));
            }
        }
        if let Some((desc, data)) = self.loaded.get(name) {
            return Ok(Some(g.weight(name, *desc, data.clone())?));
        }
        let Some(mapped) = map_name(name) else {
            return Ok(None);
        };
        let decoded = match mapped {
            Mapped::Tensor(off) => match self.model.tensor(&off) {
                None => return Ok(None),
                Some(t) => self.decode(name, t)?,
            },
            Mapped::Experts { layer, w } => match self.experts(name, layer, w)? {
                None => return Ok(None),
                Some(d) => d,
            },
        };
        let desc = TensorDesc::new(decoded.dtype, &decoded.ne)?;
        let scales = decoded.scales;
        let data = match decoded.data {
            Data::Mapped { shard, offset, len } => {
                WeightData::new(self.maps[shard].clone() as Owner, offset, len)
            }
            Data::Owned(o) => {
                let len = (*o).as_ref().len();
                self.owned += len as u64;
                WeightData::new(o, 0, len)
            }
            Data::Paged(src) => {
                let len = desc.nbytes();
                let zeros = crate::files::zero_reservation(len).map_err(|e| {
                    ForwardError::Unsupported(format!(
                        "'{name}': no address space for the paged expert stack: {e}"
                    ))
                })?;
                WeightData::new(Arc::new(zeros) as Owner, 0, len).map(|d| d.with_experts(src))
            }
        }
        .ok_or_else(|| ForwardError::Missing(format!("{name} (data outside its shard)")))?;
        let data = match scales {
            Some(s) => {
                self.owned += 4 * s.values.len() as u64;
                data.with_block_scales(s)
            }
            None => data,
        };
        if data.bytes().len() != desc.nbytes() {
            return Err(unsupported(
                name,
                &official_name(name).unwrap_or_default(),
                format_args!(
                    "{} bytes for {} {:?} (needs {})",
                    data.bytes().len(),
                    decoded.dtype,
                    decoded.ne,
                    desc.nbytes()
                ),
            ));
        }
        let id = g.weight(name, desc, data.clone())?;
        self.loaded.insert(name.to_string(), (desc, data));
        Ok(Some(id))
    }

    /// Nothing to forget: graph ids are looked up in the graph itself (by name), and the
    /// converted tensors are kept for the next graph.
    fn new_graph(&mut self) {}

    /// Names the checkpoint tensor and its shard, shapes in the checkpoint's order (the
    /// reverse of GGUF's).
    fn shape_error(&self, name: &str, got: &[usize], want: &[usize]) -> ForwardError {
        let rev = |d: &[usize]| d.iter().rev().copied().collect::<Vec<_>>();
        let described = match map_name(name) {
            Some(Mapped::Tensor(off)) => {
                let file = self
                    .model
                    .tensor(&off)
                    .and_then(|t| self.model.shards().get(t.shard))
                    .map(|s| s.path().display().to_string())
                    .unwrap_or_else(|| self.model.path().display().to_string());
                format!("'{off}' in {file} (fathom's '{name}')")
            }
            Some(Mapped::Experts { layer, w }) => format!(
                "'layers.{layer}.ffn.experts.*.{w}.weight', stacked, in {} (fathom's '{name}')",
                self.model.path().display()
            ),
            None => format!("'{name}'"),
        };
        ForwardError::Shape {
            name: described,
            got: rev(got),
            want: rev(want),
        }
    }
}
