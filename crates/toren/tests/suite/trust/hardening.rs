//! What the agent leaves on the host, and Toren's own files. The agent runs as Toren's user,
//! so it can open its workspace to everyone (`chmod 777 /workspace`), leave set-uid
//! programs and world-writable directories in it; other local users still cannot enter it,
//! whatever the sandbox root's mode, because it sits in the run's private directory. Inside
//! the sandbox the workspace is mounted `nosuid,nodev` (local; docker cannot mount a bind
//! so, and there no-new-privileges, no capabilities and no device nodes stand in), and no
//! device node can be made. `TOREN_HOME` is created 0700 and the event log — which holds
//! everything the agent saw — 0600, its `-wal` and `-shm` files too. Under e2b what the
//! agent leaves is on the VM's disk: the run's host directory stays empty, and inside the
//! command runs without capabilities and cannot make a device node.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::harness::{self, bash};
use super::{Backend, note, report};

/// A user who is not Toren's.
const OTHER_UID: u32 = 65534;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

pub(crate) fn suite(backend: &Backend) {
    let toren = harness::toren_for(backend);
    // An operator's sandbox root that anyone may enter (as /tmp-like roots are).
    let root = toren.dir.path().join("shared-root");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(toren.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let toren = toren.env("TOREN_SANDBOX_ROOT", root.to_str().unwrap());
    let calls = vec![bash(
        "chmod 777 /workspace; cp /bin/sh suid-sh; chmod 4755 suid-sh; mkdir -m 777 open; \
         echo secret > open/data; chmod 666 open/data; ls -ld /workspace suid-sh | cut -c1-10; \
         mknod dev c 1 3 2>/dev/null; echo mknod=$?; \
         grep ' /workspace ' /proc/self/mountinfo; grep -E '^(NoNewPrivs|CapEff):' /proc/self/status",
    )];
    harness::agent(&toren, "leaver", "  approval: never\n", &[calls]);
    let ran = harness::run(&toren, "leaver");
    ran.assert_completed();
    let inside = &ran.result(0).output;
    let mut count = 0;

    // The agent did what it wanted with what it sees…
    assert!(inside.contains("drwxrwxrwx\n-rwsr-xr-x"), "{inside}");
    let ws = toren_sandbox::workspace_path(&root, &ran.run);
    if harness::fake().is_some() {
        // …on the VM's disk (e2b); the run's host directory, a stand-in no sandbox sees,
        // holds nothing of it (only Toren's note of the sandbox id).
        let vm = harness::workspace(&toren, &ran.run);
        assert_ne!(vm, ws);
        assert_eq!(mode(&vm), 0o777);
        assert_eq!(mode(&vm.join("suid-sh")), 0o4755);
        let mut host: Vec<String> = std::fs::read_dir(&ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        host.retain(|name| name != ".toren-e2b-sandbox");
        assert_eq!(host, Vec::<String>::new(), "the VM's files on the host");
    } else {
        assert_eq!(mode(&ws), 0o777);
        assert_eq!(mode(&ws.join("suid-sh")), 0o4755);
    }
    // …but the run's private directory around it is Toren's alone.
    let private = ws.parent().unwrap();
    assert_eq!(private, root.join(&ran.run));
    assert_eq!(mode(private), 0o700);
    let me = std::fs::metadata(toren.dir.path()).unwrap().uid();
    assert_eq!(std::fs::metadata(private).unwrap().uid(), me);
    count += 1;
    let other_user = backend.applies("another local user");
    if other_user && nix_is_root() {
        // Another local user can reach neither the set-uid program nor the open directory.
        for target in [ws.join("suid-sh"), ws.join("open/data"), ws.clone()] {
            let probe = Command::new("/bin/sh")
                .args(["-c", "test -e \"$1\" || ls \"$1\"", "sh"])
                .arg(&target)
                .uid(OTHER_UID)
                .gid(OTHER_UID)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&probe.stderr);
            assert!(
                !probe.status.success() && said.contains("Permission denied"),
                "uid {OTHER_UID} reached {}: {said}",
                target.display()
            );
        }
        count += 1;
    } else if other_user {
        note(
            backend,
            "not root: the private directory's mode is checked, not another user's access",
        );
    }

    // No device node could be made.
    assert!(inside.contains("mknod=1"), "{inside}");
    count += 1;
    // Set-uid programs gain nothing inside: the mount (local) or the process (docker).
    let mount = inside
        .lines()
        .find(|l| l.contains(" /workspace "))
        .unwrap_or_else(|| panic!("no /workspace mount in:\n{inside}"));
    let options = mount.split(' ').nth(5).unwrap_or_default();
    let flags: Vec<&str> = options.split(',').collect();
    if backend.applies("workspace mounted nosuid") {
        assert!(
            flags.contains(&"nosuid") && flags.contains(&"nodev"),
            "{mount}"
        );
        count += 1;
    }
    if backend.applies("no new privileges") {
        assert!(inside.contains("NoNewPrivs:\t1"), "{inside}");
    }
    // The command runs without capabilities (e2b: as the VM's unprivileged default user).
    assert!(inside.contains("CapEff:\t0000000000000000"), "{inside}");
    count += 1;

    // Toren's own files are private.
    let home = toren.dir.path().join("toren");
    assert_eq!(mode(&home), 0o700);
    let mut files = vec![home.join("toren.db")];
    for suffix in ["-wal", "-shm"] {
        let sidecar = home.join(format!("toren.db{suffix}"));
        if sidecar.exists() {
            files.push(sidecar);
        }
    }
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    count += 1;
    if files.len() < 3 {
        note(
            backend,
            "SQLite removed its -wal/-shm files when the last connection closed; their mode \
             is checked by toren-store's own tests",
        );
    }
    report(backend, "hardening", count);
}

fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
