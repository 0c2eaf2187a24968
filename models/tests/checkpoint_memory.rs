//! A checkpoint's conversion memory is known before loading
//! (`SafetensorsWeights::converted_bytes`): for every weight policy it is exactly what loading
//! every tensor of the model then owns, on the FP8/FP4 fixture (FP8 dense, FP4 experts, BF16
//! and F32 tensors, an I64 id table) and on the BF16 one.

use fathom_models::deepseek4::{tensors, SafetensorsWeights};
use fathom_models::weights::policy::{Fp4Policy, Fp8Policy, StOptions};
use fathom_models::weights::Weights;
use graph::Graph;

fn fx(p: &str) -> String {
    format!("{}/tests/fixtures/{p}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn converted_bytes_are_what_loading_owns() {
    let q8 = StOptions {
        fp8: Fp8Policy::Q8_0,
        ..StOptions::default()
    };
    let f32_dense = StOptions {
        fp8: Fp8Policy::F32,
        ..StOptions::default()
    };
    let stacked = StOptions {
        fp4: Fp4Policy::Mxfp4,
        ..q8
    };
    for path in ["dsv4-tiny-fp8", "dsv4-tiny/model.safetensors"] {
        for opts in [
            StOptions::default(),
            q8,
            f32_dense,
            stacked,
            StOptions::fp32(),
        ] {
            let (mut w, hp) = SafetensorsWeights::open_with(fx(path), opts).unwrap();
            let want = w.converted_bytes();
            assert_eq!(w.owned_bytes(), 0);
            let mut g = Graph::new();
            for s in tensors::all(&hp) {
                w.get(&mut g, &s.name).unwrap();
            }
            assert_eq!(w.owned_bytes(), want, "{path} {opts:?}");
            assert!(want > 0, "{path} {opts:?}");
        }
    }
    // FP8 in place (the default) owns less than Q8_0 dense, which owns less than F32 dense,
    // and the estimates under other policies say so
    let (w, _) = SafetensorsWeights::open(fx("dsv4-tiny-fp8")).unwrap();
    assert!(w.converted_bytes() < w.converted_bytes_with(&q8));
    assert!(w.converted_bytes_with(&q8) < w.converted_bytes_with(&f32_dense));
    // the FP4 experts used in place (the default) own nothing; stacked they are a copy
    assert!(w.converted_bytes_with(&q8) < w.converted_bytes_with(&stacked));
}
