//! Weight providers for the forward graph: tensors of a GGUF file used **in place** from the
//! memory map (no copy), with llama.cpp's names and GGUF shapes.

use super::forward::{ForwardError, Weights};
use crate::gguf::GgufFile;
use graph::{Graph, TensorDesc, TensorId, WeightData};
use std::sync::Arc;

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
        GgufWeights { file, owners }
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
        Ok(Some(g.weight(name, desc, data)?))
    }
}
