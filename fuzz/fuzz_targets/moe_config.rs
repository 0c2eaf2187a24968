//! Fuzz target `moe_config`: the body is `models::fuzz::moe_config` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| models::fuzz::moe_config(data));
