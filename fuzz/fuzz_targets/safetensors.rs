//! Fuzz target `safetensors`: the body is `models::fuzz::safetensors` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::safetensors(data));
