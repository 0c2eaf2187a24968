//! The type table and the crate-level API: ids, geometry, errors, and the reference dots
//! against an f64 dot of the dequantized operands on random inputs of several block counts.

use fathom_quant as quant;
use quant::{
    bytes_for, dequantize_row, quantize_activation, quantize_row, vec_dot, DType, QuantError,
};

/// Ids and (block, bytes) of ggml 0.25.3 / gguf-py 0.19.0, plus Q2_0 = 42.
const GGML: &[(u32, usize, usize)] = &[
    (0, 1, 4),
    (1, 1, 2),
    (2, 32, 18),
    (3, 32, 20),
    (6, 32, 22),
    (7, 32, 24),
    (8, 32, 34),
    (9, 32, 36),
    (10, 256, 84),
    (11, 256, 110),
    (12, 256, 144),
    (13, 256, 176),
    (14, 256, 210),
    (15, 256, 292),
    (16, 256, 66),
    (17, 256, 74),
    (18, 256, 98),
    (19, 256, 50),
    (20, 32, 18),
    (21, 256, 110),
    (22, 256, 82),
    (23, 256, 136),
    (24, 1, 1),
    (25, 1, 2),
    (26, 1, 4),
    (27, 1, 8),
    (28, 1, 8),
    (29, 256, 56),
    (30, 1, 2),
    (34, 256, 54),
    (35, 256, 66),
    (39, 32, 17),
    (40, 64, 36),
    (41, 128, 18),
    (42, 64, 18),
];

#[test]
fn every_gguf_id_0_to_42() {
    for id in 0..=42u32 {
        match DType::from_gguf_id(id) {
            Ok(t) => {
                let &(_, b, s) = GGML.iter().find(|g| g.0 == id).expect("known id in table");
                assert_eq!(
                    (t.gguf_id(), t.block_size(), t.type_size()),
                    (id, b, s),
                    "{t}"
                );
                assert_eq!(DType::from_name(t.name()), Some(t));
                assert_eq!(DType::from_name(t.info().name), Some(t));
            }
            Err(QuantError::RetiredTypeId(r)) => {
                assert_eq!(r, id);
                assert!([4, 5, 31, 32, 33, 36, 37, 38].contains(&id));
            }
            Err(e) => panic!("id {id}: {e}"),
        }
    }
    // the internal types (repacked layouts, and the checkpoint's FP8 E4M3 used in place)
    // are the only ones outside ggml's table
    let internal: Vec<DType> = DType::ALL
        .iter()
        .copied()
        .filter(|t| !t.is_gguf())
        .collect();
    assert_eq!(
        internal,
        [
            DType::IQ1_S_X,
            DType::IQ2_XXS_X,
            DType::IQ1_M_X,
            DType::Q2_0_X,
            DType::F8_E4M3
        ]
    );
    assert_eq!(DType::ALL.len(), GGML.len() + internal.len());
    for t in internal {
        assert!(t.gguf_id() >= DType::FIRST_INTERNAL_ID);
        assert_eq!(
            DType::from_gguf_id(t.gguf_id()),
            Err(QuantError::UnknownTypeId(t.gguf_id()))
        );
    }
    for id in [43, 44, 100, 1000, 1019, 1021, u32::MAX] {
        let e = DType::from_gguf_id(id).unwrap_err();
        assert_eq!(e, QuantError::UnknownTypeId(id));
        assert!(e.to_string().contains(&id.to_string()));
    }
}

#[test]
fn row_bytes_is_checked() {
    assert_eq!(DType::Q4_K.row_bytes(4096).unwrap(), 16 * 144);
    assert!(matches!(
        DType::Q4_K.row_bytes(100),
        Err(QuantError::RowNotMultiple { .. })
    ));
    assert_eq!(
        DType::F32.row_bytes(u64::MAX / 2),
        Err(QuantError::Overflow)
    );
    assert!(DType::Q8_0.row_bytes(u64::MAX - 31).is_err());
}

#[test]
fn api_errors_instead_of_panics() {
    let mut out = vec![0f32; 256];
    let e = dequantize_row(DType::Q4_K, &[0u8; 100], &mut out).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::Length {
                got: 100,
                expected: 144,
                ..
            }
        ),
        "{e}"
    );
    let e = dequantize_row(DType::Q4_K, &[0u8; 144], &mut out[..100]).unwrap_err();
    assert!(matches!(e, QuantError::RowNotMultiple { .. }));
    let e = dequantize_row(DType::Q3_K, &[0u8; 110], &mut out).unwrap_err();
    assert!(matches!(e, QuantError::Unsupported { .. }));
    let e = quantize_row(DType::IQ1_S, &out, &mut [0u8; 50]).unwrap_err();
    assert!(matches!(e, QuantError::Unsupported { .. }));
    let e = vec_dot(DType::Q8_K, 256, &[0u8; 292], &[0u8; 292]).unwrap_err();
    assert!(matches!(e, QuantError::Unsupported { .. }));
    let e = vec_dot(DType::Q4_K, 256, &[0u8; 144], &[0u8; 291]).unwrap_err();
    assert!(matches!(e, QuantError::Length { .. }), "{e}");
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn gauss(&mut self) -> f32 {
        (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .sum::<f32>()
            * 1.7
    }
}

/// Random bytes that are valid blocks: f16 scale fields set to small finite values.
fn random_blocks(t: DType, nb: usize, rng: &mut Rng) -> Vec<u8> {
    let mut v: Vec<u8> = (0..nb * t.type_size()).map(|_| rng.next() as u8).collect();
    let small_f16 = |rng: &mut Rng| {
        quant::scalar::f32_to_f16(0.001 + (rng.next() % 1000) as f32 * 1e-5).to_le_bytes()
    };
    for b in v.chunks_exact_mut(t.type_size()) {
        let offs: &[usize] = match t {
            DType::Q8_0
            | DType::Q2_0
            | DType::Q1_0
            | DType::IQ2_XXS
            | DType::IQ2_XS
            | DType::IQ1_S
            | DType::IQ4_XS => &[0],
            DType::Q4_K | DType::Q5_K => &[0, 2],
            DType::Q6_K => &[208],
            DType::Q2_K => &[80, 82],
            DType::MXFP4 => {
                b[0] = 120 + (rng.next() % 10) as u8;
                &[]
            }
            DType::IQ1_M | DType::IQ1_M_X => {
                // keep the f16 nibbles (top 4 bits of each scale word, the block's last eight
                // bytes) a small normal number
                let d = small_f16(rng);
                let d = u16::from_le_bytes(d);
                let at = t.type_size() - 8;
                for i in 0..4 {
                    let o = at + 2 * i;
                    let w = u16::from_le_bytes([b[o], b[o + 1]]) & 0x0FFF;
                    let w = w | (((d >> (4 * i)) & 0xF) << 12);
                    b[o..o + 2].copy_from_slice(&w.to_le_bytes());
                }
                &[]
            }
            _ => &[],
        };
        for &o in offs {
            b[o..o + 2].copy_from_slice(&small_f16(rng));
        }
    }
    v
}

#[test]
fn reference_dots_match_f64_on_random_inputs() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let weight_types = [
        DType::Q8_0,
        DType::Q2_0,
        DType::Q1_0,
        DType::MXFP4,
        DType::Q2_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::IQ2_XXS,
        DType::IQ2_XS,
        DType::IQ1_S,
        DType::IQ1_M,
        DType::IQ1_M_X,
        DType::IQ4_XS,
        DType::F16,
        DType::BF16,
        DType::F32,
    ];
    for t in weight_types {
        let vt = t.info().dot_type.unwrap();
        for blocks_of_256 in [1usize, 2, 3, 5] {
            let n = 256 * blocks_of_256;
            let w = if t.is_quantized() {
                random_blocks(t, n / t.block_size(), &mut rng)
            } else {
                let x: Vec<f32> = (0..n).map(|_| rng.gauss()).collect();
                let mut b = vec![0u8; bytes_for(t, n).unwrap()];
                quantize_row(t, &x, &mut b).unwrap();
                b
            };
            let x: Vec<f32> = (0..n).map(|_| rng.gauss()).collect();
            let mut a = vec![0u8; bytes_for(vt, n).unwrap()];
            quantize_activation(vt, &x, &mut a).unwrap();
            let (mut wd, mut ad) = (vec![0f32; n], vec![0f32; n]);
            dequantize_row(t, &w, &mut wd).unwrap();
            dequantize_row(vt, &a, &mut ad).unwrap();
            let exact: f64 = wd.iter().zip(&ad).map(|(&p, &q)| p as f64 * q as f64).sum();
            let abs: f64 = wd
                .iter()
                .zip(&ad)
                .map(|(&p, &q)| (p as f64 * q as f64).abs())
                .sum();
            let got = vec_dot(t, n, &w, &a).unwrap() as f64;
            assert!(
                (got - exact).abs() <= 1e-5 * abs + 1e-6,
                "{t} n={n}: {got} vs {exact} (Σ|wx| {abs})"
            );
        }
    }
}

#[test]
fn quantize_dequantize_error_is_bounded() {
    let mut rng = Rng(77);
    // (type, max relative RMS error) — loose bounds that any broken packing would exceed
    for (t, bound) in [
        (DType::Q8_0, 0.01),
        (DType::Q6_K, 0.03),
        (DType::Q5_K, 0.06),
        (DType::Q4_K, 0.12),
        (DType::MXFP4, 0.2),
        (DType::Q2_0, 0.8),
        (DType::Q1_0, 0.8),
        (DType::Q8_K, 0.01),
        (DType::F16, 1e-3),
        (DType::BF16, 1e-2),
    ] {
        let n = 256 * 3;
        let x: Vec<f32> = (0..n).map(|_| rng.gauss()).collect();
        let mut q = vec![0u8; bytes_for(t, n).unwrap()];
        quantize_row(t, &x, &mut q).unwrap();
        let mut y = vec![0f32; n];
        dequantize_row(t, &q, &mut y).unwrap();
        let err: f32 = x
            .iter()
            .zip(&y)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f32>()
            .sqrt();
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!(err / norm < bound, "{t}: relative error {}", err / norm);
    }
}

#[test]
fn grid_tables_spot_checks() {
    use quant::grids::*;
    // values quoted in the spec (§8) and ggml-common.h
    assert_eq!(IQ2XXS_GRID[0], 0x0808080808080808);
    assert_eq!(IQ2XXS_GRID[1], 0x080808080808082b);
    assert_eq!(IQ2XS_GRID[0], 0x0808080808080808);
    assert_eq!(IQ1S_GRID[0], 0xffffffffffffffff);
    assert_eq!(KSIGNS_IQ2XS[..4], [0, 129, 130, 3]);
    for (i, &s) in KSIGNS_IQ2XS.iter().enumerate() {
        assert_eq!(s as usize, i + 128 * (i.count_ones() as usize % 2));
    }
    assert_eq!(
        KVALUES_IQ4NL,
        [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
    );
    assert_eq!(
        KVALUES_MXFP4,
        [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
    );
    let mut seen = std::collections::HashSet::new();
    assert!(
        IQ1S_GRID.iter().all(|g| seen.insert(*g)),
        "iq1s grid entries are distinct"
    );
    for g in IQ2XXS_GRID.iter().chain(IQ2XS_GRID.iter()) {
        assert!((0..8).all(|j| [8u8, 25, 43].contains(&((g >> (8 * j)) as u8))));
    }
}
