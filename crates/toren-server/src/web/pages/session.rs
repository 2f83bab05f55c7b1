//! A session's page: its turns as a chat, a box for the next message, its workspace.

use super::files::{Found, listing, look};
use super::*;

/// A session: its turns as a chat, a box for the next message, its workspace.
pub(crate) async fn session(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    Path(key): Path<String>,
) -> Result<Response, Problem> {
    let session = crate::sessions::find_session(&state, &key).await?;
    let view = state.service.session_view(&session.name).await?;
    let pending = pending_count(&state).await?;
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Session {}</h1><p class=\"meta\">Agent <strong>{}</strong> · <a href=\"/ui/sessions/{}/files/\" id=\"workspace-link\">Workspace</a></p><ol class=\"chat\" id=\"chat\">",
        esc(&visible(&session.name)),
        esc(&visible(&session.agent.name)),
        url(&session.id)
    );
    // The turns the conversation is made of now (a rewind leaves later ones behind).
    let line = state.service.session_line(&session).await?;
    for turn in &view.turns {
        let events = state.service.events(&turn.run_id, 0).await?;
        let status = status_name(turn.status);
        let on_line = line.iter().any(|t| t.turn == turn.turn);
        // A rewind turn is on no line: it is where the session went back.
        let rewind = events.first().is_some_and(|e| {
            matches!(&e.kind, EventKind::RunCreated(c) if c.start.as_ref().is_some_and(|s| s.rewound.is_some()))
        });
        let _ = write!(
            body,
            "<li class=\"turn{}\" data-run=\"{}\" data-turn=\"{}\">",
            if on_line || rewind {
                ""
            } else {
                " left-behind"
            },
            esc(turn.run_id.as_str()),
            turn.turn
        );
        for event in &events {
            match &event.kind {
                EventKind::RunCreated(c)
                    if c.start.as_ref().is_some_and(|s| s.rewound.is_some()) =>
                {
                    body.push_str("<div class=\"meta rewind-note\">rewind of the session</div>");
                }
                EventKind::RunCreated(c) => {
                    let _ = write!(
                        body,
                        "<div class=\"user\"><pre>{}</pre></div>",
                        esc(&visible_lines(&c.input))
                    );
                }
                EventKind::RunCompleted(c) => {
                    let _ = write!(
                        body,
                        "<div class=\"assistant\"><pre>{}</pre></div>",
                        esc(&visible_lines(&c.output))
                    );
                }
                EventKind::RunFailed(f) => {
                    let _ = write!(
                        body,
                        "<div class=\"error\"><pre>{}</pre></div>",
                        esc(&visible_lines(&f.error))
                    );
                }
                _ => {}
            }
        }
        let _ = write!(
            body,
            "<p class=\"meta\">turn {} · <a href=\"/ui/runs/{}\">run</a> · <span class=\"status status-{status}\">{}</span>{}</p></li>",
            turn.turn,
            url(turn.run_id.as_str()),
            status.replace('_', " "),
            if rewind {
                String::new()
            } else if on_line {
                format!(
                    " · <button type=\"button\" class=\"rewind-turn\" data-step=\"{}\" title=\"The workspace and the conversation as they were before this turn\">Rewind to before turn {}</button>",
                    turn.turn, turn.turn
                )
            } else {
                " · left behind by a rewind".to_owned()
            }
        );
    }
    body.push_str("</ol>");
    let _ = write!(
        body,
        "<p id=\"rewind-result\" class=\"muted\"></p><form id=\"send\" class=\"send\" data-session=\"{}\"><textarea id=\"message\" rows=\"3\" placeholder=\"Your next message\" required></textarea><button type=\"submit\" id=\"send-button\">Send</button><span id=\"send-result\" class=\"muted\"></span></form>",
        esc(&session.id)
    );
    // The workspace's top directory, under the chat.
    if let Some(root) = session.policy.as_ref().and_then(|p| p.workspace.clone()) {
        let found = tokio::task::spawn_blocking(move || look(&root, ""))
            .await
            .ok()
            .and_then(Result::ok);
        if let Some(Found::Directory(entries)) = found {
            body.push_str("<section class=\"panel\" id=\"workspace\"><h2>Workspace</h2>");
            listing(
                &mut body,
                &format!("/ui/sessions/{}", url(&session.id)),
                "",
                entries,
            );
            body.push_str("</section>");
        }
    }
    let what = format!("Session {}", visible(&session.name));
    Ok(layout(
        &title_with(pending, &what),
        Some(&signed),
        "session",
        &body,
    ))
}
