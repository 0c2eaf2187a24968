//! Every committed fuzz corpus entry (`fuzz/corpus/<target>/`) replayed through its target's
//! body (`models::fuzz`): CI re-checks on stable, without fuzzing, that nothing a fuzzer
//! once found (or reached) panics again. Fuzzing itself: `fuzz/run.sh` (docs/design.md, "Hostile input and faults").

use std::path::Path;

#[test]
fn every_corpus_entry_runs_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut total = 0;
    for (name, body) in fathom_models::fuzz::TARGETS {
        let dir = root.join(name);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        assert!(!entries.is_empty(), "{name}: empty corpus");
        for p in &entries {
            // (a fuzzer running on the corpus may remove an entry meanwhile)
            let Ok(data) = std::fs::read(p) else {
                continue;
            };
            // a panic names the entry to reproduce with `cargo fuzz run <target> <file>`
            let r = std::panic::catch_unwind(|| body(&data));
            assert!(r.is_ok(), "{name}: {} panicked", p.display());
        }
        total += entries.len();
    }
    assert!(total >= fathom_models::fuzz::TARGETS.len());
}
