//! fathom-models: GGUF and safetensors I/O, tokenizer, DeepSeek-V4 model definition, caches, sampling.

pub mod chat;
pub mod deepseek4;
pub mod gguf;
pub mod moe_config;
pub mod safetensors;
pub mod sampling;
pub mod session;
pub mod tokenizer;
