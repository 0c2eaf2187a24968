//! MUL_MAT on Q8_0 and Q2_0 weights, and MUL_MAT_ID on experts chosen by many tokens, at
//! every kernel level this CPU has (the group and panel tiles, the grid-expert tiles, the
//! multi-column and multi-row kernels the table hands out at each): every case gives the
//! reference executor's bits, at one and two threads. test-ops runs the cases at the detected
//! level only, so on an AVX-512 CPU the AVX2 and AVX-VNNI tiles are driven here.

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
    let checked = at_every_level(OpKind::MulMat, |name| {
        name.starts_with("mul_mat q8_0") || name.starts_with("mul_mat q2_0")
    });
    assert!(checked >= 8, "only {checked} Q8_0 / Q2_0 MUL_MAT cases");
}

/// Experts chosen by many tokens of a prompt chunk (the grid tiles: IQ2_XXS's group tile also
/// at `avx2-vnni`; the multi-column kernels below).
#[test]
fn many_token_mul_mat_id_cases_give_the_reference_bits_at_every_level() {
    let checked = at_every_level(OpKind::MulMatId, |name| name.ends_with("many tokens"));
    assert!(checked >= 10, "only {checked} many-token MUL_MAT_ID cases");
}

/// Runs the cases of `op` whose lower-case name passes `pick` at every level and 1 and 2
/// threads against the reference executor; returns how many cases ran.
fn at_every_level(op: OpKind, pick: impl Fn(&str) -> bool) -> usize {
    let mut checked = 0;
    for case in ops::cases(op) {
        if !pick(&case.name.to_lowercase()) {
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
    checked
}
