//! The DeepSeek-V4 forward graph fed straight from official-layout safetensors checkpoints
//! ([`SafetensorsWeights`]), against transformers:
//!
//! * `fixtures/dsv4-tiny/model.safetensors` — the tiny model, BF16 / F32 / I32;
//! * `fixtures/dsv4-tiny-fp8/` — the same architecture as the real checkpoint stores it:
//!   two shards + index, FP8 E4M3 dense weights with 128×128 E8M0 scales, FP4 experts
//!   (I8-packed e2m1 + per-32 E8M0 scales), I64 `tid2eid`.
//!
//! References: a subset of each fixture's `reference/hf_reference.safetensors` (see
//! `fixtures/README.md`), transformers 5.23.0 fp32 on the (exactly dequantized) weights.

use backends::{ExecConfig, Executor};
use fathom_models::deepseek4::forward::input;
use fathom_models::deepseek4::tensors::official_name;
use fathom_models::deepseek4::{Builder, Hparams, PrefillInputs, SafetensorsWeights};
use fathom_models::safetensors::SafetensorsModel;
use fathom_models::weights::policy::{Fp4Policy, Fp8Policy};
use fathom_models::weights::StOptions;
use fathom_models::weights::{ForwardError, Weights};
use graph::{Graph, NodeKind, TensorId};
use quant::DType;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

const BF16_MODEL: &str = "dsv4-tiny/model.safetensors";
const BF16_REF: &str = "dsv4-tiny/reference/hf_reference_subset.safetensors";
const FP8_MODEL: &str = "dsv4-tiny-fp8";
const FP8_REF: &str = "dsv4-tiny-fp8/reference/hf_reference_subset.safetensors";

struct Reference(SafetensorsModel);

impl Reference {
    fn open(rel: &str) -> Reference {
        Reference(SafetensorsModel::open(fixture(rel)).expect("reference"))
    }
    fn f32s(&self, name: &str) -> Vec<f32> {
        let b = self.0.tensor_data(name).expect(name);
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
    fn tokens(&self, prompt: usize) -> Vec<i32> {
        let b = self
            .0
            .tensor_data(&format!("prompt{prompt}.tokens"))
            .unwrap();
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
}

/// Records every name the builder asks for.
struct Recording<'a> {
    inner: &'a mut SafetensorsWeights,
    asked: Vec<String>,
}

impl Weights for Recording<'_> {
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        self.asked.push(name.to_string());
        self.inner.try_get(g, name)
    }
    fn new_graph(&mut self) {
        self.inner.new_graph()
    }
}

struct Output {
    logits: Vec<f32>,
    hidden: Vec<Vec<f32>>,
}

fn run(hp: &Hparams, w: &mut impl Weights, tokens: &[i32], hidden: bool) -> Output {
    let t = tokens.len();
    let g = Builder::new(hp, w, t)
        .expect("builder")
        .model(hidden)
        .expect("graph");
    let cfg = ExecConfig {
        threads: 2,
        pin: false,
        spin: 1000,
        ..ExecConfig::default()
    };
    let mut e = Executor::new(g, cfg);
    e.set_input_i32(input::TOKENS, tokens).unwrap();
    for (name, bytes) in PrefillInputs::new(hp, t).values {
        if e.plan().input(&name).is_some() {
            e.set_input(&name, &bytes).unwrap();
        }
    }
    e.run();
    let logits = e.output_f32("logits").unwrap();
    let hidden = if hidden {
        (0..hp.n_layer)
            .map(|l| e.output_f32(&format!("hidden.{l}")).unwrap())
            .collect()
    } else {
        Vec::new()
    };
    Output { logits, hidden }
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

/// (max |Δ| per row, fraction of rows with the same argmax).
fn compare(got: &[f32], want: &[f32], v: usize) -> (Vec<f32>, f64) {
    assert_eq!(got.len(), want.len());
    let rows = got.len() / v;
    let mut d = Vec::with_capacity(rows);
    let mut same = 0;
    for r in 0..rows {
        let (g, w) = (&got[r * v..(r + 1) * v], &want[r * v..(r + 1) * v]);
        d.push(max_abs(g, w));
        same += usize::from(argmax(g) == argmax(w));
    }
    (d, same as f64 / rows as f64)
}

fn open_bf16(opts: StOptions) -> (SafetensorsWeights, Hparams) {
    SafetensorsWeights::open_with(fixture(BF16_MODEL), opts).expect("open bf16 checkpoint")
}

fn open_fp8(opts: StOptions) -> (SafetensorsWeights, Hparams) {
    SafetensorsWeights::open_with(fixture(FP8_MODEL), opts).expect("open fp8 checkpoint")
}

/// Prompts 1 (7 tokens), 2 (33: 8 CSA entries) and 4 (260: 65 CSA + 2 HCA entries) in fp32,
/// plus the per-layer residual of prompt 2.
fn check_exact(w: &mut SafetensorsWeights, hp: &Hparams, reference: &str, fp8: bool) {
    let r = Reference::open(reference);
    let v = hp.n_vocab;
    for p in [1, 2, 4] {
        let tokens = r.tokens(p);
        let start = Instant::now();
        let out = run(hp, w, &tokens, p == 2);
        let want = r.f32s(&format!("prompt{p}.logits"));
        let (d, top1) = compare(&out.logits, &want, v);
        let alt = (fp8 && p == 4).then(|| r.f32s("prompt4.logits_ties_lowest"));
        let mut worst = 0f32;
        for (row, &dr) in d.iter().enumerate() {
            // FP8 model, prompt 4, rows 223..: an exact indexer tie in layer 1 (fixture README
            // §6); either tie-break is right.
            let dr = match &alt {
                Some(alt) if row >= 223 => dr.min(max_abs(
                    &out.logits[row * v..(row + 1) * v],
                    &alt[row * v..(row + 1) * v],
                )),
                _ => dr,
            };
            assert!(dr <= 1e-3, "prompt {p} row {row}: max |Δlogit| {dr:e}");
            worst = worst.max(dr);
        }
        eprintln!(
            "{reference} prompt {p} ({} tokens): max |Δlogit| {worst:.2e}, top-1 {:.1}% ({:.2} s)",
            tokens.len(),
            100.0 * top1,
            start.elapsed().as_secs_f64()
        );
        if !(fp8 && p == 4) {
            assert_eq!(top1, 1.0, "prompt {p}: top-1 agreement");
        }
        if p == 2 {
            for (l, h) in out.hidden.iter().enumerate() {
                let want = r.f32s(&format!("hidden.prompt2.layer{l}"));
                let dh = max_abs(h, &want);
                eprintln!("  hidden layer {l}: max |Δ| {dh:.2e}");
                assert!(dh <= 1e-3, "prompt 2 layer {l}: max |Δhidden| {dh:e}");
            }
        }
    }
}

#[test]
fn bf16_checkpoint_matches_transformers_in_fp32() {
    let (mut w, hp) = open_bf16(StOptions::fp32());
    check_exact(&mut w, &hp, BF16_REF, false);
}

#[test]
fn fp8_checkpoint_matches_transformers_in_fp32() {
    let (mut w, hp) = open_fp8(StOptions::fp32());
    check_exact(&mut w, &hp, FP8_REF, true);
}

/// The FP8 dense weights used in place (codes from the map, tile scales applied to the
/// activations, F32 products) with everything else in F32: the exact mode's 1e-3.
#[test]
fn fp8_in_place_matches_transformers_in_exact_mode() {
    let opts = StOptions {
        fp8: Fp8Policy::InPlace,
        ..StOptions::fp32()
    };
    let (mut w, hp) = open_fp8(opts);
    check_exact(&mut w, &hp, FP8_REF, true);
}

/// Mean KL(reference ‖ got) per row, in nats.
fn kl_mean(got: &[f32], want: &[f32], v: usize) -> f64 {
    let logp = |row: &[f32]| -> Vec<f64> {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
        row.iter().map(|&x| x as f64 - m - z.ln()).collect()
    };
    let rows = got.len() / v;
    let mut total = 0.0;
    for r in 0..rows {
        let (lg, lw) = (
            logp(&got[r * v..(r + 1) * v]),
            logp(&want[r * v..(r + 1) * v]),
        );
        total += lw
            .iter()
            .zip(&lg)
            .map(|(w, g)| w.exp() * (w - g))
            .sum::<f64>();
    }
    total / rows as f64
}

/// Default options: BF16 matrices in place (the kernels round activations to BF16), FP8 →
/// exact F32, FP4 → MXFP4 (activations to Q8_0); optionally FP8 → Q8_0. These are not fp32
/// computations, so they are gated statistically (KL, top-1), as llama.cpp's quantized files
/// are in the fixture READMEs.
fn check_default(
    w: &mut SafetensorsWeights,
    hp: &Hparams,
    reference: &str,
    label: &str,
    max_kl: f64,
    min_top1: f64,
) {
    let r = Reference::open(reference);
    let (mut all_got, mut all_want) = (Vec::new(), Vec::new());
    for p in [1, 2, 4] {
        let out = run(hp, w, &r.tokens(p), false);
        all_got.extend(out.logits);
        all_want.extend(r.f32s(&format!("prompt{p}.logits")));
    }
    let v = hp.n_vocab;
    let (d, top1) = compare(&all_got, &all_want, v);
    let worst = d.iter().copied().fold(0.0, f32::max);
    let mean = d.iter().map(|&x| x as f64).sum::<f64>() / d.len() as f64;
    let kl = kl_mean(&all_got, &all_want, v);
    eprintln!(
        "{label}, prompts 1+2+4 ({} rows): max |Δlogit| {worst:.3}, mean of row max {mean:.3}, KL mean {kl:.2e}, top-1 {:.1}%",
        d.len(),
        100.0 * top1
    );
    assert!(kl <= max_kl, "{label}: KL mean {kl:e}");
    assert!(top1 >= min_top1, "{label}: top-1 {top1}");
}

#[test]
fn bf16_checkpoint_zero_copy_default() {
    let (mut w, hp) = open_bf16(StOptions::default());
    // measured: KL 7.8e-4, top-1 96.0%, max |Δ| 0.73
    check_default(&mut w, &hp, BF16_REF, "bf16 default", 2e-3, 0.93);
}

#[test]
fn fp8_checkpoint_default_and_q8_0() {
    let (mut w, hp) = open_fp8(StOptions::default());
    // measured: KL 2.2e-3, top-1 93.7% (FP8 as exact F32 gave the same: 2.2e-3, 93.3%)
    check_default(
        &mut w,
        &hp,
        FP8_REF,
        "fp8 default (FP8 in place + MXFP4)",
        4e-3,
        0.9,
    );
    let opts = StOptions {
        fp8: Fp8Policy::Q8_0,
        ..StOptions::default()
    };
    let (mut w, hp) = open_fp8(opts);
    // measured: KL 4.3e-3, top-1 92.7% — what llama.cpp gets from its own conversion of this
    // checkpoint on the same prompts (fixture README §7: 1.9e-3 / 3.7e-3 / 4.4e-3 per prompt)
    check_default(&mut w, &hp, FP8_REF, "fp8 Q8_0 + MXFP4", 6e-3, 0.9);
}

/// Build the 130-token graph (one HCA entry, so every tensor is used), return (graph, names asked, weights provider).
fn build_recording(w: &mut SafetensorsWeights, hp: &Hparams) -> (Graph, Vec<String>) {
    let mut rec = Recording {
        inner: w,
        asked: Vec::new(),
    };
    let g = Builder::new(hp, &mut rec, 130)
        .unwrap()
        .model(false)
        .unwrap();
    (g, rec.asked)
}

fn weight_nodes(g: &Graph) -> HashMap<String, (graph::TensorDesc, &[u8])> {
    g.nodes()
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Weight(d) if !n.name.as_deref().unwrap_or("").starts_with("const.") => {
                Some((n.name.clone().unwrap(), (n.desc, d.bytes())))
            }
            _ => None,
        })
        .collect()
}

/// Every checkpoint tensor is consumed by the forward graph (scales through their weight), and
/// what is zero-copy is exactly what the module docs say.
#[test]
fn every_tensor_mapped_and_zero_copy_where_promised() {
    for (path, fp8) in [(BF16_MODEL, false), (FP8_MODEL, true)] {
        let (mut w, hp) = SafetensorsWeights::open(fixture(path)).unwrap();
        let (g, asked) = build_recording(&mut w, &hp);
        let mut used = BTreeSet::new();
        for name in &asked {
            let off = official_name(name).unwrap_or_else(|| panic!("{name}: no official name"));
            if off.contains("{E}") {
                for e in 0..hp.n_expert {
                    used.insert(off.replace("{E}", &e.to_string()));
                }
            } else {
                used.insert(off);
            }
        }
        let all: BTreeSet<String> = w
            .model()
            .tensors()
            .map(|t| t.name.clone())
            .filter(|n| !n.ends_with(".scale"))
            .collect();
        let unused: Vec<_> = all.difference(&used).collect();
        assert!(
            unused.is_empty(),
            "{path}: tensors the graph never uses: {unused:?}"
        );
        let absent: Vec<_> = used.difference(&all).collect();
        assert!(absent.is_empty(), "{path}: asked but absent: {absent:?}");

        for (name, (desc, bytes)) in weight_nodes(&g) {
            let off = official_name(&name).unwrap();
            let in_place = w.is_mapped(bytes);
            let t = w.model().tensor(&off);
            let expect_in_place = match t {
                None => false, // experts: stacked copy
                Some(t) => {
                    let dt = t.dtype.as_str();
                    dt == "F32"
                        || (dt == "BF16" && t.shape.len() >= 2)
                        || dt == "I32"
                        || dt == "F8_E4M3"
                }
            };
            assert_eq!(in_place, expect_in_place, "{path}: {name} ({off}) {desc:?}");
            if in_place {
                assert_eq!(bytes, w.model().tensor_data(&off).unwrap(), "{name}");
            }
            let want = match t {
                None if fp8 => DType::MXFP4,
                None => DType::BF16,
                Some(t) => match t.dtype.as_str() {
                    "BF16" if t.shape.len() >= 2 => DType::BF16,
                    "I32" | "I64" => DType::I32,
                    // the default policy: FP8 codes in place, with their tile scales
                    "F8_E4M3" => DType::F8_E4M3,
                    _ => DType::F32, // F32, 1-D BF16
                },
            };
            assert_eq!(desc.dtype, want, "{path}: {name}");
        }
    }
}

/// The FP8/FP4 dequantization is bit-exact: the sha256 of every one of the 338 dequantized
/// FP8/FP4 weights (float32 LE bytes, `reference/dequant_checksums.json`) matches the bytes the
/// provider gives the graph with `StOptions::fp32()` (experts: the slice of the stack).
#[test]
fn fp8_fp4_dequantization_bit_exact() {
    let (mut w, hp) = open_fp8(StOptions::fp32());
    let (g, asked) = build_recording(&mut w, &hp);
    let nodes = weight_nodes(&g);
    let text =
        std::fs::read_to_string(fixture("dsv4-tiny-fp8/reference/dequant_checksums.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let sums = json["tensors"].as_object().unwrap();
    assert_eq!(sums.len(), 338);
    let mut checked = 0;
    for name in asked.iter().collect::<BTreeSet<_>>() {
        let off = official_name(name).unwrap();
        let (desc, bytes) = nodes[name.as_str()];
        let slices: Vec<(String, &[u8])> = if off.contains("{E}") {
            let per = bytes.len() / hp.n_expert;
            (0..hp.n_expert)
                .map(|e| {
                    (
                        off.replace("{E}", &e.to_string()),
                        &bytes[e * per..(e + 1) * per],
                    )
                })
                .collect()
        } else {
            vec![(off, bytes)]
        };
        for (off, b) in slices {
            let Some(entry) = sums.get(&off) else {
                continue;
            };
            assert_eq!(desc.dtype, DType::F32, "{off}");
            assert_eq!(
                sha256_hex(b),
                entry["sha256_f32_le"].as_str().unwrap(),
                "{off}: dequantized bytes differ"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 338);

    // and the two debugging samples, by value
    let samples = Reference::open("dsv4-tiny-fp8/reference/dequant_samples.safetensors");
    let shexp = nodes["blk.0.ffn_down_shexp.weight"].1;
    let want = samples.f32s("dequant.layers.0.ffn.shared_experts.w2.weight");
    assert_eq!(shexp, bytemuck::cast_slice::<f32, u8>(&want));
    let exps = nodes["blk.3.ffn_down_exps.weight"].1;
    let per = exps.len() / hp.n_expert;
    let want = samples.f32s("dequant.layers.3.ffn.experts.5.w2.weight");
    assert_eq!(
        &exps[5 * per..6 * per],
        bytemuck::cast_slice::<f32, u8>(&want)
    );
}

/// MXFP4 stacks decode to exactly the FP4 values; Q8_0 policy gives Q8_0 dense weights.
#[test]
fn fp4_stack_is_lossless_mxfp4() {
    let (mut exact, hp) = open_fp8(StOptions::fp32());
    // the stacked copy (the default uses the FP4 experts in place: `checkpoint_fp4_in_place.rs`)
    let (mut packed, _) = open_fp8(StOptions {
        fp8: Fp8Policy::Q8_0,
        fp4: Fp4Policy::Mxfp4,
        ..StOptions::default()
    });
    let (ge, _) = build_recording(&mut exact, &hp);
    let (gp, _) = build_recording(&mut packed, &hp);
    let (ne, np) = (weight_nodes(&ge), weight_nodes(&gp));
    for l in 0..hp.n_layer {
        for which in ["gate", "up", "down"] {
            let name = format!("blk.{l}.ffn_{which}_exps.weight");
            let (dp, bp) = np[name.as_str()];
            assert_eq!(dp.dtype, DType::MXFP4, "{name}");
            let mut f = vec![0f32; dp.nelements()];
            quant::dequantize_row(DType::MXFP4, bp, &mut f).unwrap();
            let exact: &[f32] = bytemuck::cast_slice(ne[name.as_str()].1);
            // by value: MXFP4 and the e2m1 table may disagree on the sign of a zero
            let bad = f.iter().zip(exact).position(|(a, b)| a != b);
            assert_eq!(
                bad, None,
                "{name}: MXFP4 value differs from the FP4 dequantization"
            );
        }
        assert_eq!(
            np[format!("blk.{l}.attn_q_a.weight").as_str()].0.dtype,
            DType::Q8_0
        );
        // wq_b has 128 inputs, a multiple of 32: Q8_0 too
        assert_eq!(
            np[format!("blk.{l}.attn_q_b.weight").as_str()].0.dtype,
            DType::Q8_0
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Errors on malformed checkpoints (hand-made files)

fn write_st(path: &Path, tensors: &[(&str, &str, &[usize], Vec<u8>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let begin = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fathom-st-weights-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(fixture("dsv4-tiny/config.json"), d.join("config.json")).unwrap();
    d
}

fn try_one(tensors: &[(&str, &str, &[usize], Vec<u8>)], gguf: &str) -> String {
    let dir = tmp_dir(&gguf.replace('.', "_"));
    write_st(&dir.join("model.safetensors"), tensors);
    let (mut w, _) = SafetensorsWeights::open(&dir).unwrap();
    let mut g = Graph::new();
    let r = w.try_get(&mut g, gguf);
    std::fs::remove_dir_all(&dir).ok();
    match r {
        Ok(v) => format!("ok {}", v.is_some()),
        Err(e) => e.to_string(),
    }
}

/// FP8 codes used in place are checked once at load: the NaN code, and a NaN tile scale,
/// are refused naming the tensors (the kernels would read 0x7F as 480).
#[test]
fn fp8_nan_codes_and_scales_are_refused_at_load() {
    let mut codes = vec![0x38u8; 256 * 128];
    codes[300] = 0xFF;
    let e = try_one(
        &[
            ("layers.0.attn.wq_a.weight", "F8_E4M3", &[128, 256], codes),
            (
                "layers.0.attn.wq_a.scale",
                "F8_E8M0",
                &[1, 2],
                vec![127, 127],
            ),
        ],
        "blk.0.attn_q_a.weight",
    );
    assert!(
        e.contains("layers.0.attn.wq_a.weight") && e.contains("element 300") && e.contains("NaN"),
        "{e}"
    );
    let e = try_one(
        &[
            (
                "layers.0.attn.wq_a.weight",
                "F8_E4M3",
                &[128, 256],
                vec![0x38; 256 * 128],
            ),
            (
                "layers.0.attn.wq_a.scale",
                "F8_E8M0",
                &[1, 2],
                vec![127, 0xFF],
            ),
        ],
        "blk.0.attn_q_a.weight",
    );
    assert!(
        e.contains("layers.0.attn.wq_a.scale") && e.contains("0xFF"),
        "{e}"
    );
    // and well-formed codes load in place with their scales
    let e = try_one(
        &[
            (
                "layers.0.attn.wq_a.weight",
                "F8_E4M3",
                &[128, 256],
                vec![0x38; 256 * 128],
            ),
            (
                "layers.0.attn.wq_a.scale",
                "F8_E8M0",
                &[1, 2],
                vec![127, 126],
            ),
        ],
        "blk.0.attn_q_a.weight",
    );
    assert_eq!(e, "ok true");
}

#[test]
fn malformed_checkpoints_give_named_errors() {
    // unknown dtype
    let e = try_one(
        &[("embed.weight", "F8_E3M4", &[512, 256], vec![0; 512 * 256])],
        "token_embd.weight",
    );
    assert!(
        e.contains("token_embd.weight") && e.contains("embed.weight") && e.contains("F8_E3M4"),
        "{e}"
    );
    // a dtype the model cannot use
    let e = try_one(
        &[("head.weight", "F64", &[2, 2], vec![0; 32])],
        "output.weight",
    );
    assert!(e.contains("output.weight") && e.contains("F64"), "{e}");
    // FP8 without its scale
    let e = try_one(
        &[(
            "layers.0.attn.wq_a.weight",
            "F8_E4M3",
            &[128, 256],
            vec![0; 128 * 256],
        )],
        "blk.0.attn_q_a.weight",
    );
    assert!(
        e.contains("layers.0.attn.wq_a.scale") && e.contains("blk.0.attn_q_a.weight"),
        "{e}"
    );
    // FP8 scale of the wrong grid
    let e = try_one(
        &[
            (
                "layers.0.attn.wq_a.weight",
                "F8_E4M3",
                &[128, 256],
                vec![0; 128 * 256],
            ),
            ("layers.0.attn.wq_a.scale", "F8_E8M0", &[1, 1], vec![127]),
        ],
        "blk.0.attn_q_a.weight",
    );
    assert!(
        e.contains("layers.0.attn.wq_a.scale") && e.contains("[1, 1]"),
        "{e}"
    );
    // tid2eid out of range (16 experts)
    let mut ids = vec![0u8; 512 * 6 * 8];
    ids[8 * 100..8 * 101].copy_from_slice(&16i64.to_le_bytes());
    let e = try_one(
        &[("layers.0.ffn.gate.tid2eid", "I64", &[512, 6], ids)],
        "blk.0.ffn_gate_tid2eid.weight",
    );
    assert!(e.contains("entry 100 is 16"), "{e}");
    // I64 tid2eid in range → I32
    let mut ids = vec![0u8; 512 * 6 * 8];
    ids[8 * 7..8 * 8].copy_from_slice(&15i64.to_le_bytes());
    assert_eq!(
        try_one(
            &[("layers.0.ffn.gate.tid2eid", "I64", &[512, 6], ids)],
            "blk.0.ffn_gate_tid2eid.weight",
        ),
        "ok true"
    );
    // missing expert
    let e = try_one(
        &[(
            "layers.0.ffn.experts.0.w1.weight",
            "BF16",
            &[32, 256],
            vec![0; 32 * 256 * 2],
        )],
        "blk.0.ffn_gate_exps.weight",
    );
    assert!(e.contains("layers.0.ffn.experts.1.w1.weight"), "{e}");
    // absent tensor / unknown GGUF name: None (the builder turns that into `Missing`)
    assert_eq!(try_one(&[], "blk.0.attn_q_a.weight"), "ok false");
    assert_eq!(try_one(&[], "blk.0.something_else.weight"), "ok false");
}

#[test]
fn shape_errors_name_the_checkpoint_tensor_and_file() {
    // wq_a is [128, 256] (PyTorch order); the same bytes as [256, 128]
    let dir = tmp_dir("shape");
    write_st(
        &dir.join("model.safetensors"),
        &[(
            "layers.0.attn.wq_a.weight",
            "BF16",
            &[256, 128],
            vec![0; 128 * 256 * 2],
        )],
    );
    let (mut w, hp) = SafetensorsWeights::open(&dir).unwrap();
    let mut g = Graph::new();
    let want = fathom_models::deepseek4::tensors::Tensor::AttnQA.shape(&hp, 0);
    let e = w
        .get_shaped(&mut g, "blk.0.attn_q_a.weight", &want)
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        e.contains("'layers.0.attn.wq_a.weight' in ")
            && e.contains("model.safetensors")
            && e.contains("shape [256, 128], expected [128, 256]"),
        "{e}"
    );
}

#[test]
fn layers_past_the_config_are_rejected() {
    // the fixture config has 6 layers; a tensor of layer 6, 99 or a non-number is refused at
    // open, naming the tensor and the shard; the MTP block (`mtp.*`) is accepted and not run
    for (name, ok) in [
        ("layers.6.attn.wq_a.weight", false),
        ("layers.99.ffn.gate.bias", false),
        ("layers.x.attn_norm.weight", false),
        ("layers.5.attn_norm.weight", true),
        ("mtp.0.norm.weight", true),
    ] {
        let dir = tmp_dir(&format!("past-{}", name.replace('.', "_")));
        write_st(
            &dir.join("model.safetensors"),
            &[(name, "BF16", &[4], vec![0; 8])],
        );
        let r = SafetensorsWeights::open(&dir);
        std::fs::remove_dir_all(&dir).ok();
        match r {
            Ok(_) => assert!(ok, "{name} accepted"),
            Err(e) => {
                let e = e.to_string();
                assert!(!ok, "{name}: {e}");
                assert!(e.contains(name) && e.contains("model.safetensors"), "{e}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), for the dequantization checksums.

fn sha256_hex(msg: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut m = msg.to_vec();
    m.push(0x80);
    while m.len() % 64 != 56 {
        m.push(0);
    }
    m.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in m.chunks_exact(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_known_answer() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}
