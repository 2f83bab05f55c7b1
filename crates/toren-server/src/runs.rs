//! The runs resource: create (queued for any worker), get, list, cancel, and the approvals
//! a run waits for.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toren_protocol::{AgentSpec, RunId};
use toren_runtime::{Actor, RunService};
use toren_store::RunSummary;

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;

/// The channel API decisions and cancellations are recorded as coming through.
const VIA: &str = "api";
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateRun {
    agent: String,
    input: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Approve,
    Deny,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    decision: Verdict,
    reason: Option<String>,
}

/// A run as the API shows it.
#[derive(Debug, Serialize)]
struct RunBody {
    id: String,
    status: toren_protocol::RunStatus,
    agent: String,
    created_at: jiff::Timestamp,
    updated_at: jiff::Timestamp,
    last_seq: u64,
    links: Value,
}

impl From<&RunSummary> for RunBody {
    fn from(run: &RunSummary) -> Self {
        let id = run.id.as_str();
        Self {
            id: id.to_owned(),
            status: run.status,
            agent: run.agent.clone(),
            created_at: run.created_at,
            updated_at: run.updated_at,
            last_seq: run.last_seq,
            links: json!({
                "self": format!("/runs/{id}"),
                "events": format!("/runs/{id}/events"),
                "approvals": format!("/runs/{id}/approvals"),
            }),
        }
    }
}

/// The run id in a path; one that is not a run id names no run.
pub(crate) fn run_id(raw: &str) -> Result<RunId, Problem> {
    raw.parse()
        .map_err(|_| Problem::not_found(format!("no run {raw}")))
}

/// Loads agent `name` from the agents directory, by name only: a client never makes the
/// server read a path of its choosing.
pub(crate) fn agent(state: &AppState, name: &str) -> Result<AgentSpec, Problem> {
    let path_like = name.is_empty()
        || name.contains(['/', '\\'])
        || name.contains("..")
        || name.ends_with(".yaml")
        || name.ends_with(".yml");
    if path_like {
        return Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "name an agent of the server's agents directory by its name, not by a path",
        ));
    }
    toren_config::find_agent(name, &state.agents_dir).map_err(|e| match e {
        toren_config::Error::AgentNotFound { .. } => {
            Problem::not_found(format!("no agent named `{name}`"))
        }
        toren_config::Error::InvalidAgentName { problem, .. } => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`{name}` is not an agent name: {problem}"),
        ),
        other => {
            tracing::warn!(agent = name, error = %other, "agent cannot be loaded");
            Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("agent `{name}` cannot be loaded; the server's log says why"),
            )
        }
    })
}

fn actor(caller: &Caller) -> Actor {
    Actor {
        by: caller.0.clone(),
        via: VIA.to_owned(),
    }
}

pub(crate) async fn create(
    State(state): State<AppState>,
    body: Result<Json<CreateRun>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let spec = agent(&state, &body.agent)?;
    let service = &state.service;
    let created = service.create(spec, body.input, &holder()).await?;
    // Queued: any worker may claim it.
    service
        .store()
        .release_lease(&created.lease)
        .await
        .map_err(toren_runtime::Error::from)?;
    let summary = service.summary(&created.run_id).await?;
    Ok((StatusCode::ACCEPTED, Json(RunBody::from(&summary))).into_response())
}

/// Who holds a new run for the moment between its creation and its release (this
/// process, so that a crash in between leaves a run whose holder is provably gone).
pub(crate) fn holder() -> String {
    toren_worker::holder::this_process()
}

pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let run = run_id(&id)?;
    let view = state.service.get(&run).await?;
    let mut body = serde_json::to_value(RunBody::from(&view.summary)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut body {
        map.insert("resumable".into(), json!(view.resumable));
        map.insert("pending_approval".into(), json!(view.pending));
        if let Some(error) = view.error {
            map.insert("error".into(), json!(error));
        }
    }
    Ok(Json(body))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, Problem> {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let runs = state.service.list(limit).await?;
    let runs: Vec<RunBody> = runs.iter().map(RunBody::from).collect();
    Ok(Json(json!({ "runs": runs })))
}

pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&id)?;
    state.service.cancel(&run, None, &actor(&caller)).await?;
    let summary = state.service.summary(&run).await?;
    Ok((StatusCode::ACCEPTED, Json(RunBody::from(&summary))).into_response())
}

pub(crate) async fn approvals(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let run = run_id(&id)?;
    let view = state.service.get(&run).await?;
    let pending: Vec<_> = view.pending.into_iter().collect();
    Ok(Json(json!({ "pending": pending })))
}

pub(crate) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, call)): Path<(String, String)>,
    body: Result<Json<Decision>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let run = run_id(&id)?;
    let approved = body.decision == Verdict::Approve;
    match decide_once(&state.service, &run, &call, approved, body.reason, &caller).await {
        Ok(event) => Ok((StatusCode::OK, Json(event)).into_response()),
        Err(toren_runtime::Error::Store(toren_store::Error::AlreadyDecided {
            approved, ..
        })) => {
            let standing = if approved { "approve" } else { "deny" };
            let mut extra = serde_json::Map::new();
            extra.insert("decision".into(), json!(standing));
            Err(Problem::new(
                StatusCode::CONFLICT,
                format!("call {call} was already decided ({standing}); a decision cannot change"),
            )
            .with(extra))
        }
        Err(e) => Err(e.into()),
    }
}

async fn decide_once(
    service: &RunService,
    run: &RunId,
    call: &str,
    approved: bool,
    reason: Option<String>,
    caller: &Caller,
) -> toren_runtime::Result<toren_protocol::Event> {
    service
        .decide(run, call, approved, reason, &actor(caller))
        .await
}
