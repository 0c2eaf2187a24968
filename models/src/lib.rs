//! fathom-models: GGUF and safetensors I/O, tokenizer, DeepSeek-V4 model definition, caches, sampling.

pub mod gguf;
pub mod safetensors;
