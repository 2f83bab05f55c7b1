//! `POST /sessions/{id}/rewind`: the session's workspace and conversation go back to an
//! earlier step together (`RunService::rewind_session`: a rewind turn made in the same
//! write that checks no turn runs, the workspace restored, then the turn completed). `to`
//! is a step (`3`: before turn 3 began; `3.7`: after event 7 of turn 3's run), or `undo`
//! (before the newest turn; a newest turn that has not ended and no live process drives is
//! cancelled first). Refused (409) while a turn is driven elsewhere, for a step the session
//! cannot go back to, and when the workspace at that step is not known.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use serde::{Deserialize, Serialize};
use toren_runtime::{Actor, SessionStep};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;
use crate::runs::holder;
use crate::sessions::find_session;

/// The step to go back to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionRewindRequest {
    /// `TURN` (before that turn began), `TURN.SEQ` (after event SEQ of that turn's run, a
    /// step with no tool call pending), or `undo` (before the newest turn).
    #[schema(example = "2", pattern = r"^([1-9][0-9]{0,8}(\.[0-9]{1,18})?|undo)$")]
    to: String,
}

/// What the rewind did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionRewindBody {
    /// The step the session went back to (`TURN` or `TURN.SEQ`).
    step: String,
    /// The turn that records the rewind (its own rewind turn, or the newest turn when the
    /// step was within it while it runs).
    turn: u32,
    /// That turn's run.
    run_id: String,
    /// The workspace checkpoint restored; `null`: nothing had changed the workspace since.
    checkpoint: Option<String>,
}

/// Takes a session back to an earlier step: its workspace and conversation as they were
/// then; its next message continues from there.
#[utoipa::path(
    post,
    path = "/sessions/{id}/rewind",
    operation_id = "rewind_session",
    tag = "sessions",
    params(("id" = String, Path, description = "The session's id (`ses_…`) or name")),
    request_body = SessionRewindRequest,
    responses(
        (status = 200, description = "The session is back at the step", body = SessionRewindBody),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such session"),
        (status = 409, description = "A turn of the session is driven by a live process or has not ended, the step is not one the session can go back to, or the workspace at that step is not known"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type, or `to` is not a step (`TURN`, `TURN.SEQ` or `undo`)"),
        (status = 503, description = "The sandbox's backend (the docker daemon) does not answer, so what may still run in the sandbox cannot be stopped before the restore; ask again once it does"),
    )
)]
pub(crate) async fn rewind(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(key): Path<String>,
    body: Result<Json<SessionRewindRequest>, JsonRejection>,
) -> Result<Json<SessionRewindBody>, Problem> {
    let Json(request) = body?;
    let step = match request.to.as_str() {
        "undo" => None,
        text => Some(
            text.parse::<SessionStep>()
                .map_err(|why| Problem::new(axum::http::StatusCode::UNPROCESSABLE_ENTITY, why))?,
        ),
    };
    let session = find_session(&state, &key).await?;
    let actor = Actor {
        by: caller.0.clone(),
        via: "api".to_owned(),
    };
    let done = match step {
        Some(step) => {
            state
                .service
                .rewind_session(&session, step, &actor, &holder())
                .await?
        }
        None => {
            state
                .service
                .undo_session(&session, &actor, &holder())
                .await?
        }
    };
    Ok(Json(SessionRewindBody {
        step: done.step.to_string(),
        turn: done.turn,
        run_id: done.run_id.as_str().to_owned(),
        checkpoint: done.checkpoint,
    }))
}
