//! A checkpoint: one safetensors file, or the shards an index names, with one tensor index
//! over all of them.

use super::file::{io_err, Entries};
use super::{Result, SafetensorsError, SafetensorsFile, TensorInfo, INDEX_FILE_NAME};
use std::collections::HashMap;
use std::fmt;

use std::path::{Component, Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The parts of an index file fathom reads; `weight_map` keeps order and duplicated keys.
struct IndexJson {
    metadata: Option<Value>,
    weight_map: Option<Entries>,
}

impl<'de> Deserialize<'de> for IndexJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IndexJson;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an index object with a `weight_map` object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<IndexJson, A::Error> {
                let mut out = IndexJson {
                    metadata: None,
                    weight_map: None,
                };
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "metadata" => out.metadata = Some(m.next_value()?),
                        "weight_map" => {
                            if out.weight_map.is_some() {
                                return Err(serde::de::Error::custom("`weight_map` appears twice"));
                            }
                            out.weight_map = Some(m.next_value().map_err(|e: A::Error| {
                                serde::de::Error::custom(format!("`weight_map`: {e}"))
                            })?);
                        }
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// A checkpoint: one safetensors file, or several shards with one tensor index over all.
#[derive(Debug)]
pub struct SafetensorsModel {
    path: PathBuf,
    index_path: Option<PathBuf>,
    index_metadata: Option<Value>,
    shards: Vec<SafetensorsFile>,
    /// (shard, index within the shard), ordered by shard then offset.
    order: Vec<(usize, usize)>,
    by_name: HashMap<String, usize>,
    warnings: Vec<String>,
}

/// Is this file name a safetensors index (`*.safetensors.index.json` or any `.json`)?
fn is_index_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "json")
}

impl SafetensorsModel {
    /// Open a checkpoint given a `.safetensors` file, an index `.json`, or a directory holding
    /// `model.safetensors.index.json` (or another single `*.safetensors.index.json`), else its
    /// `.safetensors` files (one, or several taken as shards of one model, in name order).
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsModel> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(io_err(path))?;
        if meta.is_dir() {
            return Self::open_dir(path);
        }
        if is_index_name(path) {
            return Self::open_index(path);
        }
        Self::from_files(path.to_path_buf(), None, None, &[path.to_path_buf()], None)
    }

    fn open_dir(dir: &Path) -> Result<SafetensorsModel> {
        let index = dir.join(INDEX_FILE_NAME);
        if index.exists() {
            return Self::open_index(&index);
        }
        let mut indexes = Vec::new();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let p = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let wanted =
                name.ends_with(".safetensors.index.json") || name.ends_with(".safetensors");
            if !wanted {
                continue;
            }
            // a checkpoint file that is not a regular file is an error, not a file to skip
            if let Err(e) = crate::files::open_regular(&p) {
                return Err(io_err(&p)(e));
            }
            if name.ends_with(".safetensors.index.json") {
                indexes.push(p);
            } else if name.ends_with(".safetensors") {
                files.push(p);
            }
        }
        if indexes.len() == 1 {
            return Self::open_index(&indexes[0]);
        }
        if files.is_empty() {
            return Err(SafetensorsError::NoCheckpoint {
                path: dir.to_path_buf(),
            });
        }
        files.sort();
        Self::from_files(dir.to_path_buf(), None, None, &files, None)
    }

    /// Open a sharded checkpoint from its index file.
    pub fn open_index(index: impl AsRef<Path>) -> Result<SafetensorsModel> {
        let index = index.as_ref();
        let text =
            crate::files::read_capped(index, crate::files::LARGE_JSON_CAP, "safetensors index")
                .map_err(io_err(index))?;
        Self::from_index_bytes(index, &text)
    }

    /// [`SafetensorsModel::open_index`] of the index's bytes `text`, read from `index` (its
    /// shards are looked up beside it).
    pub fn from_index_bytes(index: &Path, text: &[u8]) -> Result<SafetensorsModel> {
        let bad = |message: String| SafetensorsError::BadIndex {
            path: index.to_path_buf(),
            message,
        };
        let first = text.iter().find(|b| !b" \t\r\n".contains(b));
        if first != Some(&b'{') {
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
                    Ok(_) => bad("not a JSON object".into()),
                    Err(e) => bad(format!("not valid JSON: {e}")),
                },
            );
        }
        let parsed: IndexJson = serde_json::from_slice(text).map_err(|e| bad(format!("{e}")))?;
        let metadata = parsed.metadata;
        let weight_map = parsed
            .weight_map
            .ok_or_else(|| bad("missing `weight_map`".into()))?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut shard_names: Vec<String> = Vec::new();
        let mut wanted: Vec<(String, usize)> = Vec::with_capacity(weight_map.0.len());
        let mut first_tensor_of: Vec<String> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut shard_index: HashMap<String, usize> = HashMap::new();
        for (tensor, shard) in weight_map.0 {
            let Value::String(shard) = shard else {
                return Err(bad(format!("`weight_map[\"{tensor}\"]` is not a string")));
            };
            let rel = Path::new(&shard);
            if shard.is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
                return Err(bad(format!(
                    "shard name `{shard}` for `{tensor}` is not a relative path inside the checkpoint"
                )));
            }
            let si = match shard_index.get(&shard) {
                Some(&i) => i,
                None => {
                    shard_names.push(shard.clone());
                    first_tensor_of.push(tensor.clone());
                    shard_index.insert(shard.clone(), shard_names.len() - 1);
                    shard_names.len() - 1
                }
            };
            if let Some(&prev) = seen.get(&tensor) {
                if prev != si {
                    return Err(SafetensorsError::TensorInTwoShards {
                        tensor,
                        first: dir.join(&shard_names[prev]),
                        second: dir.join(&shard_names[si]),
                    });
                }
                continue;
            }
            seen.insert(tensor.clone(), si);
            wanted.push((tensor, si));
        }
        let mut paths = Vec::with_capacity(shard_names.len());
        for (i, s) in shard_names.iter().enumerate() {
            let p = dir.join(s);
            // absent: named with its tensor; present but not a regular file: opening it says so
            if !p.exists() {
                return Err(SafetensorsError::MissingShard {
                    index: index.to_path_buf(),
                    shard: s.clone(),
                    tensor: first_tensor_of[i].clone(),
                });
            }
            paths.push(p);
        }
        Self::from_files(
            index.to_path_buf(),
            Some(index.to_path_buf()),
            metadata,
            &paths,
            Some(&wanted),
        )
    }

    fn from_files(
        path: PathBuf,
        index_path: Option<PathBuf>,
        index_metadata: Option<Value>,
        paths: &[PathBuf],
        wanted: Option<&[(String, usize)]>,
    ) -> Result<SafetensorsModel> {
        let mut shards = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            shards.push(SafetensorsFile::open_shard(p, i)?);
        }
        let mut order: Vec<(usize, usize)> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (si, s) in shards.iter().enumerate() {
            for (ti, t) in s.tensors.iter().enumerate() {
                if let Some(&prev) = by_name.get(&t.name) {
                    let (ps, _) = order[prev];
                    return Err(SafetensorsError::TensorInTwoShards {
                        tensor: t.name.clone(),
                        first: shards[ps].path.clone(),
                        second: s.path.clone(),
                    });
                }
                by_name.insert(t.name.clone(), order.len());
                order.push((si, ti));
            }
        }
        let mut warnings = Vec::new();
        if let (Some(wanted), Some(index)) = (wanted, &index_path) {
            for (name, si) in wanted {
                if !shards[*si].by_name.contains_key(name) {
                    return Err(SafetensorsError::TensorMissingFromShard {
                        index: index.clone(),
                        tensor: name.clone(),
                        shard: shards[*si].path.clone(),
                    });
                }
            }
            if order.len() > wanted.len() {
                warnings.push(format!(
                    "{} tensors in the shards are not listed in the index",
                    order.len() - wanted.len()
                ));
            }
        }
        Ok(SafetensorsModel {
            path,
            index_path,
            index_metadata,
            shards,
            order,
            by_name,
            warnings,
        })
    }

    /// The path given to [`SafetensorsModel::open`] (or the index path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index file, for a sharded checkpoint opened through one.
    pub fn index_path(&self) -> Option<&Path> {
        self.index_path.as_deref()
    }

    /// The index's `"metadata"` value (e.g. `{"total_size": …}`), if any.
    pub fn index_metadata(&self) -> Option<&Value> {
        self.index_metadata.as_ref()
    }

    /// The shard files, in index order of first appearance (or name order for a directory).
    pub fn shards(&self) -> &[SafetensorsFile] {
        &self.shards
    }

    /// The first shard's `__metadata__` (for a lone file: its metadata).
    pub fn metadata(&self) -> &[(String, String)] {
        self.shards.first().map_or(&[], |s| s.metadata())
    }

    /// Number of tensors over all shards.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the checkpoint has no tensors.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// All tensors, ordered by shard then position in the shard.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = &TensorInfo> + '_ {
        self.order.iter().map(|&(s, t)| &self.shards[s].tensors[t])
    }

    /// Look a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| {
            let (s, t) = self.order[i];
            &self.shards[s].tensors[t]
        })
    }

    /// The tensor's bytes, a slice of its shard's mapping (no copy).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor(name)
            .ok_or_else(|| SafetensorsError::TensorNotFound {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        self.shards[t.shard].data_of(t)
    }

    /// Non-fatal findings of the checkpoint and of every shard (prefixed by the shard path).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        for s in &self.shards {
            w.extend(
                s.warnings
                    .iter()
                    .map(|m| format!("{}: {m}", s.path.display())),
            );
        }
        w
    }
}
