//! What the chat endpoints share: a prompt queued on the engine, and its reply turned into
//! reasoning, text, tool calls and log-probabilities as it streams, whatever the wire format.

use crate::engine::{Event, Finish, GenParams, Job, TokenLogprob, Usage};
use crate::http::{ApiError, AppState};
use models::chat::dsml::{ReplyEvent, ReplyParser};
use models::chat::{ChatOptions, Message, ToolCall};
use models::sampling::SamplerConfig;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;

/// Largest `top_logprobs` accepted (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Why a chat reply ended, in the terms both formats need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatFinish {
    /// End of text.
    Stop,
    /// A stop string (which).
    StopString(String),
    /// Token limit or full context.
    Length,
    /// The reply ended with tool calls.
    ToolCalls,
}

/// One piece of a chat reply.
#[derive(Debug)]
pub enum ChatEvent {
    /// Reasoning text.
    Reasoning(String),
    /// Answer text.
    Content(String),
    /// A complete tool call, with its id.
    ToolCall(ToolCall),
    /// The log-probability of the next generated token.
    Logprob(TokenLogprob),
    /// The end.
    Done {
        /// Why.
        finish: ChatFinish,
        /// Token counts.
        usage: Usage,
    },
    /// The job failed after it started.
    Failed(String),
}

/// A queued job's events, parsed.
pub struct ChatStream {
    rx: mpsc::UnboundedReceiver<Event>,
    parser: Option<ReplyParser>,
    id_prefix: &'static str,
    saw_tool_call: bool,
    done: bool,
}

/// A process-wide counter for ids (`chatcmpl-…`, `call_…`, `msg_…`).
pub fn next_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(1);
    let n = N.fetch_add(1, Ordering::Relaxed);
    // Mixed with the start time so ids differ across restarts.
    n ^ (crate::http::now() << 20)
}

impl ChatStream {
    /// The next events; `None` after the end.
    pub async fn next(&mut self) -> Option<Vec<ChatEvent>> {
        if self.done {
            return None;
        }
        let Some(ev) = self.rx.recv().await else {
            self.done = true;
            return Some(vec![ChatEvent::Failed(
                "the inference engine stopped".into(),
            )]);
        };
        let mut out = Vec::new();
        match ev {
            Event::Started { .. } => {}
            Event::Token { text, logprob } => {
                if let Some(lp) = logprob {
                    out.push(ChatEvent::Logprob(lp));
                }
                self.parsed(&text, false, &mut out);
            }
            Event::Done { finish, usage, .. } => {
                self.parsed("", true, &mut out);
                self.done = true;
                let finish = match finish {
                    _ if self.saw_tool_call => ChatFinish::ToolCalls,
                    Finish::Stop => ChatFinish::Stop,
                    Finish::StopString(s) => ChatFinish::StopString(s),
                    Finish::Length => ChatFinish::Length,
                };
                out.push(ChatEvent::Done { finish, usage });
            }
            Event::Failed(e) => {
                self.done = true;
                out.push(ChatEvent::Failed(e.to_string()));
            }
        }
        Some(out)
    }

    fn parsed(&mut self, text: &str, end: bool, out: &mut Vec<ChatEvent>) {
        let Some(p) = &mut self.parser else {
            if !text.is_empty() {
                out.push(ChatEvent::Content(text.to_owned()));
            }
            return;
        };
        let mut evs = p.push(text);
        if end {
            evs.extend(p.finish());
        }
        for e in evs {
            out.push(match e {
                ReplyEvent::Reasoning(s) => ChatEvent::Reasoning(s),
                ReplyEvent::Content(s) => ChatEvent::Content(s),
                ReplyEvent::ToolCall(mut c) => {
                    self.saw_tool_call = true;
                    c.id = format!("{}{:x}", self.id_prefix, next_id());
                    ChatEvent::ToolCall(c)
                }
            });
        }
    }
}

/// Queue `prompt` and wait until the engine accepts it (so that a refusal is an HTTP status,
/// not a broken stream). `parse` = `Some(thinking)` parses the reply as a chat turn; `None`
/// returns raw text. Returns the prompt and cached token counts with the stream.
pub async fn start(
    state: &AppState,
    prompt: Vec<u32>,
    params: GenParams,
    parse: Option<bool>,
    id_prefix: &'static str,
) -> Result<(usize, usize, ChatStream), ApiError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    state.engine.submit(Job {
        prompt,
        params,
        events: tx,
    })?;
    match rx.recv().await {
        Some(Event::Started {
            prompt_tokens,
            cached_tokens,
        }) => Ok((
            prompt_tokens,
            cached_tokens,
            ChatStream {
                rx,
                parser: parse.map(ReplyParser::new),
                id_prefix,
                saw_tool_call: false,
                done: false,
            },
        )),
        Some(Event::Failed(e)) => Err(e.into()),
        _ => Err(ApiError::internal("the inference engine stopped")),
    }
}

/// Render a conversation and tokenize it.
pub fn chat_prompt(
    state: &AppState,
    messages: &[Message],
    opts: &ChatOptions,
) -> Result<Vec<u32>, ApiError> {
    let text = state.template.render(messages, opts);
    state
        .engine
        .tokenizer
        .encode(&text, false)
        .map_err(|e| ApiError::bad_request(format!("cannot tokenize the conversation: {e}")))
}

/// A field's number, if present: `Ok(None)` when absent or null, an error naming it when it
/// has another type or is out of `[lo, hi]`.
pub fn number(body: &Value, key: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(Some(x)),
            _ => Err(ApiError::bad_request(format!(
                "'{key}' must be a number from {lo} to {hi}, not {v}"
            ))),
        },
    }
}

/// A field's string, if present.
pub fn string<'a>(body: &'a Value, key: &str) -> Result<Option<&'a str>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(ApiError::bad_request(format!(
            "'{key}' must be a string, not {v}"
        ))),
    }
}

/// A field's bool, if present.
pub fn boolean(body: &Value, key: &str) -> Result<Option<bool>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ApiError::bad_request(format!(
            "'{key}' must be true or false, not {v}"
        ))),
    }
}

/// Stop strings: a string or an array of at most 16 strings, under `key`.
pub fn stops(body: &Value, key: &str) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::bad_request(format!("'{key}' must be a string or up to 16 strings"));
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.len() <= 16 => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// Sampling from the common fields (`temperature`, `top_p`, `top_k`, `seed`,
/// `frequency_penalty` is not supported and ignored). Temperature 0 is greedy; the filters a
/// request does not set are off (the OpenAI and Anthropic defaults), not the CLI's.
pub fn sampler(body: &Value) -> Result<SamplerConfig, ApiError> {
    let temperature = number(body, "temperature", 0.0, 2.0)?.unwrap_or(1.0) as f32;
    let top_p = number(body, "top_p", 0.0, 1.0)?.unwrap_or(1.0) as f32;
    let top_k = number(body, "top_k", 0.0, 1e6)?.unwrap_or(0.0) as usize;
    let seed = match body.get("seed") {
        None | Some(Value::Null) => next_id(),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_i64().map(|x| x as u64))
            .ok_or_else(|| ApiError::bad_request(format!("'seed' must be an integer, not {v}")))?,
    };
    let cfg = SamplerConfig {
        temperature,
        top_k,
        top_p,
        min_p: 0.0,
        seed,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
    };
    cfg.validate()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(cfg)
}

/// `max_tokens` from the first of `keys` present (a positive integer), else `default`.
pub fn max_tokens(body: &Value, keys: &[&str], default: usize) -> Result<usize, ApiError> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return v
                    .as_u64()
                    .filter(|&n| n >= 1)
                    .map(|n| n.min(u32::MAX as u64) as usize)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("'{k}' must be a positive integer, not {v}"))
                    })
            }
        }
    }
    Ok(default)
}
