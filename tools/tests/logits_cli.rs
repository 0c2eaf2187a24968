//! `fathom logits --repack iq1_s` (`iq2_xxs`, `iq1_m`) writes the same bytes as without it
//! (the repacks are lossless and every kernel returns its reference's bits), in batch and
//! incremental mode, on the tiny IQ1_S (IQ2_XXS, IQ1_M) model.

mod common;

fn logits(quant: &str, mode: &str, repack: &str, out: &std::path::Path) {
    let model = format!(
        "{}/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-{quant}.gguf",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = common::fathom()
        .args([
            "logits",
            "-m",
            &model,
            "--tokens",
            "0,266,85,329,66,356,329,12,85",
        ])
        .args(["--mode", mode, "-t", "2", "--repack", repack, "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn repacked_logits_are_the_same_bytes() {
    let dir = std::env::temp_dir().join(format!("fathom-logits-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (quant, repack) in [
        ("IQ1_S", "iq1_s"),
        ("IQ2_XXS", "iq2_xxs"),
        ("IQ1_M", "iq1_m"),
    ] {
        for mode in ["batch", "incremental"] {
            let (a, b) = (
                dir.join(format!("{quant}-{mode}-plain")),
                dir.join(format!("{quant}-{mode}-x")),
            );
            logits(quant, mode, "none", &a);
            logits(quant, mode, repack, &b);
            let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            assert!(a.len() > 9 * 512 * 4, "{mode}: {} bytes", a.len());
            assert!(
                a == b,
                "{quant} {mode}: --repack {repack} changed the logits"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
