//! A session's events: every turn's journaled events in turn order, as a JSON array
//! (`?format=json`) or as Server-Sent Events — each turn from its start (or from
//! `Last-Event-ID`), then live, then the next turn when one starts, for as long as the
//! client stays. The SSE id of an event is `<turn>:<seq>`, so a client that reconnects
//! with the last id it saw misses and repeats nothing. Unlike a run's stream, a session's
//! never ends by itself (a next turn may always come): heartbeat comments keep it alive
//! while nothing happens, and it ends only when the client goes away, the session is
//! deleted, or the store fails (then the client reconnects). Streamed text comes as
//! `text` events without an id. Each turn is followed with `RunService::follow`; a next
//! turn is looked for every follow interval of the run service.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt as _};
use serde::Deserialize;
use toren_protocol::Event;
use toren_runtime::{Follow, Followed, RunService};
use toren_store::Session;

use crate::AppState;
use crate::error::Problem;
use crate::sessions::find_session;

const HEARTBEAT: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct SessionEventsQuery {
    /// `json` for the journaled events of every turn as one JSON array; none (or `sse`)
    /// for Server-Sent Events.
    #[param(value_type = Option<crate::events::Format>, inline)]
    format: Option<String>,
    /// The `<turn>:<seq>` to start after (as `Last-Event-ID`, for clients that cannot set
    /// headers).
    #[param(pattern = "^[1-9][0-9]{0,8}:[0-9]{1,19}$")]
    after: Option<String>,
}

/// Where a session's stream is: after event `seq` of turn `turn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    turn: u32,
    seq: u64,
}

impl Position {
    const START: Self = Self { turn: 1, seq: 0 };

    /// `<turn>:<seq>`, as the stream's ids are written.
    fn parse(text: &str) -> Option<Self> {
        let (turn, seq) = text.trim().split_once(':')?;
        let turn = turn.parse().ok().filter(|turn| *turn >= 1)?;
        Some(Self {
            turn,
            seq: seq.parse().ok()?,
        })
    }

    fn id(self) -> String {
        format!("{}:{}", self.turn, self.seq)
    }
}

/// All of a session's turns: Server-Sent Events from the first turn's start or from
/// `Last-Event-ID` (`<turn>:<seq>`), each turn then live and the next turns as they
/// start, never ending by itself; or (`?format=json`) every turn's journaled events so
/// far, in order.
///
/// Each journaled event is an SSE event whose `id` is `<turn>:<seq>`, whose `event` is its
/// type and whose `data` is the event as JSON (the `Event` schema, which names its run);
/// the assistant's streamed text comes as `text` events without an id, `data`
/// `{"turn": …, "text": …}`. Heartbeat comments come every 15 seconds while nothing
/// happens; the stream ends when the client leaves or the session is deleted.
#[utoipa::path(
    get,
    path = "/sessions/{id}/events",
    operation_id = "session_events",
    tag = "events",
    params(
        ("id" = String, Path, description = "The session's id (`ses_…`) or name"),
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[1-9][0-9]{0,8}:[0-9]{1,19}$", description = "The `<turn>:<seq>` of the last event seen: the stream resumes after it"),
        SessionEventsQuery,
    ),
    responses(
        (status = 200, description = "The events", content(
            (Vec<crate::openapi::Event> = "application/json"),
            (crate::openapi::ServerSentEvent = "text/event-stream"),
        )),
        (status = 400, description = "A query parameter or `Last-Event-ID` is not valid"),
        (status = 404, description = "No such session"),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(key): Path<String>,
    headers: HeaderMap,
    query: Result<Query<SessionEventsQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) = query?;
    let bad_position = |what: &str| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!("{what} must be `<turn>:<seq>`, the id of an event of this stream"),
        )
    };
    let from_header = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(Position::parse)
                .ok_or_else(|| bad_position("Last-Event-ID"))?,
        ),
    };
    let from_query = match query.after.as_deref() {
        None => None,
        Some(text) => Some(Position::parse(text).ok_or_else(|| bad_position("`after`"))?),
    };
    let start = from_header.or(from_query).unwrap_or(Position::START);
    let session = find_session(&state, &key).await?;
    match query.format.as_deref() {
        Some("json") => Ok(Json(journaled(&state.service, &session, start).await?).into_response()),
        None | Some("sse") => {
            let follow = SessionFollow {
                service: state.service.clone(),
                session,
                at: start,
                turn: None,
            };
            let stream = stream(follow).take_until(state.shutdown.clone().cancelled_owned());
            Ok(Sse::new(stream)
                .keep_alive(KeepAlive::new().interval(HEARTBEAT))
                .into_response())
        }
        Some(other) => Err(Problem::new(
            StatusCode::BAD_REQUEST,
            format!("unknown format `{other}`; use `json`, or none for Server-Sent Events"),
        )),
    }
}

/// The journaled events of every turn after `start`, in order.
async fn journaled(
    service: &RunService,
    session: &Session,
    start: Position,
) -> Result<Vec<Event>, Problem> {
    let view = service.session_view(&session.name).await?;
    let mut events = Vec::new();
    for turn in view.turns.iter().filter(|t| t.turn >= start.turn) {
        let after = if turn.turn == start.turn {
            start.seq
        } else {
            0
        };
        let turn_events = service.events(&turn.run_id, after).await?;
        events.extend(turn_events.into_iter().map(crate::redact::for_client));
    }
    Ok(events)
}

/// Following a session: the turn being followed, and the position of the last event given.
struct SessionFollow {
    service: RunService,
    session: Session,
    /// The turn followed (or waited for) and the last seq of it given.
    at: Position,
    /// The follow of turn `at.turn`, once it exists.
    turn: Option<Follow>,
}

/// What the stream gives next.
enum Next {
    Event(Box<Event>),
    Text(String),
}

impl SessionFollow {
    /// The next journaled event or streamed text; `None` when the stream must end (the
    /// session was deleted, or the store failed).
    async fn next(&mut self) -> Option<Next> {
        loop {
            if let Some(follow) = &mut self.turn {
                match follow.next().await {
                    Ok(Some(Followed::Event(event))) => {
                        self.at.seq = event.seq;
                        return Some(Next::Event(event));
                    }
                    Ok(Some(Followed::Text(text))) => return Some(Next::Text(text)),
                    Ok(None) => {
                        // The turn ended and all of it was given: on to the next.
                        self.turn = None;
                        self.at = Position {
                            turn: self.at.turn.saturating_add(1),
                            seq: 0,
                        };
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(session = %self.session.id, error = %error, "following a session failed");
                        return None;
                    }
                }
            }
            let view = match self.service.session_view(&self.session.name).await {
                // Removed (and perhaps made anew under the same name): nothing more of it.
                Ok(view) if view.session.id != self.session.id => return None,
                Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => {
                    return None;
                }
                Err(error) => {
                    tracing::warn!(session = %self.session.id, error = %error, "following a session failed");
                    return None;
                }
                Ok(view) => view,
            };
            match view.turns.iter().find(|t| t.turn == self.at.turn) {
                Some(turn) => {
                    self.turn = Some(self.service.follow(&turn.run_id, self.at.seq));
                }
                // Not started yet: look again soon (heartbeats keep the connection).
                None => tokio::time::sleep(self.service.follow_poll()).await,
            }
        }
    }
}

/// The follow as SSE events.
fn stream(follow: SessionFollow) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(follow, |mut follow| async move {
        let sse = match follow.next().await? {
            Next::Event(event) => {
                let event = crate::redact::for_client(*event);
                let data = serde_json::to_string(&event).unwrap_or_default();
                SseEvent::default()
                    .id(follow.at.id())
                    .event(event.kind.name())
                    .data(data)
            }
            Next::Text(text) => {
                let data = serde_json::json!({ "turn": follow.at.turn, "text": text });
                SseEvent::default().event("text").data(data.to_string())
            }
        };
        Some((Ok(sse), follow))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_turn_colon_seq() {
        assert_eq!(Position::parse("2:17"), Some(Position { turn: 2, seq: 17 }));
        assert_eq!(Position::parse(" 1:0 "), Some(Position::START));
        assert_eq!(Position { turn: 3, seq: 4 }.id(), "3:4");
        for bad in ["", "7", "0:3", "a:1", "1:b", "1:2:3", "-1:2", "1:-2"] {
            assert_eq!(Position::parse(bad), None, "{bad}");
        }
    }
}
