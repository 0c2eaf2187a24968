//! An official checkpoint's FP4 routed experts used in place (the default `Fp4Policy`):
//! MUL_MAT_ID reads each expert's code and scale tensors from the shards' maps and converts a
//! few rows at a time, so the logits are the stacked MXFP4 copy's bit for bit, while nothing
//! of the experts is copied at load; an expert whose scales hold the E8M0 NaN byte is found
//! when first used, and the step fails naming its tensor and file.

use fathom_models::deepseek4::DeepSeek4;
use fathom_models::model::{LoadOptions, Model};
use fathom_models::safetensors::SafetensorsModel;
use fathom_models::session::Session;
use fathom_models::weights::policy::Fp4Policy;
use fathom_models::weights::StOptions;
use std::path::{Path, PathBuf};

mod session_support;
use session_support::greedy;

fn checkpoint() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsv4-tiny-fp8")
}

fn session(path: &Path, st: StOptions, threads: usize) -> Session {
    let opts = LoadOptions {
        checkpoint: st,
        exec: backends::ExecConfig {
            threads,
            ..backends::ExecConfig::default()
        },
        ..LoadOptions::default()
    };
    let m = DeepSeek4::from_checkpoint(path, &opts).unwrap();
    Session::new(Box::new(m) as Box<dyn Model>, opts.exec, 64).unwrap()
}

const PROMPT: [u32; 11] = [0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];

/// In place and stacked give the same logits at every step (prompt chunk and decode, one
/// and two threads), and in place owns none of the experts' bytes.
#[test]
fn in_place_experts_give_the_stacked_logits() {
    let path = checkpoint();
    let in_place = StOptions::default();
    assert_eq!(in_place.fp4, Fp4Policy::InPlace);
    let stacked = StOptions {
        fp4: Fp4Policy::Mxfp4,
        ..in_place
    };
    for threads in [1, 2] {
        let mut a = session(&path, stacked, threads);
        let mut b = session(&path, in_place, threads);
        let want = greedy(&mut a, &PROMPT, 6);
        let got = greedy(&mut b, &PROMPT, 6);
        assert!(
            got == want,
            "{threads} threads: logits differ from the stacked copy's"
        );
        // one layer's experts: 16 × (gate, up, down) of 32 × 256 values, as MXFP4; six layers
        let experts = 6 * 16 * 3 * 32 * 256 / 32 * 17;
        let owned = |s: &Session| s.model().converted_bytes().unwrap().bytes;
        assert_eq!(owned(&a), owned(&b) + experts, "{threads} threads");
    }
}

/// Every scale byte of layer 0's gate experts set to the NaN byte, in a copy of the
/// checkpoint: loading does not read them, the first step that uses one fails naming the
/// tensor and its shard.
#[test]
fn a_nan_scale_is_named_when_its_expert_is_first_used() {
    let src = checkpoint();
    let d = std::env::temp_dir().join(format!("fathom-fp4-nan-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), d.join(f.file_name())).unwrap();
        }
    }
    let model = SafetensorsModel::open(&d).unwrap();
    let mut hits = 0;
    for e in 0..16 {
        let name = format!("layers.0.ffn.experts.{e}.w1.scale");
        let t = model.tensor(&name).unwrap();
        let path = model.shards()[t.shard].path().to_path_buf();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = t.file_offset as usize;
        bytes[at..at + t.byte_len() as usize].fill(0xFF);
        std::fs::write(&path, bytes).unwrap();
        hits += 1;
    }
    assert_eq!(hits, 16);
    drop(model);
    let mut s = session(&d, StOptions::default(), 2);
    let e = s.prefill(&PROMPT).unwrap_err().to_string();
    assert!(
        e.contains("layers.0.ffn.experts.")
            && e.contains(".w1.scale")
            && e.contains("NaN byte")
            && e.contains(".safetensors"),
        "{e}"
    );
    // the stacked copy refuses the same file when it converts the experts
    let opts = LoadOptions {
        checkpoint: StOptions {
            fp4: Fp4Policy::Mxfp4,
            ..StOptions::default()
        },
        ..LoadOptions::default()
    };
    let m = DeepSeek4::from_checkpoint(&d, &opts).unwrap();
    let stacked = Session::new(Box::new(m) as Box<dyn Model>, opts.exec, 64)
        .and_then(|mut s| s.prefill(&PROMPT).map(|_| ()));
    assert!(stacked.is_err());
    std::fs::remove_dir_all(&d).unwrap();
}
