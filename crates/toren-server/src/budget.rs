//! A run's budget over HTTP: what it has spent and the limits in force (part of
//! `GET /runs/{id}`), and `POST /runs/{id}/budget`, which raises the budget of a run paused
//! at it (no lease needed; the run is claimable again at once).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use toren_protocol::Usd;
use toren_runtime::{Actor, BudgetRaise};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;
use crate::runs::{RunBody, run_id};

/// How much to add to a paused run's limits; at least one amount, each for a limit the run
/// has.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RaiseBudget {
    /// Tokens to add to the token limit.
    #[schema(minimum = 0)]
    add_tokens: Option<u64>,
    /// US dollars to add to the dollar limit.
    #[schema(minimum = 0, example = 2.0)]
    add_usd: Option<f64>,
    /// Wall time to add, with its unit (`30m`, `1h`).
    #[schema(example = "30m")]
    add_wall: Option<String>,
}

/// What a run has spent, and its limits.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SpendingBody {
    /// Input (cached ones included) and output tokens of its model answers.
    tokens: u64,
    /// Their price in US dollars; `null` when the model's prices are unknown.
    usd: Option<f64>,
    /// Its active time in seconds (not counting waits for a person).
    wall_secs: u64,
    /// The limits in force (the agent file's, with every raise); a `null` member is no
    /// limit.
    limits: LimitsBody,
    /// The limits it reached and waits on a raise of (status `awaiting_budget`); empty
    /// otherwise.
    reached: Vec<String>,
}

/// A run's limits; `null`: none.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LimitsBody {
    tokens: Option<u64>,
    usd: Option<f64>,
    wall_secs: Option<u64>,
}

impl SpendingBody {
    /// The spending of the run `view` shows; `None` when its log cannot be replayed.
    pub(crate) fn of(view: &toren_runtime::RunView) -> Option<Self> {
        let state = view.state.as_ref()?;
        let spent = state.spending();
        let limits = state.budget_limits();
        Some(Self {
            tokens: spent.tokens,
            usd: spent.usd.map(Usd::dollars),
            wall_secs: spent.wall_secs,
            limits: LimitsBody {
                tokens: limits.tokens,
                usd: limits.usd.map(Usd::dollars),
                wall_secs: limits.wall_secs,
            },
            reached: state
                .budget_reached()
                .map(|r| r.reached.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        })
    }
}

/// Raises the budget of a run paused at it (`awaiting_budget`); it goes on from the model
/// call it was about to make.
#[utoipa::path(
    post,
    path = "/runs/{id}/budget",
    operation_id = "raise_budget",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    request_body = RaiseBudget,
    responses(
        (status = 202, description = "The run, raised and claimable again", body = RunBody),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such run"),
        (status = 409, description = "The run is not paused at its budget, or has ended"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "Nothing to raise, an amount that is not one, or a limit the run does not have"),
    )
)]
pub(crate) async fn raise(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Result<Json<RaiseBudget>, JsonRejection>,
) -> Result<Response, Problem> {
    let run = run_id(&id)?;
    let Json(body) = body?;
    let unprocessable = |detail: String| Problem::new(StatusCode::UNPROCESSABLE_ENTITY, detail);
    let usd = match body.add_usd {
        None => Usd::ZERO,
        Some(dollars) => Usd::from_dollars(dollars).ok_or_else(|| {
            unprocessable(format!(
                "add_usd must be an amount of dollars, found {dollars}"
            ))
        })?,
    };
    let wall_secs = match &body.add_wall {
        None => 0,
        Some(text) => match text.trim().parse::<jiff::SignedDuration>() {
            Ok(d) if !d.is_negative() => {
                u64::try_from(d.as_secs() + i64::from(d.subsec_nanos() > 0)).unwrap_or(u64::MAX)
            }
            _ => {
                return Err(unprocessable(format!(
                    "add_wall must be a duration with its unit such as `30m`, found {text:?}"
                )));
            }
        },
    };
    let raise = BudgetRaise {
        tokens: body.add_tokens.unwrap_or(0),
        usd,
        wall_secs,
    };
    let actor = Actor {
        by: caller.0.clone(),
        via: "api".to_owned(),
    };
    state.service.raise_budget(&run, raise, &actor).await?;
    let summary = state.service.summary(&run).await?;
    Ok((StatusCode::ACCEPTED, Json(RunBody::from(&summary))).into_response())
}
