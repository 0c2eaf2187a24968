//! Fuzz target `chat_request`: the body is `server::fuzz::chat_request` (replayed over the corpus by `cargo test`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzz::chat_request(data));
