//! What the run service knows of its process's environment (resolved in wiring, given with
//! [`RunService::with_env`]): the values of the variables a run's agent grants (`env`) or
//! injects through its egress proxy (`sandbox.secrets`).
//!
//! Every front door creates runs and sends session messages through the service, so the
//! service is where they are refused, before anything is written, when an injected secret
//! is unset in the environment of the process that will drive them (only a process that
//! drives its own runs checks: an API in front of a shared queue cannot see its workers'
//! environment, and there the worker fails the run naming the variable). It is also where a
//! person's input and messages are redacted of those values before they are journaled
//! (`toren_worker::policy_redactor`), and where a process that reads a run but never drove
//! it learns the values, so that its log lines are redacted of them too.

use std::sync::Arc;

use toren_protocol::{Event, EventKind, ResolvedPolicy, RunId};

use crate::{Error, Result, RunService};

/// Looks a variable up in the process's environment (`None`: unset or empty).
pub type EnvValues = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The service's view of its process's environment.
#[derive(Clone)]
pub(crate) struct ProcessEnv {
    values: EnvValues,
    /// Whether this process drives the runs it creates, so that an unset injected secret
    /// is refused when the run or session is made.
    drives: bool,
}

impl RunService {
    /// The same service, seeing this process's environment through `values`. With
    /// `drives_runs` (the process drives the runs it creates: `toren run`, `toren chat`,
    /// Telegram, `toren serve` with its own workers on the local queue), creating a run or
    /// a session, or sending a message, is refused while an injected secret of the agent is
    /// unset ([`Error::SecretsUnset`]). Without this the service checks and redacts nothing.
    #[must_use]
    pub fn with_env(mut self, values: EnvValues, drives_runs: bool) -> Self {
        self.env = Some(ProcessEnv {
            values,
            drives: drives_runs,
        });
        self
    }

    /// [`Error::SecretsUnset`] if this process drives its runs and a secret `policy`
    /// injects is unset in its environment. Names only, never a value.
    pub fn require_secrets(&self, agent: &str, policy: Option<&ResolvedPolicy>) -> Result<()> {
        let Some(env) = self.env.as_ref().filter(|env| env.drives) else {
            return Ok(());
        };
        let names: Vec<String> = policy
            .and_then(|policy| policy.egress.as_ref())
            .into_iter()
            .flat_map(|egress| &egress.secrets)
            .map(|secret| secret.name.clone())
            .filter(|name| (env.values)(name).is_none())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        Err(Error::SecretsUnset {
            agent: agent.to_owned(),
            names,
        })
    }

    /// `text` (a run's input, a session's message) as it may be journaled: the values
    /// `policy` grants or injects, as this process knows them, replaced by
    /// `[redacted:NAME]`.
    pub(crate) fn redact_input(&self, policy: Option<&ResolvedPolicy>, text: String) -> String {
        let Some(env) = &self.env else {
            return text;
        };
        let redactor = toren_worker::policy_redactor(policy, &*env.values);
        match redactor.redact(&text) {
            std::borrow::Cow::Owned(redacted) => redacted,
            std::borrow::Cow::Borrowed(_) => text,
        }
    }

    /// `text` a person wrote about `run` (a decision's reason) as it may be journaled:
    /// [`RunService::redact_input`] with the policy the run was created under (read from
    /// its log only when this process knows values to redact).
    pub(crate) async fn redact_for_run(&self, run: &RunId, text: String) -> Result<String> {
        if self.env.is_none() {
            return Ok(text);
        }
        let events = self.store().read(run, 0).await?;
        Ok(self.redact_with_events(&events, text))
    }

    /// [`RunService::redact_input`] with the policy of the `run_created` at the start of
    /// `events` (one run's log).
    pub(crate) fn redact_with_events(&self, events: &[Event], text: String) -> String {
        let policy = events.first().and_then(|event| match &event.kind {
            EventKind::RunCreated(created) => created.policy.as_ref(),
            _ => None,
        });
        self.redact_input(policy, text)
    }

    /// Learns the values of the run whose `run_created` is among `events`, so that this
    /// process's log lines are redacted of them though it never drove the run. The
    /// service's own reads (`get`, `events`) do it; a front door that follows a run from
    /// its start (`toren events --follow`) calls it with what it follows.
    pub fn learn_values(&self, events: &[Event]) {
        let Some(env) = &self.env else {
            return;
        };
        for event in events {
            if let EventKind::RunCreated(created) = &event.kind {
                toren_worker::policy_redactor(created.policy.as_ref(), &*env.values);
            }
        }
    }
}
