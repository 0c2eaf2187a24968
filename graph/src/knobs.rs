//! Live MoE knobs (issue 6): per learned-router layer settings that kernels read at execution
//! time, so a configuration change takes effect at the next token with no plan rebuild. The
//! hot path takes no lock: every field is an atomic written only between runs (the session
//! applies a new configuration before it starts the next token) and read with relaxed loads.

use std::sync::atomic::{AtomicU32, Ordering};

/// How kept routing weights are rescaled after experts are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rescale {
    /// Keep the weights as they are.
    None,
    /// Multiply by `Σ_all w / Σ_kept w` (preserves the weights' sum).
    L1,
    /// Multiply by `sqrt(Σ_all w² / Σ_kept w²)` (preserves the expected norm of a sum of
    /// nearly orthogonal expert outputs; the default).
    L2,
}

impl Rescale {
    fn code(self) -> u32 {
        match self {
            Rescale::None => 0,
            Rescale::L1 => 1,
            Rescale::L2 => 2,
        }
    }
    fn from_code(c: u32) -> Rescale {
        match c {
            1 => Rescale::L1,
            2 => Rescale::L2,
            _ => Rescale::None,
        }
    }
}

/// The resolved setting of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerMoe {
    /// Experts kept (the first `top_k` of the router's selection); 0 = the model's own.
    pub top_k: u32,
    /// Rescaling of the kept weights.
    pub rescale: Rescale,
    /// Adaptive tail: drop kept experts whose weight is below this (0 = off).
    pub min_weight: f32,
    /// …but never keep fewer than this many.
    pub min_k: u32,
    /// Gate-first SwiGLU rows kept per 128-row stratum of routed experts (0 = all).
    pub keep_experts: u32,
    /// The same for the shared expert (0 = all).
    pub keep_shared: u32,
}

impl LayerMoe {
    /// The model's own routing: nothing dropped, nothing skipped.
    pub const MODEL: LayerMoe = LayerMoe {
        top_k: 0,
        rescale: Rescale::L2,
        min_weight: 0.0,
        min_k: 1,
        keep_experts: 0,
        keep_shared: 0,
    };

    /// True when this setting changes nothing for a layer with `k` experts per token.
    pub fn is_identity(&self, k: usize) -> bool {
        (self.top_k == 0 || self.top_k as usize >= k) && self.min_weight <= 0.0
    }
}

#[derive(Debug, Default)]
struct Slot {
    top_k: AtomicU32,
    rescale: AtomicU32,
    min_weight: AtomicU32,
    min_k: AtomicU32,
    keep_experts: AtomicU32,
    keep_shared: AtomicU32,
}

/// Live settings for every layer of a model (shared by the graph ops through an `Arc`).
#[derive(Debug)]
pub struct MoeKnobs {
    slots: Vec<Slot>,
}

impl MoeKnobs {
    /// Knobs for `n_layer` layers, all at the model's own routing.
    pub fn new(n_layer: usize) -> MoeKnobs {
        let k = MoeKnobs {
            slots: (0..n_layer).map(|_| Slot::default()).collect(),
        };
        for l in 0..n_layer {
            k.set(l, LayerMoe::MODEL);
        }
        k
    }
    /// Number of layers.
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    /// True for a model without layers.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// Set layer `l` (call between runs only).
    pub fn set(&self, l: usize, m: LayerMoe) {
        if let Some(s) = self.slots.get(l) {
            s.top_k.store(m.top_k, Ordering::Relaxed);
            s.rescale.store(m.rescale.code(), Ordering::Relaxed);
            s.min_weight
                .store(m.min_weight.to_bits(), Ordering::Relaxed);
            s.min_k.store(m.min_k, Ordering::Relaxed);
            s.keep_experts.store(m.keep_experts, Ordering::Relaxed);
            s.keep_shared.store(m.keep_shared, Ordering::Relaxed);
        }
    }
    /// The setting of layer `l` (the model's own routing for an unknown layer).
    pub fn get(&self, l: usize) -> LayerMoe {
        match self.slots.get(l) {
            Some(s) => LayerMoe {
                top_k: s.top_k.load(Ordering::Relaxed),
                rescale: Rescale::from_code(s.rescale.load(Ordering::Relaxed)),
                min_weight: f32::from_bits(s.min_weight.load(Ordering::Relaxed)),
                min_k: s.min_k.load(Ordering::Relaxed),
                keep_experts: s.keep_experts.load(Ordering::Relaxed),
                keep_shared: s.keep_shared.load(Ordering::Relaxed),
            },
            None => LayerMoe::MODEL,
        }
    }
}

/// Apply a layer's top-k / tail / rescale rule to one token's routing weights `w` (in the
/// router's selection order, after the model's normalisation and routed scaling), in place:
/// dropped experts get weight exactly 0. The identity setting leaves `w` untouched (bit-exact).
pub fn apply_routing(m: &LayerMoe, w: &mut [f32]) {
    let k = w.len();
    if m.is_identity(k) {
        return;
    }
    let mut keep = if m.top_k == 0 {
        k
    } else {
        (m.top_k as usize).min(k)
    }
    .max(1);
    if m.min_weight > 0.0 {
        let floor = (m.min_k as usize).clamp(1, keep);
        while keep > floor && w[keep - 1] < m.min_weight {
            keep -= 1;
        }
    }
    let (all1, all2): (f64, f64) = w.iter().fold((0.0, 0.0), |(a, b), &x| {
        (a + x as f64, b + (x as f64) * (x as f64))
    });
    let (kept1, kept2): (f64, f64) = w[..keep].iter().fold((0.0, 0.0), |(a, b), &x| {
        (a + x as f64, b + (x as f64) * (x as f64))
    });
    let f = match m.rescale {
        Rescale::None => 1.0,
        Rescale::L1 if kept1 > 0.0 => all1 / kept1,
        Rescale::L2 if kept2 > 0.0 => (all2 / kept2).sqrt(),
        _ => 1.0,
    } as f32;
    for (i, x) in w.iter_mut().enumerate() {
        *x = if i < keep { *x * f } else { 0.0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(top_k: u32, rescale: Rescale, min_weight: f32, min_k: u32) -> LayerMoe {
        LayerMoe {
            top_k,
            rescale,
            min_weight,
            min_k,
            keep_experts: 0,
            keep_shared: 0,
        }
    }

    #[test]
    fn identity_is_bit_exact() {
        let mut w = [0.4f32, 0.3, 0.25, 0.2, 0.2, 0.15];
        let orig = w;
        apply_routing(&m(0, Rescale::L2, 0.0, 1), &mut w);
        assert_eq!(w.map(f32::to_bits), orig.map(f32::to_bits));
        apply_routing(&m(6, Rescale::L1, 0.0, 1), &mut w);
        assert_eq!(w.map(f32::to_bits), orig.map(f32::to_bits));
    }

    #[test]
    fn top_k_with_each_rescale() {
        let w0 = [0.5f32, 0.4, 0.3, 0.2, 0.1, 0.0];
        let mut w = w0;
        apply_routing(&m(4, Rescale::None, 0.0, 1), &mut w);
        assert_eq!(w, [0.5, 0.4, 0.3, 0.2, 0.0, 0.0]);
        let mut w = w0;
        apply_routing(&m(4, Rescale::L1, 0.0, 1), &mut w);
        let f1 = 1.5 / 1.4;
        for (g, e) in w
            .iter()
            .zip([0.5 * f1, 0.4 * f1, 0.3 * f1, 0.2 * f1, 0.0, 0.0])
        {
            assert!((g - e as f32).abs() < 1e-6, "{w:?}");
        }
        let mut w = w0;
        apply_routing(&m(2, Rescale::L2, 0.0, 1), &mut w);
        let f2 = ((0.25f64 + 0.16 + 0.09 + 0.04 + 0.01) / (0.25 + 0.16)).sqrt();
        assert!((w[0] - (0.5 * f2) as f32).abs() < 1e-6 && (w[1] - (0.4 * f2) as f32).abs() < 1e-6);
        assert_eq!(&w[2..], &[0.0; 4]);
    }

    #[test]
    fn adaptive_tail_respects_min_k() {
        let mut w = [0.6f32, 0.5, 0.2, 0.1, 0.06, 0.04];
        apply_routing(&m(0, Rescale::None, 0.15, 1), &mut w);
        assert_eq!(w, [0.6, 0.5, 0.2, 0.0, 0.0, 0.0]);
        let mut w = [0.6f32, 0.05, 0.04, 0.03, 0.02, 0.01];
        apply_routing(&m(5, Rescale::None, 0.5, 3), &mut w);
        assert_eq!(w, [0.6, 0.05, 0.04, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn knobs_round_trip() {
        let k = MoeKnobs::new(3);
        assert_eq!(k.get(1), LayerMoe::MODEL);
        let s = m(4, Rescale::L1, 0.05, 2);
        k.set(1, s);
        assert_eq!(k.get(1), s);
        assert_eq!(k.get(0), LayerMoe::MODEL);
        assert_eq!(k.get(7), LayerMoe::MODEL);
    }
}
