//! Paths (I-10): `read_file`, `write_file` and `edit_file` run on the host (under e2b they
//! resolve each path in the VM, and the test reads the VM's disk), so every way a
//! path can lead out of the workspace is tried — `..`, absolute paths, `~`, empty and NUL
//! paths, very long ones, symlinks the agent makes with bash (to `/`, to `/etc/passwd`, to a
//! host file that does not even exist inside the sandbox, chains, loops, a symlinked
//! directory in the middle, a dangling link a write would follow), hard links, non-UTF-8
//! names. Each escape is refused with a clear error and nothing outside is read or changed;
//! ordinary subdirectories still work. Paths naming the sandbox's own view (`/workspace/`,
//! `/workspace/..`) get messages that never suggest a path leading out. Special files the
//! agent makes — a named pipe, a unix socket (bound with python3), a symlink to each — are
//! refused by every tool as what they are, and the run goes on; a character device the
//! agent cannot even make.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::{self, Call, bash, call};
use super::{Backend, report};
use crate::suite::common::read;

/// What a probe must come back with.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Refused as leading outside the workspace.
    Escape,
    /// Refused as an invalid path, with this reason.
    Invalid(&'static str),
    /// Another error, whose message contains this.
    Error(&'static str),
    /// Success, whose message contains this.
    Ok(&'static str),
}

const VICTIM_TEXT: &str = "victim: the original text\n";
const MARKER: &str = "zz-not-in-any-file";

fn read_file(path: &str) -> Call {
    call("read_file", json!({ "path": path }))
}

fn write_file(path: &str) -> Call {
    call(
        "write_file",
        json!({ "path": path, "content": "written by the agent\n" }),
    )
}

fn edit_file(path: &str, old: &str) -> Call {
    call(
        "edit_file",
        json!({ "path": path, "old_string": old, "new_string": "EDITED" }),
    )
}

/// All three tools against `path`, expecting `expect` from each.
fn every_tool(probes: &mut Vec<(Call, Expect)>, path: &str, expect: Expect) {
    probes.push((read_file(path), expect));
    probes.push((write_file(path), expect));
    probes.push((edit_file(path, "victim"), expect));
}

/// The bash call that plants the attacks inside the workspace; `outside` is a host
/// directory holding `victim.txt`.
fn setup(outside: &Path) -> Call {
    let out = outside.display();
    bash(&format!(
        "set -e
         ln -s / root_link
         ln -s /etc/passwd passwd_link
         ln -s root_link chain1; ln -s chain1 chain2; ln -s chain2 chain3
         mkdir -p real inside; ln -s / real/mid
         ln -s ../../.. up_link
         ln -s {out}/victim.txt victim_link
         ln -s {out}/created-by-escape.txt dangling
         ln -s {out} victim_dir_link
         ln -s loop_b loop_a; ln -s loop_a loop_b
         ln -s /proc/self/root proc_root
         mkfifo fifo
         python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"
         ln -s fifo fifo_link; ln -s sock sock_link
         echo 'inner text' > inside/file.txt
         ln -s inside/file.txt ok_link; ln -s inside ok_dir_link
         touch $'bad\\xffname'; ln -s / $'esc\\xff'
         set +e
         ln /etc/passwd hard_passwd 2>/dev/null; echo hard-link-to-etc=$?
         ln {out}/victim.txt hard_victim 2>/dev/null; echo hard-link-to-victim=$?
         mknod chardev c 1 3 2>/dev/null; echo mknod=$?
         echo planted"
    ))
}

fn probes(outside: &Path) -> Vec<(Call, Expect)> {
    let victim = outside.join("victim.txt").display().to_string();
    let mut probes = Vec::new();
    // Escapes, each tried with every tool; the target is the host's victim file.
    let escapes = [
        "../../../outside/victim.txt".to_owned(),
        "a/../../../../outside/victim.txt".to_owned(),
        "inside/../../../../outside/victim.txt".to_owned(),
        victim.clone(),
        "victim_link".to_owned(),
        "victim_dir_link/victim.txt".to_owned(),
        format!("root_link{victim}"),
        format!("chain3{victim}"),
        format!("real/mid{victim}"),
        "up_link/outside/victim.txt".to_owned(),
        format!("proc_root{victim}"),
        "passwd_link".to_owned(),
        "root_link/etc/passwd".to_owned(),
    ];
    for path in &escapes {
        every_tool(&mut probes, path, Expect::Escape);
    }
    // Reads of the host's files through the agent's links.
    for path in [
        "chain2/etc/shadow",
        "proc_root/etc/hostname",
        "/etc/passwd",
        "/proc/self/environ",
    ] {
        probes.push((read_file(path), Expect::Escape));
    }
    // A write that would follow a dangling link, or create a file in an outside directory.
    probes.push((write_file("dangling"), Expect::Escape));
    probes.push((write_file("victim_dir_link/new.txt"), Expect::Escape));
    probes.push((write_file("victim_dir_link/sub/new.txt"), Expect::Escape));
    // The sandbox's own mount point is not a way out either.
    every_tool(
        &mut probes,
        "/workspace/../../outside/victim.txt",
        Expect::Escape,
    );
    // Malformed paths.
    let long_path = "a/".repeat(3000) + "x";
    let long_name = "n".repeat(300);
    for (path, why) in [
        ("", "the path is empty"),
        ("a\0b", "NUL byte"),
        (long_path.as_str(), "too long"),
        (long_name.as_str(), "too long"),
        ("loop_a", "too many levels of symbolic links"),
    ] {
        every_tool(&mut probes, path, Expect::Invalid(why));
    }
    for path in [".", "..", "./..", "inside/.."] {
        let expect = if path == "." || path == "inside/.." {
            Expect::Error("is a directory")
        } else {
            Expect::Escape
        };
        probes.push((read_file(path), expect));
        probes.push((write_file(path), expect));
    }
    // Special files: refused as what they are, never opened, never a host fault.
    for (path, kind) in [
        ("fifo", "`fifo` is a named pipe (FIFO), not a regular file"),
        ("sock", "`sock` is a unix socket, not a regular file"),
        (
            "fifo_link",
            "`fifo_link` is a symbolic link to a named pipe (FIFO), not a regular file",
        ),
        (
            "sock_link",
            "`sock_link` is a symbolic link to a unix socket, not a regular file",
        ),
    ] {
        every_tool(&mut probes, path, Expect::Error(kind));
    }
    // The sandbox's view of the workspace: a hint where it names something inside, an
    // escape where it does not.
    let root_itself = "`/workspace` is the workspace root itself, a directory";
    for (path, expect) in [
        ("/workspace", Expect::Invalid(root_itself)),
        ("/workspace/", Expect::Invalid(root_itself)),
        (
            "/workspace/inside/file.txt",
            Expect::Invalid("write `inside/file.txt` instead"),
        ),
        (
            "/workspace/inside/../ok_link",
            Expect::Invalid("write `ok_link` instead"),
        ),
        ("/workspace/..", Expect::Escape),
        ("/workspace/../etc/passwd", Expect::Escape),
        ("/workspace/inside/../../etc/passwd", Expect::Escape),
        ("//workspace/../../etc/passwd", Expect::Escape),
        ("/workspaces/x", Expect::Escape),
        ("./", Expect::Error("`./` is a directory, not a file")),
    ] {
        probes.push((read_file(path), expect));
        probes.push((write_file(path), expect));
    }
    probes.push((read_file("hard_passwd"), Expect::Error("does not exist")));
    probes.push((
        read_file("bad\u{fffd}name"),
        Expect::Error("does not exist"),
    ));
    probes.push((
        read_file("~/.aws/credentials"),
        Expect::Error("does not exist"),
    ));
    probes.push((edit_file("victim_link", MARKER), Expect::Escape));
    // Inside the workspace everything still works, through subdirectories and links.
    probes.push((
        write_file("deep/a/b/c.txt"),
        Expect::Ok("created `deep/a/b/c.txt`"),
    ));
    probes.push((
        read_file("deep/a/b/c.txt"),
        Expect::Ok("written by the agent"),
    ));
    probes.push((
        edit_file("deep/a/b/c.txt", "agent"),
        Expect::Ok("replaced 1 occurrence"),
    ));
    probes.push((read_file("ok_link"), Expect::Ok("inner text")));
    probes.push((write_file("ok_dir_link/new.txt"), Expect::Ok("created")));
    probes.push((write_file("inside/../back.txt"), Expect::Ok("created")));
    probes.push((write_file("~/.aws/credentials"), Expect::Ok("created")));
    probes.push((write_file("..\\x"), Expect::Ok("created")));
    probes.push((write_file("\u{2025}/x"), Expect::Ok("created")));
    probes
}

fn check(probe: &Call, expect: Expect, is_error: bool, output: &str) {
    // No message ever suggests a path that leads out.
    assert!(
        !output.contains("write `..") && !output.contains("write `/"),
        "{probe:?} suggests an escape:\n{output}"
    );
    let ok = match expect {
        Expect::Escape => is_error && output.contains("leads outside the workspace"),
        Expect::Invalid(why) => {
            is_error && output.starts_with("invalid path") && output.contains(why)
        }
        Expect::Error(text) => is_error && output.contains(text),
        Expect::Ok(text) => !is_error && output.contains(text),
    };
    assert!(
        ok,
        "{probe:?}: expected {expect:?}, got (error: {is_error}):\n{output}"
    );
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub(crate) fn suite(backend: &Backend) {
    let toren = harness::toren_for(backend);
    let outside = toren.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), VICTIM_TEXT).unwrap();
    let home_credentials = toren.dir.path().join("home/.aws/credentials");
    std::fs::create_dir_all(home_credentials.parent().unwrap()).unwrap();
    std::fs::write(&home_credentials, "host credentials\n").unwrap();
    let passwd_before = std::fs::read("/etc/passwd").unwrap();

    let probes = probes(&outside);
    let mut calls = vec![setup(&outside)];
    calls.extend(probes.iter().map(|(c, _)| c.clone()));
    harness::agent(&toren, "walker", "  approval: never\n", &[calls]);
    let ran = harness::run(&toren, "walker");
    ran.assert_completed();

    let planted = &ran.result(0).output;
    assert!(planted.contains("planted"), "{planted}");
    // Hard links across the sandbox's mounts cannot be made at all.
    assert!(planted.contains("hard-link-to-etc=1"), "{planted}");
    assert!(planted.contains("hard-link-to-victim=1"), "{planted}");
    // Nor can the agent make a device node for the tools to open.
    assert!(planted.contains("mknod=1"), "{planted}");
    let mut count = 3;

    for (i, (probe, expect)) in probes.iter().enumerate() {
        let result = ran.result(i + 1);
        check(probe, *expect, result.is_error, &result.output);
        count += 1;
    }

    // Nothing outside was changed or created.
    assert_eq!(read(&outside.join("victim.txt")), VICTIM_TEXT);
    assert_eq!(listing(&outside), vec!["victim.txt"]);
    assert_eq!(read(&home_credentials), "host credentials\n");
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd_before);
    count += 4;

    // The writes that stayed inside landed inside.
    let ws = harness::workspace(&toren, &ran.run);
    assert_eq!(read(&ws.join("deep/a/b/c.txt")), "written by the EDITED\n");
    assert_eq!(read(&ws.join("inside/new.txt")), "written by the agent\n");
    assert_eq!(
        read(&ws.join("~/.aws/credentials")),
        "written by the agent\n"
    );
    for name in ["back.txt", "..\\x", "\u{2025}"] {
        assert!(ws.join(name).exists(), "{name} inside the workspace");
    }
    count += 1;
    // The special files are still there, untouched.
    use std::os::unix::fs::FileTypeExt;
    let kind = |name: &str| {
        std::fs::symlink_metadata(ws.join(name))
            .unwrap()
            .file_type()
    };
    assert!(kind("fifo").is_fifo() && kind("sock").is_socket());
    count += 1;
    report(backend, "paths", count);
}
