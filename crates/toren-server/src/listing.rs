//! `GET /runs`'s query string: `status` (given several times, comma-separated, or both),
//! `agent`, `limit` and `cursor`, read into the store's [`RunQuery`], and the link to the
//! next page with the same filters. Parsed by hand from the pairs because `status` may
//! repeat; an unknown parameter, an unknown status, a limit that is not a number or a
//! cursor this server did not make is a 400 problem that says what would be valid.

use axum::http::StatusCode;
use toren_protocol::RunStatus;
use toren_store::{RunCursor, RunQuery};

use crate::error::Problem;

/// Runs on a page when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: u32 = 50;
/// The most runs on one page; a larger `limit` is taken as this.
pub(crate) const MAX_LIMIT: u32 = 1000;

/// Every status, as `status=` takes them.
const STATUSES: [RunStatus; 7] = [
    RunStatus::Queued,
    RunStatus::Running,
    RunStatus::AwaitingApproval,
    RunStatus::AwaitingBudget,
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

/// One `status=` value, as [`parse`] reads it: statuses separated by commas, each may be
/// padded with spaces; an empty one names none.
#[derive(utoipa::ToSchema)]
#[schema(
    value_type = String,
    pattern = r"^\s*(?:(?:queued|running|awaiting_approval|awaiting_budget|completed|failed|cancelled)\s*)?(?:,\s*(?:(?:queued|running|awaiting_approval|awaiting_budget|completed|failed|cancelled)\s*)?)*$",
    example = "completed,failed"
)]
#[expect(dead_code, reason = "a schema only: `parse` reads the text")]
pub(crate) struct StatusFilter(String);

/// `GET /runs?…` read: the store's query (its limit clamped to 1..=[`MAX_LIMIT`]).
pub(crate) fn parse(pairs: &[(String, String)]) -> Result<RunQuery, Problem> {
    let bad = |detail: String| Problem::new(StatusCode::BAD_REQUEST, detail);
    let mut query = RunQuery::newest(DEFAULT_LIMIT);
    let (mut agent_seen, mut limit_seen, mut cursor_seen) = (false, false, false);
    let once = |seen: &mut bool, name: &str| {
        if std::mem::replace(seen, true) {
            Err(bad(format!("`{name}` is given more than once")))
        } else {
            Ok(())
        }
    };
    for (name, value) in pairs {
        match name.as_str() {
            "status" => {
                for text in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                    let status = text.parse::<RunStatus>().map_err(|_| {
                        bad(format!(
                            "unknown status `{text}`; use one of {} (several: repeat `status` \
                             or separate them with commas)",
                            status_names()
                        ))
                    })?;
                    if !query.statuses.contains(&status) {
                        query.statuses.push(status);
                    }
                }
            }
            "agent" => {
                once(&mut agent_seen, "agent")?;
                query.agent = (!value.is_empty()).then(|| value.clone());
            }
            "limit" => {
                once(&mut limit_seen, "limit")?;
                let limit = value.trim().parse::<u32>().map_err(|_| {
                    bad(format!(
                        "`limit` must be a whole number of runs (1 to {MAX_LIMIT}), not `{value}`"
                    ))
                })?;
                query.limit = limit.clamp(1, MAX_LIMIT);
            }
            "cursor" => {
                once(&mut cursor_seen, "cursor")?;
                let cursor = RunCursor::decode(value.trim()).map_err(|e| bad(e.to_string()))?;
                query.after = Some(cursor);
            }
            other => {
                return Err(bad(format!(
                    "unknown query parameter `{other}`; `/runs` takes status, agent, limit and \
                     cursor"
                )));
            }
        }
    }
    Ok(query)
}

/// `queued, running, …`: the statuses a client may name.
fn status_names() -> String {
    STATUSES
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The URL of the page after `next` with the filters of `query`.
pub(crate) fn next_link(query: &RunQuery, next: &RunCursor) -> String {
    let mut link = String::from("/runs?");
    if !query.statuses.is_empty() {
        let statuses: Vec<&str> = query.statuses.iter().map(|s| s.as_str()).collect();
        link.push_str(&format!("status={}&", statuses.join(",")));
    }
    if let Some(agent) = &query.agent {
        link.push_str(&format!("agent={}&", encode(agent)));
    }
    link.push_str(&format!("limit={}&cursor={}", query.limit, next.encode()));
    link
}

/// `text` percent-encoded for a query component: unreserved characters as they are.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn statuses_repeat_or_come_comma_separated() {
        let query = parse(&pairs(&[
            ("status", "completed, failed"),
            ("status", "cancelled"),
            ("status", "failed"),
            ("agent", "hello"),
            ("limit", "5000"),
        ]))
        .unwrap();
        assert_eq!(
            query,
            RunQuery {
                statuses: vec![
                    RunStatus::Completed,
                    RunStatus::Failed,
                    RunStatus::Cancelled
                ],
                agent: Some("hello".into()),
                limit: MAX_LIMIT,
                after: None,
            }
        );
        assert_eq!(
            parse(&pairs(&[("status", "")])).unwrap(),
            RunQuery::newest(50)
        );
    }

    #[test]
    fn bad_parameters_say_what_is_valid() {
        for (list, says) in [
            (
                vec![("status", "done")],
                "queued, running, awaiting_approval, awaiting_budget, completed, failed, cancelled",
            ),
            (vec![("limit", "many")], "whole number"),
            (vec![("cursor", "nope")], "cursor"),
            (vec![("order", "asc")], "status, agent, limit and cursor"),
            (vec![("agent", "a"), ("agent", "b")], "more than once"),
        ] {
            let problem = parse(&pairs(&list)).unwrap_err();
            assert_eq!(problem.status, 400, "{list:?}");
            assert!(
                problem.detail.contains(says),
                "{list:?}: {}",
                problem.detail
            );
        }
    }

    #[test]
    fn the_next_link_keeps_the_filters() {
        let next = RunCursor {
            created_at: "2026-03-14T09:27:00Z".parse().unwrap(),
            id: "run_01abc".parse().unwrap(),
        };
        let query = RunQuery {
            statuses: vec![RunStatus::Running, RunStatus::AwaitingApproval],
            agent: Some("my agent&co".into()),
            limit: 2,
            after: None,
        };
        let link = next_link(&query, &next);
        assert_eq!(
            link,
            format!(
                "/runs?status=running,awaiting_approval&agent=my%20agent%26co&limit=2&cursor={}",
                next.encode()
            )
        );
        let query_string = link.split_once('?').unwrap().1;
        let again: Vec<(String, String)> = query_string
            .split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_owned(), v.replace("%20", " ").replace("%26", "&"))
            })
            .collect();
        let mut parsed = parse(&again).unwrap();
        assert_eq!(parsed.after.take(), Some(next));
        assert_eq!(parsed, query);
    }
}
