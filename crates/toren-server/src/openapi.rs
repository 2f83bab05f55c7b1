//! The API's OpenAPI 3.1 document, generated from the code: each handler carries its
//! `#[utoipa::path]` and is routed through utoipa-axum's `routes!`, so a route cannot
//! exist without its documentation (see `lib.rs`). This module holds what the handlers'
//! annotations share: the document's root, the schemas of types other crates own (the
//! event, a run's status, a pending approval), and [`finish`], which applies the API-wide
//! rules to the collected document — the bearer token and its 401 on every operation behind
//! it, `application/problem+json` on every error response, axum's `{*path}` written as
//! OpenAPI's `{path}`. The document is served at `/openapi.json` and checked in as
//! `crates/toren-server/openapi.json`, where a test keeps it current.

use std::borrow::Cow;

use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response, Schema};
use utoipa::{PartialSchema, ToSchema};

use crate::error::Problem;

/// The security scheme's name in the document.
pub(crate) const BEARER: &str = "bearer";

/// The content type of every error response.
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// The document's root: what the API is, its tags and the shared schemas.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Toren",
        description = "The HTTP API of `toren serve`: runs of LLM agents (created queued for the server's workers), their journaled events as JSON or Server-Sent Events, their approvals, sessions of turns, and the files of their workspaces. Every route but `/healthz`, `/readyz` and `/openapi.json` needs `Authorization: Bearer <token>`; every error is `application/problem+json`.",
    ),
    components(schemas(Problem, Event, ServerSentEvent, crate::listing::StatusFilter)),
    tags(
        (name = "runs", description = "Runs: create, read, list, cancel, approvals"),
        (name = "events", description = "A run's journaled events, as JSON or Server-Sent Events"),
        (name = "sessions", description = "Sessions: conversations of turns, each turn a run"),
        (name = "files", description = "The files of a run's or a session's workspace"),
        (name = "service", description = "Liveness, readiness and this document"),
    )
)]
pub(crate) struct ApiDoc;

/// Applies the API-wide rules to the document collected from the routes: `guarded` (the
/// operations behind the token) get the bearer requirement and their 401, every operation
/// its 500, and every error response without content the problem document.
pub(crate) fn finish(mut public: OpenApi, mut guarded: OpenApi) -> OpenApi {
    const UNAUTHORIZED: &str =
        "no valid `Authorization: Bearer <token>` (the token's name is who the request acts as)";
    let bearer = vec![SecurityRequirement::new(BEARER, Vec::<String>::new())];
    for item in guarded.paths.paths.values_mut() {
        for operation in operations(item) {
            operation.security = Some(bearer.clone());
            operation
                .responses
                .responses
                .entry("401".to_owned())
                .or_insert_with(|| response(UNAUTHORIZED));
        }
    }
    public.merge(guarded);
    // axum's catch-all `{*path}` is OpenAPI's `{path}` (a parameter that may hold slashes).
    let paths = std::mem::take(&mut public.paths.paths);
    public.paths.paths = paths
        .into_iter()
        .map(|(path, item)| (path.replace("{*", "{"), item))
        .collect();
    for item in public.paths.paths.values_mut() {
        for operation in operations(item) {
            operation
                .responses
                .responses
                .entry("500".to_owned())
                .or_insert_with(|| response("the server failed; its log says why"));
            for (status, reply) in &mut operation.responses.responses {
                let is_error = status.starts_with('4') || status.starts_with('5');
                if let RefOr::T(reply) = reply
                    && is_error
                    && reply.content.is_empty()
                {
                    reply.content.insert(
                        PROBLEM_JSON.to_owned(),
                        RefOr::T(Content::new(Some(Ref::from_schema_name(Problem::name())))),
                    );
                }
            }
        }
    }
    let components = public.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    public
}

/// The document as served: pretty JSON, made once.
fn openapi_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        crate::openapi().to_pretty_json().unwrap_or_else(|e| {
            tracing::error!(error = %e, "the OpenAPI document does not serialize");
            String::from("{}")
        })
    })
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "service",
    responses((status = 200, description = "The API's OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub(crate) async fn openapi_json() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi_text(),
    )
}

fn response(description: &str) -> RefOr<Response> {
    RefOr::T(Response::new(description))
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// A journaled event, documented as an object with the envelope every event has; the
/// members of each kind (`run_created`, `tool_started`, …) are the event format's, which
/// `ARCHITECTURE.md` describes and which only grows.
pub(crate) struct Event;

impl PartialSchema for Event {
    fn schema() -> RefOr<Schema> {
        let integer = |description: &str, minimum: f64| {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(minimum))
                .description(Some(description))
        };
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "A journaled event: the envelope (`run_id`, `seq`, `at`, `v`) and the kind's members, tagged by `type`.",
            ))
            .property(
                "run_id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("The run the event belongs to")),
            )
            .property(
                "seq",
                integer("1-based, gap-free position in the run's log", 1.0),
            )
            .property(
                "at",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                    .description(Some("When it was journaled (RFC 3339)")),
            )
            .property("v", integer("The format version it was written with", 1.0))
            .property(
                "type",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("The kind, e.g. `run_created`, `tool_completed`")),
            )
            .required("run_id")
            .required("seq")
            .required("at")
            .required("v")
            .required("type")
            .into()
    }
}

impl ToSchema for Event {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Event")
    }
}

/// One Server-Sent Event of an event stream, as a client's parser reads it: `id` (a
/// journaled event's position), `event` (its type) and `data` (the event as JSON, the
/// `Event` schema). The streamed assistant text comes as `event: text` with `data`
/// `{"text": …}` and no id of its own.
pub(crate) struct ServerSentEvent;

impl PartialSchema for ServerSentEvent {
    fn schema() -> RefOr<Schema> {
        let string = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(description))
        };
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "An SSE event: `id` the journaled event's position (a run's `seq`; a session's `<turn>:<seq>`), `event` its type (or `text` for streamed text), `data` the event as JSON (the `Event` schema; `{\"text\": …}` for text).",
            ))
            .property(
                "id",
                string("The position of the last journaled event: the value of `Last-Event-ID` to resume after it")
                    .pattern(Some("^[0-9]+(:[0-9]+)?$")),
            )
            .property("event", string("The event's type, or `text`"))
            .property(
                "data",
                string("The event as JSON").content_media_type("application/json"),
            )
            .required("event")
            .required("data")
            .into()
    }
}

impl ToSchema for ServerSentEvent {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ServerSentEvent")
    }
}

/// A run's status (`toren_protocol::RunStatus`, which serializes as these names).
#[derive(ToSchema, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[schema(as = RunStatus)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "a schema only; the tests build it")
)]
pub(crate) enum RunStatusSchema {
    Queued,
    Running,
    AwaitingApproval,
    /// Paused at a limit of its budget until it is raised (`POST /runs/{id}/budget`).
    AwaitingBudget,
    Completed,
    Failed,
    Cancelled,
}

/// An approval a run waits for (`toren_protocol::ApprovalRequested`).
#[derive(ToSchema, serde::Serialize)]
#[schema(as = PendingApproval)]
pub(crate) struct PendingApprovalSchema {
    /// The tool call waiting for the decision; decide it at `/runs/{id}/approvals/{call_id}`.
    call_id: String,
    tool: String,
    /// The exact command that will run if it is approved.
    command: String,
    /// The attempt of the call the approval is for, when not the first (a call interrupted
    /// mid-command asks again before it re-runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 2)]
    attempt: Option<u32>,
}

#[cfg(test)]
mod tests {
    use toren_protocol::{ApprovalRequested, RunStatus};

    use super::*;

    #[test]
    fn the_run_status_schema_names_every_status_as_it_serializes() {
        // Exhaustive: a new status does not compile here until the schema lists it.
        let schema = |status: RunStatus| match status {
            RunStatus::Queued => RunStatusSchema::Queued,
            RunStatus::Running => RunStatusSchema::Running,
            RunStatus::AwaitingApproval => RunStatusSchema::AwaitingApproval,
            RunStatus::AwaitingBudget => RunStatusSchema::AwaitingBudget,
            RunStatus::Completed => RunStatusSchema::Completed,
            RunStatus::Failed => RunStatusSchema::Failed,
            RunStatus::Cancelled => RunStatusSchema::Cancelled,
        };
        for status in [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::AwaitingApproval,
            RunStatus::AwaitingBudget,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::to_value(schema(status)).unwrap()
            );
        }
    }

    #[test]
    fn the_pending_approval_schema_has_the_members_an_approval_serializes_with() {
        for attempt in [1, 2] {
            let pending = ApprovalRequested {
                call_id: "call_1".into(),
                tool: "bash".into(),
                command: "ls".into(),
                attempt,
            };
            let documented = PendingApprovalSchema {
                call_id: "call_1".into(),
                tool: "bash".into(),
                command: "ls".into(),
                attempt: (attempt > 1).then_some(attempt),
            };
            assert_eq!(
                serde_json::to_value(&pending).unwrap(),
                serde_json::to_value(&documented).unwrap()
            );
        }
    }
}
