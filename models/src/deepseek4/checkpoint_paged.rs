//! An official checkpoint's routed experts paged by the expert cache
//! ([`SafetensorsWeights::page_experts`]): nothing is stacked or converted at load; each
//! expert is read from its own tensors (values, then scales) when a node needs it and
//! converted by the same [`super::recipe::Recipe`] that loading into memory uses, so the
//! cache holds exactly the bytes the stacked tensor would have had. The stack the graph
//! declares is address space that reads as zeros ([`crate::files::zero_reservation`]);
//! MUL_MAT_ID takes every expert from the cache. The experts' recipes are listed and checked
//! by one function, [`SafetensorsWeights::expert_recipes`], which the stacked copy also uses.

use super::recipe::Recipe;
use super::{map_name, unsupported, Mapped, SafetensorsWeights};
use crate::safetensors::TensorInfo;
use crate::weights::{ExpertCache, ExpertConvert, ExpertPart, ForwardError};
use graph::ExpertSource;
use quant::DType;
use std::sync::Arc;

/// Each expert's recipe and the tensors it reads (values, then scales).
pub(super) type ExpertRecipes<'s> = Vec<(Recipe, Vec<&'s TensorInfo>)>;

/// One layer's expert tensor, paged: the stack's type and shape (`{in, out, E}`) and the
/// cache's source for it.
#[derive(Debug, Clone)]
pub(super) struct PagedStack {
    pub dtype: DType,
    pub ne: Vec<usize>,
    pub src: Arc<dyn ExpertSource>,
}

impl SafetensorsWeights {
    /// Pages every routed-expert tensor of the model through `cache` (each layer's gate, up
    /// and down one group), checking every expert's tensors from the headers now; returns
    /// the bytes the cache pages (every expert as converted).
    pub fn page_experts(&mut self, cache: &ExpertCache) -> Result<u64, ForwardError> {
        let mut paged = 0;
        for gguf in self.names.clone() {
            let Some(Mapped::Experts { layer, w }) = map_name(&gguf) else {
                continue;
            };
            if let Some(stack) = self.paged_stack(&gguf, layer, w, cache)? {
                let n = stack.ne.iter().product::<usize>();
                paged += quant::bytes_for(stack.dtype, n).unwrap_or(0) as u64;
                self.paged.insert(gguf, stack);
            }
        }
        Ok(paged)
    }

    /// The recipes of one layer's expert matrices `layers.{layer}.ffn.experts.*.{w}.weight`,
    /// each with the tensors it reads (values, then scales), checked alike: every expert
    /// present, 2-D, of expert 0's type and shape. `None` where the checkpoint has no such
    /// experts. The stacked copy and the paged experts are both made from these.
    pub(super) fn expert_recipes(
        &self,
        gguf: &str,
        layer: usize,
        w: &str,
    ) -> Result<Option<ExpertRecipes<'_>>, ForwardError> {
        let name = |e: usize| format!("layers.{layer}.ffn.experts.{e}.{w}.weight");
        if self.model.tensor(&name(0)).is_none() {
            return Ok(None);
        }
        let mut list: ExpertRecipes = Vec::with_capacity(self.n_expert);
        for e in 0..self.n_expert {
            let n = name(e);
            let t = self
                .model
                .tensor(&n)
                .ok_or_else(|| ForwardError::Missing(format!("{n} (expert {e} of '{gguf}')")))?;
            let (r, tensors) = self.recipe(gguf, t)?;
            match list.first() {
                None if r.ne.len() != 2 => {
                    return Err(unsupported(
                        gguf,
                        &t.name,
                        format_args!("expert matrix of rank {}", r.ne.len()),
                    ))
                }
                Some((r0, _)) if r.dtype != r0.dtype || r.ne != r0.ne => {
                    return Err(ForwardError::Shape {
                        name: format!("{n} ({} in '{gguf}', expert 0 is {})", r.dtype, r0.dtype),
                        got: r.ne,
                        want: r0.ne.clone(),
                    })
                }
                _ => {}
            }
            list.push((r, tensors));
        }
        Ok(Some(list))
    }

    /// The paged stack of `layers.{layer}.ffn.experts.*.{w}.weight` (`None` where the
    /// checkpoint has no such experts).
    fn paged_stack(
        &self,
        gguf: &str,
        layer: usize,
        w: &str,
        cache: &ExpertCache,
    ) -> Result<Option<PagedStack>, ForwardError> {
        let Some(list) = self.expert_recipes(gguf, layer, w)? else {
            return Ok(None);
        };
        let parts = list
            .iter()
            .map(|(_, tensors)| {
                tensors
                    .iter()
                    .map(|t| ExpertPart {
                        path: self.model.shards()[t.shard].path().to_path_buf(),
                        offset: t.file_offset,
                        len: t.byte_len(),
                    })
                    .collect()
            })
            .collect();
        let t0 = list[0].1[0].name.clone();
        let recipes: Vec<Recipe> = list.into_iter().map(|(r, _)| r).collect();
        let r0 = recipes[0].clone();
        let per = r0.out_len().map_err(|e| unsupported(gguf, &t0, e))?;
        let recipes = Arc::new(recipes);
        let convert: ExpertConvert = Arc::new(move |e, parts, out| {
            recipes
                .get(e)
                .ok_or_else(|| format!("no expert {e}"))?
                .convert(parts, out)
        });
        let src = cache
            .add_tensor_parts(gguf, parts, per as u64, convert, layer as u32)
            .map_err(|e| ForwardError::Unsupported(e.to_string()))?;
        let mut ne = r0.ne;
        ne.push(self.n_expert);
        Ok(Some(PagedStack {
            dtype: r0.dtype,
            ne,
            src,
        }))
    }
}
