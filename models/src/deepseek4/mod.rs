//! The DeepSeek-V4 model definition (spec `shared/spec/deepseek4.md`): hyperparameters,
//! weights by name, and the forward graph built from `fathom-graph` builders.

pub mod forward;
pub mod hparams;

pub use forward::{Builder, ForwardError, PrefillInputs, Weights};
pub use hparams::{AttnKind, Hparams, HparamsError, Yarn};
