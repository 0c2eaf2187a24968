//! fathom-graph: tensor descriptors, the op set, the graph arena and the planner.
//!
//! # Glossary
//! - **`ne[4]`**: elements per dimension, innermost first (ggml). A PyTorch `[out, in]` weight
//!   is `{in, out}` here.
//! - **`nb[4]`**: byte strides. Views (reshape/permute/transpose/slices) only change `ne`, `nb`
//!   and a byte offset.
//! - **row**: the `ne[0]` elements at fixed `(i1, i2, i3)`; kernels split work by rows.
//! - **node**: an input (bound by name per run), a weight (bytes used in place) or an op result.
//! - **plan**: order, arena offsets and barriers for one graph, built once and replayed.
//!
//! Values that change between decode steps (positions, cache lengths, visible compressed
//! entries, MoE knobs) are *inputs* read by kernels at execution time, so a decode plan is
//! built once and replayed without rebuilding.
//!
//! The op list is [`for_each_op!`]; `fathom-ops` turns the same list into kernel dispatch.

pub mod error;
pub mod experts;
pub mod graph;
pub mod knobs;
pub mod op;
pub mod plan;
pub mod tensor;

pub use error::GraphError;
pub use experts::{ExpertBytes, ExpertLayout, ExpertSource, Pinned};
pub use graph::{BlockScales, Graph, Node, NodeKind, TensorId, WeightData};
pub use op::{Access, Op, OpDef, OpKind};
pub use plan::{Location, Plan, PlanOptions, Step};
pub use quant::DType;
pub use tensor::TensorDesc;
