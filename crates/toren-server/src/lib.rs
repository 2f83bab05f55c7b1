//! The HTTP API of `toren serve`, as an [`axum::Router`] over the run service: create,
//! get, list and cancel runs, read their events as JSON or follow them as Server-Sent
//! Events, and decide their approvals. Every route but `/healthz` needs a bearer token;
//! every error is an `application/problem+json` document without internals. The router
//! opens no socket itself, so tests drive it with `tower::ServiceExt::oneshot`.

mod auth;
mod error;
mod events;
mod runs;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use toren_runtime::RunService;

pub use auth::Token;
pub use error::Problem;

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
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(api)
        .fallback(error::not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}
