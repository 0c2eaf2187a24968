//! The RAM-budgeted expert cache (`--ram`): a session whose routed experts are read from the
//! GGUF file into a cache far smaller than one layer's experts gives the logits of the
//! session that uses them from the memory map, bit for bit — prompt chunks (several tokens
//! per expert, the tiled and multi-column kernels) and decode steps alike — and the cache
//! counts its hits, misses and reads.

use fathom_models::deepseek4::DeepSeek4;
use fathom_models::gguf::GgufFile;
use fathom_models::model::{LoadOptions, Model};
use fathom_models::session::Session;
use fathom_models::weights::ExpertCacheConfig;
use std::sync::Arc;

mod session_support;
use session_support::greedy;

fn file(quant: &str) -> Arc<GgufFile> {
    let p = format!(
        "{}/tests/fixtures/dsv4-tiny/dsv4-tiny-{quant}.gguf",
        env!("CARGO_MANIFEST_DIR")
    );
    Arc::new(GgufFile::open(p).unwrap())
}

fn session(f: &Arc<GgufFile>, experts: Option<ExpertCacheConfig>, threads: usize) -> Session {
    session_with(f, experts, threads, Default::default())
}

fn session_with(
    f: &Arc<GgufFile>,
    experts: Option<ExpertCacheConfig>,
    threads: usize,
    repack: fathom_models::weights::Repack,
) -> Session {
    let opts = LoadOptions {
        experts,
        repack,
        exec: backends::ExecConfig {
            threads,
            ..backends::ExecConfig::default()
        },
        ..LoadOptions::default()
    };
    let m = DeepSeek4::from_gguf(f.clone(), &opts).unwrap();
    Session::new(Box::new(m) as Box<dyn Model>, opts.exec, 64).unwrap()
}

/// Bytes of one layer's routed experts (gate, up and down stacks of layer 0).
fn layer_expert_bytes(f: &GgufFile) -> u64 {
    ["gate", "up", "down"]
        .iter()
        .map(|m| {
            f.tensor(&format!("blk.0.ffn_{m}_exps.weight"))
                .unwrap()
                .n_bytes
        })
        .sum()
}

fn matches_with_a_small_cache(quant: &str, threads: usize) {
    let f = file(quant);
    // 11 tokens: several tokens per expert in the prompt chunk
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    let want = greedy(&mut session(&f, None, threads), &prompt, 6);
    let layer = layer_expert_bytes(&f);
    let budget = layer / 4;
    let cfg = ExpertCacheConfig {
        budget,
        io_threads: 2,
        direct: true,
    };
    let mut s = session(&f, Some(cfg), threads);
    let got = greedy(&mut s, &prompt, 6);
    assert!(got == want, "{quant}: logits differ from the memory map's");
    let st = s.model().expert_cache().unwrap().stats();
    assert!(st.misses > 0, "{quant}: {st:?}");
    assert!(st.bytes_read > 0, "{quant}: {st:?}");
    // a budget under one layer's experts: reads far exceed it
    assert!(st.bytes_read > 4 * budget, "{quant}: {st:?}");
    // over budget only by what was in use or in flight: the pins of the running node (one
    // per thread) and the reads in flight (the I/O threads and the compute threads), each
    // at most one expert's pages
    let largest = ["gate", "up", "down"]
        .iter()
        .map(|m| {
            f.tensor(&format!("blk.0.ffn_{m}_exps.weight"))
                .unwrap()
                .n_bytes
                / 16
        })
        .max()
        .unwrap();
    let slack = (2 * threads as u64 + 2) * (largest + 8192);
    assert!(
        st.peak <= budget + slack,
        "{quant}: peak {} {st:?}",
        st.peak
    );
}

#[test]
fn a_cache_smaller_than_a_layer_gives_the_mapped_logits_q8_0() {
    matches_with_a_small_cache("Q8_0", 2);
}

#[test]
fn a_cache_smaller_than_a_layer_gives_the_mapped_logits_iq2_xxs() {
    matches_with_a_small_cache("IQ2_XXS", 2);
}

#[test]
fn a_cache_smaller_than_a_layer_gives_the_mapped_logits_one_thread() {
    matches_with_a_small_cache("MIXED", 1);
}

#[test]
fn a_cache_holding_every_expert_reads_each_once() {
    let f = file("Q8_0");
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    let want = greedy(&mut session(&f, None, 2), &prompt, 4);
    let mut s = session(&f, Some(ExpertCacheConfig::with_budget(1 << 30)), 2);
    let got = greedy(&mut s, &prompt, 4);
    assert!(got == want);
    let st = s.model().expert_cache().unwrap().stats();
    // 6 layers × 16 experts × 3 tensors at most, each read once (a wrong guess is read
    // and never used: wasted, but with this budget never read twice)
    assert!(st.misses <= 6 * 16 * 3, "{st:?}");
    // the graph hints each layer's experts ahead (hash layers exactly, the others by a
    // guess); every guess that was used counts
    assert!(st.guessed > 0 && st.guess_used > 0, "{st:?}");
    assert!(st.guess_used <= st.guessed, "{st:?}");
    assert_eq!(st.wasted, 0, "{st:?}");
    assert!(st.peak <= st.budget);
    // a second pass over the same prompt reads nothing
    let before = st.bytes_read;
    let mut s2 = s;
    s2.reset();
    let again = greedy(&mut s2, &prompt, 4);
    assert!(again == want);
    let st2 = s2.model().expert_cache().unwrap().stats();
    assert_eq!(st2.bytes_read, before, "{st2:?}");
}

/// Live MoE control with experts read from disk: at top-2 the session gives the mapped
/// session's top-2 logits bit for bit and reads fewer bytes than at the model's top-6 (a
/// dropped expert is neither read nor guessed).
#[test]
fn fewer_experts_per_token_read_fewer_bytes() {
    use graph::knobs::{LayerMoe, MoeKnobs};
    let f = file("Q8_0");
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    let n_layer = 6;
    let knobs = |top_k: u32| {
        let k = Arc::new(MoeKnobs::new(n_layer));
        for l in 0..n_layer {
            k.set(
                l,
                LayerMoe {
                    top_k,
                    ..LayerMoe::MODEL
                },
            );
        }
        k
    };
    let read = |top_k: u32, cache: bool| {
        let cfg = cache.then(|| ExpertCacheConfig::with_budget(1 << 30));
        let mut s = session(&f, cfg, 2);
        s.set_moe_knobs(Some(knobs(top_k)));
        let logits = greedy(&mut s, &prompt, 4);
        let st = s.model().expert_cache().map(|c| c.stats());
        (logits, st)
    };
    let (want2, _) = read(2, false);
    let (got2, st2) = read(2, true);
    assert!(got2 == want2, "top-2 logits differ from the memory map's");
    let (_, st6) = read(6, true);
    let (st2, st6) = (st2.unwrap(), st6.unwrap());
    assert!(
        st2.bytes_read < st6.bytes_read,
        "top-2 read {} bytes, top-6 {}",
        st2.bytes_read,
        st6.bytes_read
    );
    assert!(st2.misses < st6.misses, "{st2:?} {st6:?}");
}

/// `--repack` with `--ram`: the paged experts stay in the file's layout (the cache reads
/// them as they are, nothing is copied into memory at load), the rest is repacked, and the
/// logits are the plain session's.
#[test]
fn repacking_leaves_paged_experts_in_the_files_layout() {
    let f = file("IQ2_XXS");
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    let want = greedy(&mut session(&f, None, 2), &prompt, 3);
    let all = fathom_models::weights::Repack::parse("all").unwrap();
    let cfg = ExpertCacheConfig::with_budget(1 << 20);
    let mut s = session_with(&f, Some(cfg), 2, all);
    let got = greedy(&mut s, &prompt, 3);
    assert!(got == want);
    let st = s.model().expert_cache().unwrap().stats();
    // every expert of the tiny file is IQ2_XXS and paged: the cache read them
    let experts: u64 = (0..6)
        .flat_map(|l| ["gate", "up", "down"].map(|m| format!("blk.{l}.ffn_{m}_exps.weight")))
        .map(|n| f.tensor(&n).unwrap().n_bytes)
        .sum();
    assert_eq!(s.model().expert_cache().unwrap().paged_bytes(), experts);
    assert!(st.bytes_read > 0, "{st:?}");
}

/// The per-op profile (`FATHOM_PROFILE_OPS`) carries what the expert cache did over the
/// profiled runs: after `clear_profile` only the runs since count.
#[test]
fn the_profile_reports_the_expert_cache() {
    let f = file("Q8_0");
    let cfg = ExpertCacheConfig::with_budget(64 << 10);
    let mut s = session(&f, Some(cfg), 2);
    s.set_profile(true);
    s.prefill(&[0, 266, 85, 329]).unwrap();
    s.clear_profile();
    s.decode(7).unwrap();
    s.decode(9).unwrap();
    let p = s.take_profile().unwrap();
    let x = p.experts.expect("the profile has the cache's counters");
    let all = s.model().expert_cache().unwrap().stats();
    assert!(x.misses > 0 && x.misses < all.misses, "{x:?} {all:?}");
    assert!(x.bytes_read < all.bytes_read, "{x:?} {all:?}");
    let t = p.table();
    assert!(
        t.contains("expert cache:") && t.contains("MiB read per token"),
        "{t}"
    );
    assert!(p.to_json()["expert_cache"]["misses"].as_u64() == Some(x.misses));
    // without a cache, no line
    let mut plain = session(&f, None, 2);
    plain.set_profile(true);
    plain.decode(7).unwrap();
    let p = plain.take_profile().unwrap();
    assert!(p.experts.is_none() && !p.table().contains("expert cache"));
}
