//! The chat's input: the line editor on a terminal (rustyline on a thread of its own, since
//! it blocks; history on disk; a line ending in `\` continues on the next) and stdin's
//! lines otherwise.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::anyhow;

use crate::exit::Failure;

pub(super) type Editor = rustyline::Editor<(), rustyline::history::FileHistory>;

pub(super) fn editor(history: &Path) -> Result<Editor, Failure> {
    let mut editor = Editor::new()
        .map_err(|e| Failure::failed(anyhow!(e).context("cannot start the line editor")))?;
    if history.exists() {
        let _ = editor.load_history(history);
    }
    Ok(editor)
}

/// `TOREN_HOME/chat/<session>.history`, in a private directory.
pub(super) fn history_file(home: &Path, session: &str) -> PathBuf {
    let dir = home.join("chat");
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir);
    dir.join(format!("{session}.history"))
}

/// One message from the line editor (a line ending in `\` continues on the next);
/// `None` at Ctrl-D.
pub(super) async fn read_message(editor: Arc<Mutex<Editor>>) -> Result<Option<String>, Failure> {
    tokio::task::spawn_blocking(move || {
        let mut editor = editor
            .lock()
            .map_err(|_| Failure::failed(anyhow!("the line editor broke")))?;
        let mut message = String::new();
        loop {
            let prompt = if message.is_empty() { "you> " } else { "...> " };
            match editor.readline(prompt) {
                Ok(line) => match line.strip_suffix('\\') {
                    Some(part) => {
                        message.push_str(part);
                        message.push('\n');
                    }
                    None => {
                        message.push_str(&line);
                        return Ok(Some(message));
                    }
                },
                // Ctrl-C at the prompt clears what was typed.
                Err(rustyline::error::ReadlineError::Interrupted) => message.clear(),
                Err(rustyline::error::ReadlineError::Eof) => return Ok(None),
                Err(e) => return Err(Failure::failed(anyhow!(e).context("cannot read input"))),
            }
        }
    })
    .await
    .map_err(|e| Failure::failed(anyhow!(e)))?
}

/// Stdin's lines, read on a thread of their own (a read is blocking).
pub(super) fn stdin_lines() -> tokio::sync::mpsc::Receiver<std::io::Result<String>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let spawned = std::thread::Builder::new()
        .name("chat-stdin".into())
        .spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::stdin().lock().lines() {
                let failed = line.is_err();
                if tx.blocking_send(line).is_err() || failed {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read stdin: {e}");
    }
    rx
}
