//! Fuzz target `dsml`: the body is `models::fuzz::dsml` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::dsml(data));
