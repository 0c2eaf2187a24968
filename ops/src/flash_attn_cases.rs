//! test-ops cases of FLASH_ATTN_EXT (`fathom test-ops -o FLASH_ATTN_EXT`): head sizes from 20
//! to 512, f32 and f16 keys and masks, sliding windows over always-visible compressed keys,
//! sinks, permuted queries, strided caches, keys in two parts, and V4-Flash's decode and
//! prompt-chunk shapes.

use crate::case::CaseBuilder;
use crate::softmax::mask_input;
use crate::Case;
use graph::TensorDesc;
use quant::DType;

/// Every case.
pub(crate) fn cases() -> Vec<Case> {
    CASES.iter().map(build_case).collect()
}

/// One test-ops configuration.
struct Cfg {
    d: usize,
    h: usize,
    t: usize,
    n_kv: usize,
    kv: DType,
    /// Mask dtype and sliding window (query `tt` sits at position `n_kv − T + tt`; keys at
    /// `0..n_kv`; the first `full` keys are visible to every query, the rest use the window).
    mask: Option<(DType, usize)>,
    /// Keys visible to every query regardless of position (compressed entries).
    full: usize,
    sinks: bool,
    /// q stored as `{D, T, H}` and permuted.
    perm_q: bool,
    /// kv is every other row of a larger cache (row stride 2 rows).
    strided_kv: bool,
    /// The rows come as two parts, `kv` and `kv2`, split after this many rows.
    split: Option<usize>,
    quick: bool,
}

const fn cfg(d: usize, h: usize, t: usize, n_kv: usize, kv: DType) -> Cfg {
    Cfg {
        d,
        h,
        t,
        n_kv,
        kv,
        mask: None,
        full: 0,
        sinks: false,
        perm_q: false,
        strided_kv: false,
        split: None,
        quick: true,
    }
}

const F16: DType = DType::F16;
const F32: DType = DType::F32;

const CASES: &[Cfg] = &[
    cfg(512, 4, 1, 1, F32),
    Cfg {
        mask: Some((F16, 4)),
        sinks: true,
        ..cfg(512, 3, 5, 7, F16)
    },
    Cfg {
        mask: Some((F32, 100)),
        sinks: true,
        perm_q: true,
        strided_kv: true,
        ..cfg(64, 4, 5, 129, F32)
    },
    Cfg {
        mask: Some((F32, 50)),
        strided_kv: true,
        ..cfg(512, 3, 1, 129, F16)
    },
    Cfg {
        mask: Some((F16, 3)),
        perm_q: true,
        ..cfg(20, 4, 5, 7, F32)
    },
    Cfg {
        sinks: true,
        ..cfg(36, 3, 2, 129, F16)
    },
    Cfg {
        mask: Some((F16, 16)),
        full: 8,
        sinks: true,
        ..cfg(512, 64, 1, 33, F16)
    },
    Cfg {
        mask: Some((F16, 4)),
        sinks: true,
        ..cfg(512, 3, 2, 0, F16)
    },
    // window and compressed entries as two parts (cached V4 layers)
    Cfg {
        mask: Some((F32, 6)),
        sinks: true,
        split: Some(9),
        ..cfg(64, 5, 3, 47, F32)
    },
    Cfg {
        mask: Some((F16, 3)),
        split: Some(2),
        ..cfg(32, 2, 2, 5, F16)
    },
    // V4-Flash decode: 128 window keys + 512 compressed entries, 64 heads
    Cfg {
        mask: Some((F16, 128)),
        full: 512,
        sinks: true,
        quick: false,
        ..cfg(512, 64, 1, 640, F16)
    },
    Cfg {
        mask: Some((F32, 128)),
        full: 512,
        sinks: true,
        quick: false,
        ..cfg(512, 64, 8, 640, F32)
    },
];

/// A named f32 or f16 input `{ne}` with uniform data in ±scale.
fn float_input(
    b: &mut CaseBuilder,
    name: &str,
    dt: DType,
    ne: &[usize],
    scale: f32,
) -> graph::TensorId {
    if dt == F32 {
        return b.input_f32(name, ne, scale).expect("case");
    }
    let d = TensorDesc::new(dt, ne).expect("case");
    let bytes = b
        .rng
        .f32s(d.nelements(), scale)
        .iter()
        .flat_map(|&x| quant::scalar::f32_to_f16(x).to_le_bytes())
        .collect();
    b.input_data(name, d, bytes).expect("case")
}

/// Mask values `{n_kv, T}`: keys `< full` always visible, then a causal window over positions
/// `0..n_kv − full` for queries at `n_kv − full − T + tt` (negative positions: fully masked).
fn mask_values(c: &Cfg, window: usize) -> Vec<f32> {
    let nw = c.n_kv - c.full;
    let mut m = vec![f32::NEG_INFINITY; c.n_kv * c.t];
    for tt in 0..c.t {
        let p = nw as i64 - c.t as i64 + tt as i64;
        for k in 0..c.n_kv {
            let s = k as i64 - c.full as i64;
            let vis = s < 0 || (s <= p && s > p - window as i64);
            if vis {
                m[tt * c.n_kv + k] = 0.0;
            }
        }
    }
    m
}

fn build_case(c: &Cfg) -> Case {
    let mut b = CaseBuilder::new(41 + c.n_kv as u64);
    let q = if c.perm_q {
        let raw = b.input_f32("q", &[c.d, c.t, c.h], 3.0).expect("case");
        b.g.permute(raw, [0, 2, 1, 3]).expect("case")
    } else {
        b.input_f32("q", &[c.d, c.h, c.t], 3.0).expect("case")
    };
    let mut kv2 = None;
    let kv = if let Some(n1) = c.split {
        kv2 = Some(float_input(&mut b, "kv2", c.kv, &[c.d, c.n_kv - n1], 1.0));
        float_input(&mut b, "kv", c.kv, &[c.d, n1], 1.0)
    } else if c.strided_kv {
        let cache = float_input(&mut b, "cache", c.kv, &[c.d, 2 * c.n_kv + 1], 1.0);
        let rb = c.d * c.kv.type_size();
        let nb = [c.kv.type_size(), 2 * rb, 2 * rb * c.n_kv, 2 * rb * c.n_kv];
        b.g.view(cache, [c.d, c.n_kv, 1, 1], nb, rb).expect("case")
    } else {
        float_input(&mut b, "kv", c.kv, &[c.d, c.n_kv], 1.0)
    };
    let mask = c
        .mask
        .map(|(dt, w)| mask_input(&mut b, dt, &[c.n_kv, c.t], &mask_values(c, w)));
    let sinks = c
        .sinks
        .then(|| b.input_f32("sinks", &[c.h], 2.0).expect("case"));
    let scale = 1.0 / (c.d as f32).sqrt();
    let out =
        b.g.flash_attn_parts(q, kv, kv2, mask, sinks, scale)
            .expect("case");
    let name = format!(
        "FLASH_ATTN_EXT q{{{},{},{}}} kv {}{{{},{}}} mask={:?} full={} sinks={} perm_q={} strided_kv={} split={:?}",
        c.d, c.h, c.t, c.kv, c.d, c.n_kv, c.mask, c.full, c.sinks, c.perm_q, c.strided_kv, c.split
    );
    b.finish(name, out, 1e-10, c.quick).expect("case")
}
