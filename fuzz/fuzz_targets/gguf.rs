//! Fuzz target `gguf`: the body is `models::fuzz::gguf` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::gguf(data));
