//! `sandbox.network`: `true` and `false` keep their meaning, a list of hosts or a mapping
//! `{allow, ask}` becomes the pinned egress policy, and every malformed host is refused at
//! its own line and column.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_config::{Position, parse_agent};
use toren_protocol::{EgressPolicy, HostPattern};

use super::common::diagnostic;

fn network(yaml_network: &str) -> (bool, Option<EgressPolicy>) {
    let yaml = format!("name: a\nmodel: anthropic/m\nsandbox:\n  network: {yaml_network}\n");
    match parse_agent(Path::new("agents/x.yaml"), &yaml) {
        Ok(spec) => {
            let sandbox = spec
                .sandbox
                .unwrap_or_else(|| panic!("no sandbox for {yaml}"));
            (sandbox.network, sandbox.egress)
        }
        Err(error) => panic!("expected a valid agent for {yaml:?}, got:\n{error}"),
    }
}

fn hosts(names: &[&str]) -> Vec<HostPattern> {
    names
        .iter()
        .map(|name| HostPattern::parse(name).unwrap())
        .collect()
}

#[test]
fn true_and_false_keep_their_meaning_without_a_proxy() {
    assert_eq!(network("true"), (true, None));
    assert_eq!(network("false"), (false, None));
}

#[test]
fn a_list_allows_exactly_those_hosts_and_refuses_the_rest() {
    assert_eq!(
        network("[pypi.org, files.pythonhosted.org, \"*.GitHub.com\"]"),
        (
            false,
            Some(EgressPolicy {
                allow: hosts(&["pypi.org", "files.pythonhosted.org", "*.github.com"]),
                ask: false,
                secrets: Vec::new(),
            })
        )
    );
}

#[test]
fn a_mapping_sets_allow_and_ask() {
    assert_eq!(
        network("{allow: [pypi.org, \"*.npmjs.org\"], ask: true}"),
        (
            false,
            Some(EgressPolicy {
                allow: hosts(&["pypi.org", "*.npmjs.org"]),
                ask: true,
                secrets: Vec::new(),
            })
        )
    );
    assert_eq!(
        network("{ask: true}"),
        (
            false,
            Some(EgressPolicy {
                allow: Vec::new(),
                ask: true,
                secrets: Vec::new(),
            })
        )
    );
}

#[test]
fn malformed_network_values_point_at_the_value() {
    let cases: &[(&str, u64, u64, &str)] = &[
        (
            "[pypi.org, \"pypi.org:443\"]",
            4,
            23,
            "`pypi.org:443` is not a host name or `*.` pattern: a host is a name only, \
             without scheme, port or path (found ':')",
        ),
        (
            "\n    - pypi.org\n    - \"a.*.com\"",
            6,
            7,
            "`a.*.com` is not a host name or `*.` pattern: `*` is only allowed as a leading \
             `*.` (e.g. `*.github.com`)",
        ),
        (
            "[169.254.169.254]",
            4,
            13,
            "`169.254.169.254` is not a host name or `*.` pattern: IP addresses are not \
             allowed; name the host (the proxy resolves it and refuses private addresses)",
        ),
        (
            "[pypi.org, PyPI.org]",
            4,
            23,
            "`PyPI.org` is listed twice in `network` (first at line 4, column 13)",
        ),
        ("[]", 4, 12, "`network: []` allows no host"),
        (
            "{allow: []}",
            4,
            12,
            "this `network` mapping allows no host and does not ask",
        ),
        (
            "ask",
            4,
            12,
            "`network` must be true, false, a list of hosts or a mapping, found the string \"ask\"",
        ),
    ];
    for &(value, line, column, message) in cases {
        let yaml = format!("name: a\nmodel: anthropic/m\nsandbox:\n  network: {value}\n");
        let found = diagnostic(&yaml);
        assert_eq!(
            (value, found.position, found.message.as_str()),
            (value, Some(Position { line, column }), message),
            "{found}"
        );
    }
}

#[test]
fn an_unknown_key_in_the_mapping_is_refused() {
    let found = diagnostic(
        "name: a\nmodel: anthropic/m\nsandbox:\n  network: {allow: [a.org], asks: true}\n",
    );
    assert_eq!(found.position.map(|p| p.line), Some(4), "{found}");
    assert!(found.message.contains("asks"), "{found}");
}
