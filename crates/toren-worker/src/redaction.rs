//! Redaction by value in the worker (issue 18, part 5): what a tool printed is journaled,
//! and so sent to the model and shown on every surface, with the values of the run's
//! granted `env` variables and injected secrets replaced by `[redacted:NAME]`
//! (`toren_redact`). The values are looked up where the sandbox's environment is, through
//! the worker's [`crate::driver::EnvLookup`], each time: nothing keeps them longer than a
//! call. Injected secrets' values are also what the run's egress proxy adds to requests
//! ([`Worker::secret_values`]); they never enter the sandbox, but a host could echo one
//! back into a command's output, and there it is redacted too.

use toren_protocol::ResolvedPolicy;
use toren_redact::Redactor;

use crate::Worker;

impl Worker {
    /// The values of the secrets `policy` injects, by name; a secret whose variable is
    /// unset is left out (the proxy then refuses to start, naming it).
    pub(crate) fn secret_values(&self, policy: &ResolvedPolicy) -> Vec<(String, String)> {
        let Some(egress) = policy.egress.as_ref() else {
            return Vec::new();
        };
        egress
            .secrets
            .iter()
            .filter_map(|secret| (self.config.env)(&secret.name).map(|v| (secret.name.clone(), v)))
            .collect()
    }

    /// The redactor of `policy`'s granted and injected values.
    pub(crate) fn redactor(&self, policy: Option<&ResolvedPolicy>) -> Redactor {
        let Some(policy) = policy else {
            return Redactor::default();
        };
        let granted = policy
            .env
            .iter()
            .filter_map(|name| (self.config.env)(name).map(|v| (name.clone(), v)));
        Redactor::new(granted.chain(self.secret_values(policy)))
    }

    /// A tool's output as it may be journaled.
    pub(crate) fn redact_output(
        &self,
        policy: Option<&ResolvedPolicy>,
        output: String,
        truncated: bool,
    ) -> String {
        let redactor = self.redactor(policy);
        if redactor.is_empty() {
            return output;
        }
        redactor.redact_output(&output, truncated)
    }
}
