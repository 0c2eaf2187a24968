//! [`SessionError`]: what can go wrong in a [`super::Session`], each written for a user.

use super::{StateError, MAX_CONTEXT};
use crate::model::ModelError;
use crate::weights::ForwardError;
use backends::ExecError;

/// Errors of a [`super::Session`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The sequence would exceed the context length.
    #[error(
        "context full: {n_past} tokens in the sequence + {adding} new = {} > context length {ctx}",
        n_past + adding
    )]
    ContextFull {
        /// Tokens already in the sequence.
        n_past: usize,
        /// Tokens being added.
        adding: usize,
        /// The context length.
        ctx: usize,
    },
    /// `prefill` with no tokens.
    #[error("no tokens to evaluate")]
    Empty,
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary ({n_vocab} tokens)")]
    BadToken {
        /// The id.
        id: u32,
        /// Vocabulary size.
        n_vocab: usize,
    },
    /// A context length of 0.
    #[error("context length must be at least 1")]
    ZeroContext,
    /// A routed expert could not be read from the model file by the expert cache, or failed
    /// its check when first used in place (the file, tensor and cause).
    #[error("routed expert: {0}")]
    ExpertRead(String),
    /// A chunk length of 0.
    #[error("chunks must hold at least one token")]
    ZeroChunk,
    /// Building the forward graph failed.
    #[error("building the graph for {n_tokens} tokens: {source}")]
    Forward {
        /// Sequence length of the graph.
        n_tokens: usize,
        /// The cause.
        source: ForwardError,
    },
    /// Binding inputs or reading outputs failed.
    #[error("executor: {0}")]
    Exec(#[from] ExecError),
    /// A chunk graph declares more state than the sequence's state buffer holds (the graphs
    /// of one sequence must share one cache layout).
    #[error("graph for {n_tokens} tokens needs {need} state bytes, the sequence has {have}")]
    StateLayout {
        /// Chunk length of the graph.
        n_tokens: usize,
        /// Bytes its plan needs.
        need: usize,
        /// Bytes of the state buffer.
        have: usize,
    },
    /// The model computed a NaN or an infinity: a damaged weight, or numbers out of range.
    /// Reported instead of passing wrong logits on; the sequence is reset.
    #[error(
        "the model computed non-finite logits (NaN or infinity) at position {position} \
         (evaluating positions {first} to {last}): a weight or value in the model file is \
         damaged or out of range"
    )]
    NonFinite {
        /// The first position whose logits are not finite.
        position: usize,
        /// First position of the step.
        first: usize,
        /// Last position of the step.
        last: usize,
    },
    /// A context longer than any session supports ([`MAX_CONTEXT`]).
    #[error("context length {0} is more than the {MAX_CONTEXT} tokens a session supports")]
    ContextTooLong(usize),
    /// The caches or a graph's working memory would not fit in the memory the session may
    /// use ([`super::Session::set_memory_limit`]): refused before anything is allocated.
    #[error(
        "{what} need {}, and this session may use {} (the memory available){}",
        gib(*need),
        gib(*limit),
        if *held > 0 { format!("; {} of it is in use already", gib(*held)) } else { String::new() }
    )]
    OutOfMemory {
        /// What was about to be allocated.
        what: String,
        /// Bytes it needs.
        need: u64,
        /// Bytes held by the session already.
        held: u64,
        /// The session's limit.
        limit: u64,
    },
    /// A saved or given state does not fit this session.
    #[error(transparent)]
    State(#[from] StateError),
    /// The model lacks something asked for.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A slot that does not exist, or a batched step the session cannot run.
    #[error("{0}")]
    Slots(String),
}

fn gib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}
