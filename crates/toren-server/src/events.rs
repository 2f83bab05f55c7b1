//! A run's events: the journaled ones as a JSON array (`?format=json`), or as Server-Sent
//! Events — each journaled event with its seq as the event id, from `Last-Event-ID` on,
//! then live, with streamed text as `text` events without an id — until the run's final
//! event. Idle connections get a heartbeat comment every 15 seconds.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt as _};
use serde::Deserialize;
use toren_runtime::{Follow, Followed};

use crate::AppState;
use crate::error::Problem;
use crate::runs::run_id;

const HEARTBEAT: Duration = Duration::from_secs(15);

/// The largest seq there can be (the store keeps seqs as 64-bit signed integers), so the
/// largest `after` and `Last-Event-ID` the document allows.
pub(crate) const MAX_SEQ: u64 = i64::MAX.unsigned_abs();

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// `json` for the journaled events as one JSON array; none (or `sse`) for Server-Sent
    /// Events.
    #[param(value_type = Option<Format>, inline)]
    format: Option<String>,
    /// The seq to start after (as `Last-Event-ID`, for clients that cannot set headers).
    after: Option<u64>,
}

/// The formats of `?format=`.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[expect(
    dead_code,
    reason = "a schema only: the handlers match the query's text"
)]
pub(crate) enum Format {
    Json,
    Sse,
}

/// A run's journaled events: Server-Sent Events from the start or from `Last-Event-ID`,
/// then live until the run's final event, or (`?format=json`) those journaled so far.
///
/// Each journaled event is an SSE event whose `id` is its seq, whose `event` is its type
/// and whose `data` is the event as JSON (the `Event` schema); the assistant's streamed
/// text comes as `text` events without an id, `data` `{"text": …}`. Idle streams get a
/// comment every 15 seconds.
#[utoipa::path(
    get,
    path = "/runs/{id}/events",
    operation_id = "run_events",
    tag = "events",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "The seq of the last event seen: the stream resumes after it"),
        EventsQuery,
    ),
    responses(
        (status = 200, description = "The events", content(
            (Vec<crate::openapi::Event> = "application/json"),
            (crate::openapi::ServerSentEvent = "text/event-stream"),
        )),
        (status = 400, description = "A query parameter or `Last-Event-ID` is not valid"),
        (status = 404, description = "No such run"),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) = query?;
    let run = run_id(&id)?;
    // An unknown run is a 404 before any stream starts.
    state.service.summary(&run).await?;
    if query.after.is_some_and(|after| after > MAX_SEQ) {
        return Err(Problem::new(
            axum::http::StatusCode::BAD_REQUEST,
            format!("`after` must be the seq of an event (0 to {MAX_SEQ})"),
        ));
    }
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|seq| *seq <= MAX_SEQ)
                .ok_or_else(|| {
                    Problem::new(
                        axum::http::StatusCode::BAD_REQUEST,
                        "Last-Event-ID must be the seq of an event",
                    )
                })?,
        ),
    };
    let after = last_event_id.or(query.after).unwrap_or(0);
    match query.format.as_deref() {
        Some("json") => {
            let events = state.service.events(&run, after).await?;
            let events: Vec<_> = events.into_iter().map(crate::redact::for_client).collect();
            Ok(Json(events).into_response())
        }
        None | Some("sse") => {
            let follow = state.service.follow(&run, after);
            let stream = stream(follow).take_until(state.shutdown.clone().cancelled_owned());
            Ok(Sse::new(stream)
                .keep_alive(KeepAlive::new().interval(HEARTBEAT))
                .into_response())
        }
        Some(other) => Err(Problem::new(
            axum::http::StatusCode::BAD_REQUEST,
            format!("unknown format `{other}`; use `json`, or none for Server-Sent Events"),
        )),
    }
}

/// The follow as SSE events; a store error ends the stream (the client reconnects with
/// the last id it saw).
fn stream(follow: Follow) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(Some(follow), |follow| async move {
        let mut follow = follow?;
        match follow.next().await {
            Ok(Some(Followed::Event(event))) => {
                let event = crate::redact::for_client(*event);
                let data = serde_json::to_string(&event).unwrap_or_default();
                let sse = SseEvent::default()
                    .id(event.seq.to_string())
                    .event(event.kind.name())
                    .data(data);
                Some((Ok(sse), Some(follow)))
            }
            Ok(Some(Followed::Text(text))) => {
                let data = serde_json::json!({ "text": text }).to_string();
                Some((
                    Ok(SseEvent::default().event("text").data(data)),
                    Some(follow),
                ))
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(error = %error, "following a run failed");
                None
            }
        }
    })
}
