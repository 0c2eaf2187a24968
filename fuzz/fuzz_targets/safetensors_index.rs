//! Fuzz target `safetensors_index`: the body is `models::fuzz::safetensors_index` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::safetensors_index(data));
