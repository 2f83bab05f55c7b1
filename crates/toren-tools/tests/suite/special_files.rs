//! Special files the agent can make in its workspace — a named pipe (`mkfifo`), a unix
//! socket it bound, a character device (only root can make one), and a symlink to each —
//! against every file tool. Each is a clear tool error naming what is there, never a host
//! fault and never a hang; the entry is left as it was.

use std::os::unix::fs::{FileTypeExt, symlink};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{Fixture, err};

#[tokio::test]
async fn every_file_tool_refuses_every_special_file_by_name() {
    let f = Fixture::new().await;
    // Made the way the agent would, inside the sandbox.
    let made = f
        .call(
            "bash",
            json!({"command": "mkfifo fifo && python3 -c \"import socket; \
                   socket.socket(socket.AF_UNIX).bind('socket')\" && echo made"}),
        )
        .await;
    assert!(made.output.contains("made"), "{}", made.output);
    let mut kinds = vec![("fifo", "named pipe (FIFO)"), ("socket", "unix socket")];
    if nix::unistd::geteuid().is_root() {
        use nix::sys::stat::{Mode, SFlag, makedev, mknod};
        let null = f.path("null");
        mknod(
            &null,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(1, 3),
        )
        .unwrap();
        kinds.push(("null", "character device"));
    } else {
        eprintln!("not root: no character device (the agent cannot make one either)");
    }
    for (name, _) in &kinds {
        symlink(name, f.path(&format!("{name}_link"))).unwrap();
    }

    let started = Instant::now();
    for (name, kind) in &kinds {
        for (path, is) in [
            ((*name).to_owned(), "is"),
            (format!("{name}_link"), "is a symbolic link to"),
        ] {
            let refusal = err(&format!(
                "`{path}` {is} a {kind}, not a regular file; read_file, write_file and \
                 edit_file work only on regular files (use bash to work with it, e.g. \
                 `ls -l {path}`)"
            ));
            let calls = [
                ("read_file", json!({"path": path})),
                ("write_file", json!({"path": path, "content": "written"})),
                (
                    "edit_file",
                    json!({"path": path, "old_string": "a", "new_string": "b"}),
                ),
            ];
            for (tool, args) in calls {
                assert_eq!(f.call(tool, args).await, refusal, "{tool} {path}");
            }
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "nothing blocked"
    );
    let kind = |name: &str| std::fs::symlink_metadata(f.path(name)).unwrap().file_type();
    assert!(kind("fifo").is_fifo());
    assert!(kind("socket").is_socket());
    assert!(kind("fifo_link").is_symlink());
}
