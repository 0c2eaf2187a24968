//! Unit tests of the session on the dsv4-tiny Q2_0 fixture: cached, chunked and recompute
//! modes agree; the context is enforced; profiles fold every executor; a state snapshot
//! restores into a fresh session, in memory and through a file.

use super::*;
use crate::model::{open, LoadOptions};

fn exec() -> ExecConfig {
    ExecConfig {
        threads: 1,
        ..ExecConfig::default()
    }
}

fn tiny_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsv4-tiny-Q2_0.gguf")
}

fn session(mode: Mode, ctx: usize) -> Session {
    let model = open(&tiny_path(), &LoadOptions::default()).expect("the dsv4-tiny Q2_0 fixture");
    let mut s = Session::new(model, exec(), ctx).unwrap();
    s.set_mode(mode);
    s
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn cached_steps_match_recompute_and_chunked_prefill() {
    // 9 prompt tokens, then decode past a CSA window boundary and more
    let prompt = [0u32, 5, 17, 3, 200, 11, 42, 7, 99];
    let steps = [9u32, 2, 300, 1, 64];
    let mut cached = session(Mode::Cached, 64);
    let mut chunked = session(Mode::Cached, 64);
    chunked.set_ubatch(4);
    let mut full = session(Mode::Recompute, 64);
    let a = cached.prefill(&prompt).unwrap();
    let c = chunked.prefill(&prompt).unwrap();
    let f = full.prefill(&prompt).unwrap();
    assert_eq!(a.len(), cached.info().n_vocab);
    assert!(max_diff(&a, &f) < 1e-3, "{}", max_diff(&a, &f));
    assert!(max_diff(&c, &f) < 1e-3, "{}", max_diff(&c, &f));
    for &t in &steps {
        let a = cached.decode(t).unwrap();
        let c = chunked.decode(t).unwrap();
        let f = full.decode(t).unwrap();
        assert!(max_diff(&a, &f) < 1e-3, "token {t}: {}", max_diff(&a, &f));
        assert!(max_diff(&c, &f) < 1e-3, "token {t}: {}", max_diff(&c, &f));
    }
    assert_eq!(cached.n_past(), prompt.len() + steps.len());
    // cached: one graph for the prompt, one for 1-token steps; chunked: 4, 1
    assert_eq!(cached.stats().graphs_built, 2);
    assert_eq!(chunked.stats().graphs_built, 2);
    assert_eq!(full.stats().graphs_built, 1 + steps.len() as u64);
    assert_eq!(cached.stats().state_bytes as u64, cached.cache_bytes());
    let parts: u64 = cached.cache_parts().iter().map(|p| p.bytes).sum();
    assert_eq!(parts, cached.cache_bytes());
    assert_eq!(full.stats().state_bytes, 0);
    assert_eq!(
        cached.stats().positions_evaluated,
        (prompt.len() + steps.len()) as u64
    );
}

/// Every position's logits through the caches, in chunks of 1, 3 and the whole sequence,
/// against the stateless batch: the last rows equal what `prefill` returns.
#[test]
fn eval_all_and_eval_batch_agree() {
    let toks = [0u32, 5, 17, 3, 200, 11, 42, 7, 99, 4, 8];
    let mut s = session(Mode::Cached, 32);
    let batch = s.eval_batch(&toks, true).unwrap();
    let v = s.info().n_vocab;
    assert_eq!(batch.logits.len(), toks.len() * v);
    assert_eq!(batch.hidden.len(), s.info().n_layer);
    let [hc, d] = s.info().hidden;
    assert_eq!(batch.hidden[0].len(), toks.len() * hc * d);
    for chunk in [1, 3, toks.len()] {
        s.reset();
        let mut all = Vec::new();
        s.eval_all(&toks, chunk, |p, l| {
            assert_eq!(p * v, all.len());
            all.extend_from_slice(l);
        })
        .unwrap();
        assert!(max_diff(&all, &batch.logits) < 1e-3, "chunk {chunk}");
        assert_eq!(s.n_past(), toks.len());
    }
    let mut p = session(Mode::Cached, 32);
    let last = p.prefill(&toks).unwrap();
    assert!(max_diff(&last, &batch.logits[(toks.len() - 1) * v..]) < 1e-3);
    assert!(matches!(
        s.eval_all(&toks, 0, |_, _| {}),
        Err(SessionError::ZeroChunk)
    ));
}

#[test]
fn context_is_enforced_and_reset_starts_over() {
    for mode in [Mode::Cached, Mode::Recompute] {
        let mut s = session(mode, 6);
        let prompt = [0u32, 5, 17, 3];
        let a = s.prefill(&prompt).unwrap();
        s.decode(9).unwrap();
        assert_eq!(s.n_past(), 5);
        // the context is 6: two more do not fit (nothing changes), one does
        let err = s.prefill(&[1, 2]).unwrap_err();
        assert!(matches!(
            err,
            SessionError::ContextFull {
                n_past: 5,
                adding: 2,
                ctx: 6
            }
        ));
        assert!(err.to_string().contains("context length 6"), "{err}");
        assert_eq!(s.n_past(), 5);
        s.decode(2).unwrap();
        assert!(matches!(s.decode(2), Err(SessionError::ContextFull { .. })));
        // reset: the same prompt gives the same logits (no stale cache rows)
        s.reset();
        assert_eq!(s.n_past(), 0);
        assert_eq!(s.prefill(&prompt).unwrap(), a, "{mode:?}");
        assert!(matches!(
            s.decode(u32::MAX),
            Err(SessionError::BadToken { .. })
        ));
        assert_eq!(s.n_past(), 4);
        assert!(matches!(s.prefill(&[]), Err(SessionError::Empty)));
    }
    let model = open(&tiny_path(), &LoadOptions::default()).unwrap();
    assert!(matches!(
        Session::new(model, exec(), 0),
        Err(SessionError::ZeroContext)
    ));
}

/// The prefix-reuse contract: a snapshot after `A`, restored into a fresh session (in memory
/// and through a file), then fed `B`, gives bit for bit the logits of one session fed `A`
/// then `B`; in both modes; and a state of another context or a damaged file is refused.
#[test]
fn a_saved_state_restores_into_a_fresh_session() {
    let a = [0u32, 5, 17, 3, 200, 11, 42, 7, 99];
    let b = [4u32, 8, 15, 16, 23, 42];
    let dir = std::env::temp_dir().join(format!("fathom-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for mode in [Mode::Cached, Mode::Recompute] {
        let mut straight = session(mode, 32);
        straight.set_ubatch(4);
        straight.prefill(&a).unwrap();
        let want_b = straight.prefill(&b).unwrap();
        let want_next = straight.decode(1).unwrap();

        let mut first = session(mode, 32);
        first.set_ubatch(4);
        first.prefill(&a).unwrap();
        let snap = first.state();
        assert_eq!(snap.tokens(), &a);
        let path = dir.join(format!("{mode:?}.state"));
        snap.save(&path).unwrap();
        let loaded = SessionState::load(&path).unwrap();
        assert_eq!(loaded.tokens(), &a);
        assert_eq!(loaded.cache_bytes(), snap.cache_bytes());
        for restored in [snap.clone(), loaded] {
            let mut s = session(Mode::Cached, 32);
            s.set_ubatch(4);
            s.set_state(&restored).unwrap();
            assert_eq!((s.mode(), s.n_past()), (mode, a.len()));
            assert_eq!(s.prefill(&b).unwrap(), want_b, "{mode:?}");
            assert_eq!(s.decode(1).unwrap(), want_next, "{mode:?}");
        }
        // the snapshot did not change with the session it came from
        first.prefill(&[1, 2]).unwrap();
        let mut s = session(mode, 32);
        s.set_state(&snap).unwrap();
        assert_eq!(s.n_past(), a.len());
        // another context: refused, the session unchanged
        let mut other = session(mode, 16);
        let e = other.set_state(&snap).unwrap_err();
        assert!(e.to_string().contains("context of 32"), "{e}");
        assert_eq!(other.n_past(), 0);
    }
    // a damaged file: one byte flipped, then truncated
    let path = dir.join("Cached.state");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let e = SessionState::load(&path).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    std::fs::write(&path, &bytes[..bytes.len() - 9]).unwrap();
    let e = SessionState::load(&path).unwrap_err();
    assert!(e.to_string().contains("not a fathom session state"), "{e}");
    std::fs::write(&path, b"hello").unwrap();
    assert!(SessionState::load(&path).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn profile_folds_every_executor() {
    let mut s = session(Mode::Cached, 8);
    s.set_profile(true);
    s.prefill(&[0, 1, 2]).unwrap();
    s.decode(3).unwrap();
    s.decode(4).unwrap();
    let p = s.take_profile().unwrap();
    assert_eq!(p.runs, 3);
    assert_eq!(p.tokens, 5);
    assert_eq!(p.graphs, 2);
    assert!(p.rows.iter().any(|r| r.op == "MUL_MAT" && r.calls > 0));
    assert!(p.table().contains("| total |"));
    assert_eq!(p.to_json()["runs"], 3);
}

#[test]
fn clear_profile_drops_the_warm_up() {
    let mut s = session(Mode::Cached, 8);
    s.clear_profile(); // profiling off: nothing to clear, and it stays off
    s.set_profile(true);
    s.prefill(&[0, 1, 2]).unwrap();
    s.decode(3).unwrap();
    s.clear_profile();
    s.decode(4).unwrap();
    let p = s.take_profile().unwrap();
    assert_eq!((p.runs, p.tokens, p.graphs), (1, 1, 2));
    // the executors' own timings went too: two decode runs after the clear count
    // twice the calls of one (with the prefill's left in, P + 3D ≠ 2·(P + 2D))
    let calls = |p: &ProfileSummary| p.rows.iter().find(|r| r.op == "MUL_MAT").unwrap().calls;
    let mut q = session(Mode::Cached, 8);
    q.set_profile(true);
    q.prefill(&[0, 1, 2]).unwrap();
    q.decode(3).unwrap();
    q.clear_profile();
    q.decode(4).unwrap();
    q.decode(5).unwrap();
    assert_eq!(calls(&q.take_profile().unwrap()), 2 * calls(&p));
}

#[test]
fn memory_limits_refuse_before_allocating() {
    // the caches of the context are checked when the limit is set
    let mut s = session(Mode::Cached, 4096);
    let caches = s.cache_bytes();
    let e = s.set_memory_limit(Some(caches - 1)).unwrap_err();
    assert!(
        matches!(e, SessionError::OutOfMemory { need, .. } if need == caches),
        "{e}"
    );
    assert!(e.to_string().contains("4096 tokens"), "{e}");
    // room for the caches but not for a step's working memory: refused at the step, the
    // sequence unchanged
    s.set_memory_limit(Some(caches + 1024)).unwrap();
    let e = s.prefill(&[1, 2, 3]).unwrap_err();
    assert!(
        matches!(e, SessionError::OutOfMemory { .. }) && e.to_string().contains("3-token step"),
        "{e}"
    );
    assert_eq!(s.n_past(), 0);
    assert_eq!(s.stats().state_bytes, 0, "nothing allocated");
    // enough: it runs; a stateless evaluation of a long sequence asks for more than the
    // limit and is refused
    s.set_memory_limit(Some(caches + (64 << 20))).unwrap();
    s.prefill(&[1, 2, 3]).unwrap();
    s.set_memory_limit(Some(caches + (1 << 20))).unwrap();
    let long: Vec<u32> = (0..2000).map(|i| i % 500).collect();
    let e = s.eval_batch(&long, false).unwrap_err();
    assert!(e.to_string().contains("in use already"), "{e}");
    // contexts past the supported length are refused outright
    let model = open(&tiny_path(), &LoadOptions::default()).unwrap();
    for ctx in [MAX_CONTEXT + 1, usize::MAX] {
        let e = Session::new(
            open(&tiny_path(), &LoadOptions::default()).unwrap(),
            exec(),
            ctx,
        )
        .unwrap_err();
        assert!(
            matches!(e, SessionError::ContextTooLong(c) if c == ctx),
            "{e}"
        );
    }
    // the largest is accepted, and its caches are sized without overflow (and refused)
    let mut s = Session::new(model, exec(), MAX_CONTEXT).unwrap();
    assert!(s.cache_bytes() > 1 << 40);
    assert!(s.set_memory_limit(Some(1 << 40)).is_err());
}

/// A memory limit with room for the caches and about one step's working memory: a prompt
/// in chunks of two lengths and then decode steps still run, the session dropping the
/// least recently used executors (their arenas) to build the next; the logits are those of
/// a session without a limit.
#[test]
fn a_tight_memory_limit_drops_old_executors_instead_of_refusing() {
    let prompt: Vec<u32> = (0..10).map(|i| (i * 37 + 5) % 500).collect();
    let mut free = session(Mode::Cached, 64);
    free.set_ubatch(4);
    let want = (free.prefill(&prompt).unwrap(), free.decode(7).unwrap());
    let arena = free.stats().peak_arena_bytes as u64;
    let mut s = session(Mode::Cached, 64);
    s.set_ubatch(4);
    s.set_memory_limit(Some(s.cache_bytes() + arena + arena / 2))
        .unwrap();
    let got = (s.prefill(&prompt).unwrap(), s.decode(7).unwrap());
    assert!(got == want);
    // chunks of 4 and 2 tokens and the 1-token step: three graphs, never all held
    assert_eq!(s.stats().graphs_built, 3);
    assert!(s.execs.len() < 3, "{} executors held", s.execs.len());
}

/// Slots: three sequences in one session, each prefilled and then decoded in batched steps
/// of changing sets of slots, against three sessions of their own. A slot's prefill runs the
/// one-sequence graph on its region (bit for bit); a batched step matches the one-token
/// steps within the chunking tolerance; a slot's state goes on in a session of its own.
#[test]
fn slots_decode_together_as_sessions_of_their_own() {
    let prompts: [&[u32]; 3] = [
        &[0, 5, 17, 3, 200, 11, 42],
        &[9, 9, 1],
        &[300, 2, 64, 8, 15],
    ];
    let mut alone: Vec<Session> = (0..3).map(|_| session(Mode::Cached, 64)).collect();
    let mut s = session(Mode::Cached, 64);
    s.set_slots(3).unwrap();
    assert_eq!(s.n_slots(), 3);
    for (k, p) in prompts.iter().enumerate() {
        s.select(k).unwrap();
        assert_eq!(
            s.prefill(p).unwrap(),
            alone[k].prefill(p).unwrap(),
            "slot {k}"
        );
    }
    // steps of every slot, of two, of one; past a CSA window boundary (ratio 4)
    let sets: [&[usize]; 5] = [&[0, 1, 2], &[2, 0], &[1], &[0, 1, 2], &[1, 2]];
    let mut worst = 0f32;
    for (i, set) in sets.iter().cycle().take(15).enumerate() {
        let steps: Vec<(usize, u32)> = set.iter().map(|&k| (k, (7 * i + k) as u32)).collect();
        let got = s.decode_slots(&steps).unwrap();
        for ((k, t), l) in steps.iter().zip(&got) {
            let want = alone[*k].decode(*t).unwrap();
            worst = worst.max(max_diff(l, &want));
        }
    }
    assert!(worst < 1e-3, "batched vs alone: {worst}");
    for (k, a) in alone.iter().enumerate() {
        assert_eq!(s.slot_tokens(k), a.tokens(), "slot {k}");
    }
    // slot 1's state continues in a session of its own as slot 1 continues here
    s.select(1).unwrap();
    let snap = s.state();
    assert_eq!(snap.tokens(), alone[1].tokens());
    let mut own = session(Mode::Cached, 64);
    own.set_state(&snap).unwrap();
    assert_eq!(own.decode(3).unwrap(), s.decode(3).unwrap());
    // and a one-slot state goes into a slot: slot 2 takes slot 1's sequence
    s.select(2).unwrap();
    s.set_state(&own.state()).unwrap();
    let want = own.decode(4).unwrap();
    assert_eq!(s.decode_slots(&[(2, 4)]).unwrap()[0], want);
    // resetting a slot leaves the others
    s.reset();
    assert_eq!(s.n_past(), 0);
    assert_eq!(s.slot_tokens(1).len(), own.n_past() - 1);
    // refusals: a slot twice, a slot out of range, a token out of the vocabulary
    assert!(s.decode_slots(&[(0, 1), (0, 2)]).is_err());
    assert!(s.decode_slots(&[(0, 1), (5, 2)]).is_err());
    assert!(s.select(3).is_err());
    assert!(s.set_slots(0).is_err());
    let v = s.info().n_vocab as u32;
    assert!(matches!(
        s.decode_slots(&[(0, 1), (1, v)]),
        Err(SessionError::BadToken { .. })
    ));
}

/// Spans: a sequence crossing the 64 → 128 → 256 buckets, each step's graph attending over
/// only the positions below its span, gives the recompute mode's logits, and builds one graph
/// per (chunk length, span).
#[test]
fn spans_follow_the_sequence_across_buckets() {
    let prompt: Vec<u32> = (0..120u32).map(|i| i * 37 % 500).collect();
    let mut cached = session(Mode::Cached, 512);
    cached.set_ubatch(32);
    let mut full = session(Mode::Recompute, 512);
    let (a, f) = (
        cached.prefill(&prompt).unwrap(),
        full.prefill(&prompt).unwrap(),
    );
    assert!(max_diff(&a, &f) < 1e-3, "{}", max_diff(&a, &f));
    for i in 0..16u32 {
        let t = (i * 91 + 5) % 500;
        let (a, f) = (cached.decode(t).unwrap(), full.decode(t).unwrap());
        assert!(max_diff(&a, &f) < 1e-3, "step {i}: {}", max_diff(&a, &f));
    }
    // chunks [0,32) [32,64) at span 64, [64,96) and the 24-token [96,120) at 128; decode
    // steps at 128 (positions 120..127), then 256
    assert_eq!(cached.stats().graphs_built, 5);
}
