//! Fuzz target `config_json`: the body is `models::fuzz::config_json` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::config_json(data));
