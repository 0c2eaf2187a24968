//! MUL_MAT on Q8_0 and Q2_0 weights at every kernel level this CPU has (the group and panel
//! tiles, the multi-column and multi-row kernels the table hands out at each): every case of
//! the op's test set gives the reference executor's bits, at one and two threads. test-ops
//! runs the cases at the detected level only, so on an AVX-512 CPU the AVX2 tiles are driven
//! here.

use fathom_backends::{ExecConfig, Executor};
use graph::OpKind;
use quant::simd::CpuLevel;

fn run(case: &ops::Case, cfg: ExecConfig) -> Vec<f32> {
    let mut e = Executor::new(case.graph.clone(), cfg);
    for (n, b) in &case.inputs {
        e.set_input(n, b).unwrap();
    }
    e.run();
    e.output_f32("out").unwrap()
}

#[test]
fn q8_0_and_q2_0_mul_mat_cases_give_the_reference_bits_at_every_level() {
    let mut checked = 0;
    for case in ops::cases(OpKind::MulMat) {
        let lower = case.name.to_lowercase();
        if !(lower.starts_with("mul_mat q8_0") || lower.starts_with("mul_mat q2_0")) {
            continue;
        }
        let want = run(
            &case,
            ExecConfig {
                reference: true,
                ..ExecConfig::default()
            },
        );
        for level in CpuLevel::detect().up_to() {
            for threads in [1, 2] {
                let got = run(
                    &case,
                    ExecConfig {
                        threads,
                        pin: false,
                        cpu: level,
                        ..ExecConfig::default()
                    },
                );
                assert_eq!(got.len(), want.len());
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} at {level} × {threads}, output {i}: {a} vs {b}",
                        case.name
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} Q8_0 / Q2_0 MUL_MAT cases");
}
