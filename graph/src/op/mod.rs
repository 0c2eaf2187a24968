//! The op set, declared once.
//!
//! [`crate::for_each_op!`] is the single list of ops. `fathom-graph` expands it into [`Op`] (one
//! variant per op struct), names and dispatch of shape inference; `fathom-ops` expands the
//! same list into kernel dispatch, so an op without a CPU kernel is a compile error. Adding an
//! op = its definition file here, its kernel file in `ops/src/`, and one line in the list.
//!
//! Each op file holds the formula header (citing `shared/spec/deepseek4.md`), the typed
//! parameter struct, its [`OpDef`] impl and its builder method on [`crate::Graph`].

use crate::error::GraphError;
use crate::tensor::TensorDesc;
use std::fmt;

pub mod binary;
pub mod compress;
pub mod concat;
pub mod cpy;
pub mod expert_prefetch;
pub mod flash_attn;
pub mod get_rows;
pub mod hadamard;
pub mod index_mask;
pub mod indexer;
pub mod mhc;
pub mod moe_route;
pub mod mul_mat;
pub mod mul_mat_id;
pub mod norm;
pub mod quantize;
pub mod rope;
pub mod set_rows;
pub mod softmax;
pub mod sum_rows;
pub mod swiglu;
pub mod swiglu_select;
pub mod topk;
pub mod unary;
pub mod view;

/// How a node's output rows depend on its inputs; drives barrier elision (see `plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Output row `r` (flat row index over dims 1..3) is computed by the thread that owns row `r`
    /// in the static even split of `nrows` over the threads, and reads from each source only
    /// its row `r` (sources with the same row count) — a "row-wise" op.
    RowWise,
    /// Anything else: reads arbitrary parts of its sources or splits work differently.
    Global,
}

/// The definition of an op: a name, shape/type inference and its access pattern.
pub trait OpDef: fmt::Debug + Clone + Send + Sync + 'static {
    /// Upper-case op name as in ggml (`"MUL_MAT"`).
    const NAME: &'static str;
    /// Validate the sources and return the output descriptor.
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError>;
    /// Access pattern for barrier elision.
    fn access(&self) -> Access {
        Access::Global
    }
    /// For view ops: the byte offset of the output into `srcs[0]`'s storage.
    fn view_offset(&self) -> Option<usize> {
        None
    }
    /// For in-place ops: the output *is* `srcs[0]`'s storage, which the kernel modifies
    /// (SET_ROWS into a cache, ROPE in place). The planner keeps the barrier before an
    /// in-place op unless the op is row-wise and nothing else read that storage since the
    /// last barrier (see [`Plan`](crate::Plan)).
    fn inplace(&self) -> bool {
        false
    }
}

/// Check the number of sources.
pub fn want_srcs(op: &'static str, srcs: &[&TensorDesc], n: usize) -> Result<(), GraphError> {
    if srcs.len() != n {
        return Err(crate::error::shape_err(
            op,
            format!("expects {n} sources, got {}", srcs.len()),
        ));
    }
    Ok(())
}

/// The op list. Invoke with the name of a macro that receives `Variant => path::Type` pairs.
#[macro_export]
macro_rules! for_each_op {
    ($cb:ident) => {
        $cb! {
            View => $crate::op::view::View,
            Cpy => $crate::op::cpy::Cpy,
            GetRows => $crate::op::get_rows::GetRows,
            IndexMask => $crate::op::index_mask::IndexMask,
            Add => $crate::op::binary::Add,
            Mul => $crate::op::binary::Mul,
            Div => $crate::op::binary::Div,
            Scale => $crate::op::unary::Scale,
            Clamp => $crate::op::unary::Clamp,
            Silu => $crate::op::unary::Silu,
            Sigmoid => $crate::op::unary::Sigmoid,
            Softplus => $crate::op::unary::Softplus,
            Sqrt => $crate::op::unary::Sqrt,
            RmsNorm => $crate::op::norm::RmsNorm,
            MulMat => $crate::op::mul_mat::MulMat,
            Quantize => $crate::op::quantize::Quantize,
            SetRows => $crate::op::set_rows::SetRows,
            MoeRoute => $crate::op::moe_route::MoeRoute,
            MaskIds => $crate::op::moe_route::MaskIds,
            SwigluSelect => $crate::op::swiglu_select::SwigluSelect,
            Rope => $crate::op::rope::Rope,
            SoftMax => $crate::op::softmax::SoftMax,
            FlashAttnExt => $crate::op::flash_attn::FlashAttnExt,
            MulMatId => $crate::op::mul_mat_id::MulMatId,
            ExpertPrefetch => $crate::op::expert_prefetch::ExpertPrefetch,
            Swiglu => $crate::op::swiglu::Swiglu,
            TopK => $crate::op::topk::TopK,
            Argsort => $crate::op::topk::Argsort,
            Argmax => $crate::op::topk::Argmax,
            Concat => $crate::op::concat::Concat,
            SumRows => $crate::op::sum_rows::SumRows,
            Hadamard => $crate::op::hadamard::Hadamard,
            HcPre => $crate::op::mhc::HcPre,
            HcPost => $crate::op::mhc::HcPost,
            DsaIndexer => $crate::op::indexer::DsaIndexer,
            DsaScores => $crate::op::indexer::DsaScores,
            DsaSelect => $crate::op::indexer::DsaSelect,
            CompressPool => $crate::op::compress::CompressPool,
        }
    };
}

macro_rules! define_ops {
    ($($v:ident => $t:path,)*) => {
        /// One op with its typed parameters.
        #[derive(Debug, Clone)]
        pub enum Op { $(
            #[doc = concat!("`", stringify!($t), "`")]
            $v($t),
        )* }

        /// The op's kind without parameters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpKind { $(
            #[doc = concat!("`", stringify!($t), "`")]
            $v,
        )* }

        impl OpKind {
            /// Every op kind, in list order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$v),*];
            /// Upper-case op name.
            pub fn name(self) -> &'static str {
                match self { $(OpKind::$v => <$t as OpDef>::NAME,)* }
            }
        }

        impl Op {
            /// The op's kind.
            pub fn kind(&self) -> OpKind {
                match self { $(Op::$v(_) => OpKind::$v,)* }
            }
            /// Upper-case op name.
            pub fn name(&self) -> &'static str {
                self.kind().name()
            }
            /// Shape/type inference.
            pub fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
                match self { $(Op::$v(o) => o.infer(srcs),)* }
            }
            /// Access pattern.
            pub fn access(&self) -> Access {
                match self { $(Op::$v(o) => o.access(),)* }
            }
            /// View offset for view ops.
            pub fn view_offset(&self) -> Option<usize> {
                match self { $(Op::$v(o) => o.view_offset(),)* }
            }
            /// Whether the op writes into its first source in place.
            pub fn inplace(&self) -> bool {
                match self { $(Op::$v(o) => o.inplace(),)* }
            }
        }

        $(impl From<$t> for Op {
            fn from(o: $t) -> Op { Op::$v(o) }
        })*
    };
}

for_each_op!(define_ops);
