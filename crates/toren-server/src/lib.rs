//! The HTTP API of `toren serve`, as an [`axum::Router`] over the run service: create,
//! get, list and cancel runs, read their events as JSON or follow them as Server-Sent
//! Events, and decide their approvals; sessions and their turns; workspace files
//! (`files`). Every route but `/healthz` and `/readyz` needs a bearer token;
//! every error is an `application/problem+json` document without internals. The router
//! opens no socket itself, so tests drive it with `tower::ServiceExt::oneshot`.

mod auth;
mod error;
mod events;
mod files;
mod runs;
mod sessions;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use toren_runtime::RunService;

pub use auth::Token;
pub use error::Problem;

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
}

/// The API's router.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/runs", post(runs::create).get(runs::list))
        .route("/runs/{id}", get(runs::get))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}/events", get(events::events))
        .route("/runs/{id}/approvals", get(runs::approvals))
        .route("/runs/{id}/approvals/{call}", post(runs::decide))
        .route("/runs/{id}/files", get(files::run_root))
        .route("/runs/{id}/files/", get(files::run_root))
        .route("/runs/{id}/files/{*path}", get(files::run_file))
        .route("/sessions", post(sessions::create).get(sessions::list))
        .route(
            "/sessions/{id}",
            get(sessions::get).delete(sessions::delete),
        )
        .route("/sessions/{id}/messages", post(sessions::send))
        .route("/sessions/{id}/files", get(files::session_root))
        .route("/sessions/{id}/files/", get(files::session_root))
        .route("/sessions/{id}/files/{*path}", get(files::session_file))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(api)
        .fallback(error::not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

/// Ready when the store answers; otherwise 503 with a problem saying so.
async fn readyz(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Result<axum::Json<serde_json::Value>, Problem> {
    match state.service.store().list_runs(1).await {
        Ok(_) => Ok(axum::Json(serde_json::json!({ "status": "ready" }))),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the store does not answer");
            Err(Problem::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "the store does not answer; the server's log says why",
            ))
        }
    }
}
