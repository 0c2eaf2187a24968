//! fathom-graph: the compute-graph layer.
//!
//! This crate will own tensor descriptors (`dtype`, `ne[4]`, byte strides `nb[4]`, view
//! offsets), the op set declared once (including DeepSeek-V4's custom ops: HADAMARD,
//! HC_PRE/HC_POST, DSA_INDEXER, MUL_MAT_ID and the compressors) with typed parameters and shape
//! inference, the graph arena and builders, and the planner (topological order, liveness-based
//! arena allocation, barrier elision). It depends only on `fathom-quant` for dtypes.
//!
//! Status: not yet implemented (issue 3); the crate exists so the dependency direction
//! `quant → graph → ops → backends → models → tools` is fixed from the start.

pub use quant::DType;
