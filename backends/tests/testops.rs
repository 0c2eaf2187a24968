//! Quick test-ops in `cargo test`: every op's quick cases on the optimized executor at 1, 2
//! and 3 threads, elision on and off, against the reference; plus the coverage check.

use fathom_backends::testops;

#[test]
fn every_op_has_a_case() {
    let missing = testops::uncovered();
    assert!(
        missing.is_empty(),
        "ops without test-ops cases: {missing:?}"
    );
}

#[test]
fn quick_cases_match_reference() {
    let res = testops::run_all(None, true, &[1, 2, 3], false);
    assert!(!res.is_empty());
    let failed: Vec<String> = res
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("{} [{} threads, elide={}]: {e}", r.name, r.threads, r.elide))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        res.len(),
        failed.join("\n")
    );
}
