//! Routing, authentication, JSON errors, `/health`, `/metrics`, `/v1/models` and the chat page.

use crate::engine::{Engine, EngineError, SubmitError};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use models::chat::ChatTemplate;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the server needs besides the engine.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The model id reported by `/v1/models` and accepted in requests.
    pub model_id: String,
    /// With `Some`, every `/v1/*` request must carry it (`Authorization: Bearer KEY` or
    /// `x-api-key: KEY`).
    pub api_key: Option<String>,
    /// Largest request body accepted (bytes); larger is refused with 413.
    pub max_body: usize,
    /// `max_tokens` when a request gives none.
    pub default_max_tokens: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            model_id: "fathom".into(),
            api_key: None,
            max_body: 32 << 20,
            default_max_tokens: 4096,
        }
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: Engine,
    /// The chat format.
    pub template: Arc<ChatTemplate>,
    /// The configuration.
    pub config: Arc<ServerConfig>,
    /// Requests answered, by outcome (for `/metrics`).
    pub requests: Arc<RequestCounters>,
    /// Start time (s since the epoch).
    pub started: u64,
}

/// HTTP request counters.
#[derive(Debug, Default)]
pub struct RequestCounters {
    /// Requests received on the `/v1` routes.
    pub total: AtomicU64,
    /// Answered with a 4xx status.
    pub client_errors: AtomicU64,
    /// Answered with 503 (queue full).
    pub busy: AtomicU64,
    /// Answered with another 5xx status.
    pub server_errors: AtomicU64,
}

impl AppState {
    /// State for `engine` with `template` and `config`.
    pub fn new(engine: Engine, template: ChatTemplate, config: ServerConfig) -> AppState {
        AppState {
            engine,
            template: Arc::new(template),
            config: Arc::new(config),
            requests: Arc::new(RequestCounters::default()),
            started: now(),
        }
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An error answered as JSON: `{"error": {"message", "type", "code"}}` (OpenAI's shape;
/// Anthropic clients read `error.message` and `error.type` from it too).
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The message, for a user.
    pub message: String,
    /// The kind (`invalid_request_error`, `authentication_error`, …).
    pub kind: &'static str,
}

impl ApiError {
    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
        }
    }

    /// 500 with `message` (the engine failed or stopped).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "api_error",
        }
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            kind: "not_found_error",
        }
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: e.to_string(),
            kind: "overloaded_error",
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let status = match e {
            EngineError::Inference(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError {
            status,
            kind: if status.is_server_error() {
                "api_error"
            } else {
                "invalid_request_error"
            },
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"type": "error", "error": {
            "message": self.message, "type": self.kind, "code": self.status.as_u16()}});
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// Check the model a request names: absent, empty, or the served one.
pub fn check_model(state: &AppState, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        None | Some("") => Ok(()),
        Some(m) if m == state.config.model_id => Ok(()),
        Some(m) => Err(ApiError::not_found(format!(
            "model '{m}' is not served here; this server serves '{}'",
            state.config.model_id
        ))),
    }
}

/// Read a JSON request body of at most `max_body` bytes.
pub async fn read_json(
    state: &AppState,
    body: axum::body::Body,
) -> Result<serde_json::Value, ApiError> {
    let bytes = axum::body::to_bytes(body, state.config.max_body)
        .await
        .map_err(|_| ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "the request body is larger than {} bytes",
                state.config.max_body
            ),
            kind: "request_too_large",
        })?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    Ok(v)
}

/// The router: every route, the key check on `/v1/*`, and request counting.
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route(
            "/v1/chat/completions",
            post(crate::openai::chat_completions),
        )
        .route("/v1/completions", post(crate::openai::completions))
        .route("/v1/models", get(models_list))
        .route("/v1/messages", post(crate::anthropic::messages))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .merge(v1)
        .route("/", get(page))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .with_state(state)
}

/// Serve `router(state)` on `listener` until Ctrl-C.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

async fn auth(
    State(state): State<AppState>,
    headers: HeaderMap,
    req: Request,
    next: Next,
) -> Response {
    if let Some(key) = &state.config.api_key {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let x = headers.get("x-api-key").and_then(|v| v.to_str().ok());
        if bearer != Some(key.as_str()) && x != Some(key.as_str()) {
            return ApiError {
                status: StatusCode::UNAUTHORIZED,
                message: "a valid API key is required (Authorization: Bearer KEY or x-api-key)"
                    .into(),
                kind: "authentication_error",
            }
            .into_response();
        }
    }
    next.run(req).await
}

async fn count(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/v1/");
    let r = next.run(req).await;
    if is_api {
        let c = &state.requests;
        c.total.fetch_add(1, Ordering::Relaxed);
        let s = r.status();
        if s == StatusCode::SERVICE_UNAVAILABLE {
            c.busy.fetch_add(1, Ordering::Relaxed);
        } else if s.is_server_error() {
            c.server_errors.fetch_add(1, Ordering::Relaxed);
        } else if s.is_client_error() {
            c.client_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
    r
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!("no route {} {}", req.method(), req.uri().path()))
}

async fn models_list(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"object": "list", "data": [{
        "id": state.config.model_id, "object": "model", "created": state.started,
        "owned_by": "fathom", "context_length": state.engine.ctx}]}))
}

async fn health(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "queued": state.engine.queued()}))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let m = &state.engine.metrics;
    let r = &state.requests;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let rate = |tokens: u64, ns: u64| {
        if ns == 0 {
            0.0
        } else {
            tokens as f64 / (ns as f64 * 1e-9)
        }
    };
    let mut out = String::new();
    let mut put = |name: &str, kind: &str, help: &str, v: String| {
        out.push_str(&format!(
            "# HELP fathom_{name} {help}\n# TYPE fathom_{name} {kind}\nfathom_{name} {v}\n"
        ));
    };
    put(
        "requests_total",
        "counter",
        "HTTP requests on /v1 routes.",
        g(&r.total).to_string(),
    );
    put(
        "requests_client_errors_total",
        "counter",
        "Requests answered with 4xx.",
        g(&r.client_errors).to_string(),
    );
    put(
        "requests_busy_total",
        "counter",
        "Requests refused with 503 (queue full).",
        g(&r.busy).to_string(),
    );
    put(
        "requests_server_errors_total",
        "counter",
        "Requests answered with another 5xx.",
        g(&r.server_errors).to_string(),
    );
    put(
        "jobs_total",
        "counter",
        "Generation jobs run by the engine.",
        g(&m.jobs).to_string(),
    );
    put(
        "jobs_failed_total",
        "counter",
        "Jobs that failed.",
        g(&m.jobs_failed).to_string(),
    );
    put(
        "jobs_cancelled_total",
        "counter",
        "Jobs stopped because the client went away.",
        g(&m.cancelled).to_string(),
    );
    put(
        "prompt_tokens_total",
        "counter",
        "Prompt tokens received.",
        g(&m.prompt_tokens).to_string(),
    );
    put(
        "prompt_tokens_cached_total",
        "counter",
        "Prompt tokens reused from a cached state.",
        g(&m.cached_tokens).to_string(),
    );
    put(
        "prompt_tokens_evaluated_total",
        "counter",
        "Prompt tokens evaluated.",
        g(&m.prefill_tokens).to_string(),
    );
    put(
        "generated_tokens_total",
        "counter",
        "Tokens generated.",
        g(&m.generated_tokens).to_string(),
    );
    put(
        "prefill_tokens_per_second",
        "gauge",
        "Prompt evaluation rate since start.",
        format!("{:.3}", rate(g(&m.prefill_tokens), g(&m.prefill_ns))),
    );
    put(
        "decode_tokens_per_second",
        "gauge",
        "Generation rate of one request since start (its tokens over its generation time).",
        format!("{:.3}", rate(g(&m.generated_tokens), g(&m.decode_ns))),
    );
    put(
        "queue_depth",
        "gauge",
        "Jobs waiting for the engine.",
        state.engine.queued().to_string(),
    );
    put(
        "slots",
        "gauge",
        "Slots (requests generating at once).",
        state.engine.parallel.to_string(),
    );
    put(
        "slots_busy",
        "gauge",
        "Slots running a request.",
        g(&m.slots_busy).to_string(),
    );
    put(
        "batched_steps_total",
        "counter",
        "Decode steps that evaluated two or more slots as one graph.",
        g(&m.batched_steps).to_string(),
    );
    put(
        "batched_tokens_total",
        "counter",
        "Tokens evaluated by batched decode steps.",
        g(&m.batched_tokens).to_string(),
    );
    let x = &m.experts;
    let wait = format!("{:.6}", g(&x.wait_ns) as f64 * 1e-9);
    for (name, kind, help, v) in [
        (
            "expert_cache_enabled",
            "gauge",
            "1 when routed experts are read from disk into a cache (--ram).",
            g(&x.enabled).to_string(),
        ),
        (
            "expert_cache_hits_total",
            "counter",
            "Experts a layer asked for that were resident.",
            g(&x.hits).to_string(),
        ),
        (
            "expert_cache_misses_total",
            "counter",
            "Experts a layer asked for that needed a read.",
            g(&x.misses).to_string(),
        ),
        (
            "expert_cache_read_bytes_total",
            "counter",
            "Bytes of experts read from disk.",
            g(&x.read_bytes).to_string(),
        ),
        (
            "expert_cache_wait_seconds_total",
            "counter",
            "Seconds compute threads waited for expert reads.",
            wait,
        ),
        (
            "expert_cache_resident_bytes",
            "gauge",
            "Bytes of experts held in the cache.",
            g(&x.resident_bytes).to_string(),
        ),
        (
            "expert_cache_budget_bytes",
            "gauge",
            "The expert cache's budget.",
            g(&x.budget_bytes).to_string(),
        ),
    ] {
        put(name, kind, help, v);
    }
    put(
        "prefix_snapshots",
        "gauge",
        "Prefix snapshots held in memory.",
        g(&m.snapshots).to_string(),
    );
    put(
        "prefix_snapshot_bytes",
        "gauge",
        "Bytes of prefix snapshots held in memory.",
        g(&m.snapshot_bytes).to_string(),
    );
    put(
        "prefix_disk_hits_total",
        "counter",
        "Prompts continued from a snapshot read from disk.",
        g(&m.disk_hits).to_string(),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

async fn page() -> Html<&'static str> {
    Html(include_str!("page.html"))
}
