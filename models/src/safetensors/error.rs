//! The errors of the safetensors readers: every variant names the file and, where there is
//! one, the tensor.

use super::StDtype;
use std::path::PathBuf;

/// Errors from reading safetensors files and sharded checkpoints. Every variant names the file
/// and, where there is one, the tensor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SafetensorsError {
    /// The file could not be opened, read or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is shorter than the 8-byte header length.
    #[error("{}: file is {len} bytes, too short for the 8-byte safetensors header length", path.display())]
    FileTooShort {
        /// The file.
        path: PathBuf,
        /// Its length in bytes.
        len: u64,
    },
    /// The header length exceeds [`super::MAX_HEADER_LEN`].
    #[error("{}: header length {header_len} exceeds the {max}-byte limit", path.display())]
    HeaderTooLarge {
        /// The file.
        path: PathBuf,
        /// The declared header length.
        header_len: u64,
        /// The limit.
        max: u64,
    },
    /// The header length points past the end of the file.
    #[error("{}: header length {header_len} runs past the end of the file ({file_len} bytes)", path.display())]
    HeaderPastEof {
        /// The file.
        path: PathBuf,
        /// The declared header length.
        header_len: u64,
        /// The file length.
        file_len: u64,
    },
    /// The header is not valid UTF-8 JSON.
    #[error("{}: header is not valid JSON: {message}", path.display())]
    HeaderJson {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The header is valid JSON but not an object.
    #[error("{}: header is JSON but not an object", path.display())]
    HeaderNotObject {
        /// The file.
        path: PathBuf,
    },
    /// `__metadata__` is not a string→string map.
    #[error("{}: __metadata__ {message}", path.display())]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A tensor's header entry is malformed (not an object, missing or mistyped fields).
    #[error("{}: tensor `{tensor}`: {message}", path.display())]
    BadTensorEntry {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// The same tensor name appears twice in one header.
    #[error("{}: tensor `{tensor}` appears twice in the header", path.display())]
    DuplicateTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
    },
    /// `data_offsets` has `begin > end`.
    #[error("{}: tensor `{tensor}`: data_offsets [{begin}, {end}] has begin > end", path.display())]
    InvalidOffsets {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Declared begin.
        begin: u64,
        /// Declared end.
        end: u64,
    },
    /// `data_offsets` reaches past the end of the data buffer.
    #[error("{}: tensor `{tensor}`: data_offsets [{begin}, {end}] out of range of the {data_len}-byte data buffer", path.display())]
    OffsetsOutOfRange {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Declared begin.
        begin: u64,
        /// Declared end.
        end: u64,
        /// Length of the data buffer (file length − 8 − header length).
        data_len: u64,
    },
    /// The byte length of `data_offsets` does not match `shape × dtype size`.
    #[error("{}: tensor `{tensor}`: {dtype} {shape:?} needs {} bytes but data_offsets span {actual}",
        path.display(), expected.map_or_else(|| "more than 2^64 bits of".to_string(), |e| e.to_string()))]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: StDtype,
        /// Its shape.
        shape: Vec<u64>,
        /// Bytes the shape needs (`None`: overflow, or not a whole number of bytes).
        expected: Option<u64>,
        /// Bytes `data_offsets` spans.
        actual: u64,
    },
    /// Two tensors' byte ranges overlap.
    #[error("{}: tensors `{tensor}` and `{other}` overlap in the data buffer", path.display())]
    Overlap {
        /// The file.
        path: PathBuf,
        /// One tensor.
        tensor: String,
        /// The other.
        other: String,
    },
    /// The tensor's dtype is not one fathom knows; its bytes cannot be interpreted.
    #[error("{}: tensor `{tensor}` has unsupported dtype `{dtype}`", path.display())]
    UnsupportedDtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The dtype string from the header.
        dtype: String,
    },
    /// No tensor of that name.
    #[error("{}: no tensor named `{tensor}`", path.display())]
    TensorNotFound {
        /// The file, index or directory.
        path: PathBuf,
        /// The tensor.
        tensor: String,
    },
    /// The index file is malformed.
    #[error("{}: bad safetensors index: {message}", path.display())]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The index names a shard file that does not exist.
    #[error("{}: shard `{shard}` (holding `{tensor}`) does not exist", index.display())]
    MissingShard {
        /// The index file.
        index: PathBuf,
        /// The shard file name as written in the index.
        shard: String,
        /// The first tensor the index puts in it.
        tensor: String,
    },
    /// A tensor the index puts in a shard is not in that shard.
    #[error("{}: tensor `{tensor}` is listed in the index but absent from shard {}", index.display(), shard.display())]
    TensorMissingFromShard {
        /// The index file.
        index: PathBuf,
        /// The tensor.
        tensor: String,
        /// The shard.
        shard: PathBuf,
    },
    /// A tensor appears in two shards (or twice in the index with different shards).
    #[error("tensor `{tensor}` appears in two shards: {} and {}", first.display(), second.display())]
    TensorInTwoShards {
        /// The tensor.
        tensor: String,
        /// One shard.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// A directory holds neither an index nor any `.safetensors` file.
    #[error("{}: no model.safetensors.index.json or .safetensors file in this directory", path.display())]
    NoCheckpoint {
        /// The directory.
        path: PathBuf,
    },
}

/// Result alias for this module.
pub type Result<T, E = SafetensorsError> = std::result::Result<T, E>;
