//! OpenAI's wire format: `POST /v1/chat/completions` (messages, tools and tool calls,
//! thinking as `reasoning_content`, streaming chunks, log-probabilities, usage with cached
//! tokens) and `POST /v1/completions` (text or token-id prompts).

use crate::engine::{GenParams, TokenLogprob, Usage};
use crate::gen::{self, ChatEvent, ChatFinish, ChatStream, MAX_TOP_LOGPROBS};
use crate::http::{check_model, now, read_json, ApiError, AppState};
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use models::chat::{ChatOptions, Message, Role, ToolCall};
use serde_json::{json, Map, Value};
use std::convert::Infallible;

/// The text of a message's `content`: a string, null, or an array of `{"type": "text"}`
/// parts (joined); other part types are refused.
fn content_text(v: Option<&Value>, what: &str) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push_str(t),
                    (Some(t), _) => {
                        return Err(ApiError::bad_request(format!(
                            "{what}: content parts of type '{t}' are not supported (text only)"
                        )))
                    }
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "{what}: a malformed content part"
                        )))
                    }
                }
            }
            Ok(out)
        }
        Some(v) => Err(ApiError::bad_request(format!(
            "{what}: 'content' must be a string or an array of parts, not {v}"
        ))),
    }
}

/// The arguments of a tool call: a JSON object, or a string holding one.
pub fn arguments(v: Option<&Value>, what: &str) -> Result<Map<String, Value>, ApiError> {
    let parsed;
    let v = match v {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Map::new()),
        Some(Value::String(s)) => {
            parsed = serde_json::from_str::<Value>(s).map_err(|e| {
                ApiError::bad_request(format!("{what}: 'arguments' is not valid JSON: {e}"))
            })?;
            &parsed
        }
        Some(v) => v,
    };
    v.as_object()
        .cloned()
        .ok_or_else(|| ApiError::bad_request(format!("{what}: 'arguments' must be a JSON object")))
}

/// OpenAI messages to chat messages.
pub(crate) fn messages(body: &Value) -> Result<Vec<Message>, ApiError> {
    let Some(list) = body.get("messages").and_then(Value::as_array) else {
        return Err(ApiError::bad_request(
            "'messages' must be an array of messages",
        ));
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let what = format!("messages[{i}]");
        let role = match m.get("role").and_then(Value::as_str) {
            Some("system") => Role::System,
            Some("user") | Some("developer") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            Some(r) => {
                return Err(ApiError::bad_request(format!(
                    "{what}: role '{r}' is not one of system, developer, user, assistant, tool"
                )))
            }
            None => return Err(ApiError::bad_request(format!("{what}: 'role' is missing"))),
        };
        let mut msg = Message::new(role, content_text(m.get("content"), &what)?);
        if role == Role::Assistant {
            msg.reasoning = gen::string(m, "reasoning_content")?.map(str::to_owned);
            if let Some(calls) = m.get("tool_calls").filter(|v| !v.is_null()) {
                let calls = calls.as_array().ok_or_else(|| {
                    ApiError::bad_request(format!("{what}: 'tool_calls' must be an array"))
                })?;
                for (j, c) in calls.iter().enumerate() {
                    let w = format!("{what}.tool_calls[{j}]");
                    let f = c.get("function").ok_or_else(|| {
                        ApiError::bad_request(format!("{w}: 'function' is missing"))
                    })?;
                    let name = gen::string(f, "name")?
                        .ok_or_else(|| ApiError::bad_request(format!("{w}: 'name' is missing")))?;
                    msg.tool_calls.push(ToolCall {
                        id: gen::string(c, "id")?.unwrap_or("").to_owned(),
                        name: name.to_owned(),
                        arguments: arguments(f.get("arguments"), &w)?,
                    });
                }
            }
        }
        if role == Role::Tool {
            msg.tool_call_id = gen::string(m, "tool_call_id")?.map(str::to_owned);
        }
        out.push(msg);
    }
    Ok(out)
}

/// Thinking on? (`chat_template_kwargs.thinking` / `enable_thinking`, `thinking.type`,
/// `reasoning_effort`); and `reasoning_effort: max`.
pub(crate) fn thinking(body: &Value) -> Result<(bool, bool), ApiError> {
    let kw = body.get("chat_template_kwargs");
    let mut on = kw
        .and_then(|k| k.get("thinking").or_else(|| k.get("enable_thinking")))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(t) = body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
    {
        on = t == "enabled";
    }
    let effort = gen::string(body, "reasoning_effort")?;
    let max = effort == Some("max");
    if matches!(effort, Some("low" | "medium" | "high" | "max")) {
        on = true;
    }
    Ok((on, on && max))
}

/// `tools` (function definitions) unless `tool_choice` is "none".
pub(crate) fn tools(body: &Value) -> Result<Vec<Value>, ApiError> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return Ok(Vec::new());
    }
    let Some(list) = body.get("tools").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| ApiError::bad_request("'tools' must be an array"))?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        let f = t
            .get("function")
            .filter(|f| f.get("name").and_then(Value::as_str).is_some())
            .ok_or_else(|| {
                ApiError::bad_request(format!("tools[{i}]: 'function.name' is missing"))
            })?;
        out.push(f.clone());
    }
    Ok(out)
}

fn top_logprobs(body: &Value) -> Result<Option<usize>, ApiError> {
    if gen::boolean(body, "logprobs")? != Some(true) {
        return Ok(None);
    }
    Ok(Some(
        gen::number(body, "top_logprobs", 0.0, MAX_TOP_LOGPROBS as f64)?.unwrap_or(0.0) as usize,
    ))
}

fn finish_reason(f: &ChatFinish) -> &'static str {
    match f {
        ChatFinish::Stop | ChatFinish::StopString(_) => "stop",
        ChatFinish::Length => "length",
        ChatFinish::ToolCalls => "tool_calls",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens}})
}

fn logprob_json(lp: &TokenLogprob) -> Value {
    json!({"token": lp.text, "logprob": lp.logprob, "bytes": lp.text.as_bytes(),
        "top_logprobs": lp.top.iter().map(|(_, t, l)| json!({"token": t, "logprob": l,
            "bytes": t.as_bytes()})).collect::<Vec<_>>()})
}

fn tool_call_json(c: &ToolCall, index: Option<usize>) -> Value {
    let mut v = json!({"id": c.id, "type": "function", "function": {"name": c.name,
        "arguments": Value::Object(c.arguments.clone()).to_string()}});
    if let Some(i) = index {
        v["index"] = json!(i);
    }
    v
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let body = read_json(&state, body).await?;
    check_model(&state, gen::string(&body, "model")?)?;
    let msgs = messages(&body)?;
    let (thinking, effort_max) = thinking(&body)?;
    let opts = ChatOptions {
        add_generation_prompt: true,
        thinking,
        keep_all_reasoning: false,
        tools: tools(&body)?,
        response_format: None,
        reasoning_effort_max: effort_max,
    };
    let params = GenParams {
        max_tokens: gen::max_tokens(
            &body,
            &["max_completion_tokens", "max_tokens"],
            state.config.default_max_tokens,
        )?,
        sampler: gen::sampler(&body)?,
        stop: gen::stops(&body, "stop")?,
        top_logprobs: top_logprobs(&body)?,
    };
    let stream = gen::boolean(&body, "stream")?.unwrap_or(false);
    let include_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let prompt = gen::chat_prompt(&state, &msgs, &opts)?;
    let (_, _, events) = gen::start(&state, prompt, params, Some(thinking), "call_").await?;
    let id = format!("chatcmpl-{:x}", gen::next_id());
    let model = state.config.model_id.clone();
    if stream {
        Ok(chat_stream(events, id, model, include_usage).into_response())
    } else {
        chat_whole(events, id, model).await
    }
}

async fn chat_whole(
    mut events: ChatStream,
    id: String,
    model: String,
) -> Result<Response, ApiError> {
    let (mut content, mut reasoning, mut calls, mut lps) =
        (String::new(), String::new(), Vec::new(), Vec::new());
    while let Some(evs) = events.next().await {
        for e in evs {
            match e {
                ChatEvent::Reasoning(s) => reasoning.push_str(&s),
                ChatEvent::Content(s) => content.push_str(&s),
                ChatEvent::ToolCall(c) => calls.push(c),
                ChatEvent::Logprob(lp) => lps.push(logprob_json(&lp)),
                ChatEvent::Failed(m) => return Err(ApiError::internal(m)),
                ChatEvent::Done { finish, usage } => {
                    let mut message = json!({"role": "assistant", "content": content});
                    if !reasoning.is_empty() {
                        message["reasoning_content"] = json!(reasoning);
                    }
                    if !calls.is_empty() {
                        message["tool_calls"] =
                            calls.iter().map(|c| tool_call_json(c, None)).collect();
                    }
                    let logprobs = if lps.is_empty() {
                        Value::Null
                    } else {
                        json!({"content": lps})
                    };
                    return Ok(Json(json!({"id": id, "object": "chat.completion",
                        "created": now(), "model": model, "choices": [{"index": 0,
                        "message": message, "logprobs": logprobs,
                        "finish_reason": finish_reason(&finish)}],
                        "usage": usage_json(&usage)}))
                    .into_response());
                }
            }
        }
    }
    Err(ApiError::internal("the reply ended early"))
}

fn chat_stream(
    events: ChatStream,
    id: String,
    model: String,
    include_usage: bool,
) -> Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>> {
    let created = now();
    let chunk = move |delta: Value, finish: Option<&str>, logprobs: Option<Value>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta,
            "logprobs": logprobs.map(|l| json!({"content": [l]})),
            "finish_reason": finish}]})
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), None, None);
    let s = stream::unfold(
        (events, 0usize, false),
        move |(mut events, mut n_calls, ended)| {
            let chunk = chunk.clone();
            async move {
                if ended {
                    return None;
                }
                let evs = events.next().await?;
                let mut out = Vec::new();
                let mut ended = false;
                for e in evs {
                    let v = match e {
                        ChatEvent::Reasoning(s) => {
                            chunk(json!({"reasoning_content": s}), None, None)
                        }
                        ChatEvent::Content(s) => chunk(json!({"content": s}), None, None),
                        ChatEvent::Logprob(lp) => chunk(json!({}), None, Some(logprob_json(&lp))),
                        ChatEvent::ToolCall(c) => {
                            n_calls += 1;
                            chunk(
                                json!({"tool_calls": [tool_call_json(&c, Some(n_calls - 1))]}),
                                None,
                                None,
                            )
                        }
                        ChatEvent::Failed(m) => {
                            ended = true;
                            json!({"error": {"message": m, "type": "api_error"}})
                        }
                        ChatEvent::Done { finish, usage } => {
                            ended = true;
                            out.push(chunk(json!({}), Some(finish_reason(&finish)), None));
                            if include_usage {
                                let mut u = chunk(json!({}), None, None);
                                u["choices"] = json!([]);
                                u["usage"] = usage_json(&usage);
                                out.push(u);
                            }
                            continue;
                        }
                    };
                    out.push(v);
                }
                let mut sse: Vec<SseEvent> = out
                    .into_iter()
                    .map(|v| SseEvent::default().data(v.to_string()))
                    .collect();
                if ended {
                    sse.push(SseEvent::default().data("[DONE]"));
                }
                Some((sse, (events, n_calls, ended)))
            }
        },
    );
    let all = stream::iter(vec![SseEvent::default().data(first.to_string())])
        .chain(s.flat_map(stream::iter))
        .map(Ok);
    Sse::new(all).keep_alive(KeepAlive::default())
}

/// The prompt of `/v1/completions`: a string (tokenized with the model's BOS policy), an
/// array of token ids, or a one-element array of either.
fn completion_prompt(state: &AppState, body: &Value) -> Result<Vec<u32>, ApiError> {
    let bad = || ApiError::bad_request("'prompt' must be a string or an array of token ids");
    let p = match body.get("prompt") {
        Some(Value::Array(a)) if a.len() == 1 && !a[0].is_number() => &a[0],
        Some(p) => p,
        None => return Err(ApiError::bad_request("'prompt' is missing")),
    };
    match p {
        Value::String(s) => state
            .engine
            .tokenizer
            .encode(s, true)
            .map_err(|e| ApiError::bad_request(format!("cannot tokenize the prompt: {e}"))),
        Value::Array(a) => a
            .iter()
            .map(|v| {
                v.as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(bad)
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let body = read_json(&state, body).await?;
    check_model(&state, gen::string(&body, "model")?)?;
    let prompt = completion_prompt(&state, &body)?;
    let top = match body.get("logprobs") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|&n| n as usize <= MAX_TOP_LOGPROBS)
                .ok_or_else(|| {
                    ApiError::bad_request("'logprobs' must be an integer from 0 to 20")
                })? as usize,
        ),
    };
    let params = GenParams {
        max_tokens: gen::max_tokens(&body, &["max_tokens"], 16)?,
        sampler: gen::sampler(&body)?,
        stop: gen::stops(&body, "stop")?,
        top_logprobs: top,
    };
    let stream = gen::boolean(&body, "stream")?.unwrap_or(false);
    let (_, _, mut events) = gen::start(&state, prompt, params, None, "").await?;
    let id = format!("cmpl-{:x}", gen::next_id());
    let model = state.config.model_id.clone();
    let created = now();
    if stream {
        let chunk = move |text: &str, finish: Option<&str>, lp: Option<&TokenLogprob>| {
            let logprobs = lp.map_or(Value::Null, |lp| completion_logprobs(&[lp]));
            json!({"id": id, "object": "text_completion", "created": created, "model": model,
                "choices": [{"text": text, "index": 0, "logprobs": logprobs,
                    "finish_reason": finish}]})
        };
        let s = stream::unfold((events, false), move |(mut events, ended)| {
            let chunk = chunk.clone();
            async move {
                if ended {
                    return None;
                }
                let evs = events.next().await?;
                let mut out = Vec::new();
                let mut ended = false;
                for e in evs {
                    match e {
                        ChatEvent::Content(s) => out.push(chunk(&s, None, None).to_string()),
                        // each token's log-probabilities in a chunk of their own
                        ChatEvent::Logprob(lp) => out.push(chunk("", None, Some(&lp)).to_string()),
                        ChatEvent::Done { finish, .. } => {
                            ended = true;
                            out.push(chunk("", Some(finish_reason(&finish)), None).to_string());
                            out.push("[DONE]".into());
                        }
                        ChatEvent::Failed(m) => {
                            ended = true;
                            out.push(json!({"error": {"message": m}}).to_string());
                            out.push("[DONE]".into());
                        }
                        _ => {}
                    }
                }
                let sse: Vec<SseEvent> = out
                    .into_iter()
                    .map(|d| SseEvent::default().data(d))
                    .collect();
                Some((sse, (events, ended)))
            }
        });
        return Ok(Sse::new(s.flat_map(stream::iter).map(Ok::<_, Infallible>))
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let (mut text, mut lps) = (String::new(), Vec::new());
    while let Some(evs) = events.next().await {
        for e in evs {
            match e {
                ChatEvent::Content(s) => text.push_str(&s),
                ChatEvent::Logprob(lp) => lps.push(lp),
                ChatEvent::Failed(m) => return Err(ApiError::internal(m)),
                ChatEvent::Done { finish, usage } => {
                    let logprobs = if lps.is_empty() {
                        Value::Null
                    } else {
                        completion_logprobs(&lps.iter().collect::<Vec<_>>())
                    };
                    return Ok(Json(json!({"id": id, "object": "text_completion",
                        "created": created, "model": model, "choices": [{"text": text,
                        "index": 0, "logprobs": logprobs,
                        "finish_reason": finish_reason(&finish)}],
                        "usage": usage_json(&usage)}))
                    .into_response());
                }
                _ => {}
            }
        }
    }
    Err(ApiError::internal("the reply ended early"))
}

/// The legacy completions' `logprobs` object of some tokens.
fn completion_logprobs(lps: &[&TokenLogprob]) -> Value {
    let tops: Vec<Value> = lps
        .iter()
        .map(|lp| {
            let m: Map<String, Value> = lp
                .top
                .iter()
                .map(|(_, t, l)| (t.clone(), json!(l)))
                .collect();
            Value::Object(m)
        })
        .collect();
    json!({"tokens": lps.iter().map(|lp| lp.text.clone()).collect::<Vec<_>>(),
        "token_logprobs": lps.iter().map(|lp| lp.logprob).collect::<Vec<_>>(),
        "top_logprobs": tops})
}
