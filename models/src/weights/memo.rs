//! [`WeightMemo`]: one weight provider serving many graphs.

use super::{ForwardError, Weights};
use graph::{Graph, NodeKind, TensorDesc, TensorId, WeightData};
use std::collections::HashMap;

/// A weight provider that asks the inner provider once per tensor and replays the same
/// zero-copy data into every later graph (providers map names to ids of one graph only).
pub struct WeightMemo {
    inner: Box<dyn Weights + Send>,
    seen: HashMap<String, Option<(TensorDesc, WeightData)>>,
    current: HashMap<String, TensorId>,
}

impl Weights for WeightMemo {
    fn shape_error(&self, name: &str, got: &[usize], want: &[usize]) -> ForwardError {
        self.inner.shape_error(name, got, want)
    }
    fn new_graph(&mut self) {
        self.current.clear();
        self.inner.new_graph();
    }
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(&id) = self.current.get(name) {
            return Ok(Some(id));
        }
        let id = match self.seen.get(name) {
            Some(None) => return Ok(None),
            Some(Some((desc, data))) => g.weight(name, *desc, data.clone())?,
            None => {
                let Some(id) = self.inner.try_get(g, name)? else {
                    self.seen.insert(name.to_string(), None);
                    return Ok(None);
                };
                if let NodeKind::Weight(data) = &g.node(id).kind {
                    self.seen
                        .insert(name.to_string(), Some((*g.desc(id), data.clone())));
                }
                id
            }
        };
        self.current.insert(name.to_string(), id);
        Ok(Some(id))
    }
}

impl WeightMemo {
    /// Wrap a provider.
    pub fn new(inner: Box<dyn Weights + Send>) -> WeightMemo {
        WeightMemo {
            inner,
            seen: HashMap::new(),
            current: HashMap::new(),
        }
    }
}
