//! One run's docker sandbox: the workspace (file tools use it directly, as with the local
//! backend) and a container made lazily at the first command. Each command is a request
//! to the container's helper; when the container is gone or stopped, the next command
//! brings up a fresh one around the same workspace. A command whose container vanished
//! while it ran comes back as killed, with a note, so the run goes on.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use toren_exec::protocol::{Finished, Request, Response};
use toren_protocol::ResourceLimits;
use toren_sandbox::{
    ExecOutput, ExecRequest, LimitHit, SANDBOX_WORKDIR, Sandbox, Workspace, check_command,
};

use crate::container;
use crate::error::{Error, Result};
use crate::session::{Lost, Session};
use crate::spec::ContainerSpec;

/// How long after a command's timeout its answer may take (the helper kills the group at
/// the deadline and drains its output for at most 2 s) before the helper counts as hung.
const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// Said when a command's container disappeared under it.
const CONTAINER_LOST: &str = "[the sandbox container stopped while this command ran (it was \
     removed or killed from outside); the command was cut short. The workspace is intact, and \
     the next command runs in a fresh container.]";

/// Said when the helper did not answer in time.
const HELPER_HUNG: &str = "[the sandbox did not answer within the command's timeout; its \
     container was removed, and the next command runs in a fresh one. The workspace is intact.]";

/// What the sandbox needs to (re)create its container.
pub(crate) struct Setup {
    pub(crate) docker: Docker,
    pub(crate) workspace: Workspace,
    pub(crate) run: String,
    pub(crate) name: String,
    pub(crate) instance: String,
    pub(crate) image: String,
    pub(crate) default_image: String,
    pub(crate) helper: PathBuf,
    pub(crate) network: bool,
    pub(crate) limits: ResourceLimits,
    /// The commands' whole environment, granted values included: never logged.
    pub(crate) env: Vec<(String, String)>,
    /// The run's egress proxy (a host list), serving while this sandbox lives; its
    /// directory is bound into the container.
    pub(crate) proxy: Option<toren_sandbox::egress::RunningProxy>,
}

pub(crate) struct DockerSandbox {
    setup: Setup,
    /// The current container's session; `None` until the first command.
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// The id of the last container brought up, for `instance_id`.
    container: Mutex<Option<String>>,
}

impl DockerSandbox {
    pub(crate) fn new(setup: Setup) -> Self {
        Self {
            setup,
            session: tokio::sync::Mutex::new(None),
            container: Mutex::new(None),
        }
    }

    /// The session with a running container, bringing one up if needed.
    async fn session(&self) -> Result<Arc<Session>> {
        let mut current = self.session.lock().await;
        if let Some(session) = current.as_ref().filter(|s| !s.is_closed()) {
            return Ok(Arc::clone(session));
        }
        let s = &self.setup;
        // Whoever owns the workspace now: its files stay theirs, from both sides.
        let meta = std::fs::metadata(s.workspace.path()).map_err(|e| Error::Io {
            context: format!(
                "cannot inspect the workspace `{}`",
                s.workspace.path().display()
            ),
            source: e,
        })?;
        let spec = ContainerSpec {
            image: &s.image,
            run: &s.run,
            instance: &s.instance,
            workspace: s.workspace.path(),
            helper: &s.helper,
            user: (meta.uid(), meta.gid()),
            network: s.network,
            limits: s.limits,
            created: jiff::Timestamp::now(),
            egress: s
                .proxy
                .as_ref()
                .map(toren_sandbox::egress::RunningProxy::dir),
        };
        let session =
            Arc::new(container::bring_up(&s.docker, &s.name, &spec, &s.default_image).await?);
        *self
            .container
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(session.container().to_owned());
        *current = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Forgets `session` (if still current) and removes its container, so the next command
    /// starts afresh.
    async fn discard(&self, session: &Session) {
        let mut current = self.session.lock().await;
        if current
            .as_ref()
            .is_some_and(|s| s.container() == session.container())
        {
            *current = None;
        }
        drop(current);
        session.close();
        if let Err(err) = container::remove(&self.setup.docker, session.container()).await {
            tracing::warn!(%err, "could not remove a broken sandbox container");
        }
    }

    fn output(&self, finished: Finished) -> ExecOutput {
        let mut limits_hit = Vec::new();
        if finished.oom_kills > 0 {
            limits_hit.push(LimitHit::Memory {
                limit: self.setup.limits.memory,
            });
        }
        if finished.pids_max_hits > 0 {
            limits_hit.push(LimitHit::Pids {
                limit: self.setup.limits.pids,
            });
        }
        ExecOutput {
            exit_code: finished.exit_code,
            output: finished.output,
            truncated: finished.truncated,
            timed_out: finished.timed_out,
            limits_hit,
        }
    }
}

fn cut_short(note: &str, timed_out: bool) -> ExecOutput {
    ExecOutput {
        exit_code: None,
        output: note.to_owned(),
        truncated: false,
        timed_out,
        limits_hit: Vec::new(),
    }
}

impl fmt::Debug for DockerSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.setup;
        f.debug_struct("DockerSandbox")
            .field("name", &s.name)
            .field("workspace", &s.workspace.path())
            .field("image", &s.image)
            .field("network", &s.network)
            .field("limits", &s.limits)
            .field(
                "env",
                &s.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn workspace(&self) -> &Workspace {
        &self.setup.workspace
    }

    fn backend(&self) -> &'static str {
        crate::DockerBackend::NAME
    }

    /// The container's id once one was brought up; before that, the name it will have.
    fn instance_id(&self) -> String {
        self.container
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| self.setup.name.clone())
    }

    async fn exec(&self, req: ExecRequest) -> toren_sandbox::Result<ExecOutput> {
        check_command(&req.command)?;
        let deadline = req.timeout + ANSWER_GRACE;
        let mut retried = false;
        loop {
            let session = self.session().await?;
            let request = Request {
                id: session.next_id(),
                command: req.command.clone(),
                cwd: SANDBOX_WORKDIR.to_owned(),
                env: self.setup.env.clone(),
                timeout_ms: u64::try_from(req.timeout.as_millis()).unwrap_or(u64::MAX),
                output_limit: req.output_limit,
                cpu_secs: Some(self.setup.limits.cpu_secs),
            };
            let container = session.container().to_owned();
            match tokio::time::timeout(deadline, session.call(&request)).await {
                Ok(Ok(Response::Finished(finished))) => return Ok(self.output(finished)),
                Ok(Ok(Response::Failed { error, .. })) => {
                    let why = format!("could not run the command: {error}");
                    return Err(Error::Helper { container, why }.into());
                }
                Ok(Err(Lost::Write(err))) if !retried => {
                    // The request never reached the helper, so the command did not run:
                    // bring up a fresh container and send it there.
                    tracing::warn!(%container, %err, "cannot reach the sandbox helper; recreating its container");
                    self.discard(&session).await;
                    retried = true;
                }
                Ok(Err(_)) => {
                    tracing::warn!(%container, "the sandbox container went away during a command");
                    self.discard(&session).await;
                    return Ok(cut_short(CONTAINER_LOST, false));
                }
                Err(_) => {
                    tracing::warn!(%container, "the sandbox helper did not answer in time");
                    self.discard(&session).await;
                    return Ok(cut_short(HELPER_HUNG, true));
                }
            }
        }
    }
}
