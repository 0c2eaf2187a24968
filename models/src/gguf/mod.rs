//! GGUF reading and writing, zero-copy over a memory map.
//!
//! * [`GgufFile::open`] maps a file read-only, validates all of it (header, every metadata
//!   value, every tensor info, every tensor's byte range) and then hands out `&[u8]` tensor
//!   views borrowed from the map. Split models (`NAME-00001-of-00003.gguf`, llama.cpp's
//!   `gguf-split` convention) are detected by name and merged into one tensor index.
//! * [`GgufFile::parse`] does the same for bytes already in memory.
//! * [`GgufWriter`] writes metadata and tensors (any [`std::io::Write`] or a path), and split
//!   sets ([`GgufWriter::write_split`]).
//!
//! # Format (little-endian only)
//!
//! ```text
//! "GGUF"  u32 version (2|3)  u64 n_tensors  u64 n_kv
//! n_kv × { string key, u32 value_type, value }       string = u64 len + UTF-8 bytes
//!                                                    array  = u32 elem_type + u64 count + elems
//! n_tensors × { string name, u32 n_dims, n_dims × u64 ne, u32 ggml_type, u64 offset }
//! zero padding to `general.alignment` (u32, default 32), then the data section
//! ```
//!
//! # Validation
//!
//! Everything read from the file is untrusted (`shared/spec/hostile-inputs.md` §1.3). Before
//! any allocation or loop, each count and length is checked against the bytes that remain
//! (`count × min_encoded_size ≤ remaining`) and against a hard cap ([`MAX_KV_COUNT`],
//! [`MAX_TENSOR_COUNT`], [`MAX_ARRAY_LEN`], [`MAX_STRING_LEN`], [`MAX_KEY_LEN`],
//! [`MAX_NESTING`]). All size arithmetic is checked. Keys must be non-empty ASCII and unique;
//! strings valid UTF-8; bools 0 or 1; `general.alignment` a u32 power of two ≤
//! [`MAX_ALIGNMENT`]. Tensors: unique names of 1..=[`MAX_TENSOR_NAME_LEN`] bytes, `n_dims` in
//! 1..=4, dimensions ≤ `i64::MAX`, element count and byte size ≤ `i64::MAX`, a known (not
//! retired) ggml type, `ne[0]` a multiple of the block size, offsets aligned, data inside the
//! file and no two tensors overlapping. Gaps between tensors and trailing bytes are allowed.
//! Nothing from the file is ever `unwrap`ped; every failure is a [`GgufError`] naming the file,
//! the key or tensor, and the offset.
//!
//! # The memory map
//!
//! Models are mapped, not read. If another process truncates or rewrites a mapped file, the
//! next touch of a lost page raises SIGBUS, which no Rust code can turn into an error
//! (`hostile-inputs.md` §7.2). Replace model files by rename, never in place.

mod error;
mod file;
mod reader;
mod split;
mod tensor;
mod value;
mod writer;

pub use error::GgufError;
pub use file::{GgufFile, Shard};
pub use split::{parse_split_name, split_path, SplitName};
pub use tensor::{TensorInfo, MAX_DIMS};
pub use value::{Array, Value, ValueType};
pub use writer::GgufWriter;

/// The four magic bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The version the writer emits by default.
pub const GGUF_VERSION: u32 = 3;
/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Largest accepted `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 16;
/// Most metadata key-value pairs in one file.
pub const MAX_KV_COUNT: u64 = 1 << 20;
/// Most tensors in one file.
pub const MAX_TENSOR_COUNT: u64 = 1 << 20;
/// Most elements in one metadata array (llama.cpp's `GGUF_MAX_ARRAY_ELEMENTS`).
pub const MAX_ARRAY_LEN: u64 = 1 << 30;
/// Longest metadata string value in bytes (llama.cpp's `GGUF_MAX_STRING_LENGTH`).
pub const MAX_STRING_LEN: u64 = 1 << 30;
/// Longest metadata key in bytes (GGUF spec).
pub const MAX_KEY_LEN: u64 = 65535;
/// Longest tensor name in bytes (ggml's `GGML_MAX_NAME` is 64 including the NUL).
pub const MAX_TENSOR_NAME_LEN: u64 = 63;
/// Deepest array nesting (an array of scalars is depth 1).
pub const MAX_NESTING: usize = 16;

/// Metadata key holding the data alignment.
pub const KEY_ALIGNMENT: &str = "general.alignment";
/// Metadata key holding a shard's 0-based number (`u16`).
pub const KEY_SPLIT_NO: &str = "split.no";
/// Metadata key holding the number of shards (`u16`).
pub const KEY_SPLIT_COUNT: &str = "split.count";
/// Metadata key holding the total tensor count over all shards (`i32`).
pub const KEY_SPLIT_TENSORS_COUNT: &str = "split.tensors.count";
