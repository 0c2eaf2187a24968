//! fathom-server: an OpenAI- and Anthropic-compatible HTTP server over one model.
//!
//! - [`engine`]: the inference thread, its slots, job queue and prefix reuse (its loop in
//!   `worker`);
//! - [`prefix`]: the snapshot LRU; [`disk`]: snapshots on disk across restarts; [`stop`]:
//!   stop strings over streamed text;
//! - [`gen`]: what the chat endpoints share: a conversation rendered, queued, and its reply
//!   parsed (reasoning, text, DSML tool calls) as it streams;
//! - [`openai`] (`/v1/chat/completions`, `/v1/completions`, `/v1/models`) and [`anthropic`]
//!   (`/v1/messages`): the two wire formats;
//! - [`http`]: routing, authentication, errors, `/health`, `/metrics` and the chat page;
//! - [`fuzz`]: the body of the `chat_request` fuzz target.
//!
//! The library takes its configuration as values ([`ServerConfig`]); the CLI (`fathom
//! serve`) fills it from flags.

pub mod anthropic;
pub mod disk;
pub mod engine;
pub mod fuzz;
pub mod gen;
pub mod http;
pub mod openai;
pub mod prefix;
pub mod stop;
mod worker;

pub use engine::{DiskOptions, Engine, EngineOptions, StartError};
pub use http::{router, serve, AppState, ServerConfig};
