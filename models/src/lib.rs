//! fathom-models: GGUF and safetensors I/O, the model interface and its one way to open a
//! model ([`model`]), the DeepSeek-V4 model, sessions with their caches and snapshots,
//! tokenizer, chat format, sampling, live MoE control.

pub mod chat;
pub mod deepseek4;
pub mod files;
pub mod fuzz;
pub mod gguf;
pub mod model;
pub mod moe_config;
pub mod safetensors;
pub mod sampling;
pub mod session;
pub mod synth;
pub mod tokenizer;
pub mod weights;
