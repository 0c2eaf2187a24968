//! Anthropic's wire format: `POST /v1/messages` with text, `thinking`, `tool_use` and
//! `tool_result` blocks, tools as `input_schema`s, and the streaming event sequence
//! (`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta`,
//! `message_stop`).

use crate::engine::{GenParams, Usage};
use crate::gen::{self, ChatEvent, ChatFinish, ChatStream};
use crate::http::{check_model, read_json, ApiError, AppState};
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use models::chat::{ChatOptions, Message, Role, ToolCall};
use serde_json::{json, Value};
use std::convert::Infallible;

/// Text of a `system` field or `tool_result` content: a string or an array of text blocks.
fn text_of(v: Option<&Value>, what: &str) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut out = Vec::new();
            for b in blocks {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push(t.as_str()),
                    (Some(t), _) => {
                        return Err(ApiError::bad_request(format!(
                            "{what}: blocks of type '{t}' are not supported here"
                        )))
                    }
                    _ => return Err(ApiError::bad_request(format!("{what}: a malformed block"))),
                }
            }
            Ok(out.join("\n\n"))
        }
        Some(v) => Err(ApiError::bad_request(format!(
            "{what}: must be a string or an array of text blocks, not {v}"
        ))),
    }
}

/// Anthropic messages (and `system`) to chat messages: a user message's `tool_result`
/// blocks become tool messages, its text a user message; an assistant's `thinking`,
/// `text` and `tool_use` blocks become one assistant message.
pub(crate) fn convert(body: &Value) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::new();
    let system = text_of(body.get("system"), "system")?;
    if !system.is_empty() {
        out.push(Message::system(system));
    }
    let Some(list) = body.get("messages").and_then(Value::as_array) else {
        return Err(ApiError::bad_request(
            "'messages' must be an array of messages",
        ));
    };
    for (i, m) in list.iter().enumerate() {
        let what = format!("messages[{i}]");
        let role = match m.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some(r) => {
                return Err(ApiError::bad_request(format!(
                    "{what}: role '{r}' is not user or assistant (the system prompt is 'system')"
                )))
            }
            None => return Err(ApiError::bad_request(format!("{what}: 'role' is missing"))),
        };
        let blocks = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(b)) => b.clone(),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "{what}: 'content' must be a string or an array of blocks"
                )))
            }
        };
        let mut msg = Message::new(role, "");
        let mut text = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let w = format!("{what}.content[{j}]");
            match (role, b.get("type").and_then(Value::as_str)) {
                (_, Some("text")) => text.push(
                    gen::string(b, "text")?
                        .ok_or_else(|| ApiError::bad_request(format!("{w}: 'text' is missing")))?
                        .to_owned(),
                ),
                (Role::User, Some("tool_result")) => {
                    let mut t = Message::tool(text_of(b.get("content"), &w)?);
                    t.tool_call_id = gen::string(b, "tool_use_id")?.map(str::to_owned);
                    out.push(t);
                }
                (Role::Assistant, Some("thinking")) => {
                    msg.reasoning = gen::string(b, "thinking")?.map(str::to_owned);
                }
                (Role::Assistant, Some("redacted_thinking")) => {}
                (Role::Assistant, Some("tool_use")) => msg.tool_calls.push(ToolCall {
                    id: gen::string(b, "id")?.unwrap_or("").to_owned(),
                    name: gen::string(b, "name")?
                        .ok_or_else(|| ApiError::bad_request(format!("{w}: 'name' is missing")))?
                        .to_owned(),
                    arguments: crate::openai::arguments(b.get("input"), &w)?,
                }),
                (_, t) => {
                    return Err(ApiError::bad_request(format!(
                        "{w}: a block of type '{}' is not supported in a {} message",
                        t.unwrap_or("?"),
                        if role == Role::User {
                            "user"
                        } else {
                            "assistant"
                        }
                    )))
                }
            }
        }
        msg.content = text.join("\n\n");
        if role == Role::Assistant || !msg.content.is_empty() {
            out.push(msg);
        }
    }
    Ok(out)
}

/// `tools` as function definitions (`input_schema` → `parameters`), unless
/// `tool_choice.type` is "none".
pub(crate) fn tools(body: &Value) -> Result<Vec<Value>, ApiError> {
    if body
        .get("tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        == Some("none")
    {
        return Ok(Vec::new());
    }
    let Some(list) = body.get("tools").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| ApiError::bad_request("'tools' must be an array"))?;
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let name = gen::string(t, "name")?
                .ok_or_else(|| ApiError::bad_request(format!("tools[{i}]: 'name' is missing")))?;
            let mut f = json!({"name": name});
            if let Some(d) = gen::string(t, "description")? {
                f["description"] = json!(d);
            }
            f["parameters"] = t
                .get("input_schema")
                .cloned()
                .unwrap_or(json!({"type": "object"}));
            Ok(f)
        })
        .collect()
}

fn stop_reason(f: &ChatFinish) -> (&'static str, Value) {
    match f {
        ChatFinish::Stop => ("end_turn", Value::Null),
        ChatFinish::StopString(s) => ("stop_sequence", json!(s)),
        ChatFinish::Length => ("max_tokens", Value::Null),
        ChatFinish::ToolCalls => ("tool_use", Value::Null),
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"input_tokens": u.prompt_tokens - u.cached_tokens,
        "cache_read_input_tokens": u.cached_tokens, "cache_creation_input_tokens": 0,
        "output_tokens": u.completion_tokens})
}

/// A `/v1/messages` request.
async fn handle(state: AppState, body: Value) -> Result<Response, ApiError> {
    check_model(&state, gen::string(&body, "model")?)?;
    let msgs = convert(&body)?;
    let thinking = body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");
    let opts = ChatOptions {
        add_generation_prompt: true,
        thinking,
        keep_all_reasoning: false,
        tools: tools(&body)?,
        response_format: None,
        reasoning_effort_max: false,
    };
    let max_tokens = match body.get("max_tokens") {
        Some(Value::Null) | None => {
            return Err(ApiError::bad_request("'max_tokens' is required"));
        }
        _ => gen::max_tokens(&body, &["max_tokens"], 0)?,
    };
    let params = GenParams {
        max_tokens,
        sampler: gen::sampler(&body)?,
        stop: gen::stops(&body, "stop_sequences")?,
        top_logprobs: None,
    };
    let stream = gen::boolean(&body, "stream")?.unwrap_or(false);
    let prompt = gen::chat_prompt(&state, &msgs, &opts)?;
    let (prompt_tokens, cached, events) =
        gen::start(&state, prompt, params, Some(thinking), "toolu_").await?;
    let id = format!("msg_{:x}", gen::next_id());
    let model = state.config.model_id.clone();
    if stream {
        let start = Usage {
            prompt_tokens,
            cached_tokens: cached,
            completion_tokens: 0,
        };
        Ok(message_stream(events, id, model, start).into_response())
    } else {
        message_whole(events, id, model).await
    }
}

/// `POST /v1/messages`.
pub async fn messages(
    State(state): State<AppState>,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let body = read_json(&state, body).await?;
    handle(state, body).await
}

async fn message_whole(
    mut events: ChatStream,
    id: String,
    model: String,
) -> Result<Response, ApiError> {
    let (mut text, mut thinking, mut uses) = (String::new(), String::new(), Vec::new());
    while let Some(evs) = events.next().await {
        for e in evs {
            match e {
                ChatEvent::Reasoning(s) => thinking.push_str(&s),
                ChatEvent::Content(s) => text.push_str(&s),
                ChatEvent::ToolCall(c) => uses.push(json!({"type": "tool_use", "id": c.id,
                    "name": c.name, "input": Value::Object(c.arguments)})),
                ChatEvent::Logprob(_) => {}
                ChatEvent::Failed(m) => return Err(ApiError::internal(m)),
                ChatEvent::Done { finish, usage } => {
                    let mut content = Vec::new();
                    if !thinking.is_empty() {
                        content.push(
                            json!({"type": "thinking", "thinking": thinking, "signature": ""}),
                        );
                    }
                    if !text.is_empty() || uses.is_empty() {
                        content.push(json!({"type": "text", "text": text}));
                    }
                    content.extend(uses);
                    let (reason, seq) = stop_reason(&finish);
                    return Ok(
                        Json(json!({"id": id, "type": "message", "role": "assistant",
                        "model": model, "content": content, "stop_reason": reason,
                        "stop_sequence": seq, "usage": usage_json(&usage)}))
                        .into_response(),
                    );
                }
            }
        }
    }
    Err(ApiError::internal("the reply ended early"))
}

/// The open content block while streaming.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Thinking,
    Text,
}

struct StreamState {
    events: ChatStream,
    block: Block,
    index: usize,
    ended: bool,
}

fn ev(name: &str, data: Value) -> SseEvent {
    SseEvent::default().event(name).data(data.to_string())
}

impl StreamState {
    /// Close the open block, if any.
    fn close(&mut self, out: &mut Vec<SseEvent>) {
        if self.block != Block::None {
            out.push(ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": self.index}),
            ));
            self.index += 1;
            self.block = Block::None;
        }
    }

    /// Make `b` the open block.
    fn open(&mut self, b: Block, out: &mut Vec<SseEvent>) {
        if self.block == b {
            return;
        }
        self.close(out);
        let block = match b {
            Block::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "text", "text": ""}),
        };
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start",
            "index": self.index, "content_block": block}),
        ));
        self.block = b;
    }
}

fn message_stream(
    events: ChatStream,
    id: String,
    model: String,
    start: Usage,
) -> Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>> {
    let first = ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": id,
        "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": null, "stop_sequence": null, "usage": usage_json(&start)}}),
    );
    let st = StreamState {
        events,
        block: Block::None,
        index: 0,
        ended: false,
    };
    let s = stream::unfold(st, |mut st| async move {
        if st.ended {
            return None;
        }
        let evs = st.events.next().await?;
        let mut out = Vec::new();
        for e in evs {
            match e {
                ChatEvent::Reasoning(s) => {
                    st.open(Block::Thinking, &mut out);
                    out.push(ev(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": st.index, "delta": {"type": "thinking_delta", "thinking": s}}),
                    ));
                }
                ChatEvent::Content(s) => {
                    st.open(Block::Text, &mut out);
                    out.push(ev(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": st.index, "delta": {"type": "text_delta", "text": s}}),
                    ));
                }
                ChatEvent::ToolCall(c) => {
                    st.close(&mut out);
                    out.push(ev(
                        "content_block_start",
                        json!({"type": "content_block_start",
                        "index": st.index, "content_block": {"type": "tool_use", "id": c.id,
                        "name": c.name, "input": {}}}),
                    ));
                    out.push(ev(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": st.index, "delta": {"type": "input_json_delta",
                        "partial_json": Value::Object(c.arguments).to_string()}}),
                    ));
                    st.block = Block::Text; // closed below as any block
                    st.close(&mut out);
                }
                ChatEvent::Logprob(_) => {}
                ChatEvent::Failed(m) => {
                    st.ended = true;
                    out.push(ev(
                        "error",
                        json!({"type": "error",
                        "error": {"type": "api_error", "message": m}}),
                    ));
                }
                ChatEvent::Done { finish, usage } => {
                    st.ended = true;
                    st.close(&mut out);
                    let (reason, seq) = stop_reason(&finish);
                    out.push(ev(
                        "message_delta",
                        json!({"type": "message_delta",
                        "delta": {"stop_reason": reason, "stop_sequence": seq},
                        "usage": usage_json(&usage)}),
                    ));
                    out.push(ev("message_stop", json!({"type": "message_stop"})));
                }
            }
        }
        Some((out, st))
    });
    let all = stream::iter(vec![first])
        .chain(s.flat_map(stream::iter))
        .map(Ok);
    Sse::new(all).keep_alive(KeepAlive::default())
}
