//! `sandbox.network` of an agent file: `true` (the network, unfiltered), `false` (none),
//! a list of hosts (`[pypi.org, "*.github.com"]`, reached through Toren's egress proxy) or
//! a mapping `{allow: [...], ask: true}` (hosts outside `allow` are asked about). Each host
//! is checked by [`HostPattern::parse`], its errors pointing at the host's line and column.
//! `agent_file` calls in here with the raw, position-carrying value from `raw`.

use serde_saphyr::Spanned;
use toren_protocol::{EgressPolicy, HostPattern};

use crate::agent_file::{Checker, Problems};
use crate::error::Result;
use crate::raw::RawNetwork;

const NETWORK_HELP: &str = "`network` is `false` (no network), `true` (unfiltered), a list of \
                            hosts such as `[pypi.org, \"*.github.com\"]`, or \
                            `{allow: [pypi.org], ask: true}`";

impl Checker<'_> {
    /// The spec's `network` flag and egress policy for `network:`.
    pub(crate) fn network(
        &self,
        network: Spanned<RawNetwork>,
    ) -> Result<(bool, Option<EgressPolicy>)> {
        let at = network.referenced;
        match network.value {
            RawNetwork::Flag(flag) => Ok((flag, None)),
            RawNetwork::List(hosts) => {
                if hosts.is_empty() {
                    return Err(self.error_with_help(
                        at,
                        "`network: []` allows no host",
                        "write `network: false` for no network, or list the hosts",
                    ));
                }
                let allow = self.hosts(hosts)?;
                Ok((
                    false,
                    Some(EgressPolicy {
                        allow,
                        ask: false,
                        secrets: Vec::new(),
                    }),
                ))
            }
            RawNetwork::Mapping(mapping) => {
                let ask = mapping.ask.unwrap_or(false);
                let allow = match mapping.allow {
                    None => Vec::new(),
                    Some(list) => self.hosts(list.value)?,
                };
                if allow.is_empty() && !ask {
                    return Err(self.error_with_help(
                        at,
                        "this `network` mapping allows no host and does not ask",
                        "list hosts in `allow`, set `ask: true`, or write `network: false`",
                    ));
                }
                Ok((
                    false,
                    Some(EgressPolicy {
                        allow,
                        ask,
                        secrets: Vec::new(),
                    }),
                ))
            }
            RawNetwork::Other(found) => Err(self.error_with_help(
                at,
                format!(
                    "`network` must be true, false, a list of hosts or a mapping, found {found}"
                ),
                NETWORK_HELP,
            )),
        }
    }

    /// The hosts' patterns; fails after checking them all, if any is bad.
    fn hosts(&self, hosts: Vec<Spanned<String>>) -> Result<Vec<HostPattern>> {
        let mut patterns: Vec<(HostPattern, &Spanned<String>)> = Vec::with_capacity(hosts.len());
        let mut problems = Problems::default();
        for host in &hosts {
            if let Some(pattern) = problems.keep(self.host(host, &patterns)) {
                patterns.push((pattern, host));
            }
        }
        problems.into_result(patterns.into_iter().map(|(pattern, _)| pattern).collect())
    }

    /// `host`'s pattern, unless it is bad or among the `earlier` ones.
    fn host(
        &self,
        host: &Spanned<String>,
        patterns: &[(HostPattern, &Spanned<String>)],
    ) -> Result<HostPattern> {
        {
            let pattern = HostPattern::parse(&host.value).map_err(|why| {
                self.error_with_help(
                    host.referenced,
                    format!("`{}` is not a host name or `*.` pattern: {why}", host.value),
                    "e.g. `pypi.org` (exactly that name) or `\"*.github.com\"` (every name \
                     under github.com, not github.com itself)",
                )
            })?;
            if let Some((_, first)) = patterns.iter().find(|(earlier, _)| *earlier == pattern) {
                return Err(self.error(
                    host.referenced,
                    format!(
                        "`{}` is listed twice in `network` (first at line {}, column {})",
                        host.value,
                        first.referenced.line(),
                        first.referenced.column()
                    ),
                ));
            }
            Ok(pattern)
        }
    }
}
