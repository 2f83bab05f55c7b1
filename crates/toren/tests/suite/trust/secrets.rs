//! Secrets (I-7): the runtime's environment holds canary credentials, and canary files sit
//! where an operator keeps secrets (`~/.aws`, `~/.ssh`, `~/.docker`, beside the database,
//! in another run's workspace). From inside the sandbox no probe finds any of them; only
//! `MY_APP_DB_URL`, and only when the agent grants it. No canary reaches the event log, the
//! database files, any process's argv, or any file the runtime writes. [`telegram_secrets`]
//! runs the same probes as a session turn driven from Telegram (`toren telegram` against
//! the local Bot API server, its bot token a canary): nothing finds a canary there either,
//! and none reaches the event log, the database, a log line at debug, a file the runtime
//! wrote, or a message sent to Telegram.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::{self, Call, bash, call, contains, files_under};
use super::{Backend, report, secrets_e2b};
use crate::suite::common::{Toren, text};

/// The credentials of the runtime itself; `MY_APP_DB_URL` is the operator's own variable.
const RUNTIME_VARS: [&str; 6] = [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "E2B_API_KEY",
    "TOREN_API_TOKEN",
    "TOREN_DATABASE_URL",
    "TELEGRAM_BOT_TOKEN",
];

pub(super) struct Canaries {
    /// (variable, value) for the runtime's variables and `MY_APP_DB_URL`.
    pub(super) vars: Vec<(&'static str, String)>,
    /// Planted files and the canary each holds.
    files: Vec<(PathBuf, String)>,
    pub(super) my_app: String,
    db_dir: PathBuf,
}

impl Canaries {
    pub(super) fn values(&self) -> impl Iterator<Item = &str> {
        self.vars
            .iter()
            .map(|(_, v)| v.as_str())
            .chain(self.files.iter().map(|(_, v)| v.as_str()))
    }

    /// Every canary except the granted `MY_APP_DB_URL`.
    pub(super) fn never(&self) -> impl Iterator<Item = &str> {
        self.values().filter(move |v| *v != self.my_app)
    }
}

fn plant(toren: Toren) -> (Toren, Canaries) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let token = format!("{:x}{nanos:x}", std::process::id());
    let canary = |what: &str| format!("trustcanary-{what}-{token}");
    let home = toren.dir.path().join("home");
    let toren_home = toren.dir.path().join("toren");
    let db_dir = toren_home.join(canary("dbdir"));
    std::fs::create_dir_all(&db_dir).unwrap();

    let mut vars: Vec<(&'static str, String)> = RUNTIME_VARS
        .iter()
        .map(|v| (*v, canary(&v.to_lowercase())))
        .collect();
    let db_url = format!("sqlite://{}", db_dir.join("toren.db").display());
    vars.retain(|(name, _)| *name != "TOREN_DATABASE_URL");
    vars.push(("TOREN_DATABASE_URL", db_url));
    let my_app = canary("my-app-db-url");
    vars.push(("MY_APP_DB_URL", my_app.clone()));

    let other_workspace = toren_home.join("sandboxes").join("run_other");
    let planted = [
        (home.join(".aws/credentials"), "aws"),
        (home.join(".ssh/id_ed25519"), "ssh"),
        (home.join(".docker/config.json"), "docker"),
        (db_dir.join("secrets.env"), "beside-db"),
        (toren_home.join("operator.env"), "toren-home"),
        (other_workspace.join("secret.txt"), "other-run"),
    ];
    let files = planted
        .into_iter()
        .map(|(path, what)| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let value = canary(what);
            std::fs::write(&path, format!("secret = {value}\n")).unwrap();
            (path, value)
        })
        .collect();
    let mut toren = toren;
    for (name, value) in &vars {
        toren = toren.env(name, value);
    }
    (
        toren,
        Canaries {
            vars,
            files,
            my_app,
            db_dir,
        },
    )
}

/// (probe, what its output must show to prove it ran).
fn probes(
    canaries: &Canaries,
    sandbox_root: &Path,
    backend: &Backend,
) -> Vec<(Call, &'static str)> {
    // The kernel keyrings of the user running Toren: keyctl is refused. In a VM the
    // keyrings are the VM kernel's own; the probe still runs and must find no canary.
    let keyctl = if backend.applies("keyctl refused") {
        "keyctl: -1 1\n"
    } else {
        "keyctl: "
    };
    let mut probes = vec![
        (bash("env"), "PATH="),
        (bash("cat /proc/self/environ | tr '\\0' '\\n'"), "PATH="),
        (
            bash("tr '\\0' '\\n' < /proc/1/environ; echo read-pid-1"),
            "read-pid-1",
        ),
        (
            bash("tr '\\0' '\\n' < /proc/$PPID/environ; echo parent=$PPID"),
            "parent=",
        ),
        (bash("ps auxe"), "COMMAND"),
        (
            bash(
                "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done",
            ),
            "bash",
        ),
        (bash("cat /proc/self/mountinfo; findmnt -r"), "/workspace"),
        (
            bash(
                "grep -rao -D skip --exclude-dir=proc --exclude-dir=usr --exclude-dir=sys \
                 -e 'trustcanary-[a-z0-9-]*' / 2>/dev/null | head -20; echo searched",
            ),
            "searched",
        ),
        (
            bash(
                "find / -path /proc -prune -o \\( -name credentials -o -name id_ed25519 -o \
                 -name config.json -o -name 'toren.db*' -o -name '*.env' -o -name secret.txt \\) \
                 -print 2>/dev/null; echo found-nothing-else",
            ),
            "found-nothing-else",
        ),
        (
            bash("ls -la ~ /root /home /run /var 2>&1; echo HOME=$HOME"),
            "HOME=/workspace",
        ),
        (
            bash(
                "ls -l /proc/1/fd/ 2>&1; cat /proc/1/fd/3 2>&1; echo fds: $(ls /proc/self/fd | sort -n)",
            ),
            "fds: 0 1 2 3\n",
        ),
        (
            bash("cat /proc/keys /proc/self/status 2>&1 | head -50"),
            "Name:",
        ),
        (
            bash(
                "python3 -c 'import ctypes, platform; \\
                 nr = {\"x86_64\": 250, \"aarch64\": 219}[platform.machine()]; \\
                 libc = ctypes.CDLL(None, use_errno=True); \\
                 print(\"keyctl:\", libc.syscall(nr, 0, -3, 0), ctypes.get_errno())'",
            ),
            keyctl,
        ),
    ];
    // Every planted file and the sandbox root, by their host paths.
    for (path, _) in &canaries.files {
        probes.push((bash(&format!("cat {}", path.display())), "No such file"));
    }
    probes.push((
        bash(&format!(
            "ls {} {}",
            sandbox_root.display(),
            canaries.db_dir.display()
        )),
        "No such file",
    ));
    probes.push((
        bash(&format!(
            "cat {}",
            canaries.db_dir.join("toren.db").display()
        )),
        "No such file",
    ));
    // The file tools run on the host: a symlink made in the sandbox must not lead them to
    // the runtime's own environment, a key, or another run's workspace.
    let key = canaries.files[1].0.display().to_string();
    probes.push((
        bash(&format!(
            "ln -s /proc/self/environ env_link; ln -s {key} key_link; echo linked"
        )),
        "linked",
    ));
    probes.push((
        call("read_file", json!({"path": "env_link"})),
        "outside the workspace",
    ));
    probes.push((
        call("read_file", json!({"path": "key_link"})),
        "outside the workspace",
    ));
    probes.push((
        call("read_file", json!({"path": "../run_other/secret.txt"})),
        "outside the workspace",
    ));
    // A long probe, during which the test reads every process's argv.
    probes.push((bash("sleep 1.5; echo slept"), "slept"));
    probes
}

pub(crate) fn suite(backend: &Backend) {
    let (toren, mut canaries) = plant(harness::toren_for(backend));
    let toren = secrets_e2b::e2b_key(backend, toren, &mut canaries);
    let probes = probes(&canaries, &toren.sandbox_root(), backend);
    let calls: Vec<Call> = probes.iter().map(|(c, _)| c.clone()).collect();
    harness::agent(&toren, "nosy", "  approval: never\n", &[calls]);
    let grant_calls = vec![
        bash("env"),
        bash("cat /proc/self/environ | tr '\\0' '\\n'"),
        bash("sleep 1.5; echo slept"),
        // The value is there (its length shows it) though its output is redacted.
        bash("echo length=${#MY_APP_DB_URL}"),
    ];
    harness::agent(
        &toren,
        "granted",
        "  approval: never\n  env: [MY_APP_DB_URL]\n",
        &[grant_calls],
    );
    let mut count = 0;

    // Every probe from inside the sandbox finds nothing.
    let mut argv_leaks: Vec<String> = Vec::new();
    let mut sample = |_pid: u32| {
        for (_, line) in harness::command_lines() {
            if canaries.values().any(|v| line.contains(v)) {
                argv_leaks.push(line);
            }
        }
    };
    let ran = harness::run_watching(&toren, "nosy", &mut sample);
    ran.assert_completed();
    for (i, (probe, proof)) in probes.iter().enumerate() {
        let result = ran.result(i);
        for value in canaries.values() {
            assert!(
                !result.output.contains(value),
                "probe {probe:?} found canary {value}:\n{}",
                result.output
            );
        }
        assert!(
            result.output.contains(proof),
            "probe {probe:?} did not run as intended (expected {proof:?}):\n{}",
            result.output
        );
        // Nothing, an inherited file descriptor included, leads to the database (unless
        // the probe itself names it).
        let names_db = probe.args.to_string().contains("toren.db");
        assert!(
            names_db || !result.output.contains("toren.db"),
            "probe {probe:?} sees the database:\n{}",
            result.output
        );
        count += 1;
    }

    // Granted, MY_APP_DB_URL and only it is in the sandbox, and what a command prints of
    // its value is journaled redacted.
    let granted = harness::run_watching(&toren, "granted", &mut sample);
    granted.assert_completed();
    let length = granted.result(3).output.clone();
    assert_eq!(
        length,
        format!("length={}\n[exit code: 0]", canaries.my_app.len())
    );
    for i in 0..2 {
        let output = &granted.result(i).output;
        assert!(
            output.contains("MY_APP_DB_URL=[redacted:MY_APP_DB_URL]\n"),
            "{output}"
        );
        assert!(!output.contains(&canaries.my_app), "{output}");
        for value in canaries.never() {
            assert!(
                !output.contains(value),
                "granted run found {value}:\n{output}"
            );
        }
        count += 1;
    }
    assert_eq!(
        granted.events[0]["policy"]["env"],
        json!(["MY_APP_DB_URL"]),
        "names only are pinned"
    );
    count += 1;

    // No canary in any process's argv while the runs went on.
    assert_eq!(argv_leaks, Vec::<String>::new(), "canaries in argv");
    count += 1;

    // None in the event logs, the granted value neither (its output was redacted).
    for value in canaries.never() {
        assert!(!ran.log_text().contains(value), "event log holds {value}");
        assert!(
            !granted.log_text().contains(value),
            "event log holds {value}"
        );
    }
    assert!(!ran.log_text().contains(&canaries.my_app));
    assert!(!granted.log_text().contains(&canaries.my_app));
    count += 1;

    // None in the database files, write-ahead log included.
    let db_files: Vec<PathBuf> = files_under(&canaries.db_dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("toren.db")
        })
        .collect();
    assert!(!db_files.is_empty(), "no database files found");
    for file in db_files {
        let bytes = std::fs::read(&file).unwrap();
        for value in canaries.never() {
            assert!(!contains(&bytes, value), "{} holds {value}", file.display());
        }
    }
    count += 1;

    // None in any file the runtime wrote (the planted ones aside).
    let planted: Vec<&PathBuf> = canaries.files.iter().map(|(p, _)| p).collect();
    for file in files_under(&toren.dir.path().join("toren")) {
        if planted.contains(&&file) {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        for value in canaries.never() {
            assert!(!contains(&bytes, value), "{} holds {value}", file.display());
        }
    }
    count += 1;

    // An agent file may not grant the runtime's credentials.
    for name in RUNTIME_VARS {
        let path = toren.agent(
            "greedy",
            &format!("name: greedy\nmodel: scripted/nosy.script.yaml\nsandbox:\n  env: [{name}]\n"),
        );
        let out = toren.run(&["check", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "granting {name}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("never enters a sandbox"),
            "{}",
            text(&out.stderr)
        );
        count += 1;
    }
    if let Some(fake) = harness::fake() {
        count += secrets_e2b::requests(fake, &canaries, &[&ran, &granted]);
    }
    report(backend, "secrets", count);
}

#[test]
fn telegram_secrets() {
    use std::os::unix::process::ExitStatusExt as _;
    use toren_test_support::telegram::FakeTelegram;

    const USER: i64 = 111;
    let (toren, canaries) = plant(harness::toren_for(&super::LOCAL));
    // A bot token is `<id>:<secret>`: the secret is the canary.
    let secret = canaries
        .vars
        .iter()
        .find(|(name, _)| *name == "TELEGRAM_BOT_TOKEN")
        .map(|(_, value)| value.clone())
        .unwrap();
    let token = format!("4242:{secret}");
    let fake = FakeTelegram::start(&token).unwrap();
    let toren = toren
        .env("TELEGRAM_BOT_TOKEN", &token)
        .env("TELEGRAM_API_URL", &fake.url())
        .env("TOREN_TELEGRAM_USERS", &USER.to_string())
        .env("TOREN_TELEGRAM_AGENT", "nosy")
        .env("TOREN_LOG", "debug");
    let probes = probes(&canaries, &toren.sandbox_root(), &super::LOCAL);
    let calls: Vec<Call> = probes.iter().map(|(c, _)| c.clone()).collect();
    harness::agent(&toren, "nosy", "  approval: never\n", &[calls]);
    // Its log (at debug, long) goes to a file: a pipe nobody reads would fill and stall it.
    let log_path = toren.dir.path().join("bot.log");
    let mut child = toren
        .command(&["telegram"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    fake.send_text(USER, "probe");
    let mut argv_leaks: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut done = false;
    while std::time::Instant::now() < deadline && !done {
        for (_, line) in harness::command_lines() {
            if canaries.values().any(|v| line.contains(v)) {
                argv_leaks.push(line);
            }
        }
        done = fake.wait_for(std::time::Duration::from_millis(15), |v| {
            v.messages(USER)
                .iter()
                .any(|m| m.text.contains("probes done"))
        });
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read(&log_path).unwrap();
    std::fs::remove_file(&log_path).unwrap();
    let stderr = text(&log);
    assert!(
        done,
        "the turn did not end: {:?}\n{stderr}",
        toren.newest_run().map(|run| toren.events(&run))
    );
    let ran = harness::Ran::collect(
        &toren,
        std::process::Output {
            status: std::process::ExitStatus::from_raw(0),
            stdout: Vec::new(),
            stderr: log,
        },
    );
    assert!(
        ran.events[0]["session"].is_object() && ran.events[0]["channel"]["kind"] == "telegram",
        "a Telegram session turn: {}",
        ran.events[0]
    );
    for (i, (probe, proof)) in probes.iter().enumerate() {
        let result = ran.result(i);
        for value in canaries.values() {
            assert!(
                !result.output.contains(value),
                "probe {probe:?} found canary {value}:\n{}",
                result.output
            );
        }
        assert!(
            result.output.contains(proof),
            "probe {probe:?} did not run as intended (expected {proof:?}):\n{}",
            result.output
        );
    }
    assert_eq!(argv_leaks, Vec::<String>::new(), "canaries in argv");
    for value in canaries.never() {
        assert!(
            !ran.log_text().contains(value),
            "the event log holds {value}"
        );
        assert!(
            !stderr.contains(value),
            "a log line holds {value}: {stderr}"
        );
        for call in fake.calls() {
            assert!(
                !call.params.to_string().contains(value),
                "a call to Telegram holds {value}: {call:?}"
            );
        }
    }
    assert!(
        stderr.contains("DEBUG"),
        "the bot logged at debug: {stderr}"
    );
    // Nor the database files, nor any file the runtime wrote (the planted ones aside).
    let planted: Vec<&PathBuf> = canaries.files.iter().map(|(p, _)| p).collect();
    let written = files_under(&toren.dir.path().join("toren"));
    assert!(
        written.iter().any(|p| p.starts_with(&canaries.db_dir)),
        "the bot's database is under the canary directory"
    );
    for file in written {
        if planted.contains(&&file) {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        for value in canaries.never() {
            assert!(!contains(&bytes, value), "{} holds {value}", file.display());
        }
    }
}
