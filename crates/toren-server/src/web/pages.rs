//! The pages, rendered on the server from the run service (as the API's handlers read it)
//! with every value escaped; live parts are filled in by `app.js` from the API's event
//! streams under `/ui/api`. Everything shown that came from a model, a sandbox, a file or
//! an agent file goes through `toren_display` first, as on the terminal: a control,
//! invisible or reordering character is shown as its marker (`⟨U+202E⟩`), never raw, and
//! a command holding any is flagged ([`hidden_warning`]).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use futures::StreamExt as _;
use toren_display::{visible, visible_lines};
use toren_protocol::{EventKind, RunStatus};
use toren_runtime::ApprovalState;
use toren_sandbox::{EntryKind, Workspace};
use toren_store::{RunQuery, RunSummary};

use super::Signed;
use super::html::{esc, url, url_path};
use crate::AppState;
use crate::error::Problem;

mod files;
mod session;

pub(crate) use files::{run_files, run_files_root, session_files, session_files_root};
pub(crate) use session::session;

/// The largest text file shown inline (bigger ones are offered for download).
const VIEW_LIMIT: usize = 1024 * 1024;

fn status_name(status: RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A whole page: head, the navigation with the sign-out form, `body`.
fn layout(title: &str, signed: Option<&Signed>, page: &str, body: &str) -> Response {
    let mut out = String::with_capacity(body.len() + 1024);
    out.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(out, "<title>{}</title>", esc(title));
    if let Some(signed) = signed {
        let _ = write!(
            out,
            "<meta name=\"csrf\" content=\"{}\">",
            esc(&signed.csrf)
        );
    }
    out.push_str("<link rel=\"stylesheet\" href=\"/ui/static/app.css\">");
    // display.js first: app.js renders every value through it (deferred scripts run in
    // document order).
    out.push_str("<script src=\"/ui/static/display.js\" defer></script>");
    out.push_str("<script src=\"/ui/static/app.js\" defer></script></head>");
    let _ = write!(out, "<body data-page=\"{}\">", esc(page));
    out.push_str("<header><a class=\"brand\" href=\"/ui/runs\">Toren</a>");
    if let Some(signed) = signed {
        out.push_str("<nav><a href=\"/ui/runs\">Runs</a><a href=\"/ui/approvals\">Approvals</a>");
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/ui/sign-out\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" id=\"sign-out\" title=\"signed in as {}\">Sign out</button></form></nav>",
            esc(&signed.csrf),
            esc(&signed.name)
        );
    }
    out.push_str("</header><main>");
    out.push_str(body);
    out.push_str("</main></body></html>");
    Html(out).into_response()
}

pub(super) fn sign_in(error: Option<&str>, status: StatusCode) -> Response {
    let mut body = String::from("<h1>Sign in</h1>");
    if let Some(error) = error {
        let _ = write!(
            body,
            "<p class=\"error\" id=\"sign-in-error\">{}</p>",
            esc(error)
        );
    }
    body.push_str(
        "<form method=\"post\" action=\"/ui/sign-in\" class=\"sign-in\">\
         <label for=\"token\">API token</label>\
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>\
         <button type=\"submit\" id=\"sign-in\">Sign in</button></form>",
    );
    body.push_str(&token_help());
    let mut response = layout("Sign in — Toren", None, "sign-in", &body);
    *response.status_mut() = status;
    response
}

/// Where the sign-in page says a token comes from: the token `toren serve` wrote for a
/// fresh user on loopback (`$TOREN_HOME/api-token`, by default `~/.toren/api-token`), or
/// the one the operator gave it. The variables are named from `toren-config`'s table, so
/// the page cannot name one that does not exist.
fn token_help() -> String {
    use toren_config::env_vars::{TOREN_API_TOKEN, TOREN_API_TOKENS_FILE, TOREN_HOME};
    format!(
        "<p class=\"muted\" id=\"token-help\">Started with no token configured, <code>toren serve</code> made one and wrote it to <code>~/.toren/api-token</code> (<code>${home}/api-token</code> when <code>{home}</code> is set): paste the contents of that file. Otherwise use the value of <code>{token}</code> or one of the tokens in the <code>name:token</code> lines of the file <code>{file}</code> names. The token is kept in an HttpOnly cookie.</p>",
        home = TOREN_HOME.name,
        token = TOREN_API_TOKEN.name,
        file = TOREN_API_TOKENS_FILE.name,
    )
}

/// The warning shown under a command (or a host request: `what`) that holds characters
/// shown as markers, in the terminal's words; `app.js` words the run page's panel the
/// same (the browser suite checks both pages).
pub(crate) fn hidden_warning(what: &str, text: &str) -> Option<String> {
    let n = toren_display::hidden_count(text);
    (n > 0).then(|| {
        format!(
            "⚠ this {what} contains {n} hidden or control character{} ({}), shown as ⟨…⟩: read it with care",
            if n == 1 { "" } else { "s" },
            toren_display::findings(text).join(" ")
        )
    })
}

/// The notice on a call that asks again after an interruption, as the terminal and
/// Telegram give it: its first attempt may have done part of its work.
pub(crate) fn attempt_notice(attempt: u32) -> Option<String> {
    (attempt > 1).then(|| {
        format!(
            "⚠ attempt {attempt}: this command was interrupted mid-execution and asks to run again; it may already have had some of its effects"
        )
    })
}

/// How many approvals wait, across runs (a session's turns are runs).
async fn pending_count(state: &AppState) -> Result<usize, Problem> {
    Ok(waiting_runs(state).await?.len())
}

async fn waiting_runs(state: &AppState) -> Result<Vec<RunSummary>, Problem> {
    let query = RunQuery {
        statuses: vec![RunStatus::AwaitingApproval],
        agent: None,
        limit: 1000,
        after: None,
    };
    Ok(state.service.list_page(&query).await?.runs)
}

fn title_with(count: usize, what: &str) -> String {
    if count == 0 {
        format!("{what} — Toren")
    } else {
        format!("({count}) {what} — Toren")
    }
}

const STATUSES: [&str; 8] = [
    "queued",
    "running",
    "awaiting_approval",
    "awaiting_budget",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
];

/// The runs, newest first, filtered by `status` and `agent` as `GET /runs` is.
pub(crate) async fn runs(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Problem> {
    let pairs: Vec<(String, String)> = raw
        .as_deref()
        .unwrap_or_default()
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (super::form_decode(k), super::form_decode(v)))
        .filter(|(k, v)| matches!(k.as_str(), "status" | "agent" | "cursor") && !v.is_empty())
        .collect();
    let query = crate::listing::parse(&pairs)?;
    let page = state.service.list_page(&query).await?;
    let pending = pending_count(&state).await?;
    let chosen_status = pairs
        .iter()
        .find(|(k, _)| k == "status")
        .map(|(_, v)| v.as_str());
    let chosen_agent = pairs
        .iter()
        .find(|(k, _)| k == "agent")
        .map(|(_, v)| v.as_str());

    let mut body = String::from("<h1>Runs</h1>");
    body.push_str("<form method=\"get\" action=\"/ui/runs\" class=\"filters\"><label>Status <select name=\"status\" id=\"filter-status\"><option value=\"\">any</option>");
    for s in STATUSES {
        let selected = if chosen_status == Some(s) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<option value=\"{s}\"{selected}>{}</option>",
            s.replace('_', " ")
        );
    }
    let _ = write!(
        body,
        "</select></label><label>Agent <input name=\"agent\" id=\"filter-agent\" value=\"{}\"></label><button type=\"submit\">Filter</button></form>",
        esc(chosen_agent.unwrap_or_default())
    );
    let _ = write!(
        body,
        "<p class=\"muted\"><a href=\"/ui/approvals\" id=\"pending-link\"><span id=\"pending-count\">{pending}</span> waiting for approval</a></p>"
    );
    if page.runs.is_empty() {
        body.push_str("<p id=\"no-runs\">No runs.</p>");
    }
    body.push_str("<table class=\"runs\" id=\"runs\"><thead><tr><th>Run</th><th>Agent</th><th>Status</th><th>Created</th><th>Updated</th></tr></thead><tbody>");
    for run in &page.runs {
        let id = run.id.as_str();
        let status = status_name(run.status);
        let _ = write!(
            body,
            "<tr data-run=\"{id}\"><td><a href=\"/ui/runs/{}\">{id}</a></td><td>{}</td><td><span class=\"status status-{status}\" data-status>{}</span></td><td>{}</td><td data-updated>{}</td></tr>",
            url(run.id.as_str()),
            esc(&visible(&run.agent)),
            status.replace('_', " "),
            esc(&short_time(run.created_at)),
            esc(&short_time(run.updated_at)),
            id = esc(id),
        );
    }
    body.push_str("</tbody></table>");
    if let Some(next) = &page.next {
        let mut link = String::from("/ui/runs?cursor=");
        link.push_str(&url(&next.encode()));
        for (k, v) in pairs.iter().filter(|(k, _)| k != "cursor") {
            let _ = write!(link, "&{}={}", url(k), url(v));
        }
        let _ = write!(
            body,
            "<p><a href=\"{}\" id=\"next-page\">Older runs</a></p>",
            esc(&link)
        );
    }
    Ok(layout(
        &title_with(pending, "Runs"),
        Some(&signed),
        "runs",
        &body,
    ))
}

fn short_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S").to_string()
}

/// One run: the header from the store, everything else from its event stream (`app.js`).
pub(crate) async fn run(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let run = crate::runs::run_id(&id)?;
    let view = state.service.get(&run).await?;
    let pending = pending_count(&state).await?;
    let summary = &view.summary;
    let id = summary.id.as_str();
    let status = status_name(summary.status);
    let events = state.service.events(&run, 0).await?;
    let session = events.iter().find_map(|e| match &e.kind {
        EventKind::RunCreated(c) => c.session.clone(),
        _ => None,
    });
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Run <code>{}</code></h1><p class=\"meta\">Agent <strong>{}</strong> · <span id=\"run-status\" class=\"status status-{status}\">{}</span> · created {}",
        esc(id),
        esc(&visible(&summary.agent)),
        status.replace('_', " "),
        esc(&short_time(summary.created_at)),
    );
    if let Some(session) = &session {
        let _ = write!(
            body,
            " · turn {} of session <a href=\"/ui/sessions/{}\">{}</a>",
            session.turn,
            url(&session.id),
            esc(&visible(&session.name))
        );
    }
    let _ = write!(
        body,
        "</p><p class=\"actions\"><a href=\"/ui/runs/{}/files/\" id=\"workspace-link\">Workspace</a> <button type=\"button\" id=\"cancel\" class=\"danger\"{}>Cancel run</button> <span id=\"stream-state\" class=\"muted\"></span></p>",
        url(id),
        if summary.status.is_terminal() {
            " hidden"
        } else {
            ""
        },
    );
    body.push_str("<section id=\"approval\" class=\"approval\" hidden><h2>Waiting for approval</h2><p id=\"approval-attempt\" class=\"warning\" hidden></p><pre id=\"approval-command\"></pre><p id=\"approval-warning\" class=\"warning\" hidden></p><input id=\"approval-reason\" placeholder=\"Reason (optional; a denial's reason is told to the model)\"><p><button type=\"button\" id=\"approve\">Approve</button> <button type=\"button\" id=\"deny\" class=\"danger\">Deny</button></p><p id=\"approval-error\" class=\"error\"></p></section>");
    body.push_str(&super::budget::panel(&view));
    if session.is_none() {
        body.push_str(&rewind_panel(&view, &events));
    }
    body.push_str("<section class=\"panel\"><h2>Input</h2><pre id=\"run-input\"></pre></section>");
    body.push_str("<details class=\"panel\" id=\"policy\"><summary>Pinned policy</summary><dl id=\"policy-list\"></dl></details>");
    body.push_str("<section class=\"panel\"><h2>Usage</h2><p id=\"usage\">0 input tokens · 0 output tokens</p></section>");
    let _ = write!(
        body,
        "<section><h2>Conversation</h2><ol id=\"timeline\" data-run=\"{}\" data-events=\"/ui/api/runs/{}/events\"></ol><div id=\"streaming\" class=\"assistant streaming\" hidden></div></section>",
        esc(id),
        url(id)
    );
    let what = format!("Run {id}");
    Ok(layout(
        &title_with(pending, &what),
        Some(&signed),
        "run",
        &body,
    ))
}

/// The run page's rewind form: the steps its workspace and conversation can go back to,
/// newest first, each named by what happened at it (a session's turns go back on the
/// session's page). An ended run's form starts a new run from the step instead.
fn rewind_panel(view: &toren_runtime::RunView, events: &[toren_protocol::Event]) -> String {
    let Some(state) = &view.state else {
        return String::new();
    };
    let ended = view.summary.status.is_terminal();
    let mut options = String::new();
    for seq in state.rewind_targets().into_iter().rev() {
        let what = match events.iter().find(|e| e.seq == seq).map(|e| &e.kind) {
            Some(EventKind::RunCreated(_)) => "the start",
            Some(EventKind::ModelResponded(_)) => "the model's answer",
            Some(EventKind::ToolCompleted(_)) => "the tool results",
            Some(_) => "this step",
            None => continue,
        };
        let _ = write!(
            options,
            "<option value=\"{seq}\">step {seq}: after {what}</option>"
        );
    }
    if options.is_empty() {
        return String::new();
    }
    let (summary, said, button) = if ended {
        (
            "Go on from a step",
            "The run has ended, so it stays as it is: a new run starts from the step, with the workspace and the conversation as they were then.",
            "Start a new run from here",
        )
    } else {
        (
            "Rewind",
            "The workspace and the conversation go back to a step together; what came after stays in the log.",
            "Rewind",
        )
    };
    format!(
        "<details class=\"panel\" id=\"rewind\"><summary>{summary}</summary><p class=\"muted\">{said}</p><p><select id=\"rewind-step\">{options}</select> <button type=\"button\" id=\"rewind-run\" data-ended=\"{ended}\">{button}</button></p><p id=\"rewind-result\" class=\"muted\"></p></details>"
    )
}

/// Every pending approval across runs and sessions, oldest first, each decidable here.
pub(crate) async fn approvals(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
) -> Result<Response, Problem> {
    let mut waiting = Vec::new();
    for run in waiting_runs(&state).await? {
        let events = state.service.events(&run.id, 0).await?;
        let session = events.iter().find_map(|e| match &e.kind {
            EventKind::RunCreated(c) => c.session.clone(),
            _ => None,
        });
        for approval in toren_runtime::approvals_of(&events) {
            if approval.state == ApprovalState::Pending {
                waiting.push((run.clone(), session.clone(), approval));
            }
        }
    }
    waiting.sort_by_key(|(_, _, a)| a.requested_at);
    let mut body = format!(
        "<h1>Approvals</h1><p class=\"muted\">{} waiting, oldest first.</p>",
        waiting.len()
    );
    body.push_str("<ol class=\"approvals\" id=\"approvals\">");
    for (run, session, approval) in &waiting {
        let id = run.id.as_str();
        let _ = write!(
            body,
            "<li class=\"approval\" data-run=\"{}\" data-call=\"{}\"><p class=\"meta\"><a href=\"/ui/runs/{}\">{}</a> · {} · {}",
            esc(id),
            esc(&approval.call_id),
            url(id),
            esc(id),
            esc(&visible(&run.agent)),
            esc(&short_time(approval.requested_at)),
        );
        if let Some(s) = session {
            let _ = write!(
                body,
                " · session <a href=\"/ui/sessions/{}\">{}</a>",
                url(&s.id),
                esc(&visible(&s.name))
            );
        }
        body.push_str("</p>");
        if let Some(notice) = attempt_notice(approval.attempt) {
            let _ = write!(body, "<p class=\"warning attempt\">{}</p>", esc(&notice));
        }
        let what = if approval.host.is_some() {
            "request"
        } else {
            "command"
        };
        let _ = write!(
            body,
            "<pre class=\"command\">{}</pre>",
            esc(&visible_lines(&approval.command))
        );
        if let Some(warning) = hidden_warning(what, &approval.command) {
            let _ = write!(
                body,
                "<p class=\"warning hidden-chars\">{}</p>",
                esc(&warning)
            );
        }
        body.push_str(
            "<input class=\"reason\" placeholder=\"Reason (optional)\"><p><button type=\"button\" class=\"decide\" data-decision=\"approve\">Approve</button> <button type=\"button\" class=\"decide danger\" data-decision=\"deny\">Deny</button> <span class=\"result\"></span></p></li>",
        );
    }
    body.push_str("</ol>");
    Ok(layout(
        &title_with(waiting.len(), "Approvals"),
        Some(&signed),
        "approvals",
        &body,
    ))
}

/// The runs list's live stream: every second, the newest runs' statuses and the pending
/// count, sent when they changed (`runs` events with `{"runs": [{id, status, agent}],
/// "pending": n}`).
pub(crate) async fn live_runs(State(state): State<AppState>) -> Response {
    let shutdown = state.shutdown.clone();
    let wake = super::live::Wake::new(&state);
    let stream = futures::stream::unfold((state, String::new(), wake), |(state, last, mut wake)| async move {
        loop {
            let query = RunQuery { statuses: vec![], agent: None, limit: 200, after: None };
            let runs = state.service.list_page(&query).await.ok()?.runs;
            let pending = runs.iter().filter(|r| r.status == RunStatus::AwaitingApproval).count();
            let pending = if pending == 0 { 0 } else { pending_count(&state).await.ok()? };
            let listed: Vec<_> = runs
                .iter()
                .map(|r| serde_json::json!({"id": r.id.as_str(), "status": status_name(r.status), "agent": r.agent, "updated": short_time(r.updated_at)}))
                .collect();
            let data = serde_json::json!({"runs": listed, "pending": pending}).to_string();
            if data != last {
                let event: Result<SseEvent, Infallible> = Ok(SseEvent::default().event("runs").data(data.clone()));
                return Some((event, (state, data, wake)));
            }
            wake.next().await;
        }
    })
    .take_until(shutdown.cancelled_owned());
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
