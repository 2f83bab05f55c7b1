//! The HTTP API of `toren serve`, as an [`axum::Router`] over the run service: create,
//! get, list (`listing`: filters and cursor pages) and cancel runs, read their events as
//! JSON or follow them as Server-Sent Events, and see and decide their approvals; sessions
//! and their turns, with one stream of all their events (`session_events`); workspace files
//! (`files`); Prometheus metrics (`metrics`); the web page at `/` and `/ui/…` (`web`).
//! Every API route but `/healthz`, `/readyz` and `/openapi.json` needs a bearer token (the
//! web page's copies under `/ui/api` need its sign-in cookie instead); every error is an
//! `application/problem+json` document without internals. Each route is documented where
//! its handler is (`#[utoipa::path]`), and [`openapi()`] is the OpenAPI 3.1 document
//! collected from them (`openapi.rs`). The router opens no socket itself, so tests drive it
//! with `tower::ServiceExt::oneshot`.

mod auth;
mod budget;
mod error;
mod events;
mod files;
mod listing;
mod metrics;
mod openapi;
mod redact;
mod rewind;
mod runs;
mod session_events;
mod session_rewind;
mod sessions;
mod tokens;
mod web;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use toren_runtime::RunService;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::Token;
pub use error::Problem;
pub use metrics::Metrics;
pub use tokens::{MIN_TOKEN_LEN, TokensError, parse_tokens};

/// The largest workspace file the API serves (the tools' own read limit).
pub const FILE_LIMIT: u64 = files::FILE_LIMIT;

/// The largest request body accepted (the run's input included).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub service: RunService,
    /// `TOREN_AGENTS`: agents are looked up here by name only.
    pub agents_dir: PathBuf,
    /// The tokens a request may present; each has the name decisions are recorded under.
    pub tokens: Arc<Vec<Token>>,
    /// What `GET /metrics` reports; also the observer of this process's workers.
    pub metrics: Metrics,
    /// The sandbox backends of this process: `/readyz` asks them, and a removed session's
    /// sandbox is let go of through them.
    pub backends: Vec<Arc<dyn toren_sandbox::SandboxBackend>>,
    /// Fires when the server shuts down: event streams end then (their clients reconnect
    /// with `Last-Event-ID`, to this server's successor), so they hold up no exit.
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// The API's router: the documented routes (see [`openapi()`]) behind the token, the
/// public ones beside them, `/openapi.json`, and problem documents for unknown paths.
pub fn app(state: AppState) -> Router {
    let (guarded, _) = guarded_routes()
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .split_for_parts();
    let (public, _) = public_routes().split_for_parts();
    // The web page (`web`): its pages, and the same guarded routes under `/ui/api` behind
    // the sign-in cookie and CSRF token instead of the bearer header.
    let (api_for_web, _) = guarded_routes().split_for_parts();
    public
        .merge(guarded)
        .merge(web::router(state.clone(), api_for_web))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(error::rejections_as_problems))
        .layer(axum::middleware::from_fn(access_log))
        .with_state(state)
}

/// The routes behind the bearer token. A route is added here with `routes!` and a handler
/// that carries `#[utoipa::path]`, so that it is in the OpenAPI document.
fn guarded_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(runs::create, runs::list))
        .routes(routes!(runs::get))
        .routes(routes!(runs::cancel))
        .routes(routes!(rewind::rewind))
        .routes(routes!(rewind::diff))
        .routes(routes!(budget::raise))
        .routes(routes!(events::events))
        .routes(routes!(runs::approvals))
        .routes(routes!(runs::decide))
        .routes(routes!(files::run_root))
        .routes(routes!(files::run_root_slash))
        .routes(routes!(files::run_file))
        .routes(routes!(sessions::create, sessions::list))
        .routes(routes!(sessions::get, sessions::delete))
        .routes(routes!(sessions::send))
        .routes(routes!(session_rewind::rewind))
        .routes(routes!(session_events::events))
        .routes(routes!(files::session_root))
        .routes(routes!(files::session_root_slash))
        .routes(routes!(files::session_file))
        .routes(routes!(metrics::scrape))
}

/// The routes anyone may call.
fn public_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(openapi::openapi_json))
}

/// The API's OpenAPI 3.1 document, as `/openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    openapi::finish(
        public_routes().into_openapi(),
        guarded_routes().into_openapi(),
    )
}

/// Whether the server is up.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
struct Health {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "service",
    responses((status = 200, description = "The server is up", body = Health))
)]
async fn healthz() -> axum::Json<Health> {
    axum::Json(Health { status: "ok" })
}

/// One line per request: method, path, status and duration; never a header (the token),
/// never a body. Event streams are logged when their response starts.
async fn access_log(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    tracing::info!(
        target: "toren::access",
        %method,
        path,
        status = response.status().as_u16(),
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

/// Ready when the store answers and the sandbox backend can open sandboxes; otherwise
/// 503 with a problem saying which.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "service",
    responses(
        (status = 200, description = "The store answers and the sandbox backend is usable", body = Health),
        (status = 503, description = "The store does not answer, or the sandbox backend cannot open sandboxes", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn readyz(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Result<axum::Json<Health>, Problem> {
    if let Err(e) = state.service.store().list_runs(1).await {
        tracing::warn!(error = %e, "not ready: the store does not answer");
        return Err(Problem::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the store does not answer; the server's log says why",
        ));
    }
    for backend in &state.backends {
        if let Err(e) = backend.ready().await {
            tracing::warn!(backend = backend.name(), error = %e, "not ready: the sandbox backend");
            return Err(Problem::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the {} sandbox backend cannot open sandboxes; the server's log says why",
                    backend.name()
                ),
            ));
        }
    }
    Ok(axum::Json(Health { status: "ready" }))
}
