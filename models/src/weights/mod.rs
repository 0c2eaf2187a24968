//! Weight providers: where a model's tensors come from. A graph builder asks a [`Weights`]
//! provider for each tensor by its GGUF name; the provider registers it in the graph once,
//! zero-copy where the bytes allow it. [`GgufWeights`] serves a GGUF file (with optional
//! load-time repacks, [`Repack`]); a model's checkpoint provider maps the same names onto
//! the official layout; [`WeightMemo`] lets one provider serve many graphs (one per chunk
//! length) without asking it twice.

mod gguf;
mod memo;
pub mod policy;

pub use gguf::{GgufWeights, Repack};
pub use memo::WeightMemo;
pub use policy::StOptions;

use graph::{Graph, GraphError, TensorId};

/// Errors while building the forward graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    /// A tensor the model needs is absent.
    #[error("missing tensor '{0}'")]
    Missing(String),
    /// A tensor has the wrong shape.
    #[error("tensor '{name}': shape {got:?}, expected {want:?}")]
    Shape {
        /// Tensor name.
        name: String,
        /// Shape found (GGUF order).
        got: Vec<usize>,
        /// Shape expected.
        want: Vec<usize>,
    },
    /// The hyperparameters are outside what this implementation supports.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// Graph construction failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A tensor could not be converted to a repacked layout (`--repack`).
    #[error("tensor '{name}': cannot repack to {to}: {reason}")]
    Repack {
        /// Tensor name.
        name: String,
        /// The layout asked for.
        to: quant::DType,
        /// Why (out of memory).
        reason: String,
    },
}

/// Resolves weights by GGUF name and registers them in the graph (once).
pub trait Weights {
    /// The weight `name` as a graph node, or `None` if the model has no such tensor.
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError>;

    /// Called before a provider starts serving a new graph. Providers must never hand out a
    /// `TensorId` of another graph; the default does nothing (for providers that look up the
    /// graph itself, as [`GgufWeights`] does).
    fn new_graph(&mut self) {}

    /// The weight `name`; an error naming it when absent.
    fn get(&mut self, g: &mut Graph, name: &str) -> Result<TensorId, ForwardError> {
        self.try_get(g, name)?
            .ok_or_else(|| ForwardError::Missing(name.to_string()))
    }

    /// The weight `name`, checking its shape (GGUF order, trailing 1s ignored).
    fn get_shaped(
        &mut self,
        g: &mut Graph,
        name: &str,
        want: &[usize],
    ) -> Result<TensorId, ForwardError> {
        let id = self.get(g, name)?;
        let d = g.desc(id);
        let mut want4 = [1usize; 4];
        want4[..want.len()].copy_from_slice(want);
        if d.ne != want4 {
            return Err(ForwardError::Shape {
                name: name.into(),
                got: d.ne.to_vec(),
                want: want.to_vec(),
            });
        }
        Ok(id)
    }
}
