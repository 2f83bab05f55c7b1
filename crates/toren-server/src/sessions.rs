//! The sessions resource: create (a generated name when none is given), list, get by id
//! (`ses_…`) or name with its turns, send a message (a new turn, queued for any worker, or
//! waiting behind the turn that runs), and delete (the workspace kept unless asked).
//! Turns created here are bound to no channel: whichever worker claims them drives them.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toren_protocol::RunId;
use toren_runtime::Sent;
use toren_store::Session;

use crate::AppState;
use crate::error::Problem;
use crate::runs::{agent, holder};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateSession {
    agent: String,
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Message {
    text: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteQuery {
    delete_workspace: Option<bool>,
}

/// A session as the API shows it.
#[derive(Debug, Serialize)]
struct SessionBody {
    id: String,
    name: String,
    agent: String,
    created_at: jiff::Timestamp,
    links: Value,
}

impl From<&Session> for SessionBody {
    fn from(session: &Session) -> Self {
        let id = &session.id;
        Self {
            id: id.clone(),
            name: session.name.clone(),
            agent: session.agent.name.clone(),
            created_at: session.created_at,
            links: json!({
                "self": format!("/sessions/{id}"),
                "messages": format!("/sessions/{id}/messages"),
                "files": format!("/sessions/{id}/files/"),
            }),
        }
    }
}

/// The session `key` names: its name, or else its id.
pub(crate) async fn find_session(state: &AppState, key: &str) -> Result<Session, Problem> {
    let missing = || Problem::not_found(format!("no session {key}"));
    match state.service.session(key).await {
        Ok(session) => Ok(session),
        Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_)))
            if key.starts_with("ses_") =>
        {
            let all = state.service.sessions().await?;
            all.into_iter().find(|s| s.id == key).ok_or_else(missing)
        }
        Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => Err(missing()),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn create(
    State(state): State<AppState>,
    body: Result<Json<CreateSession>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let spec = agent(&state, &body.agent)?;
    let name = body
        .name
        .unwrap_or_else(|| format!("s-{}", RunId::new().as_str().to_ascii_lowercase()));
    let session = state.service.create_session(&name, spec).await?;
    Ok((StatusCode::CREATED, Json(SessionBody::from(&session))).into_response())
}

pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    let sessions = state.service.sessions().await?;
    let sessions: Vec<SessionBody> = sessions.iter().map(SessionBody::from).collect();
    Ok(Json(json!({ "sessions": sessions })))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<Value>, Problem> {
    let session = find_session(&state, &key).await?;
    let view = state.service.session_view(&session.name).await?;
    let turns: Vec<Value> = view
        .turns
        .iter()
        .map(|t| {
            json!({
                "turn": t.turn,
                "run_id": t.run_id.as_str(),
                "status": t.status,
                "links": { "run": format!("/runs/{}", t.run_id.as_str()) },
            })
        })
        .collect();
    let mut body = serde_json::to_value(SessionBody::from(&view.session)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut body {
        map.insert("turns".into(), Value::from(turns));
    }
    Ok(Json(body))
}

pub(crate) async fn send(
    State(state): State<AppState>,
    Path(key): Path<String>,
    body: Result<Json<Message>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let session = find_session(&state, &key).await?;
    let service = &state.service;
    // A message that waited behind a turn that has ended goes first.
    if let Some(Sent::Turn { created, .. }) = service.next_queued(&session, &holder(), None).await?
    {
        release(&state, &created.lease).await?;
    }
    let sent = service.send(&session, &body.text, &holder(), None).await?;
    let body = sent_body(&state, sent).await?;
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Queues a new turn for any worker.
async fn release(state: &AppState, lease: &toren_store::Lease) -> Result<(), Problem> {
    state
        .service
        .store()
        .release_lease(lease)
        .await
        .map_err(toren_runtime::Error::from)?;
    Ok(())
}

async fn sent_body(state: &AppState, sent: Sent) -> Result<Value, Problem> {
    match sent {
        Sent::Turn { created, turn } => {
            release(state, &created.lease).await?;
            let run = state.service.summary(&created.run_id).await?;
            let id = run.id.as_str();
            Ok(json!({
                "queued": false,
                "turn": turn,
                "run": {
                    "id": id,
                    "status": run.status,
                    "agent": run.agent,
                    "created_at": run.created_at,
                    "links": {
                        "self": format!("/runs/{id}"),
                        "events": format!("/runs/{id}/events"),
                        "approvals": format!("/runs/{id}/approvals"),
                    },
                },
            }))
        }
        Sent::Queued { waiting } => Ok(json!({ "queued": true, "waiting": waiting })),
    }
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(key): Path<String>,
    query: Result<Query<DeleteQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) = query?;
    let session = find_session(&state, &key).await?;
    let removed = state.service.remove_session(&session.name).await?;
    let workspace = removed.policy.as_ref().and_then(|p| p.workspace.clone());
    let deleted = match (workspace, query.delete_workspace.unwrap_or(false)) {
        (Some(ws), true) => {
            // The session's private directory holds the workspace; both go.
            let ws = std::path::PathBuf::from(ws);
            let dir = ws
                .parent()
                .map_or_else(|| ws.clone(), std::path::Path::to_path_buf);
            tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
                .map_err(|e| {
                    tracing::error!(session = %removed.id, error = %e, "cannot delete a workspace");
                    Problem::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "the session is removed but its workspace could not be deleted; the server's log says why",
                    )
                })?;
            true
        }
        _ => false,
    };
    Ok((
        StatusCode::OK,
        Json(json!({
            "id": removed.id,
            "name": removed.name,
            "workspace_deleted": deleted,
        })),
    )
        .into_response())
}
