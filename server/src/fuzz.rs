//! The body of the `chat_request` fuzz target (`fuzz/`): a request body as both APIs read it.
//! `server/tests/fuzz_corpus.rs` replays the committed corpus in `cargo test`.

use crate::gen;
use models::chat::{ChatOptions, ChatTemplate};

/// A chat request body: parsed as JSON, then every field both formats read (messages,
/// tools, thinking, sampling, stop strings, token limits) converted as the OpenAI and the
/// Anthropic endpoints convert them, and the conversation rendered. Any error is fine; a
/// panic is not.
pub fn chat_request(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let t = ChatTemplate::deepseek_v4();
    let _ = gen::sampler(&body);
    let _ = gen::stops(&body, "stop");
    let _ = gen::stops(&body, "stop_sequences");
    let _ = gen::max_tokens(&body, &["max_completion_tokens", "max_tokens"], 16);
    if let (Ok(msgs), Ok((thinking, max)), Ok(tools)) = (
        crate::openai::messages(&body),
        crate::openai::thinking(&body),
        crate::openai::tools(&body),
    ) {
        let opts = ChatOptions {
            thinking,
            reasoning_effort_max: max,
            tools,
            ..ChatOptions::default()
        };
        let _ = t.render(&msgs, &opts);
    }
    if let (Ok(msgs), Ok(tools)) = (
        crate::anthropic::convert(&body),
        crate::anthropic::tools(&body),
    ) {
        let opts = ChatOptions {
            tools,
            thinking: true,
            ..ChatOptions::default()
        };
        let _ = t.render(&msgs, &opts);
    }
}
