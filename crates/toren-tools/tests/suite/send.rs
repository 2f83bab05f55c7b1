//! `send_to_channel` against a real workspace and a real terminal channel: the file reaches
//! the downloads directory byte for byte with what is journaled, a re-run call is not sent
//! twice, a run without a channel and every file the tool cannot send are tool errors the
//! model can act on.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_channel::{Announcement, TerminalChannel};
use toren_protocol::{MessageDelivered, RunId, ToolCall};
use toren_tools::{Executed, RunChannel, ToolOutcome, ToolSettings};

use super::common::{Fixture, err};

/// A workspace, and a terminal channel into a temp downloads directory.
struct Send {
    f: Fixture,
    _downloads: tempfile::TempDir,
    dir: PathBuf,
    channel: RunChannel,
    heard: Arc<Mutex<Vec<String>>>,
}

impl Send {
    async fn new() -> Self {
        Self::with_settings(ToolSettings::default()).await
    }

    async fn with_settings(settings: ToolSettings) -> Self {
        let downloads = tempfile::tempdir().unwrap();
        let dir = downloads.path().join("chat");
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&heard);
        let terminal =
            TerminalChannel::new(&dir).announce_with(Arc::new(move |a: &Announcement| {
                sink.lock().unwrap().push(a.line())
            }));
        Self {
            f: Fixture::with_settings(settings).await,
            _downloads: downloads,
            dir,
            channel: RunChannel {
                run_id: RunId::new(),
                channel: Arc::new(terminal),
            },
            heard,
        }
    }

    async fn send(&self, call_id: &str, arguments: Value) -> Executed {
        let call = ToolCall::new(call_id, "send_to_channel", arguments);
        self.f
            .kit
            .execute_with(self.f.sandbox.as_ref(), &call, Some(&self.channel))
            .await
            .unwrap()
    }

    /// The downloads directory's visible files.
    fn downloads(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }
}

fn sha256sum(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[tokio::test]
async fn a_file_reaches_the_downloads_byte_for_byte_as_journaled() {
    let s = Send::new().await;
    let bytes: Vec<u8> = (0..=255u8).rev().cycle().take(5000).collect();
    s.f.write("out/data.bin", &bytes);
    let got = s
        .send(
            "toolu_1",
            json!({"path": "out/data.bin", "caption": "the samples"}),
        )
        .await;
    let file = s.dir.join("data.bin");
    assert_eq!(
        got,
        Executed {
            outcome: ToolOutcome::success(
                "sent `out/data.bin` (5000 bytes, document) to the person through the \
                 terminal channel: saved as `data.bin` in the person's downloads folder."
            ),
            delivered: Some(MessageDelivered {
                call_id: "toolu_1".to_owned(),
                channel: "terminal".to_owned(),
                path: "out/data.bin".to_owned(),
                bytes: 5000,
                sha256: sha256sum(&s.f.path("out/data.bin")),
                kind: "document".to_owned(),
                caption: Some("the samples".to_owned()),
                receipt: file.display().to_string(),
                repeated: false,
            }),
        }
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_eq!(sha256sum(&file), got.delivered.unwrap().sha256);
    assert_eq!(s.heard.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn images_are_sent_as_images_and_names_are_numbered() {
    let s = Send::new().await;
    s.f.write(
        "plot.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0",
    );
    s.f.write("sub/plot.png", b"not really a png");
    let first = s.send("c1", json!({"path": "plot.png"})).await;
    let second = s.send("c2", json!({"path": "sub/plot.png"})).await;
    assert_eq!(first.delivered.unwrap().kind, "image");
    let second = second.delivered.unwrap();
    assert_eq!(second.kind, "document");
    assert_eq!(
        second.receipt,
        s.dir.join("plot-1.png").display().to_string()
    );
    assert_eq!(s.downloads(), ["plot-1.png", "plot.png"]);
}

#[tokio::test]
async fn a_call_run_again_is_not_sent_twice() {
    let s = Send::new().await;
    s.f.write("report.md", "# Report\n");
    let first = s.send("toolu_5", json!({"path": "report.md"})).await;
    // The same call, run again after an interruption between the delivery and its
    // journal entry.
    let again = s.send("toolu_5", json!({"path": "report.md"})).await;
    assert_eq!(s.downloads(), ["report.md"]);
    assert_eq!(s.heard.lock().unwrap().len(), 1, "announced once");
    let (first, again_delivered) = (first.delivered.unwrap(), again.delivered.unwrap());
    assert_eq!(
        again_delivered,
        MessageDelivered {
            repeated: true,
            ..first
        }
    );
    assert!(
        again.outcome.output.ends_with(
            "It had already been sent before this call was interrupted, and was not sent again."
        ),
        "{}",
        again.outcome.output
    );
}

#[tokio::test]
async fn a_run_without_a_channel_is_told_to_give_the_path() {
    let s = Send::new().await;
    s.f.write("report.md", "# Report\n");
    let refusal = err(
        "this run has no chat to send files to; tell the person the file's path in the \
         workspace instead (`report.md`)",
    );
    // Through the channel-less entry point, as `toren run` drives it...
    assert_eq!(
        s.f.call("send_to_channel", json!({"path": "report.md"}))
            .await,
        refusal
    );
    // ...and through the other one with no channel.
    let call = ToolCall::new("c1", "send_to_channel", json!({"path": "report.md"}));
    let got =
        s.f.kit
            .execute_with(s.f.sandbox.as_ref(), &call, None)
            .await
            .unwrap();
    assert_eq!(got, Executed::from(refusal));
}

#[tokio::test]
async fn what_cannot_be_sent_is_a_tool_error_and_nothing_arrives() {
    let s = Send::with_settings(ToolSettings {
        file_size_limit: 100,
        ..ToolSettings::default()
    })
    .await;
    s.f.write("big.bin", vec![7u8; 101]);
    s.f.write("dir/a.txt", "a");
    std::fs::write(s.f.path("../outside.txt"), "secret").unwrap();
    symlink("../outside.txt", s.f.path("escape")).unwrap();
    symlink("/etc/passwd", s.f.path("passwd")).unwrap();
    nix::unistd::mkfifo(
        &s.f.path("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let cases = [
        (json!({"path": "missing.txt"}), "does not exist"),
        (json!({"path": "big.bin"}), "compress it"),
        (json!({"path": "dir"}), "archive a directory first"),
        (json!({"path": "../outside.txt"}), "outside"),
        (json!({"path": "/etc/passwd"}), "outside"),
        (json!({"path": "escape"}), "outside"),
        (json!({"path": "passwd"}), "outside"),
        (json!({"path": "fifo"}), "named pipe (FIFO)"),
        (json!({"path": ""}), "`path` is empty"),
        (json!({"file": "a.txt"}), "send_to_channel"),
        (
            json!({"path": "dir/a.txt", "caption": "x".repeat(1025)}),
            "`caption` is 1025 characters, more than the limit of 1024",
        ),
    ];
    for (i, (args, says)) in cases.iter().enumerate() {
        let got = s.send(&format!("c{i}"), args.clone()).await;
        assert!(got.outcome.is_error, "{args}: {got:?}");
        assert_eq!(got.delivered, None, "{args}");
        assert!(
            got.outcome
                .output
                .to_lowercase()
                .contains(&says.to_lowercase()),
            "{args}: {}",
            got.outcome.output
        );
    }
    assert_eq!(s.downloads(), Vec::<String>::new());
}
