//! `toren sessions list|show|rm`: the sessions `toren chat` keeps, through the run service.

use anyhow::anyhow;
use serde_json::json;
use toren_display::{escape_json, visible};
use toren_protocol::EventKind;

use crate::exit::Failure;
use crate::printer::say;
use crate::wiring;

pub(crate) async fn list(as_json: bool) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let sessions = service.sessions().await.map_err(Failure::failed)?;
    if as_json {
        let array: Vec<_> = sessions
            .iter()
            .map(|s| json!({"id": s.id, "name": s.name, "agent": s.agent.name, "created_at": s.created_at.to_string()}))
            .collect();
        println!(
            "{}",
            escape_json(&serde_json::Value::Array(array).to_string())
        );
        return Ok(0);
    }
    if sessions.is_empty() {
        say!("no sessions yet; start one with `toren chat NAME --agent AGENT`");
        return Ok(0);
    }
    println!("{:<24}  {:<20}  {:<20}  ID", "SESSION", "AGENT", "CREATED");
    for s in &sessions {
        println!(
            "{:<24}  {:<20}  {:<20}  {}",
            visible(&s.name),
            visible(&s.agent.name),
            s.created_at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            s.id
        );
    }
    Ok(0)
}

pub(crate) async fn show(name: &str, as_json: bool) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let view = service.session_view(name).await.map_err(Failure::failed)?;
    let mut turns = Vec::new();
    let (mut input, mut output) = (0_u64, 0_u64);
    // The turns the conversation is made of now: a rewind leaves later ones behind.
    let line = service
        .session_line(&view.session)
        .await
        .map_err(Failure::failed)?;
    for turn in &view.turns {
        let events = service
            .events(&turn.run_id, 0)
            .await
            .map_err(Failure::failed)?;
        let rewind = events.first().and_then(|e| match &e.kind {
            EventKind::RunCreated(c) => c
                .start
                .as_ref()?
                .rewound
                .as_ref()
                .map(|r| toren_protocol::TurnStart::step_name(r.turn.unwrap_or(0), r.to)),
            _ => None,
        });
        let (i, o) = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ModelResponded(m) => Some((m.usage.input_tokens, m.usage.output_tokens)),
                _ => None,
            })
            .fold((0, 0), |(a, b), (i, o)| (a + i, b + o));
        input += i;
        output += o;
        turns.push(
            json!({"turn": turn.turn, "run": turn.run_id, "status": turn.status,
            "usage": {"input_tokens": i, "output_tokens": o},
            "on_line": line.iter().any(|t| t.turn == turn.turn), "rewind_to": rewind}),
        );
    }
    let status = match view.turns.last() {
        Some(t) if !t.status.is_terminal() => format!("turn {} {}", t.turn, t.status),
        Some(_) => "idle".to_owned(),
        None => "new".to_owned(),
    };
    let container = view
        .session
        .policy
        .as_ref()
        .filter(|p| p.backend == "docker")
        .and_then(|p| p.sandbox_key.clone());
    if as_json {
        let object = json!({
            "id": view.session.id, "name": view.session.name, "agent": view.session.agent.name,
            "model": view.session.agent.model, "status": status, "workspace": view.workspace,
            "backend": view.session.policy.as_ref().map(|p| &p.backend),
            "container_key": container, "turns": turns,
            "usage": {"input_tokens": input, "output_tokens": output},
        });
        println!("{}", escape_json(&object.to_string()));
        return Ok(0);
    }
    println!(
        "session    {} ({})",
        visible(&view.session.name),
        view.session.id
    );
    println!(
        "agent      {} ({})",
        visible(&view.session.agent.name),
        visible(&view.session.agent.model)
    );
    println!("status     {status}");
    if let Some(workspace) = &view.workspace {
        println!("workspace  {}", visible(workspace));
    }
    if let Some(key) = &container {
        println!(
            "container  one per session, named for {key} (made at a turn's first command, removed when it ends)"
        );
    }
    println!("turns      {}", view.turns.len());
    for t in &turns {
        let note = match (t["rewind_to"].as_str(), t["on_line"].as_bool()) {
            (Some(step), _) if !step.contains('.') => format!("  rewind to before turn {step}"),
            (Some(step), _) => format!("  rewind to step {step}"),
            (None, Some(false)) => "  (left behind by a rewind)".to_owned(),
            (None, _) => String::new(),
        };
        println!(
            "  {}  {}  {}{note}",
            t["turn"],
            t["run"].as_str().unwrap_or_default(),
            t["status"].as_str().unwrap_or_default()
        );
    }
    if !turns.is_empty() {
        println!(
            "steps      `toren rewind {} --to TURN` goes back to before a turn on the line, \
             `--to TURN.SEQ` to after event SEQ of its run (`toren events RUN`)",
            visible(&view.session.name)
        );
    }
    println!("usage      {input} tokens in, {output} out");
    Ok(0)
}

pub(crate) async fn rm(name: &str, delete_workspace: bool) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let session = service
        .remove_session(name)
        .await
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    let workspace = session.policy.as_ref().and_then(|p| p.workspace.clone());
    if let Some(policy) = &session.policy
        && policy.backend == "docker"
        && let Some(key) = &policy.sandbox_key
    {
        wiring::remove_container(&settings, key).await;
    }
    if let Some(policy) = &session.policy
        && policy.backend == "e2b"
        && let Some(key) = &policy.sandbox_key
    {
        wiring::release_e2b(&settings, key).await;
    }
    match (workspace, delete_workspace) {
        (Some(ws), true) => {
            // The session's private directory holds the workspace; both go.
            let dir = std::path::Path::new(&ws)
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_else(|| ws.clone().into());
            std::fs::remove_dir_all(&dir).map_err(|e| {
                Failure::failed(anyhow!(e).context(format!("cannot delete `{}`", dir.display())))
            })?;
            say!(
                "removed session {name} and deleted its workspace {}",
                visible(&ws)
            );
        }
        (Some(ws), false) => say!(
            "removed session {name}; its workspace is kept at {} (delete it with --delete-workspace next time, or by hand)",
            visible(&ws)
        ),
        (None, _) => say!("removed session {name}"),
    }
    Ok(0)
}
