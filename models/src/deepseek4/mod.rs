//! The DeepSeek-V4 model definition (spec `shared/spec/deepseek4.md`): hyperparameters,
//! weights by name, and the forward graph built from `fathom-graph` builders.

pub mod eval;
pub mod forward;
pub mod hparams;
pub mod st_weights;
pub mod weights;

pub use forward::{Builder, ForwardError, PrefillInputs, Weights};
pub use hparams::{AttnKind, Hparams, HparamsError, Yarn};
pub use st_weights::{SafetensorsWeights, StOptions};
pub use weights::{GgufWeights, Repack};
