//! One run's E2B sandbox. Opening it connects to the sandbox Toren's metadata names for
//! this run (or session) — the one a dead worker left running or a finished turn left
//! paused; `connect` resumes it — or creates one; its lifetime is refreshed every third of
//! it while this process holds it. Each command goes through envd (`process`). When the
//! sandbox turns out gone (404, 502) a new one is made, what the journal holds of the files
//! is restored into it (`restore`), and the next command's output says that the old
//! sandbox's files were lost and what was restored. How the current sandbox came to be
//! (reconnected, or replacing a lost one) is its `origin`, which the worker records.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use toren_sandbox::{
    ExecOutput, ExecRequest, Files, SANDBOX_WORKDIR, Sandbox, Workspace, check_command,
};

use crate::client::{Client, CreateRequest};
use crate::error::{Error, Result};
use crate::files::VmFiles;
use crate::process::{self, Ended, Target, script_message, start_message};

/// Metadata keys on every sandbox Toren makes.
pub const META_RUN: &str = "toren_run";
pub const META_KEY: &str = "toren_key";
pub const META_INSTANCE: &str = "toren_instance";
pub const META_WORKSPACE: &str = "toren_workspace";

/// Made once in a fresh sandbox: the workspace directory, owned by the default user.
/// The file in the run's host workspace directory where this machine notes its sandbox.
const NOTE_FILE: &str = ".toren-e2b-sandbox";

const SETUP: &str = "mkdir -p /workspace && { chown user:user /workspace 2>/dev/null || true; }";

pub(crate) struct Setup {
    pub(crate) client: Client,
    pub(crate) workspace: Workspace,
    pub(crate) run: String,
    pub(crate) key: String,
    pub(crate) instance: String,
    pub(crate) template: String,
    pub(crate) internet: bool,
    /// The create request's `network` for a host list (secrets' values included: never
    /// logged).
    pub(crate) network: Option<serde_json::Value>,
    pub(crate) lifetime: Duration,
    /// The commands' whole environment, granted values included: never logged.
    pub(crate) env: Vec<(String, String)>,
    /// `sandbox.limits`, applied to each command in the VM as rlimits.
    pub(crate) limits: toren_protocol::ResourceLimits,
    /// Where to ask what to restore into a sandbox that replaces a lost one.
    pub(crate) restore: Option<toren_sandbox::SharedRestoreSource>,
}

struct Live {
    id: String,
    token: Option<String>,
    keepalive: JoinHandle<()>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

pub(crate) struct E2bSandbox {
    setup: Setup,
    live: tokio::sync::Mutex<Option<Live>>,
    /// The id of the last sandbox used, for `instance_id` and to tell a loss.
    last: Mutex<Option<(String, String)>>,
    /// Notes for the next command's output (a lost workspace).
    notes: Mutex<Vec<String>>,
    /// How the sandbox in use came to be, when not simply made for this run.
    origin: Mutex<Option<toren_protocol::SandboxOrigin>>,
    /// Itself, for the file tools' handle.
    me: Weak<E2bSandbox>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl E2bSandbox {
    /// A sandbox not connected yet; `me` is the `Arc` it will live in.
    pub(crate) fn new(setup: Setup, me: Weak<E2bSandbox>) -> Self {
        Self {
            setup,
            live: tokio::sync::Mutex::new(None),
            last: Mutex::new(None),
            notes: Mutex::new(Vec::new()),
            origin: Mutex::new(None),
            me,
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.setup.client
    }

    pub(crate) fn metadata(&self) -> BTreeMap<String, String> {
        let s = &self.setup;
        BTreeMap::from([
            (META_RUN.to_owned(), s.run.clone()),
            (META_KEY.to_owned(), s.key.clone()),
            (META_INSTANCE.to_owned(), s.instance.clone()),
            (
                META_WORKSPACE.to_owned(),
                s.workspace.path().display().to_string(),
            ),
        ])
    }

    /// The sandbox to run in: the current one, one found by metadata, or a new one.
    pub(crate) async fn ensure(&self) -> Result<(String, Option<String>)> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref() {
            return Ok((l.id.clone(), l.token.clone()));
        }
        let s = &self.setup;
        let filter = BTreeMap::from([
            (META_KEY.to_owned(), s.key.clone()),
            (META_INSTANCE.to_owned(), s.instance.clone()),
        ]);
        let mut found = None;
        // Whether the sandbox found was running (a dead worker's), not paused (a session's
        // between turns, whose commands all ended).
        let mut was_running = false;
        let listed = s
            .client
            .retrying("list sandboxes", || s.client.list(&filter))
            .await?;
        for candidate in listed {
            match s
                .client
                .retrying("connect", || {
                    s.client.connect(&candidate.sandbox_id, s.lifetime)
                })
                .await
            {
                Ok(info) => {
                    tracing::info!(sandbox = %info.sandbox_id, "reconnected to the run's E2B sandbox");
                    *locked(&self.origin) = Some(toren_protocol::SandboxOrigin::Reconnected);
                    was_running = candidate.state.as_deref() != Some("paused");
                    found = Some(info);
                    break;
                }
                Err(err) if err.is_gone() => {}
                Err(err) => return Err(err),
            }
        }
        let fresh = found.is_none();
        // The lost sandbox this one replaces, whose files are restored once it is ready.
        let mut replaces = None;
        let info = match found {
            Some(info) => info,
            None => {
                let request = CreateRequest {
                    template: s.template.clone(),
                    timeout: s.lifetime,
                    internet: s.internet,
                    metadata: self.metadata(),
                    network: s.network.clone(),
                };
                s.client
                    .retrying("create a sandbox", || s.client.create(&request))
                    .await?
            }
        };
        let id = info.sandbox_id.clone();
        let token = info.envd_access_token.clone();
        if fresh {
            let target = Target {
                client: &s.client,
                id: &id,
                token: token.as_deref(),
            };
            let ran = process::run(
                &target,
                &script_message(SETUP, &[]),
                Duration::from_secs(60),
                4096,
                Some("root"),
            )
            .await?;
            if !matches!(ran.ended, Ended::Exited(Some(0))) {
                return Err(Error::Protocol {
                    id,
                    why: format!(
                        "could not make /workspace ({}): {}",
                        ran.ended.describe(),
                        ran.output.trim()
                    ),
                });
            }
            // The sandbox this process used, else the one a process on this machine last
            // noted for the run (a worker that died and whose sandbox expired since), else
            // the one the run's log recorded (a worker on another machine).
            let previous = locked(&self.last)
                .as_ref()
                .map(|(id, _)| id.clone())
                .or_else(|| self.noted())
                .or_else(|| self.setup.restore.as_ref().and_then(|r| r.recorded()));
            replaces = previous.filter(|old| *old != id);
            if replaces.is_none() {
                *locked(&self.origin) = None;
            }
            // The project the run started as, before anything runs (and, in a sandbox
            // replacing a lost one, before what the log restores over it).
            let note = NOTE_FILE;
            if crate::seed::seed(&target, self.setup.workspace.path(), note).await? {
                tracing::info!(sandbox = %id, "copied the project the workspace started as into the sandbox");
            }
        } else if was_running {
            // A dead worker's command may still run in it (it is run again on resume):
            // ended first, as a local sandbox ends with its worker, so that two attempts
            // never run at once.
            let target = Target {
                client: &s.client,
                id: &id,
                token: token.as_deref(),
            };
            process::end_leftovers(&target).await;
        }
        tracing::info!(sandbox = %id, envd = %info.envd_version, fresh, "E2B sandbox ready");
        self.note(&id);
        *locked(&self.last) = Some((id.clone(), info.envd_version.clone()));
        let keepalive = tokio::spawn(keep_alive(s.client.clone(), id.clone(), s.lifetime));
        *live = Some(Live {
            id: id.clone(),
            token: token.clone(),
            keepalive,
        });
        drop(live);
        if let (Some(previous), Some(me)) = (replaces, self.me.upgrade()) {
            let source = self.setup.restore.as_deref();
            let (note, origin) =
                crate::restore::restore(me, source, &previous, (&id, token.as_deref())).await;
            locked(&self.notes).push(note);
            *locked(&self.origin) = Some(origin);
        }
        Ok((id, token))
    }

    /// Where this machine notes the run's sandbox id: in the run's host workspace
    /// directory, which on e2b is only a stand-in that no sandbox sees (the VM's disk is
    /// the workspace). Not beside it: the run's private directory holds the workspace alone.
    fn note_path(&self) -> Option<std::path::PathBuf> {
        Some(self.setup.workspace.path().join(NOTE_FILE))
    }

    fn noted(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.note_path()?).ok()?;
        Some(text.trim().to_owned()).filter(|id| !id.is_empty())
    }

    fn note(&self, id: &str) {
        if let Some(path) = self.note_path()
            && let Err(err) = std::fs::write(&path, format!("{id}\n"))
        {
            tracing::warn!(path = %path.display(), %err, "could not note the run's E2B sandbox");
        }
    }

    /// Forgets the sandbox `id` (gone), so the next command makes a new one.
    pub(crate) async fn forget(&self, id: &str) {
        let mut live = self.live.lock().await;
        if live.as_ref().is_some_and(|l| l.id == id) {
            *live = None;
        }
    }

    /// Whether this sandbox is a session's (kept under a key that is not the run's id).
    pub(crate) fn is_session(&self) -> bool {
        self.setup.key != self.setup.run
    }

    /// Stops refreshing the lifetime; returns the sandbox in use, if any.
    pub(crate) async fn close(&self) -> Option<String> {
        self.live.lock().await.take().map(|l| l.id.clone())
    }
}

/// Refreshes the sandbox's lifetime every third of it until it is gone.
async fn keep_alive(client: Client, id: String, lifetime: Duration) {
    let period = (lifetime / 3).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(period).await;
        match client.set_timeout(&id, lifetime).await {
            Ok(()) => tracing::debug!(sandbox = %id, "refreshed the sandbox's lifetime"),
            Err(err) if err.is_gone() => return,
            Err(err) => {
                tracing::warn!(sandbox = %id, %err, "could not refresh the sandbox's lifetime")
            }
        }
    }
}

fn cut_short(note: String, timed_out: bool) -> ExecOutput {
    ExecOutput {
        exit_code: None,
        output: note,
        truncated: false,
        timed_out,
        limits_hit: Vec::new(),
    }
}

impl fmt::Debug for E2bSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.setup;
        f.debug_struct("E2bSandbox")
            .field("key", &s.key)
            .field("template", &s.template)
            .field("internet", &s.internet)
            .field(
                "env",
                &s.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Sandbox for E2bSandbox {
    fn workspace(&self) -> &Workspace {
        &self.setup.workspace
    }

    fn backend(&self) -> &'static str {
        crate::E2bBackend::NAME
    }

    /// The files in the VM's `/workspace`, checked there (`files`).
    fn files(&self) -> Arc<dyn Files> {
        match (self.me.upgrade(), tokio::runtime::Handle::try_current()) {
            (Some(sandbox), Ok(runtime)) => Arc::new(VmFiles { sandbox, runtime }),
            // Outside a runtime, or while being dropped: nothing can reach the VM.
            _ => Arc::new(Unreachable),
        }
    }

    /// The E2B sandbox id (`id@envd <version>` is not used: the id alone is what a
    /// resumed run connects to).
    fn instance_id(&self) -> String {
        locked(&self.last).as_ref().map_or_else(
            || format!("pending-{}", self.setup.key),
            |(id, _)| id.clone(),
        )
    }

    /// Reconnected to the sandbox a dead worker left (or a finished turn paused), or
    /// replacing a lost one with what was restored; `None` for one made for this run.
    fn origin(&self) -> Option<toren_protocol::SandboxOrigin> {
        locked(&self.origin).clone()
    }

    /// The envd version E2B reported for the sandbox behind `instance_id`.
    fn envd_version(&self) -> Option<String> {
        locked(&self.last)
            .as_ref()
            .map(|(_, version)| version.clone())
    }

    async fn exec(&self, req: ExecRequest) -> toren_sandbox::Result<ExecOutput> {
        check_command(&req.command)?;
        let message = start_message(
            &req.command,
            &self.setup.env,
            &self.setup.limits,
            SANDBOX_WORKDIR,
        );
        let mut retried = false;
        loop {
            let (id, token) = self.ensure().await?;
            let target = Target {
                client: &self.setup.client,
                id: &id,
                token: token.as_deref(),
            };
            // A command whose request never got a connection did not start: retried.
            let ran = self
                .setup
                .client
                .retrying("start a command", || {
                    process::run(&target, &message, req.timeout, req.output_limit, None)
                })
                .await;
            let notes: String = locked(&self.notes).drain(..).collect();
            return match ran {
                Ok(ran) => match ran.ended {
                    Ended::Exited(code) => Ok(ExecOutput {
                        exit_code: code,
                        output: format!("{notes}{}", ran.output),
                        truncated: ran.truncated,
                        timed_out: false,
                        limits_hit: Vec::new(),
                    }),
                    Ended::TimedOut => Ok(ExecOutput {
                        exit_code: None,
                        output: format!("{notes}{}", ran.output),
                        truncated: ran.truncated,
                        timed_out: true,
                        limits_hit: Vec::new(),
                    }),
                    Ended::Broken(err) => {
                        tracing::warn!(sandbox = %id, %err, "a command's stream broke");
                        let gone = matches!(
                            self.setup.client.connect(&id, self.setup.lifetime).await,
                            Err(e) if e.is_gone()
                        );
                        if gone {
                            self.forget(&id).await;
                        }
                        let why = if gone {
                            "the E2B sandbox went away while this command ran (killed or expired); the next command runs in a new sandbox, which has only the files Toren can restore from the log (listed then)"
                        } else {
                            "the connection to the E2B sandbox broke while this command ran; the command was killed"
                        };
                        Ok(cut_short(format!("{notes}{}\n[{why}]", ran.output), false))
                    }
                },
                Err(err) if err.is_gone() && !retried => {
                    // The command never started: run it in a new sandbox.
                    tracing::warn!(sandbox = %id, %err, "the E2B sandbox is gone; making a new one");
                    locked(&self.notes).insert(0, notes);
                    self.forget(&id).await;
                    retried = true;
                    continue;
                }
                Err(err) => Err(err.into()),
            };
        }
    }
}

/// The file tools' handle when the VM cannot be reached from here.
struct Unreachable;

impl Unreachable {
    fn error<T>() -> toren_sandbox::Result<T> {
        Err(toren_sandbox::Error::Io {
            context: "e2b sandbox".to_owned(),
            source: std::io::Error::other(
                "the sandbox's files are reachable only from the runtime",
            ),
        })
    }
}

impl Files for Unreachable {
    fn read(&self, _: &str, _: u64) -> toren_sandbox::Result<Vec<u8>> {
        Self::error()
    }

    fn write(&self, _: &str, _: &[u8]) -> toren_sandbox::Result<()> {
        Self::error()
    }

    fn metadata(&self, _: &str) -> toren_sandbox::Result<toren_sandbox::EntryInfo> {
        Self::error()
    }
}
