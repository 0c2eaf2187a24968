//! The planner: built once from a [`Graph`], replayed for every run.
//!
//! It fixes
//! - the **execution order** (the graph's insertion order, which is topological);
//! - where every tensor lives: weights in place (zero copy), inputs and op results in one
//!   arena with **liveness-based reuse** (a buffer is recycled after its last reader), views
//!   resolved to their root buffer plus a byte offset;
//! - the **barriers** between nodes, with barrier elision.
//!
//! ## Barrier elision rule
//! The executor runs every node on all threads and, by default, waits at a barrier before the
//! next node. The barrier before node `N` is dropped when no thread can read data another
//! thread is still writing:
//! 1. For every source `s` of `N` whose root buffer was written since the last kept barrier,
//!    `N` must be [`Access::RowWise`], the writer must be `RowWise` too, and `s` must have
//!    exactly the writer's layout and `N`'s row count. Then thread `i` reads only rows that
//!    thread `i` itself wrote (both nodes use the same static row split).
//! 2. Sources not written since the last kept barrier are always safe (weights, inputs, and
//!    results completed before it).
//! 3. Write-after-read: a buffer freed by liveness is only handed out again after the next kept
//!    barrier, so a node never overwrites memory another thread may still be reading.
//! 4. An in-place op (it writes its first source's buffer) keeps its barrier unless it is
//!    `RowWise` and no node read that buffer since the last kept barrier: then, with 1., each
//!    thread rewrites only rows it wrote itself (a `rope` in place after the `rms_norm` that
//!    made its rows).
//!
//! A chain such as `rms_norm → mul → scale → silu` over the same rows therefore runs without
//! barriers; a matmul (which splits work by an atomic chunk counter) always gets one.

use crate::graph::{Graph, NodeKind, TensorId};
use crate::op::Access;
use std::collections::{HashMap, HashSet};

/// Alignment of every arena buffer (bytes).
pub const ALIGN: usize = 64;

/// Where a tensor's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// In the weight of node `root`, at a byte offset.
    Weight {
        /// The weight node.
        root: TensorId,
        /// Offset into its bytes.
        offset: usize,
    },
    /// In the arena at a byte offset.
    Arena {
        /// Offset into the arena.
        offset: usize,
    },
    /// In the persistent state buffer at a byte offset (decode caches).
    State {
        /// Offset into the state buffer.
        offset: usize,
    },
}

/// One step of the plan: an op node to execute.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// The node.
    pub node: TensorId,
    /// Whether all threads synchronise before it.
    pub barrier_before: bool,
}

/// Options of the planner.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions {
    /// Drop barriers that are provably unnecessary (see the module doc).
    pub elide_barriers: bool,
    /// Leave [`ALIGN`] guard bytes after every arena buffer (for out-of-bounds write checks).
    pub guards: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            elide_barriers: true,
            guards: false,
        }
    }
}

/// An execution plan for one graph.
#[derive(Debug, Clone)]
pub struct Plan {
    steps: Vec<Step>,
    locations: Vec<Location>,
    arena_size: usize,
    elided: usize,
    inputs: HashMap<String, TensorId>,
    outputs: Vec<(String, TensorId)>,
    guards: Vec<(usize, usize)>,
    state_size: usize,
    states: HashMap<String, TensorId>,
}

#[derive(Default)]
struct FreeList {
    blocks: Vec<(usize, usize)>, // (offset, size), sorted by offset
    top: usize,
    guard: usize,
}

impl FreeList {
    fn padded(&self, size: usize) -> usize {
        size.max(1).div_ceil(ALIGN) * ALIGN + self.guard
    }
    fn alloc(&mut self, size: usize) -> usize {
        let size = self.padded(size);
        if let Some(i) = self.blocks.iter().position(|&(_, s)| s >= size) {
            let (off, s) = self.blocks[i];
            if s == size {
                self.blocks.remove(i);
            } else {
                self.blocks[i] = (off + size, s - size);
            }
            return off;
        }
        let off = self.top;
        self.top += size;
        off
    }
    fn free(&mut self, off: usize, size: usize) {
        if self.guard > 0 {
            // with guards every buffer keeps its own slot, so each guard stays meaningful
            return;
        }
        let size = self.padded(size);
        let i = self.blocks.partition_point(|&(o, _)| o < off);
        self.blocks.insert(i, (off, size));
        // coalesce neighbours
        let mut j = 0;
        while j + 1 < self.blocks.len() {
            let (o, s) = self.blocks[j];
            if o + s == self.blocks[j + 1].0 {
                self.blocks[j].1 += self.blocks[j + 1].1;
                self.blocks.remove(j + 1);
            } else {
                j += 1;
            }
        }
    }
}

impl Plan {
    /// Plan `g`.
    pub fn new(g: &Graph, opts: PlanOptions) -> Plan {
        let nodes = g.nodes();
        let n = nodes.len();
        // root of every node (views resolved) and byte offset into the root
        let mut root = vec![(TensorId(0), 0usize); n];
        for (i, node) in nodes.iter().enumerate() {
            root[i] = match &node.kind {
                NodeKind::Op { op, srcs } => match op.view_offset() {
                    Some(off) => {
                        let (r, o) = root[srcs[0].idx()];
                        (r, o + off)
                    }
                    // in-place ops live in their first source's storage
                    None if op.inplace() => root[srcs[0].idx()],
                    None => (TensorId(i as u32), 0),
                },
                _ => (TensorId(i as u32), 0),
            };
        }
        let is_view = |i: usize| matches!(&nodes[i].kind, NodeKind::Op { op, .. } if op.view_offset().is_some());
        let mut keep = vec![false; n];
        for (_, id) in g.outputs() {
            keep[root[id.idx()].0.idx()] = true;
        }
        // last step that reads each root
        let mut last_use = vec![0usize; n];
        for (i, node) in nodes.iter().enumerate() {
            if let NodeKind::Op { srcs, .. } = &node.kind {
                for s in srcs {
                    let r = root[s.idx()].0.idx();
                    last_use[r] = last_use[r].max(i);
                }
            }
        }

        // barriers
        let mut steps = Vec::new();
        // root -> writer node, and the roots read, since the last barrier
        let mut dirty: HashMap<usize, usize> = HashMap::new();
        let mut read: HashSet<usize> = HashSet::new();
        let mut elided = 0;
        for (i, node) in nodes.iter().enumerate() {
            let NodeKind::Op { op, srcs } = &node.kind else {
                continue;
            };
            if is_view(i) {
                continue;
            }
            let mut need = false;
            for s in srcs {
                let r = root[s.idx()].0.idx();
                let Some(&w) = dirty.get(&r) else { continue };
                let wn = &nodes[w];
                let writer_rowwise =
                    matches!(&wn.kind, NodeKind::Op { op, .. } if op.access() == Access::RowWise);
                let sd = g.desc(*s);
                let ok = op.access() == Access::RowWise
                    && writer_rowwise
                    && root[s.idx()].1 == 0
                    && *sd == wn.desc
                    && sd.nrows() == node.desc.nrows();
                if !ok {
                    need = true;
                }
            }
            let first = steps.is_empty();
            // an in-place write may race any earlier reader of its buffer; it needs no barrier
            // only as a row-wise op whose buffer no other node read since the last barrier
            // (each thread then rewrites just the rows it wrote itself, or that nobody reads)
            let need = need
                || op.inplace()
                    && (op.access() != Access::RowWise || read.contains(&root[i].0.idx()));
            let barrier = first || need || !opts.elide_barriers;
            if barrier {
                dirty.clear();
                read.clear();
            } else {
                elided += 1;
            }
            read.extend(srcs.iter().map(|s| root[s.idx()].0.idx()));
            dirty.insert(root[i].0.idx(), i);
            steps.push(Step {
                node: TensorId(i as u32),
                barrier_before: barrier && !first,
            });
        }

        // allocation
        let mut fl = FreeList {
            guard: if opts.guards { ALIGN } else { 0 },
            ..FreeList::default()
        };
        let mut base_off: Vec<Option<usize>> = vec![None; n];
        let mut inputs = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let NodeKind::Input = node.kind {
                base_off[i] = Some(fl.alloc(node.desc.nbytes()));
                if let Some(name) = &node.name {
                    inputs.insert(name.clone(), TensorId(i as u32));
                }
            }
        }
        let mut pending: Vec<usize> = Vec::new();
        for st in &steps {
            let i = st.node.idx();
            if st.barrier_before {
                for r in pending.drain(..) {
                    fl.free(base_off[r].unwrap_or(0), nodes[r].desc.nbytes());
                }
            }
            let inplace = matches!(&nodes[i].kind, NodeKind::Op { op, .. } if op.inplace());
            if !inplace {
                base_off[i] = Some(fl.alloc(nodes[i].desc.nbytes()));
            }
            if let NodeKind::Op { srcs, .. } = &nodes[i].kind {
                let mut done: Vec<usize> = srcs.iter().map(|s| root[s.idx()].0.idx()).collect();
                done.push(i);
                done.sort_unstable();
                done.dedup();
                for r in done {
                    let releasable = matches!(nodes[r].kind, NodeKind::Op { .. })
                        && !keep[r]
                        && last_use[r] <= i;
                    if releasable && base_off[r].is_some() && !pending.contains(&r) {
                        pending.push(r);
                    }
                }
            }
        }

        // persistent states: declaration order, so every plan declaring the same states in the
        // same order shares one state buffer layout
        let mut state_off = vec![0usize; n];
        let mut state_size = 0usize;
        let mut states = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let NodeKind::State = node.kind {
                state_off[i] = state_size;
                state_size += node.desc.nbytes().div_ceil(ALIGN) * ALIGN;
                if let Some(name) = &node.name {
                    states.insert(name.clone(), TensorId(i as u32));
                }
            }
        }
        let locations = (0..n)
            .map(|i| {
                let (r, off) = root[i];
                match nodes[r.idx()].kind {
                    NodeKind::Weight(_) => Location::Weight {
                        root: r,
                        offset: off,
                    },
                    NodeKind::State => Location::State {
                        offset: state_off[r.idx()] + off,
                    },
                    _ => Location::Arena {
                        offset: base_off[r.idx()].unwrap_or(0) + off,
                    },
                }
            })
            .collect();
        // guard regions: from the end of each buffer's bytes to the end of its padded slot
        let mut guards = Vec::new();
        if opts.guards {
            for (i, node) in nodes.iter().enumerate() {
                if let Some(off) = base_off[i] {
                    let used = node.desc.nbytes();
                    let end = off + fl.padded(used);
                    guards.push((off + used, end - off - used));
                }
            }
        }
        Plan {
            steps,
            locations,
            arena_size: fl.top,
            elided,
            inputs,
            outputs: g.outputs().to_vec(),
            guards,
            state_size,
            states,
        }
    }

    /// The op steps in execution order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
    /// Where node `id` lives.
    pub fn location(&self, id: TensorId) -> Location {
        self.locations[id.idx()]
    }
    /// Peak arena bytes (inputs + live intermediates at the worst point).
    pub fn arena_size(&self) -> usize {
        self.arena_size
    }
    /// Barriers dropped by elision.
    pub fn elided_barriers(&self) -> usize {
        self.elided
    }
    /// Barriers kept.
    pub fn barriers(&self) -> usize {
        self.steps.iter().filter(|s| s.barrier_before).count()
    }
    /// Named inputs.
    pub fn input(&self, name: &str) -> Option<TensorId> {
        self.inputs.get(name).copied()
    }
    /// Named inputs, all of them.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, TensorId)> {
        self.inputs.iter().map(|(k, v)| (k.as_str(), *v))
    }
    /// Named outputs.
    pub fn outputs(&self) -> &[(String, TensorId)] {
        &self.outputs
    }
    /// Bytes of the persistent state buffer this plan needs.
    pub fn state_size(&self) -> usize {
        self.state_size
    }
    /// A named state tensor.
    pub fn state(&self, name: &str) -> Option<TensorId> {
        self.states.get(name).copied()
    }
    /// Guard regions `(offset, len)` (empty unless planned with guards).
    pub fn guards(&self) -> &[(usize, usize)] {
        &self.guards
    }
}
