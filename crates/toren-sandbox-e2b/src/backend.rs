//! [`E2bBackend`]: the settings, the startup check (the key's shape, then one list call that
//! proves the key and the address), and opening one run's sandbox — connected or created
//! at once, so its id is what `sandbox_provisioned` records. `finish` kills a run's sandbox,
//! or pauses a session turn's (the session's next turn resumes it); `release` kills a
//! removed session's.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use toren_protocol::{ResolvedPolicy, RunId};
use toren_sandbox::{Sandbox, SandboxBackend};

use crate::client::{Client, Endpoints};
use crate::error::{Error, Result, check_key};
use crate::reaper::TorenSandbox;
use crate::sandbox::{E2bSandbox, META_INSTANCE, META_KEY, Setup};

/// The template for agents that name none: E2B's public `base` (Debian with Python 3.11,
/// Node.js 20, npm, yarn and git).
pub const DEFAULT_TEMPLATE: &str = "base";
/// How long a sandbox lives without a refresh (refreshed every third of it while a run
/// holds it); also how long a dead worker's sandbox waits for another to reconnect.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Settings of the e2b backend, resolved by the caller.
#[derive(Clone, Debug)]
pub struct E2bSettings {
    pub endpoints: Endpoints,
    /// Workspaces on the host (`<sandbox_root>/<run id>/workspace`), pinned per run.
    pub sandbox_root: PathBuf,
    /// The template for agents without `sandbox.image` (e.g. [`DEFAULT_TEMPLATE`]).
    pub default_template: String,
    /// Names this Toren installation in the sandboxes' metadata.
    pub instance: String,
    pub lifetime: Duration,
}

/// The e2b backend.
#[derive(Clone, Debug)]
pub struct E2bBackend {
    settings: E2bSettings,
    client: Client,
    /// The sandboxes opened here, by run, to close at `finish`.
    open: Arc<Mutex<HashMap<RunId, Arc<E2bSandbox>>>>,
}

impl E2bBackend {
    /// The backend's name, as recorded in policies and events.
    pub const NAME: &'static str = "e2b";

    /// Checks the key's shape; no request yet.
    pub fn new(settings: E2bSettings) -> Result<Self> {
        check_key(&settings.endpoints.api_key)?;
        let client = Client::new(settings.endpoints.clone())?;
        Ok(Self {
            settings,
            client,
            open: Arc::default(),
        })
    }

    pub fn settings(&self) -> &E2bSettings {
        &self.settings
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The startup check: E2B answers and takes the key. Returns how many sandboxes of
    /// this instance exist.
    pub async fn check(&self) -> Result<usize> {
        let filter = BTreeMap::from([(META_INSTANCE.to_owned(), self.settings.instance.clone())]);
        Ok(self.client.list(&filter).await?.len())
    }

    /// Opens the run's sandbox: reconnects to the one its metadata names, else creates one.
    pub async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>> {
        self.open_with_secrets(run, policy, env, &[], None).await
    }

    /// [`open`](Self::open) with the values of the secrets a host list injects
    /// (`sandbox.secrets`): they go into the create request's transform rules, to E2B's
    /// control plane only; and where to ask what to restore into a sandbox that replaces
    /// a lost one.
    pub async fn open_with_secrets(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        secrets: &[(String, String)],
        restore: Option<toren_sandbox::SharedRestoreSource>,
    ) -> Result<Arc<dyn Sandbox>> {
        for (name, value) in &env {
            check_env(name, value)?;
        }
        // A host list is E2B's own allow-list; what E2B cannot keep (`ask`) is refused
        // before any sandbox exists, never widened.
        let network = toren_sandbox::egress::proxied(policy)
            .map(|egress| crate::network::create_network(egress, secrets))
            .transpose()
            .map_err(|why| Error::NetworkPolicy { why })?;
        let key = policy
            .sandbox_key
            .clone()
            .unwrap_or_else(|| run.as_str().to_owned());
        // The VM's disk is the workspace; the host directory pinned with the run is only a
        // stand-in (e.g. for `Sandbox::workspace`). A worker on another machine, where it
        // does not exist, makes its own empty one rather than refusing the run.
        let workspace =
            match toren_sandbox::pinned_workspace(&self.settings.sandbox_root, run, policy) {
                Err(toren_sandbox::Error::WorkspaceMissing { .. }) => {
                    toren_sandbox::Workspace::create(&self.settings.sandbox_root, &key)?
                }
                other => other?,
            };
        let setup = Setup {
            client: self.client.clone(),
            workspace,
            run: run.as_str().to_owned(),
            key,
            instance: self.settings.instance.clone(),
            template: policy
                .image
                .clone()
                .unwrap_or_else(|| self.settings.default_template.clone()),
            internet: policy.network,
            network,
            lifetime: self.settings.lifetime,
            env: toren_sandbox::sandbox_env(&env),
            limits: policy.limits,
            restore,
        };
        let sandbox = Arc::new_cyclic(|me| E2bSandbox::new(setup, me.clone()));
        sandbox.ensure().await?;
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run.clone(), Arc::clone(&sandbox));
        Ok(sandbox)
    }

    /// The ids of this instance's sandboxes kept under `key`.
    async fn by_key(&self, key: &str) -> Result<Vec<String>> {
        let filter = BTreeMap::from([
            (META_KEY.to_owned(), key.to_owned()),
            (META_INSTANCE.to_owned(), self.settings.instance.clone()),
        ]);
        let listed = self.client.list(&filter).await?;
        Ok(listed.into_iter().map(|s| s.sandbox_id).collect())
    }

    /// This installation's sandboxes, running and paused.
    pub async fn list_toren_sandboxes(&self) -> Result<Vec<TorenSandbox>> {
        let filter = BTreeMap::from([(META_INSTANCE.to_owned(), self.settings.instance.clone())]);
        let listed = self.client.list(&filter).await?;
        Ok(listed.iter().map(TorenSandbox::from_info).collect())
    }

    /// The run ended: kill its sandbox, or pause a session turn's for the next turn.
    pub async fn finish_run(&self, run: &RunId, key: Option<&str>) -> Result<()> {
        let opened = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run);
        let key = key.map_or_else(|| run.as_str().to_owned(), str::to_owned);
        let ids = match &opened {
            Some(sandbox) => sandbox.close().await.into_iter().collect(),
            None => self.by_key(&key).await?,
        };
        let session = opened
            .as_ref()
            .map_or_else(|| key != run.as_str(), |s| s.is_session());
        for id in ids {
            if session {
                self.client
                    .retrying("pause a sandbox", || self.client.pause(&id))
                    .await?;
            } else {
                self.client
                    .retrying("kill a sandbox", || self.client.kill(&id))
                    .await?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl SandboxBackend for E2bBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        Ok(E2bBackend::open(self, run, policy, env).await?)
    }

    /// The hooks' secrets go into E2B's transform rules; the approver and recorder are
    /// not used: E2B's firewall asks nobody and reports no connections.
    async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        egress: toren_sandbox::EgressHooks,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        Ok(self
            .open_with_secrets(run, policy, env, &egress.secrets, egress.restore)
            .await?)
    }

    async fn finish(&self, run: &RunId) -> toren_sandbox::Result<()> {
        self.finish_run(run, None).await?;
        Ok(())
    }

    async fn ready(&self) -> toren_sandbox::Result<()> {
        self.check().await?;
        Ok(())
    }

    async fn release(&self, key: &str) -> toren_sandbox::Result<()> {
        for id in self.by_key(key).await? {
            self.client.kill(&id).await?;
        }
        Ok(())
    }
}

fn check_env(name: &str, value: &str) -> Result<()> {
    let why = if name.is_empty() {
        "the name is empty"
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        "the name is not letters, digits and `_`"
    } else if value.contains('\0') {
        "the value contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(Error::Sandbox(toren_sandbox::Error::InvalidEnv {
        name: name.to_owned(),
        why,
    }))
}
