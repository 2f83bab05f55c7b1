//! `POST /runs/{id}/rewind`: the run's workspace and conversation go back to an earlier
//! step together (`RunService::go_back`). A run that has not ended is rewound in place
//! (under its lease, `rewound` recorded before the workspace is restored) and is then
//! resumable from the step; a run that has ended keeps its closed log, and a new run goes
//! on from the step instead (its id in `run_id`, `forked_from` naming the ended one). The
//! server's workers pick up either. Refused (409) while a live process drives the run, for
//! a step it cannot go back to, and when the workspace at that step is not known.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use toren_runtime::{Actor, WentBack};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;
use crate::runs::run_id;

/// The step to go back to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewindRequest {
    /// An event's `seq` between turns or right after a model answer.
    #[schema(minimum = 1)]
    to: u64,
}

/// What the rewind did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RewindBody {
    /// The run that goes on from the step: the run itself, or the new run when it had
    /// ended.
    run_id: String,
    /// The ended run the new run goes on from; `null`: the run was rewound in place.
    forked_from: Option<String>,
    /// The seq of the event that took the run back: its `rewound`, or the new run's
    /// `run_created` (1).
    seq: u64,
    /// The step the run went back to.
    to: u64,
    /// The workspace checkpoint restored (a new run's: the one its workspace was filled
    /// from); `null`: nothing had changed the workspace since, or the run has no sandbox.
    checkpoint: Option<String>,
}

/// Takes a run back to an earlier step: its workspace and conversation as they were then
/// (a run that has ended: a new run going on from the step).
#[utoipa::path(
    post,
    path = "/runs/{id}/rewind",
    operation_id = "rewind_run",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    request_body = RewindRequest,
    responses(
        (status = 200, description = "The run is back at the step, or a new run goes on from it (the run had ended)", body = RewindBody),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such run"),
        (status = 409, description = "The run is driven by a live process, cannot go back to that step (or a new run cannot go on from it), or its workspace then is not known"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type (`to` is a whole number of at least 1)"),
        (status = 503, description = "The sandbox's backend (the docker daemon) does not answer, so what may still run in the sandbox cannot be stopped before the restore; ask again once it does"),
    )
)]
pub(crate) async fn rewind(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Result<Json<RewindRequest>, JsonRejection>,
) -> Result<Json<RewindBody>, Problem> {
    let run = run_id(&id)?;
    let Json(request) = body?;
    let actor = Actor {
        by: caller.0.clone(),
        via: "api".to_owned(),
    };
    let holder = toren_worker::holder::this_process();
    let body = match state
        .service
        .go_back(&run, request.to, &actor, &holder)
        .await?
    {
        WentBack::Rewound(outcome) => RewindBody {
            run_id: run.to_string(),
            forked_from: None,
            seq: outcome.seq,
            to: outcome.to,
            checkpoint: outcome.checkpoint,
        },
        WentBack::Forked(fork) => RewindBody {
            run_id: fork.run_id.to_string(),
            forked_from: Some(fork.from.to_string()),
            seq: 1,
            to: fork.to,
            checkpoint: fork.checkpoint,
        },
    };
    Ok(Json(body))
}

/// The steps to compare (`GET /runs/{id}/diff`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffQuery {
    /// The workspace as it was after this step (an event's seq); default: as it began (the
    /// project it was seeded with, else its first checkpoint).
    from: Option<u64>,
    /// The workspace as it was after this step; default: as it is now.
    to: Option<u64>,
}

/// What changed in a run's workspace: a unified diff with `a/` and `b/` paths that `git
/// apply` takes (binary files, directories, symlinks and modes as one line each), served
/// as a download.
#[utoipa::path(
    get,
    path = "/runs/{id}/diff",
    operation_id = "run_diff",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id"), DiffQuery),
    responses(
        (status = 200, description = "The patch", content_type = "text/x-diff", body = String),
        (status = 400, description = "A parameter is not a whole number from 0 to 2^63-1, or is unknown"),
        (status = 404, description = "No such run"),
        (status = 409, description = "The run's workspace is not on this host (an e2b sandbox), it has none, or it has no checkpoint at that step"),
    )
)]
pub(crate) async fn diff(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<DiffQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let run = run_id(&id)?;
    let Query(query) = query?;
    if [query.from, query.to]
        .into_iter()
        .flatten()
        .any(|seq| seq > crate::events::MAX_SEQ)
    {
        return Err(Problem::new(
            axum::http::StatusCode::BAD_REQUEST,
            format!(
                "`from` and `to` must be the seqs of events (0 to {})",
                crate::events::MAX_SEQ
            ),
        ));
    }
    let patch = state
        .service
        .workspace_diff(&run, query.from, query.to)
        .await?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/x-diff; charset=utf-8".to_owned(),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{run}.patch\""),
            ),
        ],
        patch,
    )
        .into_response())
}
