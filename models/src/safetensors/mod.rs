//! Zero-copy reading of safetensors checkpoints: single files, sharded checkpoints described by
//! a `model.safetensors.index.json`, and checkpoint directories.
//!
//! # Format
//!
//! A safetensors file is an 8-byte little-endian header length `n`, `n` bytes of UTF-8 JSON (an
//! object mapping tensor names to `{"dtype", "shape", "data_offsets"}`, plus an optional
//! `"__metadata__"` string→string map), then the data buffer. `data_offsets` are `[begin, end)`
//! byte offsets relative to the start of the data buffer.
//!
//! # Why the header is parsed here and not by the `safetensors` crate
//!
//! [`safetensors::SafeTensors::deserialize`] rejects the *whole file* when a single tensor has a
//! dtype string it does not know, and it reports most problems without naming the file or the
//! tensor. fathom must be able to open a checkpoint in which one tensor uses a dtype that is
//! newer than the crate (and report that tensor as unsupported when it is accessed), so the
//! header is parsed and validated here, with [`serde_json`]: the header length against the file
//! size and a 100 MB cap, the JSON object, `__metadata__`, and for every tensor its shape,
//! `shape product × dtype size == end − begin` (checked arithmetic), `begin ≤ end ≤ data length`
//! and that no two tensors overlap. After this validation every tensor's byte range lies inside
//! the mapping, which is all that [`SafetensorsFile::tensor_data`] relies on.
//!
//! When every dtype in a file is one the crate knows, the file is also passed to
//! [`safetensors::SafeTensors::deserialize`] as a cross-check. The crate is stricter than the
//! validation here — it also requires the data buffer to be covered exactly, without holes or
//! trailing bytes — so a disagreement is not fatal: it is recorded in
//! [`SafetensorsFile::warnings`] (and shown by `fathom inspect`).
//!
//! # Memory
//!
//! Files are memory-mapped read-only; tensor data are `&[u8]` slices into the mapping, so opening
//! a checkpoint touches only its headers, whatever its size.

mod dtype;
mod error;
mod file;
mod model;

pub use dtype::{StDtype, TensorDtype, TensorInfo};
pub use error::{Result, SafetensorsError};
pub use file::SafetensorsFile;
pub use model::SafetensorsModel;

/// Largest accepted JSON header, in bytes (the same cap as the `safetensors` crate).
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// The conventional name of a sharded checkpoint's index file.
pub const INDEX_FILE_NAME: &str = "model.safetensors.index.json";
