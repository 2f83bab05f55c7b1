//! Commands, environment, timeouts, reconnection, loss, pause and errors, each against the
//! local E2B server whose sandboxes really run the commands.

use std::time::Duration;

use pretty_assertions::assert_eq;
use toren_sandbox::SandboxBackend;
use toren_test_support::e2b::Faults;

use super::support::{Fixture, KEY, policy, run, run_for, run_id};

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_in_the_sandbox_with_exact_exit_codes() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let out = run(sandbox.as_ref(), "echo hello; pwd").await;
    assert_eq!(
        (out.exit_code, out.output.as_str()),
        (Some(0), "hello\n/workspace\n")
    );
    // stderr arrives on its own pipe, so only its content is certain, not its place.
    let out = run(sandbox.as_ref(), "echo oops >&2").await;
    assert_eq!(out.output, "oops\n");
    for code in [1, 3, 42, 127, 137] {
        let out = run(sandbox.as_ref(), &format!("exit {code}")).await;
        assert_eq!(out.exit_code, Some(code));
    }
    // A command killed by a signal: envd's end event says `exitCode: -1`, `exited` false,
    // `status: "signal: …"` (the fake's reporter sees the wait status, as envd does), and
    // the backend reports 128 + the signal, as the local backend and bash do.
    for (signal, code) in [("KILL", 137), ("TERM", 143), ("SEGV", 139)] {
        let out = run(sandbox.as_ref(), &format!("kill -{signal} $$")).await;
        assert_eq!(
            (out.exit_code, out.timed_out),
            (Some(code), false),
            "{signal}"
        );
    }
    // The same code when bash, not envd, sees the signal.
    // (bash's own "Killed" line comes on stderr, in no certain place.)
    let out = run(sandbox.as_ref(), "sh -c 'kill -KILL $$'; echo $?").await;
    assert!(
        out.exit_code == Some(0) && out.output.lines().any(|l| l == "137"),
        "{}",
        out.output
    );
    // Files persist between commands, on the sandbox's own disk.
    run(sandbox.as_ref(), "echo kept > /workspace/a.txt").await;
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert_eq!(
        std::fs::read_to_string(disk.workspace().join("a.txt")).unwrap(),
        "kept\n"
    );
    // Output over the limit keeps its head and tail.
    let big = sandbox
        .exec(toren_sandbox::ExecRequest {
            command: "seq 1 100000".into(),
            timeout: Duration::from_secs(20),
            output_limit: 1000,
        })
        .await
        .unwrap();
    assert!(
        big.truncated && big.output.starts_with("1\n2\n") && big.output.ends_with("100000\n"),
        "{}",
        big.output
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_is_made_as_the_policy_says() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let run = run_id();
    let sandbox = backend
        .open(&run, &policy(serde_json::json!({"network": true})), vec![])
        .await
        .unwrap();
    let id = sandbox.instance_id();
    assert_eq!(fx.fake.internet(&id), Some(true));
    let meta = fx.fake.metadata(&id).unwrap();
    assert_eq!(meta.get("toren_run"), Some(&run.to_string()));
    assert_eq!(meta.get("toren_instance").map(String::as_str), Some("test"));
    assert!(meta.contains_key("toren_workspace"));
    assert_eq!(fx.fake.env_vars(&id), Some(Default::default()));
    let left = fx.fake.time_left(&id).unwrap();
    assert!(left > Duration::from_secs(590), "{left:?}");
    let create = fx
        .fake
        .requests()
        .into_iter()
        .find(|r| r.uri == "/sandboxes")
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&create.body).unwrap();
    assert_eq!(body["secure"], true);
    assert_eq!(body["templateID"], "base");
    assert_eq!(body["timeout"], 600);
    let offline = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    assert_eq!(fx.fake.internet(&offline.instance_id()), Some(false));
    let out = super::support::run(
        offline.as_ref(),
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    )
    .await;
    assert_eq!(out.output, "lo\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_exactly_the_granted_names_and_no_credential_is_sent() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let policy = policy(serde_json::json!({"env": ["MY_TOKEN"]}));
    let granted = vec![("MY_TOKEN".to_owned(), "granted-value-123".to_owned())];
    let sandbox = backend.open(&run_id(), &policy, granted).await.unwrap();
    let out = run(
        sandbox.as_ref(),
        "env | cut -d= -f1 | sort | tr '\\n' ' '; echo; echo $MY_TOKEN",
    )
    .await;
    assert_eq!(
        out.output,
        "HOME LANG MY_TOKEN PATH PWD SHLVL _ \ngranted-value-123\n"
    );
    for request in fx.fake.requests() {
        let text = request.text();
        if request.plane == "envd" {
            assert!(!text.contains(KEY), "the API key reached envd: {text}");
        }
        // The granted value travels in `envs` only, never an argv or the control plane.
        if text.contains("granted-value-123") {
            assert_eq!(request.plane, "envd");
            assert!(text.contains(r#""envs":{"#), "{text}");
            assert!(!text.contains(r#""args":["-c","granted-value-123"#));
        }
        if request.plane == "control" {
            assert!(!text.contains("envVars"), "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_limits_bound_each_command_in_the_vm() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let limits = serde_json::json!({"limits": {"memory": 268_435_456, "pids": 64, "cpu_secs": 30}});
    let sandbox = backend
        .open(&run_id(), &policy(limits), vec![])
        .await
        .unwrap();
    let out = run(
        sandbox.as_ref(),
        "ulimit -d; ulimit -t; ulimit -Hd; ulimit -u; ulimit -Hu",
    )
    .await;
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines[..3], ["262144", "30", "262144"], "{}", out.output);
    // 64 more processes than the user already runs (the wrapper's few), soft and hard.
    let nproc: u32 = lines[3].parse().unwrap();
    assert!((64..64 + 8).contains(&nproc), "{}", out.output);
    assert_eq!(lines[4], lines[3]);
    // A memory hog is stopped by the data limit, and the next command still runs.
    let hog = run(
        sandbox.as_ref(),
        "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}",
    )
    .await;
    assert!(!hog.output.contains("survived"), "{}", hog.output);
    assert_eq!(run(sandbox.as_ref(), "echo ok").await.output, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_kills_the_command_and_everything_it_started() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let out = run_for(
        sandbox.as_ref(),
        "(sleep 3; echo leaked > /workspace/leak) & echo started; sleep 100",
        Duration::from_secs(1),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        (out.timed_out, out.exit_code, out.output.as_str()),
        (true, None, "started\n")
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert!(
        !disk.workspace().join("leak").exists(),
        "a child outlived the timeout"
    );
    // The sandbox still serves commands.
    assert_eq!(run(sandbox.as_ref(), "echo ok").await.output, "ok\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_process_reconnects_to_the_same_sandbox_and_finish_kills_it() {
    let fx = Fixture::new();
    let run = run_id();
    let first = fx.backend();
    let sandbox = first
        .open(&run, &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    run_cmd(&sandbox, "echo mine > /workspace/f").await;
    let id = sandbox.instance_id();
    drop(sandbox);
    drop(first);
    // A new worker (a new backend, nothing shared in memory).
    let second = fx.backend();
    let again = second
        .open(&run, &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    assert_eq!(again.instance_id(), id);
    assert_eq!(
        super::support::run(again.as_ref(), "cat /workspace/f")
            .await
            .output,
        "mine\n"
    );
    assert_eq!(fx.fake.calls("create"), 1);
    assert!(fx.fake.calls("connect") >= 1);
    SandboxBackend::finish(&second, &run).await.unwrap();
    assert_eq!(fx.fake.sandboxes(), Vec::<String>::new());
}

async fn run_cmd(sandbox: &std::sync::Arc<dyn toren_sandbox::Sandbox>, command: &str) {
    let out = run(sandbox.as_ref(), command).await;
    assert_eq!(out.exit_code, Some(0), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_killed_behind_torens_back_is_replaced_and_the_loss_is_stated() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    run_cmd(&sandbox, "echo x > /workspace/f").await;
    let old = sandbox.instance_id();
    assert!(fx.fake.kill(&old));
    let out = run(sandbox.as_ref(), "ls /workspace; echo done").await;
    let new = sandbox.instance_id();
    assert_ne!(new, old);
    assert!(
        out.output
            .contains(&format!("the E2B sandbox `{old}` is gone")),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("done\n"), "{}", out.output);
    assert_eq!(out.exit_code, Some(0));
    // Only the first command after the loss says so.
    assert_eq!(run(sandbox.as_ref(), "echo again").await.output, "again\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn gone_answered_as_html_is_still_gone() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    fx.fake.set_faults(Faults {
        html_502: true,
        ..Faults::default()
    });
    fx.fake.kill(&sandbox.instance_id());
    let out = run(sandbox.as_ref(), "echo fine").await;
    assert!(out.output.ends_with("fine\n"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_mid_command_is_reported_and_the_command_killed() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    fx.fake.set_faults(Faults {
        cut_next_stream: true,
        ..Faults::default()
    });
    let out = run(sandbox.as_ref(), "sleep 2; echo late > /workspace/late").await;
    assert_eq!(out.exit_code, None);
    assert!(
        out.output.contains("connection to the E2B sandbox broke"),
        "{}",
        out.output
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert!(!disk.workspace().join("late").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_turn_pauses_the_sandbox_and_the_next_turn_resumes_it() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let session = policy(serde_json::json!({"sandbox_key": "session-1"}));
    let turn1 = run_id();
    let sandbox = backend.open(&turn1, &session, vec![]).await.unwrap();
    run_cmd(&sandbox, "echo day1 > /workspace/notes").await;
    // A process of the VM's own, which no envd call knows any more (Toren's commands end
    // what they leave running).
    let id = sandbox.instance_id();
    start_service(&backend, &id, "nohup sleep 302 >/dev/null 2>&1 &").await;
    wait_for_host("sleep 302").await;
    SandboxBackend::finish(&backend, &turn1).await.unwrap();
    assert_eq!(fx.fake.paused(&id), Some(true));
    // The paused machine is frozen whole, as a paused VM is: the left process too.
    wait_for_state("sleep 302", 'T').await;
    let turn2 = run_id();
    let resumed = backend.open(&turn2, &session, vec![]).await.unwrap();
    assert_eq!(resumed.instance_id(), id);
    assert_eq!(fx.fake.paused(&id), Some(false));
    wait_for_state("sleep 302", 'S').await;
    assert_eq!(
        run(resumed.as_ref(), "cat /workspace/notes").await.output,
        "day1\n"
    );
    SandboxBackend::release(&backend, "session-1")
        .await
        .unwrap();
    assert_eq!(fx.fake.sandboxes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lifetime_is_refreshed_while_the_run_holds_the_sandbox() {
    let fx = Fixture::new();
    let backend = toren_sandbox_e2b::E2bBackend::new(fx.settings(Duration::from_secs(3))).unwrap();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(fx.fake.calls("timeout") >= 2);
    assert_eq!(run(sandbox.as_ref(), "echo alive").await.output, "alive\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_are_retried_and_other_errors_name_the_fix() {
    let fx = Fixture::new();
    let backend = fx.backend();
    fx.fake.set_faults(Faults {
        create_errors: vec![
            (
                429,
                "maximum number of concurrent E2B sandboxes (20)".into(),
            ),
            (503, "sandbox_capacity_unavailable".into()),
        ],
        ..Faults::default()
    });
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    assert_eq!(fx.fake.calls("create"), 3);
    assert_eq!(run(sandbox.as_ref(), "echo up").await.output, "up\n");

    let unknown = backend
        .open(
            &run_id(),
            &policy(serde_json::json!({"image": "nope"})),
            vec![],
        )
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("no template `nope`"),
        "{unknown}"
    );

    let mut settings = fx.settings(Duration::from_secs(60));
    settings.endpoints.api_key = "e2b_ffff".into();
    let wrong = toren_sandbox_e2b::E2bBackend::new(settings).unwrap();
    let err = wrong.check().await.unwrap_err();
    assert!(err.to_string().contains("refused the API key"), "{err}");

    let mut settings = fx.settings(Duration::from_secs(60));
    settings.endpoints.api_key = "sk-not-e2b".into();
    let err = toren_sandbox_e2b::E2bBackend::new(settings).unwrap_err();
    assert!(
        err.to_string().contains("does not look like an E2B key"),
        "{err}"
    );

    let mut settings = fx.settings(Duration::from_secs(60));
    settings.endpoints.api_url = "http://127.0.0.1:9".into();
    let down = toren_sandbox_e2b::E2bBackend::new(settings).unwrap();
    let err = down.check().await.unwrap_err();
    assert!(err.to_string().contains("cannot reach E2B"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_without_the_pinned_host_directory_still_drives_the_run() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let run = run_id();
    let elsewhere = fx.root.path().join("on-another-machine/workspace");
    let policy = policy(serde_json::json!({"workspace": elsewhere.display().to_string()}));
    let sandbox = backend.open(&run, &policy, vec![]).await.unwrap();
    assert_eq!(
        super::support::run(sandbox.as_ref(), "echo fine")
            .await
            .output,
        "fine\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_the_data_plane_turned_away_is_retried() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    fx.fake.set_faults(Faults {
        envd_429: 2,
        ..Faults::default()
    });
    let out = super::support::run(
        sandbox.as_ref(),
        "echo once >> /workspace/ran; cat /workspace/ran",
    )
    .await;
    assert_eq!((out.exit_code, out.output.as_str()), (Some(0), "once\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_whose_sandbox_expired_meanwhile_is_told_its_files_are_lost() {
    let fx = Fixture::new();
    let run = run_id();
    let first = fx.backend();
    let sandbox = first
        .open(&run, &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let old = sandbox.instance_id();
    drop(sandbox);
    drop(first);
    // The worker died; its sandbox expired before another process resumed the run.
    assert!(fx.fake.kill(&old));
    let second = fx.backend();
    let again = second
        .open(&run, &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    assert_ne!(again.instance_id(), old);
    let out = super::support::run(again.as_ref(), "echo on").await;
    assert!(
        out.output
            .contains(&format!("the E2B sandbox `{old}` is gone")),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("on\n"), "{}", out.output);
}

/// The command lines of the processes `/proc` shows, one a line.
const PROCESSES: &str =
    r#"for p in /proc/[0-9]*; do tr '\0' ' ' < "$p/cmdline" 2>/dev/null; echo; done"#;

fn host_has(cmdline: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == cmdline)
    })
}

/// Starts `script` in sandbox `id` straight through envd, without Toren's wrapper: a
/// process of the VM's own (as a template's start command is), which Toren's commands do
/// not end. Returns when envd's stream ends.
async fn start_service(backend: &toren_sandbox_e2b::E2bBackend, id: &str, script: &str) {
    let client = backend.client();
    let info = client.connect(id, Duration::from_secs(600)).await.unwrap();
    let message = serde_json::json!({
        "process": {"cmd": "/bin/sh", "args": ["-c", script], "envs": {}, "cwd": "/"},
        "stdin": false,
    });
    let payload = serde_json::to_vec(&message).unwrap();
    let mut frame = vec![0u8];
    frame.extend(u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend(payload);
    let request = client
        .envd(
            reqwest::Method::POST,
            "/process.Process/Start",
            id,
            info.envd_access_token.as_deref(),
        )
        .header("Content-Type", "application/connect+json")
        .header("Connect-Protocol-Version", "1")
        .body(frame);
    let (status, _) = client.envd_send(id, request).await.unwrap();
    assert!(status.is_success(), "{status}");
}

/// Waits until a host process's command line is `cmdline` (a background process of a
/// command that ended may not have exec'd yet).
async fn wait_for_host(cmdline: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !host_has(cmdline) {
        assert!(std::time::Instant::now() < deadline, "no {cmdline} started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the host process whose command line is `cmdline` is in state `want` (a
/// signal takes effect when the process is next scheduled).
async fn wait_for_state(cmdline: &str, want: char) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let state = host_state(cmdline);
        if state == Some(want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{cmdline} is in state {state:?}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The state letter (`S`, `T`, …) of the host process whose command line is `cmdline`.
fn host_state(cmdline: &str) -> Option<char> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find_map(|entry| {
            let c = std::fs::read(entry.path().join("cmdline")).ok()?;
            if String::from_utf8_lossy(&c).replace('\0', " ").trim() != cmdline {
                return None;
            }
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            stat.rsplit_once(") ")?.1.chars().next()
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_is_one_machine_of_its_own_and_its_end_ends_every_process() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let a = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let b = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    // A process of the VM's own (Toren's commands end what they leave running).
    start_service(
        &backend,
        &a.instance_id(),
        "nohup sleep 301 >/dev/null 2>&1 &",
    )
    .await;
    // A command of the same sandbox sees it.
    let seen = run(a.as_ref(), PROCESSES).await.output;
    assert!(seen.lines().any(|l| l.trim() == "sleep 301"), "{seen}");
    // Neither the other sandbox nor the host's processes are visible: a handful of lines
    // (the sandbox's init, its keeper, this command), none of the test's.
    let other = run(b.as_ref(), PROCESSES).await.output;
    assert!(!other.contains("sleep 301"), "{other}");
    let me = std::fs::read_to_string("/proc/self/cmdline").unwrap();
    let me = me.split('\0').next().unwrap();
    assert!(!seen.contains(me) && !other.contains(me), "{seen}\n{other}");
    assert!(seen.lines().filter(|l| !l.is_empty()).count() < 8, "{seen}");
    // A command holds its standard descriptors and nothing else: the machine's namespaces,
    // which bubblewrap joins through descriptors 5 and 6, are closed before it starts.
    assert_eq!(
        run(a.as_ref(), "ls /proc/self/fd | sort -n | tr '\\n' ' '")
            .await
            .output,
        "0 1 2 3 "
    );
    // What a command leaves running ends with it, as on the other backends.
    let left = run(
        a.as_ref(),
        "nohup sleep 303 >/dev/null 2>&1 & setsid sleep 304 & echo ok",
    )
    .await;
    assert_eq!(left.output, "ok\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while host_has("sleep 303") || host_has("sleep 304") {
        assert!(
            std::time::Instant::now() < deadline,
            "a process outlived its command"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Killing the sandbox ends a process of its own, as a VM's end does.
    start_service(
        &backend,
        &a.instance_id(),
        "nohup sleep 301 >/dev/null 2>&1 &",
    )
    .await;
    wait_for_host("sleep 301").await;
    assert!(fx.fake.kill(&a.instance_id()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while host_has("sleep 301") {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep 301 outlived its sandbox"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
