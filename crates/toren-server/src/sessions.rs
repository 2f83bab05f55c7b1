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
use toren_protocol::RunId;
use toren_runtime::Sent;
use toren_store::Session;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::Problem;
use crate::runs::{RunBody, agent, holder};

/// A new session.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateSession {
    /// The name of an agent of the server's agents directory (`TOREN_AGENTS`).
    #[schema(example = "hello", pattern = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
    agent: String,
    /// Its name (letters, digits, `-`, `_`, `.`; up to 64; not starting with `.`); one is
    /// made up when none is given.
    #[schema(pattern = "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")]
    name: Option<String>,
    /// A git repository to start the session's workspace as a clone of, as
    /// `POST /runs` takes it (an https URL whose host the agent's network policy reaches).
    #[serde(default)]
    #[schema(
        pattern = "^https?://",
        example = "https://github.com/octocat/Hello-World.git"
    )]
    workspace_from: Option<String>,
}

/// A message to a session: its next turn's input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Message {
    text: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteQuery {
    /// Also delete the session's workspace (kept by default).
    delete_workspace: Option<bool>,
}

/// A session as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Session)]
pub(crate) struct SessionBody {
    /// `ses_…`
    id: String,
    name: String,
    /// The agent's name.
    agent: String,
    #[schema(value_type = String, format = DateTime)]
    created_at: jiff::Timestamp,
    links: SessionLinks,
}

/// Where a session's parts are.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionLinks {
    #[serde(rename = "self")]
    this: String,
    messages: String,
    files: String,
}

/// The sessions.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionList {
    sessions: Vec<SessionBody>,
}

/// A session with its turns.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionView {
    #[serde(flatten)]
    session: SessionBody,
    /// Its turns, first to last.
    turns: Vec<TurnBody>,
}

/// A turn of a session: a run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TurnBody {
    /// 1 for the first turn.
    turn: u32,
    run_id: String,
    #[schema(value_type = crate::openapi::RunStatusSchema)]
    status: toren_protocol::RunStatus,
    links: TurnLinks,
}

/// Where a turn's run is.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TurnLinks {
    run: String,
}

/// What became of a message: a new turn, or a place in the queue behind the running one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum SentBody {
    /// The message is the session's new turn, queued for the workers.
    Turn {
        /// `false`
        queued: bool,
        turn: u32,
        run: RunBody,
    },
    /// A turn runs: the message waits to be the next one.
    Queued {
        /// `true`
        queued: bool,
        /// How many messages wait now.
        waiting: u32,
    },
}

/// A removed session.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Deleted {
    id: String,
    name: String,
    /// Whether its workspace was deleted too.
    workspace_deleted: bool,
}

impl From<&Session> for SessionBody {
    fn from(session: &Session) -> Self {
        let id = &session.id;
        Self {
            id: id.clone(),
            name: session.name.clone(),
            agent: session.agent.name.clone(),
            created_at: session.created_at,
            links: SessionLinks {
                this: format!("/sessions/{id}"),
                messages: format!("/sessions/{id}/messages"),
                files: format!("/sessions/{id}/files/"),
            },
        }
    }
}

/// The session `key` names: its id (`ses_…`, which no name can start with), else its name.
pub(crate) async fn find_session(state: &AppState, key: &str) -> Result<Session, Problem> {
    let missing = || Problem::not_found(format!("no session {key}"));
    if key.starts_with(toren_runtime::SESSION_ID_PREFIX) {
        let all = state.service.sessions().await?;
        return all.into_iter().find(|s| s.id == key).ok_or_else(missing);
    }
    match state.service.session(key).await {
        Ok(session) => Ok(session),
        Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => Err(missing()),
        Err(e) => Err(e.into()),
    }
}

/// Creates a session of an agent; its workspace is made now and kept across its turns.
#[utoipa::path(
    post,
    path = "/sessions",
    operation_id = "create_session",
    tag = "sessions",
    request_body = CreateSession,
    responses(
        (status = 201, description = "The session", body = SessionBody, links(
            ("files" = (operation_id = "session_file", parameters(("id" = "$response.body#/id")), description = "A file of its workspace")),
        )),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No agent of that name"),
        (status = 409, description = "A session of that name exists"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type; the name is not valid; the agent is named by a path; its sandbox cannot be had (an injected secret the agent needs is not set where its runs are driven: the detail names it); or its workspace cannot start from `workspace_from`"),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    body: Result<Json<CreateSession>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let spec = agent(&state, &body.agent)?;
    let name = body
        .name
        .unwrap_or_else(|| format!("s-{}", RunId::new().as_str().to_ascii_lowercase()));
    let session = match body.workspace_from {
        Some(from) => {
            let seed = crate::runs::git_seed(&from)?;
            state
                .service
                .create_session_seeded(&name, spec, &seed)
                .await?
        }
        None => state.service.create_session(&name, spec).await?,
    };
    Ok((StatusCode::CREATED, Json(SessionBody::from(&session))).into_response())
}

/// The sessions.
#[utoipa::path(
    get,
    path = "/sessions",
    operation_id = "list_sessions",
    tag = "sessions",
    responses((status = 200, description = "Every session", body = SessionList))
)]
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<SessionList>, Problem> {
    let sessions = state.service.sessions().await?;
    let sessions: Vec<SessionBody> = sessions.iter().map(SessionBody::from).collect();
    Ok(Json(SessionList { sessions }))
}

/// A session, by id or name, with its turns.
#[utoipa::path(
    get,
    path = "/sessions/{id}",
    operation_id = "get_session",
    tag = "sessions",
    params(("id" = String, Path, description = "The session's id (`ses_…`) or name")),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 404, description = "No such session"),
    )
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<SessionView>, Problem> {
    let session = find_session(&state, &key).await?;
    let view = state.service.session_view(&session.name).await?;
    let turns = view
        .turns
        .iter()
        .map(|t| TurnBody {
            turn: t.turn,
            run_id: t.run_id.as_str().to_owned(),
            status: t.status,
            links: TurnLinks {
                run: format!("/runs/{}", t.run_id.as_str()),
            },
        })
        .collect();
    Ok(Json(SessionView {
        session: SessionBody::from(&view.session),
        turns,
    }))
}

/// Sends a message: the session's next turn, queued for the workers, or waiting behind
/// the turn that runs.
#[utoipa::path(
    post,
    path = "/sessions/{id}/messages",
    operation_id = "send_message",
    tag = "sessions",
    params(("id" = String, Path, description = "The session's id (`ses_…`) or name")),
    request_body = Message,
    responses(
        (status = 202, description = "The new turn, or the message's place in the queue", body = SentBody),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such session"),
        (status = 409, description = "The session cannot take a message now"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type; or an injected secret the session's agent needs is not set where its runs are driven (the detail names it)"),
    )
)]
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
    state.service.enqueue(lease).await?;
    Ok(())
}

async fn sent_body(state: &AppState, sent: Sent) -> Result<SentBody, Problem> {
    match sent {
        Sent::Turn { created, turn } => {
            release(state, &created.lease).await?;
            let run = state.service.summary(&created.run_id).await?;
            Ok(SentBody::Turn {
                queued: false,
                turn,
                run: RunBody::from(&run),
            })
        }
        Sent::Queued { waiting } => Ok(SentBody::Queued {
            queued: true,
            waiting,
        }),
    }
}

/// Removes a session; its workspace is kept unless `delete_workspace=true`.
#[utoipa::path(
    delete,
    path = "/sessions/{id}",
    operation_id = "delete_session",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "The session's id (`ses_…`) or name"),
        DeleteQuery,
    ),
    responses(
        (status = 200, description = "The session removed", body = Deleted),
        (status = 400, description = "A query parameter is unknown or not valid"),
        (status = 404, description = "No such session"),
        (status = 409, description = "A turn of the session runs"),
    )
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(key): Path<String>,
    query: Result<Query<DeleteQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) = query?;
    let session = find_session(&state, &key).await?;
    let removed = state.service.remove_session(&session.name).await?;
    // Its turns shared one sandbox (a docker container): let go of it now, not at the
    // reaper's next sweep. A failure is logged; the reaper collects what is left.
    if let Some(policy) = &removed.policy
        && let Some(backend) = state.backends.iter().find(|b| b.name() == policy.backend)
        && let Err(e) = backend.release(&removed.id).await
    {
        tracing::warn!(session = %removed.id, error = %e, "cannot remove the session's sandbox");
    }
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
        Json(Deleted {
            id: removed.id,
            name: removed.name,
            workspace_deleted: deleted,
        }),
    )
        .into_response())
}
