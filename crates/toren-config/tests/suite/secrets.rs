//! `sandbox.secrets`: names, exact hosts (each allowed by `network`) and the header
//! template are pinned in the egress policy, never a value; every mistake is refused at its
//! own line and column.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_config::{Position, parse_agent};
use toren_protocol::{EgressPolicy, HostPattern, SecretRule};

use super::common::diagnostic;

fn agent(sandbox: &str) -> String {
    format!("name: a\nmodel: anthropic/m\nsandbox:\n{sandbox}")
}

#[test]
fn a_secret_is_pinned_by_name_hosts_and_template() {
    let yaml = agent(
        "  network: [api.github.com, pypi.org]\n  env: [LANGUAGE]\n  secrets:\n    \
         GITHUB_TOKEN: {hosts: [API.github.com], header: \"Authorization: Bearer ${value}\"}\n",
    );
    let spec = parse_agent(Path::new("agents/x.yaml"), &yaml).unwrap_or_else(|e| panic!("{e}"));
    let sandbox = spec.sandbox.unwrap();
    let host = |name: &str| HostPattern::parse(name).unwrap();
    assert_eq!(
        sandbox.egress,
        Some(EgressPolicy {
            allow: vec![host("api.github.com"), host("pypi.org")],
            ask: false,
            secrets: vec![SecretRule {
                name: "GITHUB_TOKEN".to_owned(),
                hosts: vec![host("api.github.com")],
                header: "Authorization".to_owned(),
                template: "Bearer ${value}".to_owned(),
            }],
        })
    );
    assert_eq!(sandbox.env, vec!["LANGUAGE".to_owned()]);
}

#[test]
fn malformed_secrets_point_at_the_value() {
    let network = "  network: [api.github.com, \"*.example.com\"]\n";
    let cases: &[(&str, &str, u64, u64, &str)] = &[
        (
            "  network: true\n",
            "{T: {hosts: [api.github.com], header: \"A: ${value}\"}}",
            5,
            12,
            "`secrets` need `network` to be a list of hosts: the egress proxy adds them, and \
             it runs only for a host list",
        ),
        (
            network,
            "{T: {hosts: [pypi.org], header: \"A: ${value}\"}}",
            5,
            25,
            "secret `T` is for `pypi.org`, which `network` does not allow",
        ),
        (
            network,
            "{T: {hosts: [\"*.example.com\"], header: \"A: ${value}\"}}",
            5,
            25,
            "secret `T`: `*.example.com` is a pattern; a secret names exact hosts",
        ),
        (
            network,
            "{T: {hosts: [a.example.com], header: \"A: Bearer\"}}",
            5,
            49,
            "`header` must contain `${value}` exactly once",
        ),
        (
            network,
            "{T: {hosts: [api.github.com], header: \"Host: ${value}\"}}",
            5,
            50,
            "`Host` is a header the proxy owns; a secret cannot set it",
        ),
        (
            network,
            "{T: {hosts: [api.github.com], header: \"A: ${value}\\r\\nX: y\"}}",
            5,
            50,
            "`header` must not contain control characters (a line break would start another \
             header)",
        ),
        (
            network,
            "{T: {hosts: [api.github.com]}}",
            5,
            16,
            "secret `T` needs `header`: how it is sent",
        ),
        (
            network,
            "{1T: {hosts: [api.github.com], header: \"A: ${value}\"}}",
            5,
            13,
            "`1T` is not a valid environment variable name",
        ),
        (
            network,
            "{TOREN_HOME: {hosts: [api.github.com], header: \"A: ${value}\"}}",
            5,
            13,
            "`TOREN_HOME` is one of Toren's own variables and is never sent anywhere",
        ),
        (
            "  network: [api.github.com]\n  env: [T]\n",
            "{T: {hosts: [api.github.com], header: \"A: ${value}\"}}",
            6,
            13,
            "`T` is both granted in `env` and injected as a secret",
        ),
    ];
    for &(before, secrets, line, column, message) in cases {
        let yaml = agent(&format!("{before}  secrets: {secrets}\n"));
        let found = diagnostic(&yaml);
        assert_eq!(
            (secrets, found.position, found.message.as_str()),
            (secrets, Some(Position { line, column }), message),
            "{found}"
        );
    }
}
