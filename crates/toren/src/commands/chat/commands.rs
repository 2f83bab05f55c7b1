//! The chat's slash commands: `/help`, `/files`, `/history`, `/usage`, `/cancel`, `/undo`,
//! `/rewind STEP`, `/exit`.

use std::path::Path;

use toren_display::{visible, visible_lines};
use toren_protocol::{EventKind, Message};
use toren_runtime::SessionStep;

use super::Chat;
use crate::exit::Failure;
use crate::printer::say;

/// A slash command the person typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Slash {
    Help,
    Files,
    History,
    Usage,
    Cancel,
    /// Back to before the newest turn.
    Undo,
    /// Back to a step (`TURN` or `TURN.SEQ`, as typed).
    Rewind(String),
    Exit,
    Unknown,
}

/// The command `line` is, if it is one (`/` first; `//` sends a message starting with `/`).
pub(crate) fn parse(line: &str) -> Option<Slash> {
    let rest = line.strip_prefix('/')?;
    if rest.starts_with('/') {
        return None;
    }
    let mut words = rest.split_whitespace();
    Some(match words.next().unwrap_or("") {
        "help" | "?" => Slash::Help,
        "files" => Slash::Files,
        "history" => Slash::History,
        "usage" => Slash::Usage,
        "cancel" => Slash::Cancel,
        "undo" => Slash::Undo,
        "rewind" => Slash::Rewind(words.next().unwrap_or("").to_owned()),
        "exit" | "quit" => Slash::Exit,
        _ => Slash::Unknown,
    })
}

const HELP: &str = "\
/files     the workspace's files with their sizes
/history   the conversation so far
/usage     tokens used, per turn and in all
/cancel    cancel the turn that is running (Ctrl-C does too)
/undo      back to before the last turn: the workspace and the conversation as they were
/rewind S  back to step S: TURN (before that turn, e.g. 3) or TURN.SEQ (after event SEQ
           of that turn's run, e.g. 3.7, as `toren events RUN` numbers them); /history
           shows the turns and their runs
/exit      leave (Ctrl-D too); the session stays, continue it with `toren chat NAME`
A line ending in \\ continues on the next line.";

impl Chat {
    pub(crate) async fn slash(&self, command: Slash) -> Result<(), Failure> {
        match command {
            Slash::Help | Slash::Unknown => say!("{HELP}"),
            Slash::Files => self.files(),
            Slash::History => self.history().await?,
            Slash::Usage => self.usage().await?,
            Slash::Cancel => match self.running_turn().await? {
                Some(run) => {
                    self.service
                        .cancel(
                            &run,
                            Some("cancelled from the chat".to_owned()),
                            self.actor(),
                        )
                        .await
                        .map_err(Failure::failed)?;
                    say!("cancelled run {run}");
                }
                None => say!("no turn is running"),
            },
            Slash::Undo => self.undo().await?,
            Slash::Rewind(step) => self.rewind(&step).await?,
            Slash::Exit => {}
        }
        Ok(())
    }

    async fn undo(&self) -> Result<(), Failure> {
        let done = self
            .service
            .undo_session(&self.session, self.actor(), &self.holder())
            .await;
        self.rewound(done)
    }

    async fn rewind(&self, step: &str) -> Result<(), Failure> {
        let step: SessionStep = match step.parse() {
            Ok(step) => step,
            Err(why) => {
                say!("{why}");
                return Ok(());
            }
        };
        let done = self
            .service
            .rewind_session(&self.session, step, self.actor(), &self.holder())
            .await;
        self.rewound(done)
    }

    /// Says what a rewind did; a refused one is said and the chat goes on.
    fn rewound(
        &self,
        done: Result<toren_runtime::SessionRewound, toren_runtime::Error>,
    ) -> Result<(), Failure> {
        match done {
            Ok(done) => {
                say!(
                    "{}",
                    crate::commands::rewind::session_note(&self.session.name, &done)
                );
                Ok(())
            }
            Err(e) if e.is_refusal() || matches!(e, toren_runtime::Error::Worker(_)) => {
                say!("{}", visible_lines(&e.to_string()));
                Ok(())
            }
            Err(e) => Err(Failure::failed(e)),
        }
    }

    fn files(&self) {
        let Some(root) = self
            .session
            .policy
            .as_ref()
            .and_then(|p| p.workspace.clone())
        else {
            say!("this agent has no workspace");
            return;
        };
        let mut entries = Vec::new();
        walk(Path::new(&root), Path::new(""), &mut entries, 0);
        if entries.is_empty() {
            say!("the workspace {} is empty", visible(&root));
            return;
        }
        say!("workspace {}", visible(&root));
        for (path, size) in entries.iter().take(500) {
            println!("{size:>10}  {}", visible(&path.display().to_string()));
        }
        if entries.len() > 500 {
            say!("… and {} more", entries.len() - 500);
        }
    }

    async fn history(&self) -> Result<(), Failure> {
        let conversation = self
            .service
            .conversation(&self.session)
            .await
            .map_err(Failure::failed)?;
        // Where each turn's steps are: `/rewind N` before it, `/rewind N.SEQ` after event
        // SEQ of its run (`toren events RUN`).
        let line = self
            .service
            .session_line(&self.session)
            .await
            .map_err(Failure::failed)?;
        let mut shown = None;
        for (turn, message) in conversation {
            if shown != Some(turn) {
                shown = Some(turn);
                if let Some(t) = line.iter().find(|t| t.turn == turn) {
                    say!(
                        "turn {turn}: run {} (`/rewind {turn}` goes back to before it, `/rewind {turn}.SEQ` to after event SEQ of `toren events {}`)",
                        t.run_id,
                        t.run_id
                    );
                }
            }
            match message {
                Message::User { text } => println!("[{turn}] you> {}", visible_lines(&text)),
                Message::Assistant(a) => {
                    if !a.text.is_empty() {
                        println!("[{turn}] {}", visible_lines(&a.text));
                    }
                    for call in &a.tool_calls {
                        println!("[{turn}]   » {} {}", visible(&call.name), visible(&call.id));
                    }
                }
                Message::ToolResults { results } => {
                    for r in results {
                        let mark = if r.is_error { "✗" } else { "✓" };
                        println!(
                            "[{turn}]   {mark} {} ({})",
                            visible(&r.call_id),
                            toren_display::count(r.content.lines().count(), "line", "lines")
                        );
                    }
                }
            }
        }
        Ok(())
    }

    async fn usage(&self) -> Result<(), Failure> {
        let view = self
            .service
            .session_view(&self.session.name)
            .await
            .map_err(Failure::failed)?;
        let (mut input, mut output) = (0_u64, 0_u64);
        for turn in &view.turns {
            let events = self
                .service
                .events(&turn.run_id, 0)
                .await
                .map_err(Failure::failed)?;
            let (i, o) = events
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::ModelResponded(m) => {
                        Some((m.usage.input_tokens, m.usage.output_tokens))
                    }
                    _ => None,
                })
                .fold((0, 0), |(a, b), (i, o)| (a + i, b + o));
            println!("turn {:>3}: {i} tokens in, {o} out", turn.turn);
            input += i;
            output += o;
        }
        println!("session:  {input} tokens in, {output} out");
        Ok(())
    }
}

/// The files under `dir` (not following symbolic links), with their sizes.
fn walk(dir: &Path, rel: &Path, out: &mut Vec<(std::path::PathBuf, u64)>, depth: usize) {
    if depth > 20 || out.len() > 5000 {
        return;
    }
    let Ok(read) = std::fs::read_dir(dir.join(rel)) else {
        return;
    };
    let mut names: Vec<_> = read.flatten().collect();
    names.sort_by_key(std::fs::DirEntry::file_name);
    for entry in names {
        let path = rel.join(entry.file_name());
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            walk(dir, &path, out, depth + 1);
        } else {
            out.push((path, meta.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_parse_and_double_slash_sends_a_message() {
        assert_eq!(parse("/files"), Some(Slash::Files));
        assert_eq!(parse("/exit"), Some(Slash::Exit));
        assert_eq!(parse("/undo"), Some(Slash::Undo));
        assert_eq!(parse("/rewind 2.5"), Some(Slash::Rewind("2.5".into())));
        assert_eq!(parse("/what"), Some(Slash::Unknown));
        assert_eq!(parse("//etc/hosts is odd"), None);
        assert_eq!(parse("hello /files"), None);
    }
}
