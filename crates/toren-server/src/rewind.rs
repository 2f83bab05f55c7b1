//! `POST /runs/{id}/rewind`: the run's workspace and conversation go back to an earlier
//! step together (`RunService::rewind`: under the run's lease, `rewound` recorded before the
//! workspace is restored). Refused (409) while a live process drives the run, for a step it
//! cannot go back to, and when the workspace at that step is not known; then the run is
//! resumable from the step (the server's workers pick it up).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use serde::{Deserialize, Serialize};
use toren_runtime::Actor;
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
    /// The `rewound` event's seq.
    seq: u64,
    /// The step the run went back to.
    to: u64,
    /// The workspace checkpoint restored; `null`: nothing had changed the workspace since.
    checkpoint: Option<String>,
}

/// Takes a run back to an earlier step: its workspace and conversation as they were then.
#[utoipa::path(
    post,
    path = "/runs/{id}/rewind",
    operation_id = "rewind_run",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    request_body = RewindRequest,
    responses(
        (status = 200, description = "The run is back at the step", body = RewindBody),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such run"),
        (status = 409, description = "The run is driven by a live process, has ended, or cannot go back to that step"),
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
    let outcome = state
        .service
        .rewind(&run, request.to, &actor, &holder)
        .await?;
    Ok(Json(RewindBody {
        seq: outcome.seq,
        to: outcome.to,
        checkpoint: outcome.checkpoint,
    }))
}
