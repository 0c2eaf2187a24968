//! What the server's in-process tests share: a server on the built-in tiny model and calls
//! through its router (`tower`'s `oneshot`, no sockets).
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fathom_server::{router, AppState, Engine, EngineOptions, ServerConfig};
use http_body_util::BodyExt;
use models::model::{open_gguf, LoadOptions};
use models::session::Session;
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

pub const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tools/assets/dsv4-tiny-trained-Q8_0.gguf"
);

pub fn state(ctx: usize, opts: EngineOptions, config: ServerConfig) -> AppState {
    let bytes = std::fs::read(MODEL).unwrap();
    let file = Arc::new(models::gguf::GgufFile::parse(bytes).unwrap());
    let lo = LoadOptions::default();
    let model = open_gguf(file, &lo).unwrap();
    let tok = model.tokenizer().unwrap().clone();
    let template = model.chat_template().unwrap();
    let session = Session::new(model, lo.exec.clone(), ctx).unwrap();
    AppState::new(Engine::start(session, tok, opts).unwrap(), template, config)
}

/// A server whose model is opened from `MODEL`'s path with `lo` (e.g. an expert cache).
pub fn state_from_path(ctx: usize, lo: LoadOptions) -> AppState {
    let file = Arc::new(models::gguf::GgufFile::open(MODEL).unwrap());
    let model = open_gguf(file, &lo).unwrap();
    let tok = model.tokenizer().unwrap().clone();
    let template = model.chat_template().unwrap();
    let session = Session::new(model, lo.exec.clone(), ctx).unwrap();
    AppState::new(
        Engine::start(session, tok, EngineOptions::default()).unwrap(),
        template,
        ServerConfig::default(),
    )
}

pub fn default_state() -> AppState {
    state(512, EngineOptions::default(), ServerConfig::default())
}

pub async fn call(app: &AppState, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let (s, _, b) = call_raw(app, method, path, body.to_string(), &[]).await;
    let v = serde_json::from_slice(&b).unwrap_or(Value::Null);
    (s, v)
}

pub async fn call_raw(
    app: &AppState,
    method: &str,
    path: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = router(app.clone())
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, bytes)
}

pub fn greedy(messages: Value, max_tokens: usize) -> Value {
    json!({"messages": messages, "max_tokens": max_tokens, "temperature": 0,
        "logprobs": true, "top_logprobs": 3})
}
