//! Weight providers for the forward graph: tensors of a GGUF file used **in place** from the
//! memory map (no copy), with llama.cpp's names and GGUF shapes — or, where [`Repack`] asks
//! for it, converted once at load into one of fathom's faster layouts (IQ1_S → IQ1_S_X,
//! IQ2_XXS → IQ2_XXS_X, IQ1_M → IQ1_M_X, Q2_0 → Q2_0_X, see `quant::codec::repack`), held in
//! memory beside the map.

use super::{ForwardError, Weights};
use crate::gguf::GgufFile;
use graph::{ExpertSource, Graph, TensorDesc, TensorId, WeightData};
use quant::simd::CpuLevel;
use quant::DType;
use std::collections::HashMap;
use std::sync::Arc;

/// Which tensor types [`GgufWeights`] converts at load into a repacked layout. Off by
/// default: a repacked tensor is a copy in anonymous memory (IQ1_S_X: 1.4× the IQ1_S bytes,
/// IQ2_XXS_X 1.55× the IQ2_XXS bytes, IQ1_M_X 1.36× the IQ1_M bytes, Q2_0_X the same bytes)
/// instead of pages of the file's map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repack {
    /// IQ1_S → IQ1_S_X (lossless; its decode matvec needs no grid lookups).
    pub iq1_s: bool,
    /// IQ2_XXS → IQ2_XXS_X (lossless; no grid or sign-table lookups).
    pub iq2_xxs: bool,
    /// IQ1_M → IQ1_M_X (lossless; no grid lookups).
    pub iq1_m: bool,
    /// Q2_0 → Q2_0_X (lossless, the same size; its decode kernel needs no byte shuffles),
    /// for tensors whose rows are whole multiples of 512 elements (every V4-Flash Q2_0
    /// tensor; the others stay Q2_0).
    pub q2_0: bool,
}

impl Repack {
    /// Parses a comma-separated list of source types (`iq1_s`, `iq2_xxs`, `iq1_m`, `q2_0`,
    /// `all` for the four), or `none`.
    pub fn parse(s: &str) -> Result<Repack, String> {
        let mut r = Repack::default();
        for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match t.to_ascii_lowercase().as_str() {
                "iq1_s" => r.iq1_s = true,
                "iq2_xxs" => r.iq2_xxs = true,
                "iq1_m" => r.iq1_m = true,
                "q2_0" => r.q2_0 = true,
                "all" => (r.iq1_s, r.iq2_xxs, r.iq1_m, r.q2_0) = (true, true, true, true),
                "none" => {}
                other => {
                    return Err(format!(
                        "cannot repack '{other}' (known: iq1_s, iq2_xxs, iq1_m, q2_0, all, none)"
                    ))
                }
            }
        }
        Ok(r)
    }

    /// The layout tensors of type `t` are converted to, if any: only where the layout's
    /// kernels at `level` do every job `t`'s do (`quant::simd::table::covers`: on the scalar
    /// reference, or without a prompt-chunk kernel, the repacked form would be slower). A
    /// tensor is converted only if its rows also fit the layout's blocks
    /// ([`Repack::target_for`]).
    pub fn target(&self, t: DType, level: CpuLevel) -> Option<DType> {
        let has_kernel = |x: DType| quant::simd::table::covers(x, t, level);
        match t {
            DType::IQ1_S if self.iq1_s && has_kernel(DType::IQ1_S_X) => Some(DType::IQ1_S_X),
            DType::IQ2_XXS if self.iq2_xxs && has_kernel(DType::IQ2_XXS_X) => {
                Some(DType::IQ2_XXS_X)
            }
            DType::IQ1_M if self.iq1_m && has_kernel(DType::IQ1_M_X) => Some(DType::IQ1_M_X),
            DType::Q2_0 if self.q2_0 && has_kernel(DType::Q2_0_X) => Some(DType::Q2_0_X),
            _ => None,
        }
    }

    /// The types this asks to repack that [`Repack::target`] leaves as stored at `level`
    /// (their repacked kernels there do not cover the stored type's), in flag order.
    pub fn left_as_stored(&self, level: CpuLevel) -> Vec<DType> {
        [
            (self.iq1_s, DType::IQ1_S),
            (self.iq2_xxs, DType::IQ2_XXS),
            (self.iq1_m, DType::IQ1_M),
            (self.q2_0, DType::Q2_0),
        ]
        .into_iter()
        .filter(|&(asked, t)| asked && self.target(t, level).is_none())
        .map(|(_, t)| t)
        .collect()
    }

    /// The layout a tensor of type `t` with rows of `row` elements is converted to, if any:
    /// [`Repack::target`] where `row` is a whole number of the layout's blocks.
    pub fn target_for(&self, t: DType, row: u64, level: CpuLevel) -> Option<DType> {
        self.target(t, level)
            .filter(|x| row.is_multiple_of(x.block_size() as u64))
    }

    /// Bytes a tensor of `t`, rows of `row` elements and `n_bytes` file bytes occupies once
    /// loaded.
    pub fn loaded_bytes(&self, t: DType, row: u64, n_bytes: u64, level: CpuLevel) -> u64 {
        match self.target_for(t, row, level) {
            Some(x) => {
                let elements = n_bytes / t.type_size() as u64 * t.block_size() as u64;
                elements / x.block_size() as u64 * x.type_size() as u64
            }
            None => n_bytes,
        }
    }
}

/// Converts `src` (whole blocks of `from`) into `to`'s layout, on all cores. The copy is
/// allocated fallibly: a machine without room for it gets an error, not an abort.
fn repack(from: DType, to: DType, src: &[u8]) -> Result<Vec<u8>, String> {
    let convert = match quant::codec::repack::repack_source(to) {
        Some((source, convert)) if source == from => convert,
        _ => return Err(format!("no repack from {from} to {to}")),
    };
    // one unit: a block of `to` and the source blocks it is made from
    let per_unit = to.block_size() / from.block_size();
    let (bs, bd) = (from.type_size() * per_unit, to.type_size());
    if per_unit == 0 || !src.len().is_multiple_of(bs) {
        return Err(format!("not whole {to} blocks"));
    }
    let nb = src.len() / bs;
    let len = nb
        .checked_mul(bd)
        .ok_or_else(|| "size overflows".to_string())?;
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| format!("out of memory for {len} bytes (run without --repack)"))?;
    out.resize(len, 0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = nb.div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        for (s, d) in src.chunks(per * bs).zip(out.chunks_mut(per * bd)) {
            sc.spawn(move || convert(s, d));
        }
    });
    Ok(out)
}

/// Keeps a GGUF file alive and exposes one shard's bytes (the owner of a [`WeightData`]).
struct ShardBytes {
    file: Arc<GgufFile>,
    shard: usize,
}

impl AsRef<[u8]> for ShardBytes {
    fn as_ref(&self) -> &[u8] {
        self.file.shards()[self.shard].bytes()
    }
}

/// Weights of a (possibly split) GGUF file, registered lazily in the graph.
pub struct GgufWeights {
    file: Arc<GgufFile>,
    owners: Vec<Arc<dyn AsRef<[u8]> + Send + Sync>>,
    repack: Repack,
    /// The CPU level whose kernels decide the repacks.
    level: CpuLevel,
    /// Repacked tensors by name, converted once and shared by every graph.
    repacked: HashMap<String, (DType, WeightData)>,
    /// Expert tensors whose experts MUL_MAT_ID reads through an expert cache, by name.
    paged: HashMap<String, Arc<dyn ExpertSource>>,
}

impl GgufWeights {
    /// Wrap an opened file.
    pub fn new(file: Arc<GgufFile>) -> GgufWeights {
        let owners = (0..file.shards().len())
            .map(|shard| {
                Arc::new(ShardBytes {
                    file: file.clone(),
                    shard,
                }) as Arc<dyn AsRef<[u8]> + Send + Sync>
            })
            .collect();
        GgufWeights {
            file,
            owners,
            repack: Repack::default(),
            level: CpuLevel::detect(),
            repacked: HashMap::new(),
            paged: HashMap::new(),
        }
    }

    /// Wrap an opened file, converting the tensor types `repack` names as they are first
    /// used (where this CPU runs the layout's kernels).
    pub fn with_repack(file: Arc<GgufFile>, repack: Repack) -> GgufWeights {
        GgufWeights::with_repack_at(file, repack, CpuLevel::detect())
    }

    /// [`GgufWeights::with_repack`] for the kernels of CPU level `level`.
    pub fn with_repack_at(file: Arc<GgufFile>, repack: Repack, level: CpuLevel) -> GgufWeights {
        GgufWeights {
            repack,
            level,
            ..GgufWeights::new(file)
        }
    }

    /// Routes the experts of the tensors named in `paged` through their sources (an
    /// [`super::ExpertCache`]); those tensors are not repacked.
    pub fn with_paged_experts(mut self, paged: super::PagedSources) -> GgufWeights {
        self.paged = paged;
        self
    }

    /// The repacks asked for, and the level they are decided at.
    pub fn repack(&self) -> (Repack, CpuLevel) {
        (self.repack, self.level)
    }
    /// The file.
    pub fn file(&self) -> &GgufFile {
        &self.file
    }
}

impl Weights for GgufWeights {
    /// Registers `name` in `g` once; the same provider can serve several graphs (a weight
    /// already in `g` is found by name, never by an id from another graph).
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(id) = g.find(name) {
            if matches!(g.node(id).kind, graph::NodeKind::Weight(_)) {
                return Ok(Some(id));
            }
        }
        let Some(info) = self.file.tensor(name) else {
            return Ok(None);
        };
        let ne: Vec<usize> = info.ne.iter().map(|&x| x as usize).collect();
        let desc = TensorDesc::new(info.dtype, &ne)?;
        let shard = &self.file.shards()[info.shard];
        let off = (shard.data_offset() + info.offset) as usize;
        let data = WeightData::new(self.owners[info.shard].clone(), off, info.n_bytes as usize)
            .ok_or_else(|| ForwardError::Missing(format!("{name} (data outside its shard)")))?;
        // paged experts stay in the file's layout (the cache reads them as they are)
        if let Some(src) = self.paged.get(name) {
            return Ok(Some(g.weight(
                name,
                desc,
                data.with_experts(src.clone()),
            )?));
        }
        let Some(to) = self.repack.target_for(info.dtype, info.ne[0], self.level) else {
            return Ok(Some(g.weight(name, desc, data)?));
        };
        let (dtype, data) = match self.repacked.get(name) {
            Some(done) => done.clone(),
            None => {
                let bytes = repack(info.dtype, to, data.bytes()).map_err(|reason| {
                    ForwardError::Repack {
                        name: name.to_string(),
                        to,
                        reason,
                    }
                })?;
                let done = (to, WeightData::from_vec(bytes));
                self.repacked.insert(name.to_string(), done.clone());
                done
            }
        };
        let desc = TensorDesc::new(dtype, &ne)?;
        Ok(Some(g.weight(name, desc, data)?))
    }
}
