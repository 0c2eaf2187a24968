//! `fathom logits --repack iq1_s` writes the same bytes as without it (the repack is
//! lossless and every kernel returns its reference's bits), in batch and incremental mode.

use std::process::Command;

fn logits(mode: &str, repack: &str, out: &std::path::Path) {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-IQ1_S.gguf"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_fathom"))
        .args([
            "logits",
            "-m",
            model,
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
    for mode in ["batch", "incremental"] {
        let (a, b) = (
            dir.join(format!("{mode}-plain")),
            dir.join(format!("{mode}-x")),
        );
        logits(mode, "none", &a);
        logits(mode, "iq1_s", &b);
        let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert!(a.len() > 9 * 512 * 4, "{mode}: {} bytes", a.len());
        assert!(a == b, "{mode}: --repack iq1_s changed the logits");
    }
    std::fs::remove_dir_all(&dir).ok();
}
