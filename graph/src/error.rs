//! Typed errors raised while building or planning a graph.

/// What went wrong while building, validating or planning a graph.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// An op received sources whose shapes or types it cannot accept.
    #[error("{op}: {msg}")]
    Shape {
        /// The op's name.
        op: &'static str,
        /// What is wrong, with the offending shapes.
        msg: String,
    },
    /// A source id that does not exist in this graph.
    #[error("{op}: source tensor #{id} does not exist")]
    BadSource {
        /// The op's name.
        op: &'static str,
        /// The id.
        id: u32,
    },
    /// A named input, weight or output is declared twice.
    #[error("duplicate name '{0}'")]
    DuplicateName(String),
    /// Size arithmetic overflowed.
    #[error("size of tensor '{0}' overflows")]
    Overflow(String),
    /// A row length that is not a whole number of blocks for its type.
    #[error(transparent)]
    Quant(#[from] quant::QuantError),
}

/// Shorthand to build a [`GraphError::Shape`].
pub fn shape_err(op: &'static str, msg: impl Into<String>) -> GraphError {
    GraphError::Shape {
        op,
        msg: msg.into(),
    }
}
