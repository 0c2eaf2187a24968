//! Every committed `chat_request` fuzz corpus entry (`fuzz/corpus/chat_request/`) replayed
//! through the target's body (`fathom_server::fuzz::chat_request`) in `cargo test`.

use std::path::Path;

#[test]
fn every_chat_request_corpus_entry_runs_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/chat_request");
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    assert!(!entries.is_empty(), "empty corpus");
    for p in &entries {
        let Ok(data) = std::fs::read(p) else {
            continue;
        };
        let r = std::panic::catch_unwind(|| fathom_server::fuzz::chat_request(&data));
        assert!(r.is_ok(), "{} panicked", p.display());
    }
}
