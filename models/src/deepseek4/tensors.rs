//! The DeepSeek-V4 tensor table: every tensor of the model with its GGUF name (llama.cpp's,
//! spec §3), its name in the official checkpoint, its shape (GGUF order: the PyTorch shape
//! reversed) and which layers have it. The one place these are written down: the forward
//! graph asks for tensors through it, the checkpoint loader maps names with it, and
//! `fathom synth` writes its files from it.

use super::hparams::{AttnKind, Hparams};

/// One kind of tensor: global, or one per layer (`blk.{l}.` / `layers.{l}.`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is its GGUF name, see `TABLE`
pub enum Tensor {
    TokenEmbd,
    HcAttnFn,
    HcAttnBase,
    HcAttnScale,
    HcFfnFn,
    HcFfnBase,
    HcFfnScale,
    AttnNorm,
    AttnQA,
    AttnQANorm,
    AttnQB,
    AttnKv,
    AttnKvANorm,
    AttnSinks,
    AttnOutputA,
    AttnOutputB,
    AttnCompressorKv,
    AttnCompressorGate,
    AttnCompressorApe,
    AttnCompressorNorm,
    IndexerQB,
    IndexerProj,
    IndexerCompressorKv,
    IndexerCompressorGate,
    IndexerCompressorApe,
    IndexerCompressorNorm,
    FfnNorm,
    FfnGateInp,
    FfnGateTid2eid,
    ExpProbsB,
    FfnGateExps,
    FfnUpExps,
    FfnDownExps,
    FfnGateShexp,
    FfnUpShexp,
    FfnDownShexp,
    OutputHcFn,
    OutputHcBase,
    OutputHcScale,
    OutputNorm,
    Output,
}

/// What a tensor is, for choosing its storage type (`fathom synth`'s recipes) and its
/// conversions (the checkpoint loader).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The token embedding.
    Embedding,
    /// The LM head.
    Head,
    /// The attention projections (q, kv, output).
    Attention,
    /// The compressors' kv / gate projections and the indexer's head weights.
    Compressor,
    /// The Lightning Indexer's query projection.
    IndexerQuery,
    /// The MoE router.
    Router,
    /// Stacked routed experts `{in, out, E}`.
    Experts,
    /// The shared expert's gate and up projections.
    SharedGateUp,
    /// The shared expert's down projection.
    SharedDown,
    /// Small f32 tensors: norms, HC mixes and scales, APE, sinks, router bias.
    Small,
    /// The hash-routing table `tid2eid` (expert ids, I32).
    Ids,
}

/// Where a tensor lives in the official checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Official {
    /// One tensor: the global name, or the suffix after `layers.{l}.`.
    Name(&'static str),
    /// The stack of `layers.{l}.ffn.experts.{E}.{w}.weight` over every expert `E`.
    Experts(&'static str),
}

/// The table: kind, GGUF name (global) or suffix after `blk.{l}.`, official name, role.
/// In the order of llama.cpp's converter (and `fathom synth`): the token embedding, every
/// layer's tensors, then the head.
const TABLE: &[(Tensor, &str, Official, Role)] = {
    use Official::{Experts as X, Name as N};
    use Role::*;
    use Tensor::*;
    &[
        (TokenEmbd, "token_embd.weight", N("embed.weight"), Embedding),
        (HcAttnFn, "hc_attn_fn.weight", N("hc_attn_fn"), Small),
        (HcAttnBase, "hc_attn_base.weight", N("hc_attn_base"), Small),
        (
            HcAttnScale,
            "hc_attn_scale.weight",
            N("hc_attn_scale"),
            Small,
        ),
        (HcFfnFn, "hc_ffn_fn.weight", N("hc_ffn_fn"), Small),
        (HcFfnBase, "hc_ffn_base.weight", N("hc_ffn_base"), Small),
        (HcFfnScale, "hc_ffn_scale.weight", N("hc_ffn_scale"), Small),
        (AttnNorm, "attn_norm.weight", N("attn_norm.weight"), Small),
        (AttnQA, "attn_q_a.weight", N("attn.wq_a.weight"), Attention),
        (
            AttnQANorm,
            "attn_q_a_norm.weight",
            N("attn.q_norm.weight"),
            Small,
        ),
        (AttnQB, "attn_q_b.weight", N("attn.wq_b.weight"), Attention),
        (AttnKv, "attn_kv.weight", N("attn.wkv.weight"), Attention),
        (
            AttnKvANorm,
            "attn_kv_a_norm.weight",
            N("attn.kv_norm.weight"),
            Small,
        ),
        (AttnSinks, "attn_sinks.weight", N("attn.attn_sink"), Small),
        (
            AttnOutputA,
            "attn_output_a.weight",
            N("attn.wo_a.weight"),
            Attention,
        ),
        (
            AttnOutputB,
            "attn_output_b.weight",
            N("attn.wo_b.weight"),
            Attention,
        ),
        (
            AttnCompressorKv,
            "attn_compressor_kv.weight",
            N("attn.compressor.wkv.weight"),
            Compressor,
        ),
        (
            AttnCompressorGate,
            "attn_compressor_gate.weight",
            N("attn.compressor.wgate.weight"),
            Compressor,
        ),
        (
            AttnCompressorApe,
            "attn_compressor_ape.weight",
            N("attn.compressor.ape"),
            Small,
        ),
        (
            AttnCompressorNorm,
            "attn_compressor_norm.weight",
            N("attn.compressor.norm.weight"),
            Small,
        ),
        (
            IndexerQB,
            "indexer.attn_q_b.weight",
            N("attn.indexer.wq_b.weight"),
            IndexerQuery,
        ),
        (
            IndexerProj,
            "indexer.proj.weight",
            N("attn.indexer.weights_proj.weight"),
            Compressor,
        ),
        (
            IndexerCompressorKv,
            "indexer_compressor_kv.weight",
            N("attn.indexer.compressor.wkv.weight"),
            Compressor,
        ),
        (
            IndexerCompressorGate,
            "indexer_compressor_gate.weight",
            N("attn.indexer.compressor.wgate.weight"),
            Compressor,
        ),
        (
            IndexerCompressorApe,
            "indexer_compressor_ape.weight",
            N("attn.indexer.compressor.ape"),
            Small,
        ),
        (
            IndexerCompressorNorm,
            "indexer_compressor_norm.weight",
            N("attn.indexer.compressor.norm.weight"),
            Small,
        ),
        (FfnNorm, "ffn_norm.weight", N("ffn_norm.weight"), Small),
        (
            FfnGateInp,
            "ffn_gate_inp.weight",
            N("ffn.gate.weight"),
            Router,
        ),
        (
            FfnGateTid2eid,
            "ffn_gate_tid2eid.weight",
            N("ffn.gate.tid2eid"),
            Ids,
        ),
        (ExpProbsB, "exp_probs_b.bias", N("ffn.gate.bias"), Small),
        (FfnGateExps, "ffn_gate_exps.weight", X("w1"), Experts),
        (FfnUpExps, "ffn_up_exps.weight", X("w3"), Experts),
        (FfnDownExps, "ffn_down_exps.weight", X("w2"), Experts),
        (
            FfnGateShexp,
            "ffn_gate_shexp.weight",
            N("ffn.shared_experts.w1.weight"),
            SharedGateUp,
        ),
        (
            FfnUpShexp,
            "ffn_up_shexp.weight",
            N("ffn.shared_experts.w3.weight"),
            SharedGateUp,
        ),
        (
            FfnDownShexp,
            "ffn_down_shexp.weight",
            N("ffn.shared_experts.w2.weight"),
            SharedDown,
        ),
        (OutputHcFn, "output_hc_fn.weight", N("hc_head_fn"), Small),
        (
            OutputHcBase,
            "output_hc_base.weight",
            N("hc_head_base"),
            Small,
        ),
        (
            OutputHcScale,
            "output_hc_scale.weight",
            N("hc_head_scale"),
            Small,
        ),
        (OutputNorm, "output_norm.weight", N("norm.weight"), Small),
        (Output, "output.weight", N("head.weight"), Head),
    ]
};

fn row(t: Tensor) -> &'static (Tensor, &'static str, Official, Role) {
    TABLE
        .iter()
        .find(|r| r.0 == t)
        .expect("every tensor kind has a row")
}

impl Tensor {
    /// Whether there is one per layer (else one for the model).
    pub fn per_layer(self) -> bool {
        !matches!(
            self,
            Tensor::TokenEmbd
                | Tensor::OutputHcFn
                | Tensor::OutputHcBase
                | Tensor::OutputHcScale
                | Tensor::OutputNorm
                | Tensor::Output
        )
    }

    /// The GGUF name, in layer `l` for a per-layer tensor (`l` is ignored otherwise).
    pub fn name(self, l: usize) -> String {
        let s = row(self).1;
        if self.per_layer() {
            format!("blk.{l}.{s}")
        } else {
            s.to_string()
        }
    }

    /// Where it lives in the official checkpoint.
    pub fn official(self) -> Official {
        row(self).2
    }

    /// Its role.
    pub fn role(self) -> Role {
        row(self).3
    }

    /// Whether layer `l` of a model with `hp` has it: the compressor tensors only compressed
    /// layers, the indexer's only CSA layers, `tid2eid` only the hash-routed layers and the
    /// router bias only the others. Global tensors are always there.
    pub fn in_layer(self, hp: &Hparams, l: usize) -> bool {
        use Tensor::*;
        match self {
            AttnCompressorKv | AttnCompressorGate | AttnCompressorApe | AttnCompressorNorm => {
                hp.attn_kind(l) != AttnKind::Sliding
            }
            IndexerQB
            | IndexerProj
            | IndexerCompressorKv
            | IndexerCompressorGate
            | IndexerCompressorApe
            | IndexerCompressorNorm => hp.attn_kind(l) == AttnKind::Csa,
            FfnGateTid2eid => hp.is_hash_layer(l),
            ExpProbsB => !hp.is_hash_layer(l),
            _ => true,
        }
    }

    /// Its shape in GGUF order (trailing 1s dropped) in layer `l` of a model with `hp`.
    pub fn shape(self, hp: &Hparams, l: usize) -> Vec<usize> {
        use Tensor::*;
        let (d, v, hc) = (hp.n_embd, hp.n_vocab, hp.hc);
        let (h, hd, e, ff) = (hp.n_head, hp.head_dim, hp.n_expert, hp.expert_ff);
        let mix = (2 + hc) * hc;
        let ratio = hp.compress_ratios.get(l).map_or(0, |&r| r as usize);
        let coff = if ratio == 4 { 2 } else { 1 };
        let (di, hi) = (hp.idx_dim, hp.idx_heads);
        let shared = ff * hp.n_expert_shared;
        match self {
            TokenEmbd | Output => vec![d, v],
            HcAttnFn | HcFfnFn => vec![hc * d, mix],
            HcAttnBase | HcFfnBase => vec![mix],
            HcAttnScale | HcFfnScale => vec![3],
            AttnNorm | FfnNorm | OutputNorm => vec![d],
            AttnQA => vec![d, hp.q_lora_rank],
            AttnQANorm => vec![hp.q_lora_rank],
            AttnQB => vec![hp.q_lora_rank, h * hd],
            AttnKv => vec![d, hd],
            AttnKvANorm | AttnCompressorNorm => vec![hd],
            AttnSinks => vec![h],
            AttnOutputA => vec![hd * h / hp.o_groups, hp.o_lora_rank * hp.o_groups],
            AttnOutputB => vec![hp.o_lora_rank * hp.o_groups, d],
            AttnCompressorKv | AttnCompressorGate => vec![d, coff * hd],
            AttnCompressorApe => vec![coff * hd, ratio],
            IndexerQB => vec![hp.q_lora_rank, hi * di],
            IndexerProj => vec![d, hi],
            IndexerCompressorKv | IndexerCompressorGate => vec![d, 2 * di],
            IndexerCompressorApe => vec![2 * di, 4],
            IndexerCompressorNorm => vec![di],
            FfnGateInp => vec![d, e],
            FfnGateTid2eid => vec![hp.n_expert_used, v],
            ExpProbsB => vec![e],
            FfnGateExps | FfnUpExps => vec![d, ff, e],
            FfnDownExps => vec![ff, d, e],
            FfnGateShexp | FfnUpShexp => vec![d, shared],
            FfnDownShexp => vec![shared, d],
            OutputHcFn => vec![hc * d, hc],
            OutputHcBase => vec![hc],
            OutputHcScale => vec![1],
        }
    }
}

/// One tensor of a model: its kind, layer (`None` for global ones), GGUF name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The kind.
    pub tensor: Tensor,
    /// The layer, for per-layer tensors.
    pub layer: Option<usize>,
    /// The GGUF name.
    pub name: String,
    /// The shape, GGUF order.
    pub ne: Vec<usize>,
}

/// Every tensor of a model with `hp`, in the converter's order.
pub fn all(hp: &Hparams) -> Vec<Spec> {
    let spec = |t: Tensor, l: Option<usize>| Spec {
        tensor: t,
        layer: l,
        name: t.name(l.unwrap_or(0)),
        ne: t.shape(hp, l.unwrap_or(0)),
    };
    let globals = |first: bool| {
        TABLE
            .iter()
            .filter(move |r| !r.0.per_layer() && (r.0 == Tensor::TokenEmbd) == first)
            .map(|r| r.0)
    };
    let mut v: Vec<Spec> = globals(true).map(|t| spec(t, None)).collect();
    for l in 0..hp.n_layer {
        for r in TABLE.iter().filter(|r| r.0.per_layer()) {
            if r.0.in_layer(hp, l) {
                v.push(spec(r.0, Some(l)));
            }
        }
    }
    v.extend(globals(false).map(|t| spec(t, None)));
    v
}

/// The kind and layer of a GGUF tensor name (`blk.3.attn_q_a.weight` → `(AttnQA, Some(3))`);
/// `None` for a name the model does not use.
pub fn parse(gguf: &str) -> Option<(Tensor, Option<usize>)> {
    if let Some(r) = TABLE.iter().find(|r| !r.0.per_layer() && r.1 == gguf) {
        return Some((r.0, None));
    }
    let (n, suffix) = gguf.strip_prefix("blk.")?.split_once('.')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let layer: usize = n.parse().ok()?;
    let r = TABLE.iter().find(|r| r.0.per_layer() && r.1 == suffix)?;
    Some((r.0, Some(layer)))
}

/// Why a GGUF tensor named `gguf` has no place in a model with `hp` (`None`: it has one): a
/// name the model does not use, a layer past the last, or a tensor its layer does not have.
/// Nothing in a file goes unused silently.
pub fn misplaced(hp: &Hparams, gguf: &str) -> Option<String> {
    match parse(gguf) {
        None => Some("is not a DeepSeek-V4 tensor".into()),
        Some((_, Some(l))) if l >= hp.n_layer => Some(format!(
            "is in layer {l}, but the model has {} layers",
            hp.n_layer
        )),
        Some((t, Some(l))) if !t.in_layer(hp, l) => Some(format!(
            "is not part of layer {l} (a {} layer{})",
            match hp.attn_kind(l) {
                AttnKind::Sliding => "sliding-window",
                AttnKind::Csa => "CSA",
                AttnKind::Hca => "HCA",
            },
            if hp.is_hash_layer(l) {
                ", hash-routed"
            } else {
                ""
            }
        )),
        _ => None,
    }
}

/// Check a hash-routing table (`tid2eid`): every entry an expert id below `n_expert`. The one
/// check for every format (GGUF and checkpoint), so that a table is accepted or refused the
/// same way wherever it comes from.
pub fn check_expert_ids(ids: impl IntoIterator<Item = i64>, n_expert: usize) -> Result<(), String> {
    match ids
        .into_iter()
        .enumerate()
        .find(|&(_, e)| e < 0 || e as u64 >= n_expert as u64)
    {
        Some((i, e)) => Err(format!(
            "entry {i} is {e}, not an expert id (0 to {})",
            n_expert.saturating_sub(1)
        )),
        None => Ok(()),
    }
}

/// The official checkpoint name of a GGUF tensor name (`blk.3.attn_q_a.weight` →
/// `layers.3.attn.wq_a.weight`); for a stacked expert tensor, the per-expert pattern with
/// `{E}` (`blk.3.ffn_gate_exps.weight` → `layers.3.ffn.experts.{E}.w1.weight`). `None` for a
/// name the model does not use.
pub fn official_name(gguf: &str) -> Option<String> {
    let (t, layer) = parse(gguf)?;
    Some(match (t.official(), layer) {
        (Official::Name(n), None) => n.to_string(),
        (Official::Name(n), Some(l)) => format!("layers.{l}.{n}"),
        (Official::Experts(w), l) => {
            format!("layers.{}.ffn.experts.{{E}}.{w}.weight", l.unwrap_or(0))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        for (gguf, off) in [
            ("token_embd.weight", "embed.weight"),
            ("output.weight", "head.weight"),
            ("blk.0.attn_q_a.weight", "layers.0.attn.wq_a.weight"),
            ("blk.12.hc_attn_fn.weight", "layers.12.hc_attn_fn"),
            (
                "blk.1.attn_kv_a_norm.weight",
                "layers.1.attn.kv_norm.weight",
            ),
            ("blk.1.attn_sinks.weight", "layers.1.attn.attn_sink"),
            ("blk.2.ffn_gate_tid2eid.weight", "layers.2.ffn.gate.tid2eid"),
            ("blk.3.exp_probs_b.bias", "layers.3.ffn.gate.bias"),
            (
                "blk.3.indexer_compressor_ape.weight",
                "layers.3.attn.indexer.compressor.ape",
            ),
            (
                "blk.3.ffn_down_exps.weight",
                "layers.3.ffn.experts.{E}.w2.weight",
            ),
        ] {
            assert_eq!(official_name(gguf).as_deref(), Some(off), "{gguf}");
            let (t, l) = parse(gguf).unwrap();
            assert_eq!(t.name(l.unwrap_or(0)), gguf);
        }
        for bad in [
            "blk..attn_q_a.weight",
            "blk.+1.attn_q_a.weight",
            "blk.1.nope",
            "nope",
            "blk.1.token_embd.weight",
            "blk.x.attn_q_a.weight",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn every_kind_has_one_row() {
        let mut seen = std::collections::HashSet::new();
        for r in TABLE {
            assert!(seen.insert(r.0), "{:?} twice", r.0);
            assert!(seen.len() <= TABLE.len());
        }
        assert_eq!(seen.len(), TABLE.len());
    }
}
