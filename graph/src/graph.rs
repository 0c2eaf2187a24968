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

/// Bytes of a weight, borrowed zero-copy from an owner that keeps them alive (a memory map,
/// a `Vec<u8>`, …).
#[derive(Clone)]
pub struct WeightData {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    offset: usize,
    len: usize,
    /// Where MUL_MAT_ID takes the experts' bytes instead, when they are paged.
    experts: Option<Arc<dyn ExpertSource>>,
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
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.offset..self.offset + self.len]
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
        self.push(Node {
            desc,
            kind: NodeKind::Op {
                op,
                srcs: srcs.to_vec(),
            },
            name: None,
        })
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
