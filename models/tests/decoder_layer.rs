//! One full DeepSeek-V4 decoder layer (HC_PRE → attention with compressor, Lightning Indexer,
//! sinks and inverse RoPE → grouped output → HC_POST → HC_PRE → routed + shared MoE → HC_POST)
//! at tiny dimensions with random weights, run by the optimized executor at several thread
//! counts with barrier elision on and off, against the single-thread reference executor.
//!
//! Shapes come from the tiny fixture GGUF's tensor table (so they are the real layout); the
//! weight bytes are random (f32 norms/biases, Q8_0/Q4_K/BF16 matrices, random hash table).

use backends::{ExecConfig, Executor};
use fathom_models::deepseek4::forward::input;
use fathom_models::deepseek4::{Builder, Hparams, PrefillInputs};
use fathom_models::gguf::GgufFile;
use fathom_models::weights::{ForwardError, Weights};
use graph::{Graph, TensorDesc, TensorId, WeightData};
use quant::DType;
use std::collections::HashMap;

struct RandomWeights {
    shapes: HashMap<String, Vec<usize>>,
    loaded: HashMap<String, TensorId>,
    seed: u64,
    n_expert: usize,
}

impl RandomWeights {
    fn next(&mut self) -> f32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

impl Weights for RandomWeights {
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(&id) = self.loaded.get(name) {
            return Ok(Some(id));
        }
        let Some(ne) = self.shapes.get(name).cloned() else {
            return Ok(None);
        };
        let n: usize = ne.iter().product();
        let fan_in = ne[0] as f32;
        let (dtype, bytes) = if name.ends_with("tid2eid.weight") {
            let ids: Vec<i32> = (0..n)
                .map(|i| ((i * 5 + (i / ne[0]) * 3) % self.n_expert) as i32)
                .collect();
            (DType::I32, bytemuck::cast_slice(&ids).to_vec())
        } else if ne.len() == 1
            || name.contains("_ape")
            || name.contains("hc_")
            || name.contains("sinks")
        {
            let norm = name.contains("norm");
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    if norm {
                        1.0 + 0.3 * self.next()
                    } else {
                        0.5 * self.next()
                    }
                })
                .collect();
            (DType::F32, bytemuck::cast_slice(&v).to_vec())
        } else {
            let dtype = if name.contains("exps") && ne[0] % 256 == 0 {
                DType::Q4_K
            } else if name.contains("compressor") || name.contains("gate_inp") {
                DType::BF16
            } else {
                DType::Q8_0
            };
            let scale = 1.7 / fan_in.sqrt();
            let v: Vec<f32> = (0..n).map(|_| scale * self.next()).collect();
            let d = TensorDesc::new(dtype, &ne).expect("shape");
            let mut b = vec![0u8; d.nbytes()];
            quant::quantize_row(dtype, &v, &mut b).expect("quantize");
            (dtype, b)
        };
        let d = TensorDesc::new(dtype, &ne)?;
        let id = g.weight(name, d, WeightData::from_vec(bytes))?;
        self.loaded.insert(name.to_string(), id);
        Ok(Some(id))
    }
}

fn setup() -> (Hparams, HashMap<String, Vec<usize>>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/dsv4-tiny-Q2_0.gguf"
    );
    let f = GgufFile::open(path).expect("fixture");
    let hp = Hparams::from_gguf(&f).expect("hparams");
    let shapes = f
        .tensors()
        .iter()
        .map(|t| (t.name.clone(), t.ne.iter().map(|&x| x as usize).collect()))
        .collect();
    (hp, shapes)
}

/// Build a graph of one layer: input `x {D,4,T}` → output `"out"`.
fn layer_graph(hp: &Hparams, shapes: &HashMap<String, Vec<usize>>, l: usize, t: usize) -> Graph {
    let mut w = RandomWeights {
        shapes: shapes.clone(),
        loaded: HashMap::new(),
        seed: 0x5eed + l as u64,
        n_expert: hp.n_expert,
    };
    let mut b = Builder::new(hp, &mut w, t).expect("builder");
    let x =
        b.g.input("x", TensorDesc::f32(&[hp.n_embd, 4, t]).unwrap())
            .unwrap();
    let tokens =
        b.g.input(input::TOKENS, TensorDesc::new(DType::I32, &[t]).unwrap())
            .unwrap();
    let out = b.layer(l, x, tokens).expect("layer");
    let mut g = b.g;
    g.output("out", out).unwrap();
    g
}

fn run(mut e: Executor, hp: &Hparams, t: usize) -> Vec<f32> {
    let mut seed = 99u64;
    let x: Vec<f32> = (0..hp.n_embd * 4 * t)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0
        })
        .collect();
    e.set_input_f32("x", &x).unwrap();
    let toks: Vec<i32> = (0..t as i32)
        .map(|i| (i * 37 + 5) % hp.n_vocab as i32)
        .collect();
    e.set_input_i32(input::TOKENS, &toks).unwrap();
    for (name, bytes) in PrefillInputs::new(hp, t).values {
        // inputs a layer does not use are not in its graph
        let _ = e.set_input(&name, &bytes);
    }
    e.fill_guards();
    e.run();
    assert!(
        e.broken_guards().is_empty(),
        "a kernel wrote outside its buffer"
    );
    e.output_f32("out").unwrap()
}

fn nmse(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    num / den.max(1e-30)
}

fn check_layer(l: usize, t: usize) {
    let (hp, shapes) = setup();
    let g = layer_graph(&hp, &shapes, l, t);
    let want = run(Executor::reference(g.clone()), &hp, t);
    assert!(
        want.iter().all(|v| v.is_finite()),
        "layer {l}: reference output not finite"
    );
    for threads in [1, 2, 3] {
        let mut outs = Vec::new();
        for elide in [true, false] {
            let cfg = ExecConfig {
                threads,
                cpus: None,
                pin: false,
                elide_barriers: elide,
                spin: 1000,
                profile: None,
                guards: true,
                ..ExecConfig::default()
            };
            let got = run(Executor::new(g.clone(), cfg), &hp, t);
            // The reference accumulates attention and the HC maths in f64; activations quantized
            // to Q8_0/Q8_K/BF16 turn those last-bit differences into occasional code flips at
            // rounding boundaries, so the layer is compared by NMSE, not bits.
            let err = nmse(&got, &want);
            assert!(
                err < 1e-5,
                "layer {l} ({:?}) T={t}: nmse {err:e} at {threads} threads, elide={elide}",
                hp.attn_kind(l)
            );
            outs.push(got);
        }
        // barrier elision never changes a bit
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&outs[0]),
            bits(&outs[1]),
            "layer {l}: elision changed the result at {threads} threads"
        );
    }
}

#[test]
fn csa_layer_with_hash_routing() {
    check_layer(1, 13); // CSA (compressor + indexer), hash-routed MoE
}

#[test]
fn csa_layer_with_learned_router() {
    check_layer(3, 13); // CSA, top-k router with bias
}

#[test]
fn sliding_layer() {
    check_layer(5, 9);
}

#[test]
fn hca_layer_with_entries() {
    check_layer(2, 130); // HCA with one complete 128-token window
}

#[test]
fn elision_actually_drops_barriers_in_a_layer() {
    let (hp, shapes) = setup();
    let g = layer_graph(&hp, &shapes, 3, 13);
    let p = graph::Plan::new(
        &g,
        graph::PlanOptions {
            elide_barriers: true,
            guards: false,
        },
    );
    assert!(p.elided_barriers() > 0, "no barrier elided in a full layer");
    assert!(p.barriers() > 0);
}
