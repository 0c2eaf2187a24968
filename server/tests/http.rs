//! The server in process (the router driven by `tower`'s `oneshot`, no sockets) on the
//! built-in tiny model: prefix reuse gives the same greedy text and log-probabilities as a
//! fresh server, streamed and whole replies agree, both wire formats answer, and every error
//! path has its status and a JSON body.

use axum::http::StatusCode;
use fathom_server::{EngineOptions, ServerConfig};
use serde_json::{json, Value};

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_prefix_gives_the_same_reply_as_a_fresh_server() {
    let turn1 = json!([{"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "What is free software?"}]);
    let a = default_state();
    let (s, r1) = call(
        &a,
        "POST",
        "/v1/chat/completions",
        greedy(turn1.clone(), 12),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r1}");
    let reply = r1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut turn2 = turn1.as_array().unwrap().clone();
    turn2.push(json!({"role": "assistant", "content": reply}));
    turn2.push(json!({"role": "user", "content": "And who wrote the licence?"}));
    let turn2 = Value::Array(turn2);

    let (s, warm) = call(
        &a,
        "POST",
        "/v1/chat/completions",
        greedy(turn2.clone(), 12),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        cached > 10,
        "the second turn reused {cached} tokens: {warm}"
    );

    let b = default_state();
    let (s, cold) = call(
        &b,
        "POST",
        "/v1/chat/completions",
        greedy(turn2.clone(), 12),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(
        warm["usage"]["prompt_tokens"],
        cold["usage"]["prompt_tokens"]
    );
    assert_eq!(warm["choices"][0]["message"], cold["choices"][0]["message"]);
    assert_eq!(
        warm["choices"][0]["logprobs"],
        cold["choices"][0]["logprobs"]
    );
    assert_eq!(
        warm["choices"][0]["logprobs"]["content"]
            .as_array()
            .unwrap()
            .len(),
        12
    );

    // The same request again is served from the snapshot before its prompt's last token.
    let (_, again) = call(&a, "POST", "/v1/chat/completions", greedy(turn2, 12)).await;
    assert_eq!(
        again["choices"][0]["message"],
        cold["choices"][0]["message"]
    );
    assert_eq!(
        again["usage"]["prompt_tokens_details"]["cached_tokens"],
        again["usage"]["prompt_tokens"].as_u64().unwrap() - 1
    );
}

/// The SSE stream of a reply, as (data payloads).
fn sse_data(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_and_whole_replies_agree() {
    let a = default_state();
    let msgs = json!([{"role": "user", "content": "Tell me about the GNU project."}]);
    let (_, whole) = call(&a, "POST", "/v1/chat/completions", greedy(msgs.clone(), 16)).await;
    let mut req = greedy(msgs, 16);
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let (s, h, b) = call_raw(&a, "POST", "/v1/chat/completions", req.to_string(), &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(h["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let data = sse_data(&b);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let mut text = String::new();
    let mut finish = None;
    let mut usage = None;
    for d in &data[..data.len() - 1] {
        let v: Value = serde_json::from_str(d).unwrap();
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            text.push_str(c);
        }
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_owned());
        }
        if !v["usage"].is_null() {
            usage = Some(v["usage"].clone());
        }
    }
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(finish.as_deref(), Some("length"));
    assert_eq!(usage.unwrap()["completion_tokens"], 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_whole_and_streamed() {
    let a = default_state();
    let req = json!({"max_tokens": 8, "temperature": 0, "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]});
    let (s, whole) = call(&a, "POST", "/v1/messages", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{whole}");
    assert_eq!(whole["type"], "message");
    assert_eq!(whole["stop_reason"], "max_tokens");
    assert_eq!(whole["usage"]["output_tokens"], 8);
    let text = whole["content"][0]["text"].as_str().unwrap().to_owned();

    let mut sreq = req;
    sreq["stream"] = json!(true);
    let (s, _, b) = call_raw(&a, "POST", "/v1/messages", sreq.to_string(), &[]).await;
    assert_eq!(s, StatusCode::OK);
    let body = String::from_utf8_lossy(&b).into_owned();
    let names: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(names.contains(&"content_block_start") && names.contains(&"message_delta"));
    let mut streamed = String::new();
    for d in sse_data(&b) {
        let v: Value = serde_json::from_str(&d).unwrap();
        if v["type"] == "content_block_delta" {
            streamed.push_str(v["delta"]["text"].as_str().unwrap());
        }
        if v["type"] == "message_start" {
            // the whole request above left its prompt cached
            assert!(
                v["message"]["usage"]["cache_read_input_tokens"]
                    .as_u64()
                    .unwrap()
                    > 0
            );
        }
    }
    assert_eq!(streamed, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_take_text_or_token_ids() {
    let a = default_state();
    let (s, r) = call(
        &a,
        "POST",
        "/v1/completions",
        json!({"prompt": "This program is free software", "max_tokens": 6, "temperature": 0,
            "logprobs": 2}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        r["choices"][0]["logprobs"]["tokens"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    let ids = a
        .engine
        .tokenizer
        .encode("This program is free software", true)
        .unwrap();
    let (s, r2) = call(
        &a,
        "POST",
        "/v1/completions",
        json!({"prompt": ids, "max_tokens": 6, "temperature": 0}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["choices"][0]["text"], r2["choices"][0]["text"]);
    assert_eq!(
        r2["usage"]["prompt_tokens_details"]["cached_tokens"],
        ids.len() - 1
    );
    // A stop string ends the text before it.
    let text = r["choices"][0]["text"].as_str().unwrap();
    let cut: String = text.chars().skip(2).take(2).collect();
    let (_, r3) = call(
        &a,
        "POST",
        "/v1/completions",
        json!({"prompt": ids, "max_tokens": 6, "temperature": 0, "stop": [cut.clone()]}),
    )
    .await;
    let t3 = r3["choices"][0]["text"].as_str().unwrap();
    assert_eq!(t3, &text[..text.find(&cut).unwrap()]);
    assert_eq!(r3["choices"][0]["finish_reason"], "stop");
    // Streamed: the same text, and each token's log-probabilities in a chunk.
    let body = json!({"prompt": ids, "max_tokens": 6, "temperature": 0, "logprobs": 2,
        "stream": true});
    let (s, _, b) = call_raw(&a, "POST", "/v1/completions", body.to_string(), &[]).await;
    assert_eq!(s, StatusCode::OK);
    let (mut streamed, mut lps) = (String::new(), Vec::new());
    for d in sse_data(&b).iter().filter(|d| *d != "[DONE]") {
        let v: Value = serde_json::from_str(d).unwrap();
        streamed.push_str(v["choices"][0]["text"].as_str().unwrap());
        if let Some(t) = v["choices"][0]["logprobs"]["token_logprobs"].as_array() {
            lps.extend(t.iter().map(|x| x.as_f64().unwrap()));
        }
    }
    assert_eq!(streamed, text);
    let whole: Vec<f64> = r["choices"][0]["logprobs"]["token_logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(lps, whole);
}

/// A path, a body, headers, and the status expected.
type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, StatusCode);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_their_status_and_a_json_body() {
    let a = state(
        64,
        EngineOptions::default(),
        ServerConfig {
            api_key: Some("sekrit".into()),
            max_body: 4096,
            ..ServerConfig::default()
        },
    );
    let key = [("authorization", "Bearer sekrit")];
    let msg = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
    let cases: Vec<Case> = vec![
        (
            "/v1/chat/completions",
            msg.to_string(),
            vec![],
            StatusCode::UNAUTHORIZED,
        ),
        (
            "/v1/chat/completions",
            msg.to_string(),
            vec![("x-api-key", "wrong")],
            StatusCode::UNAUTHORIZED,
        ),
        (
            "/v1/chat/completions",
            "{not json".into(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            "[1]".into(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": 3}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "wizard", "content": "x"}]}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "temperature": 7}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-9", "messages": []}).to_string(),
            key.to_vec(),
            StatusCode::NOT_FOUND,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x ".repeat(2500)}]}).to_string(),
            key.to_vec(),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "word ".repeat(300)}]}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/completions",
            json!({"prompt": [999999]}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": "x"}]}).to_string(),
            key.to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        ("/v1/nope", "{}".into(), key.to_vec(), StatusCode::NOT_FOUND),
    ];
    for (path, body, headers, want) in cases {
        let (s, _, b) = call_raw(&a, "POST", path, body.clone(), &headers).await;
        assert_eq!(s, want, "{path} {}", &body[..body.len().min(80)]);
        let v: Value = serde_json::from_slice(&b).unwrap();
        let m = v["error"]["message"].as_str().unwrap();
        assert!(!m.is_empty() && !m.contains("{ "), "{m}");
    }
    // The key is not needed outside /v1.
    let (s, _, _) = call_raw(&a, "GET", "/health", String::new(), &[]).await;
    assert_eq!(s, StatusCode::OK);
    // The prompt-too-long message gives both figures.
    let (_, _, b) = call_raw(
        &a,
        "POST",
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "word ".repeat(300)}]}).to_string(),
        &key,
    )
    .await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the context holds 64"),
        "{v}"
    );
    // Metrics count the refusals.
    let (_, _, b) = call_raw(&a, "GET", "/metrics", String::new(), &[]).await;
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.contains("fathom_requests_client_errors_total 15"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_retry_after() {
    let a = state(
        512,
        EngineOptions {
            queue: 1,
            ..EngineOptions::default()
        },
        ServerConfig::default(),
    );
    let req = json!({"messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": 200, "temperature": 0})
    .to_string();
    let mut handles = Vec::new();
    for _ in 0..4 {
        let a = a.clone();
        let req = req.clone();
        handles.push(tokio::spawn(async move {
            call_raw(&a, "POST", "/v1/chat/completions", req, &[]).await
        }));
    }
    let mut ok = 0;
    let mut busy = 0;
    for h in handles {
        let (s, headers, _) = h.await.unwrap();
        if s == StatusCode::OK {
            ok += 1;
        } else {
            assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(headers["retry-after"], "1");
            busy += 1;
        }
    }
    assert!(ok >= 1 && busy >= 1, "ok {ok}, busy {busy}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_cache_serves_a_restarted_server_and_survives_damage() {
    let dir = std::env::temp_dir().join(format!("fathom-prefix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = || EngineOptions {
        disk: Some(fathom_server::DiskOptions {
            dir: dir.clone(),
            fingerprint: "tiny test model".into(),
            max_bytes: 64 << 20,
        }),
        ..EngineOptions::default()
    };
    let req = greedy(
        json!([{"role": "user", "content": "Tell me about free software."}]),
        8,
    );
    let a = state(512, opts(), ServerConfig::default());
    let (_, first) = call(&a, "POST", "/v1/chat/completions", req.clone()).await;
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    drop(a);

    // A new server (a restart) finds the prompt's snapshot on disk.
    let b = state(512, opts(), ServerConfig::default());
    let (_, second) = call(&b, "POST", "/v1/chat/completions", req.clone()).await;
    assert_eq!(
        second["usage"]["prompt_tokens_details"]["cached_tokens"],
        second["usage"]["prompt_tokens"].as_u64().unwrap() - 1
    );
    assert_eq!(
        second["choices"][0]["message"],
        first["choices"][0]["message"]
    );
    assert_eq!(
        second["choices"][0]["logprobs"],
        first["choices"][0]["logprobs"]
    );
    let (_, _, m) = call_raw(&b, "GET", "/metrics", String::new(), &[]).await;
    assert!(String::from_utf8(m)
        .unwrap()
        .contains("fathom_prefix_disk_hits_total 1"));
    drop(b);

    // Damaged snapshot files are a miss (and removed), never a wrong answer.
    let sub = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for e in std::fs::read_dir(&sub).unwrap() {
        let p = e.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        std::fs::write(&p, bytes).unwrap();
    }
    let c = state(512, opts(), ServerConfig::default());
    let (_, third) = call(&c, "POST", "/v1/chat/completions", req.clone()).await;
    assert_eq!(third["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(
        third["choices"][0]["message"],
        first["choices"][0]["message"]
    );

    // Another fingerprint does not see these snapshots.
    let other = EngineOptions {
        disk: Some(fathom_server::DiskOptions {
            dir: dir.clone(),
            fingerprint: "another model".into(),
            max_bytes: 64 << 20,
        }),
        ..EngineOptions::default()
    };
    let d = state(512, other, ServerConfig::default());
    let (_, fourth) = call(&d, "POST", "/v1/chat/completions", req).await;
    assert_eq!(fourth["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A control token the model writes (here a scripted BOS) is not reply text; its
/// log-probability entry still names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_tokens_are_not_reply_text() {
    let a = state(
        512,
        EngineOptions {
            script: vec!["Hello<｜begin▁of▁sentence｜> world".into()],
            ..EngineOptions::default()
        },
        ServerConfig::default(),
    );
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    let (s, r) = call(&a, "POST", "/v1/chat/completions", greedy(msgs, 32)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["choices"][0]["message"]["content"], "Hello world");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let toks: Vec<&str> = r["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["token"].as_str().unwrap())
        .collect();
    assert!(toks.contains(&"<｜begin▁of▁sentence｜>"), "{toks:?}");
}

/// With routed experts read through a cache (`--ram`), `/metrics` reports it: enabled, the
/// reads a reply needed, hits and the budget; without one it reports 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_the_expert_cache() {
    let metric = |text: &str, name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("fathom_{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    let lo = models::model::LoadOptions {
        experts: Some(models::weights::ExpertCacheConfig::with_budget(256 << 10)),
        ..Default::default()
    };
    let a = state_from_path(512, lo);
    let body = greedy(json!([{"role": "user", "content": "Hello"}]), 8);
    let (s, v) = call(&a, "POST", "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, _, b) = call_raw(&a, "GET", "/metrics", String::new(), &[]).await;
    let text = String::from_utf8(b).unwrap();
    assert_eq!(metric(&text, "expert_cache_enabled"), 1.0);
    assert!(metric(&text, "expert_cache_misses_total") > 0.0, "{text}");
    assert!(
        metric(&text, "expert_cache_read_bytes_total") > 0.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "expert_cache_budget_bytes"),
        (256 << 10) as f64
    );
    let (_, _, b) = call_raw(&default_state(), "GET", "/metrics", String::new(), &[]).await;
    let text = String::from_utf8(b).unwrap();
    assert_eq!(metric(&text, "expert_cache_enabled"), 0.0);
}
