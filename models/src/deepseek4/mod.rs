//! The DeepSeek-V4 model definition (spec `shared/spec/deepseek4.md`): hyperparameters,
//! the tensor table, the checkpoint loader, the forward graph built from `fathom-graph`
//! builders, and [`DeepSeek4`], the model behind the [`crate::model::Model`] interface.

pub mod checkpoint;
pub mod forward;
pub mod hparams;
pub mod model;
pub mod tensors;

pub use checkpoint::SafetensorsWeights;
pub use forward::{Builder, PrefillInputs};
pub use hparams::{AttnKind, Hparams, HparamsError, Yarn};
pub use model::{DeepSeek4, ARCHITECTURE};
