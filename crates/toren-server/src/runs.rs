//! The runs resource: create (queued for any worker), get, list (filtered and paged; the
//! query string is read in `listing.rs`), cancel, and a run's approvals, pending and
//! decided.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use toren_protocol::{AgentSpec, RunId};
use toren_runtime::{Actor, RunService};
use toren_store::RunSummary;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;

/// The channel API decisions and cancellations are recorded as coming through.
const VIA: &str = "api";

/// A new run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateRun {
    /// The name of an agent of the server's agents directory (`TOREN_AGENTS`).
    #[schema(example = "hello", pattern = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
    agent: String,
    /// The task: the run's first user message.
    input: String,
    /// A git repository to start the workspace as a clone of: an `https://` (or
    /// `http://`) URL without credentials, whose host the agent's network policy lets it
    /// reach. A directory is not taken here (it would be read from the server's disk):
    /// `toren run --workspace-from DIR` copies one on the machine it runs on.
    #[serde(default)]
    #[schema(
        pattern = "^https?://",
        example = "https://github.com/octocat/Hello-World.git"
    )]
    workspace_from: Option<String>,
}

/// `GET /runs`'s parameters, for the document: `listing.rs` reads them (`status` may
/// repeat, which a derived query cannot take).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[expect(
    dead_code,
    reason = "the document's only: listing::parse reads the query"
)]
pub(crate) struct ListQuery {
    /// Only runs in these statuses: repeat the parameter or separate them with commas
    /// (`status=completed,failed`); none: any status.
    #[param(value_type = Option<Vec<crate::listing::StatusFilter>>, style = Form, explode = true)]
    status: Option<Vec<String>>,
    /// Only runs of the agent with this name.
    agent: Option<String>,
    /// How many runs, newest first (default 50; more than 1000 is taken as 1000, 0 as 1).
    #[param(value_type = Option<u64>, minimum = 0, maximum = 4294967295.0)]
    limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the page before (opaque).
    cursor: Option<String>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Approve,
    Deny,
}

/// A decision on an approval.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    decision: Verdict,
    /// Why; recorded with the decision (a denial's reason is what the model is told).
    reason: Option<String>,
}

/// A run as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Run)]
pub(crate) struct RunBody {
    id: String,
    #[schema(value_type = crate::openapi::RunStatusSchema)]
    status: toren_protocol::RunStatus,
    /// The agent's name.
    agent: String,
    #[schema(value_type = String, format = DateTime)]
    created_at: jiff::Timestamp,
    /// When its last event was journaled.
    #[schema(value_type = String, format = DateTime)]
    updated_at: jiff::Timestamp,
    /// The seq of its last event.
    last_seq: u64,
    links: RunLinks,
}

/// Where a run's parts are.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunLinks {
    #[serde(rename = "self")]
    this: String,
    events: String,
    approvals: String,
}

/// A run with what it waits for.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunDetail {
    #[serde(flatten)]
    run: RunBody,
    /// Nobody drives it and it has not ended: a worker may resume it.
    resumable: bool,
    /// The approval it waits for, if any.
    #[schema(value_type = Option<crate::openapi::PendingApprovalSchema>)]
    pending_approval: Option<toren_protocol::ApprovalRequested>,
    /// What it has spent and its budget; `null` when its log cannot be replayed.
    spending: Option<crate::budget::SpendingBody>,
    /// Why its log cannot be replayed (it has then been recorded as failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunPage {
    runs: Vec<RunBody>,
    /// Give it as `cursor` for the next page; `null` on the last page. Pages neither skip
    /// nor repeat runs while new ones are created (those are newer: on the first page).
    next_cursor: Option<String>,
    links: PageLinks,
}

/// Where the next page is.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PageLinks {
    /// The next page with the same filters and limit; `null` on the last page.
    next: Option<String>,
}

/// A run's approvals.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Approvals {
    /// Every approval the run asked for, oldest first: pending, decided, or left
    /// unanswered when the run ended.
    approvals: Vec<ApprovalBody>,
    /// The approvals it waits for now, as `approval_requested` has them.
    #[schema(value_type = Vec<crate::openapi::PendingApprovalSchema>)]
    pending: Vec<toren_protocol::ApprovalRequested>,
}

/// One approval a run asked for.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Approval)]
pub(crate) struct ApprovalBody {
    /// The tool call it is for; decide a pending one at `/runs/{id}/approvals/{call_id}`.
    call_id: String,
    tool: String,
    /// What the person is shown: exactly the command that runs if approved.
    command: String,
    /// The call's attempt (more than 1 when an interrupted call asks again).
    attempt: u32,
    #[schema(value_type = String, format = DateTime)]
    requested_at: jiff::Timestamp,
    status: ApprovalStatus,
    /// The decision, once made (the first one, which stands).
    decision: Option<DecisionBody>,
    /// Present when the approval is for network access to a host outside the agent's
    /// list (then `tool` is `network`, `command` says which host and from which call, and
    /// `call_id` is `host:<name>`): approving allows the host for the rest of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<HostBody>,
}

/// The host a network approval is about, and the tool call that connected.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = HostApproval)]
pub(crate) struct HostBody {
    host: String,
    /// The port of the connection that asked (the decision holds for every port).
    port: u16,
    /// The tool call that was running when the sandbox connected.
    call_id: Option<String>,
    /// Its command.
    command: Option<String>,
}

/// Where an approval stands.
#[derive(Debug, Serialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ApprovalStatus {
    /// It waits for a decision.
    Pending,
    Approved,
    Denied,
    /// The run ended before anyone decided.
    Unanswered,
}

/// A recorded decision.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DecisionBody {
    approved: bool,
    /// Who decided (for the API: the token's name).
    by: String,
    /// Through which front door (`api`, `cli`, `terminal`, …).
    via: String,
    reason: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    decided_at: jiff::Timestamp,
}

impl From<toren_runtime::Approval> for ApprovalBody {
    fn from(approval: toren_runtime::Approval) -> Self {
        use toren_runtime::ApprovalState;
        let (status, decision) = match approval.state {
            ApprovalState::Pending => (ApprovalStatus::Pending, None),
            ApprovalState::Unanswered => (ApprovalStatus::Unanswered, None),
            ApprovalState::Decided(d) => (
                if d.approved {
                    ApprovalStatus::Approved
                } else {
                    ApprovalStatus::Denied
                },
                Some(DecisionBody {
                    approved: d.approved,
                    by: d.by,
                    via: d.via,
                    reason: d.reason,
                    decided_at: d.decided_at,
                }),
            ),
        };
        Self {
            call_id: approval.call_id,
            tool: approval.tool,
            command: approval.command,
            attempt: approval.attempt,
            requested_at: approval.requested_at,
            status,
            decision,
            host: approval.host.map(|h| HostBody {
                host: h.host,
                port: h.port,
                call_id: h.call_id,
                command: h.command,
            }),
        }
    }
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
            links: RunLinks {
                this: format!("/runs/{id}"),
                events: format!("/runs/{id}/events"),
                approvals: format!("/runs/{id}/approvals"),
            },
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

/// Creates a run of an agent, queued for the server's workers.
#[utoipa::path(
    post,
    path = "/runs",
    operation_id = "create_run",
    tag = "runs",
    request_body = CreateRun,
    responses(
        (status = 202, description = "The run, queued", body = RunBody, links(
            ("files" = (operation_id = "run_file", parameters(("id" = "$response.body#/id")), description = "A file of its workspace")),
        )),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No agent of that name"),
        (status = 409, description = "The run cannot be made now"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type; the agent is named by a path; its sandbox cannot be had (an injected secret the agent needs is not set where its runs are driven: the detail names it); or its workspace cannot start from `workspace_from` (not an https URL, credentials in it, a host the agent's network policy does not reach, a clone that failed or is too large)"),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    body: Result<Json<CreateRun>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body?;
    let spec = agent(&state, &body.agent)?;
    let service = &state.service;
    // Queued, in one write: any worker may claim it.
    let run_id = match body.workspace_from {
        Some(from) => {
            let seed = git_seed(&from)?;
            service
                .create_queued_seeded(spec, body.input, &seed)
                .await?
        }
        None => service.create_queued(spec, body.input).await?,
    };
    let summary = service.summary(&run_id).await?;
    Ok((StatusCode::ACCEPTED, Json(RunBody::from(&summary))).into_response())
}

/// `workspace_from` as the API takes it: a git repository's URL only, never a directory,
/// which would be read from the server's own disk.
pub(crate) fn git_seed(from: &str) -> Result<toren_worker::SeedSource, Problem> {
    match toren_worker::SeedSource::parse(from) {
        toren_worker::SeedSource::Dir(_) => Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`workspace_from` takes a git repository's https:// URL: a directory would be read \
             from the server's own disk (copy one with `toren run --workspace-from DIR` on the \
             machine where it is)",
        )),
        git => Ok(git),
    }
}

/// Who holds a new run for the moment between its creation and its release (this
/// process, so that a crash in between leaves a run whose holder is provably gone).
pub(crate) fn holder() -> String {
    toren_worker::holder::this_process()
}

/// A run, with the approval it waits for.
#[utoipa::path(
    get,
    path = "/runs/{id}",
    operation_id = "get_run",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunDetail),
        (status = 404, description = "No such run"),
    )
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RunDetail>, Problem> {
    let run = run_id(&id)?;
    let view = state.service.get(&run).await?;
    Ok(Json(RunDetail {
        run: RunBody::from(&view.summary),
        resumable: view.resumable,
        spending: crate::budget::SpendingBody::of(&view),
        pending_approval: view.pending,
        error: view.error,
    }))
}

/// The runs, newest first, filtered by status and agent, a page at a time.
#[utoipa::path(
    get,
    path = "/runs",
    operation_id = "list_runs",
    tag = "runs",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of runs, newest first", body = RunPage),
        (status = 400, description = "A query parameter is unknown or not valid: an unknown status (the problem names the valid ones), a limit that is not a number, a cursor this server did not make"),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<RunPage>, Problem> {
    let Query(pairs) = query?;
    let query = crate::listing::parse(&pairs)?;
    let page = state.service.list_page(&query).await?;
    let runs: Vec<RunBody> = page.runs.iter().map(RunBody::from).collect();
    let next = page.next.as_ref();
    Ok(Json(RunPage {
        runs,
        next_cursor: next.map(toren_store::RunCursor::encode),
        links: PageLinks {
            next: next.map(|cursor| crate::listing::next_link(&query, cursor)),
        },
    }))
}

/// Cancels a run: it ends as cancelled, and a command it runs is killed.
#[utoipa::path(
    post,
    path = "/runs/{id}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 202, description = "The run, cancelled", body = RunBody),
        (status = 404, description = "No such run"),
        (status = 409, description = "The run has ended already, or it is restoring its workspace for a rewind (a restore is finished, not cancelled half done)"),
    )
)]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&id)?;
    let event = state.service.cancel(&run, None, &actor(&caller)).await?;
    // A run nobody drives here ends without a worker seeing it: /metrics must still let go
    // of its sandbox (told twice, when a worker also sees it, is harmless).
    toren_worker::Observer::event(&state.metrics, &event);
    let summary = state.service.summary(&run).await?;
    Ok((StatusCode::ACCEPTED, Json(RunBody::from(&summary))).into_response())
}

/// Every approval a run asked for, pending and decided.
#[utoipa::path(
    get,
    path = "/runs/{id}/approvals",
    operation_id = "run_approvals",
    tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "Its approvals, oldest first", body = Approvals),
        (status = 404, description = "No such run"),
    )
)]
pub(crate) async fn approvals(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Approvals>, Problem> {
    let run = run_id(&id)?;
    let approvals = state.service.approvals(&run).await?;
    let pending = approvals
        .iter()
        .filter(|a| a.state == toren_runtime::ApprovalState::Pending)
        .map(|a| toren_protocol::ApprovalRequested {
            call_id: a.call_id.clone(),
            tool: a.tool.clone(),
            command: a.command.clone(),
            attempt: a.attempt,
        })
        .collect();
    let approvals = approvals.into_iter().map(ApprovalBody::from).collect();
    Ok(Json(Approvals { approvals, pending }))
}

/// Decides an approval: the first decision wins, recorded with the token's name.
#[utoipa::path(
    post,
    path = "/runs/{id}/approvals/{call}",
    operation_id = "decide_approval",
    tag = "runs",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("call" = String, Path, description = "The call id of the approval"),
    ),
    request_body = Decision,
    responses(
        (status = 200, description = "The `approval_decided` event journaled", body = crate::openapi::Event),
        (status = 400, description = "The body is not JSON"),
        (status = 404, description = "No such run, or no approval of that call pending"),
        (status = 409, description = "Decided already (`decision` says how), the run has ended, a rewind left the call behind, or the call that asked about a host has ended"),
        (status = 413, description = "The body is over the size limit (1 MiB)"),
        (status = 415, description = "The body is not `application/json`"),
        (status = 422, description = "A member is missing, unknown or of the wrong type"),
    )
)]
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
