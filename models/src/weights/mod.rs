//! Weight providers: where a model's tensors come from. A graph builder asks a [`Weights`]
//! provider for each tensor by its GGUF name; the provider registers it in the graph once,
//! zero-copy where the bytes allow it. [`GgufWeights`] serves a GGUF file (with optional
//! load-time repacks, [`Repack`]); a model's checkpoint provider maps the same names onto
//! the official layout; [`WeightMemo`] lets one provider serve many graphs (one per chunk
//! length) without asking it twice.

pub mod experts;
mod gguf;
mod memo;
pub mod policy;

pub use experts::{
    ExpertCache, ExpertCacheConfig, ExpertCacheStats, ExpertConvert, ExpertPart, PagedSources,
};
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
    #[error("tensor {name}: shape {}, expected {}", dims(got), dims(want))]
    Shape {
        /// The tensor, as its provider names it ([`Weights::shape_error`]).
        name: String,
        /// Shape found (in the order of the file it comes from).
        got: Vec<usize>,
        /// Shape expected (the same order).
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

/// `[a, b, c]`.
fn dims(d: &[usize]) -> String {
    let v: Vec<String> = d.iter().map(usize::to_string).collect();
    format!("[{}]", v.join(", "))
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

    /// The error for weight `name` having shape `got` where `want` is expected (GGUF order,
    /// trailing 1s dropped): by default naming the GGUF tensor; a provider reading another
    /// format names the tensor, its file and the shapes as that format writes them.
    fn shape_error(&self, name: &str, got: &[usize], want: &[usize]) -> ForwardError {
        ForwardError::Shape {
            name: format!("'{name}'"),
            got: got.to_vec(),
            want: want.to_vec(),
        }
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
            let mut got = d.ne.to_vec();
            while got.len() > want.len().max(1) && got.last() == Some(&1) {
                got.pop();
            }
            return Err(self.shape_error(name, &got, want));
        }
        Ok(id)
    }
}
