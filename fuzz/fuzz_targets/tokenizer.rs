//! Fuzz target `tokenizer`: the body is `models::fuzz::tokenizer` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::tokenizer(data));
