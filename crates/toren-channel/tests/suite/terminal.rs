//! The terminal channel against a real downloads directory: the file arrives byte for byte
//! with its digest, private modes, numbered names instead of overwriting, one announcement
//! rendered safely, and a call delivered before is not copied again.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use toren_channel::{
    Announcement, Channel, ChannelError, Delivered, Delivery, FileKind, ImageFormat,
    TerminalChannel,
};
use toren_protocol::RunId;

use super::kind::PNG;

/// A terminal channel over a temp directory that keeps its announcements.
struct Terminal {
    _root: tempfile::TempDir,
    dir: PathBuf,
    channel: TerminalChannel,
    heard: Arc<Mutex<Vec<Announcement>>>,
}

impl Terminal {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("Downloads/toren/chat");
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&heard);
        let channel =
            TerminalChannel::new(&dir).announce_with(Arc::new(move |a: &Announcement| {
                sink.lock().unwrap().push(a.clone())
            }));
        Self {
            _root: root,
            dir,
            channel,
            heard,
        }
    }

    fn heard(&self) -> Vec<Announcement> {
        self.heard.lock().unwrap().clone()
    }

    /// The directory's visible files, sorted.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The SHA-256 of a file as `sha256sum` computes it (not the crate's own code).
fn sha256sum(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[tokio::test]
async fn a_file_arrives_byte_for_byte_private_and_announced() {
    let t = Terminal::new();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let delivery = Delivery::new(
        RunId::new(),
        "toolu_1",
        "data.bin",
        bytes.clone(),
        Some("the raw samples".to_owned()),
    );
    let delivered = t.channel.deliver(&delivery).await.unwrap();
    let path = t.dir.join("data.bin");
    assert_eq!(
        delivered,
        Delivered {
            receipt: path.display().to_string(),
            summary: "saved as `data.bin` in the person's downloads folder".to_owned(),
            repeated: false,
        }
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(sha256sum(&path), delivery.sha256());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&t.dir), 0o700);
    assert_eq!(t.files(), ["data.bin"]);
    // Nothing temporary is left beside it, only the ledger.
    let hidden: Vec<String> = std::fs::read_dir(&t.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert_eq!(hidden, [".toren-deliveries.jsonl"]);
    assert_eq!(mode(&t.dir.join(".toren-deliveries.jsonl")), 0o600);
    assert_eq!(
        t.heard(),
        [Announcement {
            path: path.clone(),
            bytes: 70_000,
            kind: FileKind::Document,
            caption: Some("the raw samples".to_owned()),
        }]
    );
    assert_eq!(
        t.heard()[0].line(),
        format!(
            "file from the agent: {} (68.4 KiB, document) — the raw samples",
            path.display()
        )
    );
}

#[tokio::test]
async fn an_existing_name_gets_a_number_and_is_never_overwritten() {
    let t = Terminal::new();
    std::fs::create_dir_all(&t.dir).unwrap();
    std::fs::write(t.dir.join("report.pdf"), b"the person's own report").unwrap();
    let run = RunId::new();
    let mut receipts = Vec::new();
    for (call, body) in [("c1", "first"), ("c2", "second")] {
        let delivery = Delivery::new(run.clone(), call, "report.pdf", body.into(), None);
        receipts.push(t.channel.deliver(&delivery).await.unwrap().receipt);
    }
    assert_eq!(
        receipts,
        [
            t.dir.join("report-1.pdf").display().to_string(),
            t.dir.join("report-2.pdf").display().to_string()
        ]
    );
    assert_eq!(t.files(), ["report-1.pdf", "report-2.pdf", "report.pdf"]);
    assert_eq!(
        std::fs::read(t.dir.join("report.pdf")).unwrap(),
        b"the person's own report"
    );
    assert_eq!(std::fs::read(t.dir.join("report-1.pdf")).unwrap(), b"first");
    assert_eq!(
        std::fs::read(t.dir.join("report-2.pdf")).unwrap(),
        b"second"
    );
}

#[tokio::test]
async fn a_call_delivered_before_is_answered_without_a_second_copy() {
    let t = Terminal::new();
    let run = RunId::new();
    let delivery = Delivery::new(run.clone(), "toolu_7", "chart.png", PNG.to_vec(), None);
    let first = t.channel.deliver(&delivery).await.unwrap();
    // The same call again (a re-run after a crash before its journal entry), even from a
    // new channel object as a resumed process would have.
    let again = TerminalChannel::new(&t.dir)
        .announce_with(Arc::new(|_: &Announcement| panic!("announced twice")))
        .deliver(&delivery)
        .await
        .unwrap();
    assert_eq!(
        again,
        Delivered {
            repeated: true,
            ..first.clone()
        }
    );
    assert_eq!(t.files(), ["chart.png"]);
    assert_eq!(t.heard().len(), 1);
    assert_eq!(t.heard()[0].kind, FileKind::Image(ImageFormat::Png));
    // Another call of the run, or the same call id in another run, is a new delivery.
    let other_call = Delivery::new(run, "toolu_8", "chart.png", PNG.to_vec(), None);
    let other_run = Delivery::new(RunId::new(), "toolu_7", "chart.png", PNG.to_vec(), None);
    assert!(!t.channel.deliver(&other_call).await.unwrap().repeated);
    assert!(!t.channel.deliver(&other_run).await.unwrap().repeated);
    assert_eq!(t.files(), ["chart-1.png", "chart-2.png", "chart.png"]);
}

#[tokio::test]
async fn what_the_agent_chose_is_rendered_and_made_safe() {
    let t = Terminal::new();
    let delivery = Delivery::new(
        RunId::new(),
        "c1",
        ".evil\u{1b}]0;pwned\u{7}.txt",
        b"x".to_vec(),
        Some("done\u{1b}[2J\u{202e}gnp.exe".to_owned()),
    );
    let delivered = t.channel.deliver(&delivery).await.unwrap();
    // The name lost its leading dot and its controls; the caption is shown with markers.
    assert_eq!(t.files(), ["evil_]0;pwned_.txt"]);
    assert!(delivered.receipt.ends_with("evil_]0;pwned_.txt"));
    let line = t.heard()[0].line();
    assert!(!line.chars().any(char::is_control), "{line:?}");
    assert!(line.ends_with("— done⟨ESC⟩[2J⟨U+202E⟩gnp.exe"), "{line}");
}

#[tokio::test]
async fn a_downloads_directory_that_cannot_be_made_is_an_io_error() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("file"), b"in the way").unwrap();
    let channel = TerminalChannel::new(root.path().join("file/chat"));
    let delivery = Delivery::new(RunId::new(), "c1", "a.txt", b"x".to_vec(), None);
    let err = channel.deliver(&delivery).await.unwrap_err();
    assert!(matches!(err, ChannelError::Io { .. }), "{err}");
    assert!(err.to_string().contains("downloads directory"), "{err}");
    assert!(err.hint().contains("TOREN_DOWNLOADS"));
}
