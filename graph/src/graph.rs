//! The graph arena: an append-only list of nodes (inputs, weights, op results) indexed by
//! [`TensorId`]. Insertion order is a valid topological order because an op can only name
//! sources that already exist.

use crate::error::GraphError;
use crate::experts::ExpertSource;
use crate::op::Op;
use crate::tensor::TensorDesc;
use std::collections::HashMap;
use std::sync::Arc;

/// Index of a node in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub u32);

impl TensorId {
    /// As a `usize` index.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// The per-tile scales of a block-scaled weight (an official checkpoint's FP8 E4M3 matrix
/// `{K, N}` used in place, 128×128 tiles): the weight's value at column `k` of row `n` is
/// `code(k, n) · scale of tile (n / rows, k / cols)`. Only MUL_MAT applies them (to the
/// activations, per tile row); [`Graph::op`] refuses such a weight anywhere else.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockScales {
    /// Weight rows (N) per tile.
    pub rows: usize,
    /// Weight columns (K) per tile.
    pub cols: usize,
    /// Tiles across a row: `ceil(K / cols)`.
    pub per_row: usize,
    /// The scales, one tile row after another (`ceil(N / rows)` × `per_row`).
    pub values: Vec<f32>,
}

impl BlockScales {
    /// The scales of the tile row holding weight row `n`.
    pub fn of_row(&self, n: usize) -> &[f32] {
        let start = n / self.rows * self.per_row;
        &self.values[start..start + self.per_row]
    }
    /// Whether the grid covers a `{K, N}` matrix (and nothing more).
    pub fn fits(&self, desc: &TensorDesc) -> bool {
        let (k, n) = (desc.ne[0], desc.ne[1]);
        self.rows > 0
            && self.cols > 0
            && desc.ne[2] == 1
            && desc.ne[3] == 1
            && self.per_row == k.div_ceil(self.cols)
            && self.values.len() == n.div_ceil(self.rows) * self.per_row
    }
}

/// Bytes of a weight, borrowed zero-copy from an owner that keeps them alive (a memory map,
/// a `Vec<u8>`, …).
#[derive(Clone)]
pub struct WeightData {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    offset: usize,
    len: usize,
    /// Where MUL_MAT_ID takes the experts' bytes instead, when they are paged.
    experts: Option<Arc<dyn ExpertSource>>,
    /// The tile scales of a block-scaled weight.
    scales: Option<Arc<BlockScales>>,
}

impl std::fmt::Debug for WeightData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WeightData({} bytes @ {})", self.len, self.offset)
    }
}

impl WeightData {
    /// `len` bytes at `offset` of `owner`; `None` if the range is outside it.
    pub fn new(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        offset: usize,
        len: usize,
    ) -> Option<WeightData> {
        let end = offset.checked_add(len)?;
        if end > (*owner).as_ref().len() {
            return None;
        }
        Some(WeightData {
            owner,
            offset,
            len,
            experts: None,
            scales: None,
        })
    }
    /// An owned copy (tests, small tensors).
    pub fn from_vec(v: Vec<u8>) -> WeightData {
        let len = v.len();
        WeightData {
            owner: Arc::new(v),
            offset: 0,
            len,
            experts: None,
            scales: None,
        }
    }
    /// The same bytes, with routed experts that MUL_MAT_ID reads through `src` (the bytes
    /// stay valid for everything else but their experts' pages are not touched).
    pub fn with_experts(mut self, src: Arc<dyn ExpertSource>) -> WeightData {
        self.experts = Some(src);
        self
    }
    /// The expert source, if the experts are paged.
    pub fn experts(&self) -> Option<&dyn ExpertSource> {
        self.experts.as_deref()
    }
    /// The same bytes, block-scaled by `scales` (see [`BlockScales`]).
    pub fn with_block_scales(mut self, scales: Arc<BlockScales>) -> WeightData {
        self.scales = Some(scales);
        self
    }
    /// The tile scales, if the weight is block-scaled.
    pub fn block_scales(&self) -> Option<&BlockScales> {
        self.scales.as_deref()
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.offset..self.offset + self.len]
    }
}

/// The checks on a block-scaled weight (or any FP8 E4M3 tensor, whose codes mean nothing
/// without their scales): it may be the weight of a MUL_MAT, whose scales must cover its
/// root weight, or be reshaped whole (offset 0, the same rows in the same order: a VIEW
/// whose rows are the root's rows, as the grouped output projection does); nothing else
/// reads it, so no op sees the codes unscaled. `out` is the new node's layout.
fn block_scaled_ok(
    g: &Graph,
    op: &Op,
    i: usize,
    n: &Node,
    out: &TensorDesc,
) -> Result<(), GraphError> {
    let scales = match &n.kind {
        NodeKind::Weight(w) => w.block_scales(),
        _ => None,
    };
    if scales.is_none() && n.desc.dtype != quant::DType::F8_E4M3 {
        return Ok(());
    }
    let name = n.name.as_deref().unwrap_or("?");
    let err = |msg: String| Err(crate::error::shape_err(op.name(), msg));
    match op {
        Op::MulMat(_) if i == 0 => match g.scaled_root(n) {
            Some((root, bs)) if bs.fits(&root.desc) => Ok(()),
            _ => err(format!(
                "'{name}' {}: FP8 codes without a scale grid that covers them",
                n.desc.shape_str()
            )),
        },
        Op::View(v)
            if v.offset == 0
                && out.is_contiguous()
                && n.desc.is_contiguous()
                && out.ne[0] == n.desc.ne[0]
                && out.nelements() == n.desc.nelements() =>
        {
            Ok(())
        }
        _ => err(format!(
            "'{name}' is a block-scaled FP8 weight: only MUL_MAT applies its scales"
        )),
    }
}

/// What a node is.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// Data bound by name before each run (token ids, positions, masks, cache lengths, …).
    Input,
    /// Persistent state (decode caches): lives in a state buffer outside the arena that keeps
    /// its contents between runs and is shared by every plan that declares the same states in
    /// the same order. Written only by in-place ops (SET_ROWS).
    State,
    /// Constant bytes used in place.
    Weight(WeightData),
    /// The result of an op on earlier nodes.
    Op {
        /// The op and its parameters.
        op: Op,
        /// Source nodes, in the op's order.
        srcs: Vec<TensorId>,
    },
}

/// One node of the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Layout of the node's tensor.
    pub desc: TensorDesc,
    /// Input, weight or op.
    pub kind: NodeKind,
    /// Optional name (required for inputs and weights; used by the profiler and errors).
    pub name: Option<String>,
}

/// A compute graph under construction.
#[derive(Debug, Default, Clone)]
pub struct Graph {
    nodes: Vec<Node>,
    names: HashMap<String, TensorId>,
    outputs: Vec<(String, TensorId)>,
    quantized: HashMap<(TensorId, quant::DType), TensorId>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    fn push(&mut self, node: Node) -> Result<TensorId, GraphError> {
        if let Some(n) = &node.name {
            if self.names.contains_key(n) {
                return Err(GraphError::DuplicateName(n.clone()));
            }
        }
        let id = TensorId(
            u32::try_from(self.nodes.len()).map_err(|_| GraphError::Overflow("graph".into()))?,
        );
        if let Some(n) = &node.name {
            self.names.insert(n.clone(), id);
        }
        self.nodes.push(node);
        Ok(id)
    }

    /// Declare a named input.
    pub fn input(&mut self, name: &str, desc: TensorDesc) -> Result<TensorId, GraphError> {
        self.push(Node {
            desc,
            kind: NodeKind::Input,
            name: Some(name.to_string()),
        })
    }

    /// Declare a named persistent state tensor (see [`NodeKind::State`]).
    pub fn state(&mut self, name: &str, desc: TensorDesc) -> Result<TensorId, GraphError> {
        self.push(Node {
            desc,
            kind: NodeKind::State,
            name: Some(name.to_string()),
        })
    }

    /// Declare a named weight whose bytes are used in place.
    pub fn weight(
        &mut self,
        name: &str,
        desc: TensorDesc,
        data: WeightData,
    ) -> Result<TensorId, GraphError> {
        if data.bytes().len() < desc.nbytes() {
            return Err(crate::error::shape_err(
                "weight",
                format!(
                    "'{name}' {} needs {} bytes, data has {}",
                    desc.shape_str(),
                    desc.nbytes(),
                    data.bytes().len()
                ),
            ));
        }
        self.push(Node {
            desc,
            kind: NodeKind::Weight(data),
            name: Some(name.to_string()),
        })
    }

    /// Record an op on existing nodes; validates shapes now.
    pub fn op(&mut self, op: impl Into<Op>, srcs: &[TensorId]) -> Result<TensorId, GraphError> {
        let op = op.into();
        let mut descs = Vec::with_capacity(srcs.len());
        for s in srcs {
            let n = self.nodes.get(s.idx()).ok_or(GraphError::BadSource {
                op: op.name(),
                id: s.0,
            })?;
            descs.push(&n.desc);
        }
        let desc = op.infer(&descs)?;
        for (i, s) in srcs.iter().enumerate() {
            block_scaled_ok(self, &op, i, &self.nodes[s.idx()], &desc)?;
        }
        // an in-place op writes its first source's storage: never a weight's (mapped from the
        // file, read-only; the executor would skip the node)
        if op.inplace() && srcs.first().is_some_and(|&s| self.over_weight(s)) {
            return Err(crate::error::shape_err(
                op.name(),
                "cannot write in place into a weight",
            ));
        }
        self.push(Node {
            desc,
            kind: NodeKind::Op {
                op,
                srcs: srcs.to_vec(),
            },
            name: None,
        })
    }

    /// Whether `id`'s storage is a weight's (through views).
    fn over_weight(&self, mut id: TensorId) -> bool {
        loop {
            match &self.nodes[id.idx()].kind {
                NodeKind::Weight(_) => return true,
                NodeKind::Op { op, srcs } if op.view_offset().is_some() || op.inplace() => {
                    id = srcs[0]
                }
                _ => return false,
            }
        }
    }

    /// The weight node under `n` through whole reshapes (VIEWs), and its tile scales, when
    /// it is block-scaled.
    pub fn scaled_root<'g>(&'g self, mut n: &'g Node) -> Option<(&'g Node, &'g BlockScales)> {
        loop {
            match &n.kind {
                NodeKind::Weight(w) => return w.block_scales().map(|b| (n, b)),
                NodeKind::Op {
                    op: Op::View(_),
                    srcs,
                } => n = self.nodes.get(srcs.first()?.idx())?,
                _ => return None,
            }
        }
    }

    /// Name a node (for the profiler and for [`Graph::find`]).
    pub fn set_name(&mut self, id: TensorId, name: &str) -> Result<TensorId, GraphError> {
        if self.names.contains_key(name) {
            return Err(GraphError::DuplicateName(name.to_string()));
        }
        self.names.insert(name.to_string(), id);
        self.nodes[id.idx()].name = Some(name.to_string());
        Ok(id)
    }

    /// Mark a node as a named output (kept alive to the end of the run).
    pub fn output(&mut self, name: &str, id: TensorId) -> Result<(), GraphError> {
        if self.outputs.iter().any(|(n, _)| n == name) {
            return Err(GraphError::DuplicateName(name.to_string()));
        }
        self.outputs.push((name.to_string(), id));
        Ok(())
    }

    /// The node of an id.
    pub fn node(&self, id: TensorId) -> &Node {
        &self.nodes[id.idx()]
    }
    /// Descriptor of a node.
    pub fn desc(&self, id: TensorId) -> &TensorDesc {
        &self.nodes[id.idx()].desc
    }
    /// All nodes in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// Named outputs.
    pub fn outputs(&self) -> &[(String, TensorId)] {
        &self.outputs
    }
    /// The shared QUANTIZE node of `(x, dtype)`, if one was made.
    pub fn cached_quantize(&self, x: TensorId, dtype: quant::DType) -> Option<TensorId> {
        self.quantized.get(&(x, dtype)).copied()
    }
    /// Remember the shared QUANTIZE node of `(x, dtype)`.
    pub fn cache_quantize(&mut self, x: TensorId, dtype: quant::DType, id: TensorId) {
        self.quantized.insert((x, dtype), id);
    }

    /// Find a node by name.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.names.get(name).copied()
    }
}
