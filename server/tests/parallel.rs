//! `--parallel` slots on the built-in tiny model: requests running at once in several slots,
//! their decode steps batched, reply as they do one at a time in one slot; a client that
//! goes away mid-stream stops its own generation and nobody else's.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fathom_server::{router, EngineOptions, ServerConfig};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

mod common;
use common::*;

const QUESTIONS: [&str; 5] = [
    "What is free software?",
    "Name a prime number.",
    "Why is the sky blue?",
    "Write one word.",
    "Count to three.",
];

fn request(q: &str, max_tokens: usize) -> Value {
    greedy(json!([{"role": "user", "content": q}]), max_tokens)
}

/// The text and top log-probabilities of a reply.
fn reply(v: &Value) -> (String, Vec<f64>) {
    let c = &v["choices"][0];
    let text = c["message"]["content"].as_str().unwrap_or("").to_owned();
    let lps = c["logprobs"]["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .flat_map(|t| t["top_logprobs"].as_array().cloned().unwrap_or_default())
                .map(|t| t["logprob"].as_f64().unwrap())
                .collect()
        })
        .unwrap_or_default();
    (text, lps)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("fathom_{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_reply_as_one_slot_does() {
    let one = default_state();
    let mut want = Vec::new();
    for q in QUESTIONS {
        let (s, v) = call(&one, "POST", "/v1/chat/completions", request(q, 16)).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        want.push(reply(&v));
    }
    let par = state(
        512,
        EngineOptions {
            parallel: 3,
            ..EngineOptions::default()
        },
        ServerConfig::default(),
    );
    // every request at once: three run, two wait for a slot
    let tasks: Vec<_> = QUESTIONS
        .iter()
        .map(|q| {
            let app = par.clone();
            let body = request(q, 16);
            tokio::spawn(async move { call(&app, "POST", "/v1/chat/completions", body).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (s, v) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{v}");
        let (text, lps) = reply(&v);
        assert_eq!(text, want[i].0, "request {i}");
        assert_eq!(lps.len(), want[i].1.len(), "request {i}");
        for (a, b) in lps.iter().zip(&want[i].1) {
            assert!((a - b).abs() < 1e-3, "request {i}: {a} vs {b}");
        }
    }
    let (_, _, m) = call_raw(&par, "GET", "/metrics", String::new(), &[]).await;
    let m = String::from_utf8(m).unwrap();
    assert_eq!(metric(&m, "slots"), 3);
    assert!(metric(&m, "batched_steps_total") > 0, "{m}");
    assert!(metric(&m, "batched_tokens_total") >= 2 * metric(&m, "batched_steps_total"));
    // a second round reuses the slots' live states: the same conversation goes on
    let mut turn2 = request(QUESTIONS[0], 8);
    turn2["messages"] = json!([{"role": "user", "content": QUESTIONS[0]},
        {"role": "assistant", "content": want[0].0},
        {"role": "user", "content": "Say more."}]);
    let (s, a) = call(&par, "POST", "/v1/chat/completions", turn2.clone()).await;
    assert_eq!(s, StatusCode::OK);
    let (_, b) = call(&one, "POST", "/v1/chat/completions", turn2).await;
    assert!(a["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64() > Some(5));
    assert_eq!(reply(&a).0, reply(&b).0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_stops_only_its_own_reply() {
    let par = state(
        512,
        EngineOptions {
            parallel: 2,
            ..EngineOptions::default()
        },
        ServerConfig::default(),
    );
    let one = default_state();
    let (_, want) = call(
        &one,
        "POST",
        "/v1/chat/completions",
        request(QUESTIONS[2], 24),
    )
    .await;
    // a long streamed reply, read for one event and dropped
    let mut leaving = request(QUESTIONS[1], 400);
    leaving["stream"] = json!(true);
    let req = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(leaving.to_string()))
        .unwrap();
    let resp = router(par.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.is_data());
    let staying = {
        let app = par.clone();
        tokio::spawn(async move {
            call(
                &app,
                "POST",
                "/v1/chat/completions",
                request(QUESTIONS[2], 24),
            )
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    drop(body);
    let (s, got) = staying.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{got}");
    assert_eq!(reply(&got).0, reply(&want).0);
    // the engine noticed the client left (within a few tokens)
    let mut cancelled = 0;
    for _ in 0..100 {
        let (_, _, m) = call_raw(&par, "GET", "/metrics", String::new(), &[]).await;
        cancelled = metric(&String::from_utf8(m).unwrap(), "jobs_cancelled_total");
        if cancelled > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(cancelled, 1);
}
