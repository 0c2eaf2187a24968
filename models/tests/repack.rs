//! `--repack iq1_s,iq2_xxs,iq1_m`: the IQ1_S (IQ2_XXS, IQ1_M) tensors of a GGUF are converted
//! once at load into IQ1_S_X (IQ2_XXS_X, IQ1_M_X), fathom's lossless repacked layouts, and a
//! session over them
//! gives the plain session's logits bit for bit — prefill (the tiled expert GEMM, the dense
//! rows kernels) and decode (the one-column and multi-row kernels) alike. `--repack q2_0`
//! converts the Q2_0 tensors whose rows are whole 512-element groups into Q2_0_X (the tiny
//! model has none, so a written file checks it).

use fathom_models::deepseek4::{DeepSeek4, Hparams};
use fathom_models::gguf::GgufFile;
use fathom_models::session::Session;
use fathom_models::weights::{GgufWeights, Repack, Weights};
use graph::Graph;
use quant::DType;
use std::sync::Arc;

mod session_support;
use session_support::greedy;

fn model() -> (Arc<GgufFile>, Hparams) {
    model_of("IQ1_S")
}

fn model_of(quant: &str) -> (Arc<GgufFile>, Hparams) {
    let p = format!(
        "{}/tests/fixtures/dsv4-tiny/dsv4-tiny-{quant}.gguf",
        env!("CARGO_MANIFEST_DIR")
    );
    let f = Arc::new(GgufFile::open(p).unwrap());
    let hp = Hparams::from_gguf(&f).unwrap();
    (f, hp)
}

/// The layout this CPU repacks IQ1_S into (none without a SIMD IQ1_S_X kernel).
fn expected() -> DType {
    expected_for(DType::IQ1_S, DType::IQ1_S_X)
}

/// `to` where this CPU's kernels for it do every job `from`'s do, else `from` (not repacked).
fn expected_for(from: DType, to: DType) -> DType {
    if quant::simd::table::covers(to, from, quant::simd::CpuLevel::detect()) {
        to
    } else {
        from
    }
}

/// At the AVX2 levels IQ2_XXS_X, IQ1_S_X and IQ1_M_X have the multi-column kernels (and
/// IQ2_XXS_X, with AVX-VNNI, the group tile) their stored types have, so they are made;
/// Q2_0_X has no AVX2 kernel at all, so it is not.
#[test]
fn repacks_are_made_only_where_their_kernels_do_every_job() {
    use quant::simd::CpuLevel;
    if CpuLevel::detect() < CpuLevel::Avx2 {
        return; // no SIMD kernel at all: nothing is repacked (checked above)
    }
    let all = Repack::parse("all").unwrap();
    for level in [CpuLevel::Avx2, CpuLevel::Avx2Vnni] {
        assert_eq!(
            all.target(DType::IQ2_XXS, level),
            Some(DType::IQ2_XXS_X),
            "{level}"
        );
        assert_eq!(
            all.target(DType::IQ1_S, level),
            Some(DType::IQ1_S_X),
            "{level}"
        );
        assert_eq!(
            all.target(DType::IQ1_M, level),
            Some(DType::IQ1_M_X),
            "{level}"
        );
        assert_eq!(all.target(DType::Q2_0, level), None, "{level}");
        assert_eq!(all.left_as_stored(level), [DType::Q2_0], "{level}");
    }
    // at the top level every repack covers its type
    if CpuLevel::detect() >= CpuLevel::Avx512Vnni {
        for (t, x) in [
            (DType::IQ2_XXS, DType::IQ2_XXS_X),
            (DType::IQ1_S, DType::IQ1_S_X),
            (DType::IQ1_M, DType::IQ1_M_X),
            (DType::Q2_0, DType::Q2_0_X),
        ] {
            assert_eq!(all.target(t, CpuLevel::detect()), Some(x), "{t:?}");
        }
    }
}

const IQ1: Repack = Repack {
    iq1_s: true,
    iq2_xxs: false,
    iq1_m: false,
    q2_0: false,
};
const IQ2: Repack = Repack {
    iq1_s: false,
    iq2_xxs: true,
    iq1_m: false,
    q2_0: false,
};
const IQ1M: Repack = Repack {
    iq1_s: false,
    iq2_xxs: false,
    iq1_m: true,
    q2_0: false,
};
const Q2: Repack = Repack {
    iq1_s: false,
    iq2_xxs: false,
    iq1_m: false,
    q2_0: true,
};

#[test]
fn repack_parses_and_converts_only_iq1_s() {
    assert_eq!(Repack::parse("none").unwrap(), Repack::default());
    assert!(Repack::parse("IQ1_S").unwrap().iq1_s);
    assert!(Repack::parse(" iq1_s , none").unwrap().iq1_s);
    assert_eq!(Repack::parse("iq2_xxs").unwrap(), IQ2);
    assert_eq!(Repack::parse("IQ1_M").unwrap(), IQ1M);
    assert_eq!(Repack::parse("q2_0").unwrap(), Q2);
    assert_eq!(
        Repack::parse("all").unwrap(),
        Repack::parse("iq1_s,IQ2_XXS,iq1_m,Q2_0").unwrap()
    );
    let e = Repack::parse("q4_k").unwrap_err();
    assert!(e.contains("q4_k"), "{e}");
    let r = IQ1;
    assert_eq!(
        r.target(DType::IQ2_XXS, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        IQ2.target(DType::IQ2_XXS, quant::simd::CpuLevel::detect())
            .unwrap_or(DType::IQ2_XXS),
        expected_for(DType::IQ2_XXS, DType::IQ2_XXS_X)
    );
    assert_eq!(
        IQ2.target(DType::IQ1_S, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        IQ2.target(DType::IQ1_M, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        IQ1M.target(DType::IQ1_M, quant::simd::CpuLevel::detect())
            .unwrap_or(DType::IQ1_M),
        expected_for(DType::IQ1_M, DType::IQ1_M_X)
    );
    assert_eq!(
        IQ1M.target(DType::IQ1_S, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(r.target(DType::Q8_0, quant::simd::CpuLevel::detect()), None);
    assert_eq!(
        r.target(DType::IQ1_S, quant::simd::CpuLevel::detect())
            .unwrap_or(DType::IQ1_S),
        expected()
    );
    assert_eq!(
        Repack::default().target(DType::IQ1_S, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        Repack::default().loaded_bytes(DType::IQ1_S, 2560, 500, quant::simd::CpuLevel::detect()),
        500
    );
    if expected() == DType::IQ1_S_X {
        assert_eq!(
            r.loaded_bytes(DType::IQ1_S, 2560, 500, quant::simd::CpuLevel::detect()),
            700
        );
    }

    let (f, _) = model();
    let mut w = GgufWeights::with_repack(f.clone(), r);
    let mut g = Graph::new();
    for name in ["blk.0.ffn_gate_exps.weight", "blk.0.attn_kv.weight"] {
        let id = w.try_get(&mut g, name).unwrap().unwrap();
        assert_eq!(g.node(id).desc.dtype, expected(), "{name}");
        let info = f.tensor(name).unwrap();
        assert_eq!(info.dtype, DType::IQ1_S);
        assert_eq!(
            g.node(id).desc.ne[..info.ne.len()],
            info.ne.iter().map(|&x| x as usize).collect::<Vec<_>>()[..]
        );
    }
    // a second graph gets the same converted bytes, not a second conversion
    let mut g2 = Graph::new();
    let id = w.try_get(&mut g2, "blk.0.attn_kv.weight").unwrap().unwrap();
    assert_eq!(g2.node(id).desc.dtype, expected());
}

#[test]
fn a_repacked_session_gives_the_plain_sessions_logits_bit_for_bit() {
    session_matches("IQ1_S", IQ1);
}

#[test]
fn an_iq2_xxs_repacked_session_gives_the_plain_sessions_logits_bit_for_bit() {
    assert_expert_repacked("IQ2_XXS", IQ2, DType::IQ2_XXS, DType::IQ2_XXS_X);
    session_matches("IQ2_XXS", IQ2);
}

#[test]
fn an_iq1_m_repacked_session_gives_the_plain_sessions_logits_bit_for_bit() {
    let want = assert_expert_repacked("IQ1_M", IQ1M, DType::IQ1_M, DType::IQ1_M_X);
    if want == DType::IQ1_M_X {
        assert_eq!(
            IQ1M.loaded_bytes(DType::IQ1_M, 2560, 560, quant::simd::CpuLevel::detect()),
            760
        );
    }
    session_matches("IQ1_M", IQ1M);
}

/// The tiny `quant` GGUF's first expert tensor is of type `from` in the file and, loaded
/// with `repack`, of the type this CPU repacks it to (`to` where it has the kernel); that
/// type.
fn assert_expert_repacked(quant: &str, repack: Repack, from: DType, to: DType) -> DType {
    let (f, _) = model_of(quant);
    let mut w = GgufWeights::with_repack(f.clone(), repack);
    let mut g = Graph::new();
    let name = "blk.0.ffn_gate_exps.weight";
    assert_eq!(f.tensor(name).unwrap().dtype, from);
    let id = w.try_get(&mut g, name).unwrap().unwrap();
    let want = expected_for(from, to);
    assert_eq!(g.node(id).desc.dtype, want, "{quant}");
    want
}

fn session_matches(quant: &str, repack: Repack) {
    let (f, hp) = model_of(quant);
    // 11 tokens: several tokens per expert in the prompt chunk (the tiled expert GEMM)
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    let session = |w: GgufWeights| -> Session {
        let m = DeepSeek4::new(hp.clone(), w, Err("no tokenizer in this test".into()));
        let cfg = backends::ExecConfig {
            threads: 2,
            ..backends::ExecConfig::default()
        };
        Session::new(Box::new(m) as Box<dyn fathom_models::model::Model>, cfg, 64).unwrap()
    };
    let mut plain = session(GgufWeights::new(f.clone()));
    let want = greedy(&mut plain, &prompt, 5);
    let mut s = session(GgufWeights::with_repack(f, repack));
    let got = greedy(&mut s, &prompt, 5);
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            a == b,
            "{quant} step {i}: repacked logits differ from the plain session's"
        );
    }
}

/// `--repack q2_0`: a Q2_0 tensor with rows of whole 512-element groups is converted into
/// Q2_0_X (the repack's bytes, the same size), one with 256-element rows stays Q2_0 (as do
/// all of the tiny model's, whose session is unchanged), and `loaded_bytes` is the file's.
#[test]
fn q2_0_tensors_with_whole_groups_are_repacked() {
    use fathom_models::gguf::{GgufWriter, Value};
    let want = expected_for(DType::Q2_0, DType::Q2_0_X);
    assert_eq!(
        Q2.target_for(DType::Q2_0, 256, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        Q2.target_for(DType::Q2_0, 4096, quant::simd::CpuLevel::detect())
            .unwrap_or(DType::Q2_0),
        want
    );
    assert_eq!(
        Q2.target_for(DType::IQ1_S, 4096, quant::simd::CpuLevel::detect()),
        None
    );
    assert_eq!(
        Q2.loaded_bytes(DType::Q2_0, 4096, 9216, quant::simd::CpuLevel::detect()),
        9216
    );
    assert_eq!(
        Q2.loaded_bytes(DType::Q2_0, 256, 72, quant::simd::CpuLevel::detect()),
        72
    );

    let mut s = 0x2a5u64;
    let mut blocks = |n: usize| -> Vec<u8> {
        let mut v: Vec<u8> = (0..n * 18)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect();
        for b in v.chunks_exact_mut(18) {
            b[..2].copy_from_slice(&quant::scalar::f32_to_f16(0.01).to_le_bytes());
        }
        v
    };
    let (wide, narrow) = (blocks(16 * 3), blocks(4 * 2));
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", Value::Str("deepseek4".into()))
        .unwrap();
    w.add_tensor("wide", DType::Q2_0, &[1024, 3], wide.clone())
        .unwrap();
    w.add_tensor("narrow", DType::Q2_0, &[256, 2], narrow.clone())
        .unwrap();
    let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
    let mut ws = GgufWeights::with_repack(f, Q2);
    let mut g = Graph::new();
    let id = ws.try_get(&mut g, "wide").unwrap().unwrap();
    assert_eq!(g.node(id).desc.dtype, want);
    let mut x = vec![0u8; wide.len()];
    quant::codec::repack::repack_q2_0_x(&wide, &mut x);
    let got = match &g.node(id).kind {
        graph::NodeKind::Weight(d) => d.bytes().to_vec(),
        k => panic!("not a weight: {k:?}"),
    };
    assert_eq!(got, if want == DType::Q2_0_X { x } else { wide });
    let id = ws.try_get(&mut g, "narrow").unwrap().unwrap();
    assert_eq!(g.node(id).desc.dtype, DType::Q2_0);

    // the tiny model's Q2_0 attention (rows of 256 and 128): nothing converted, same logits
    session_matches("MIXED", Q2);
}
