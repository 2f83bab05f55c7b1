//! A run's egress proxy with secrets (`toren_sandbox::egress`): it writes the CA bundle the
//! sandbox trusts (the host's roots and the run's CA certificate, never a key) beside its
//! socket, points the TLS clients' variables at it, and refuses to start without a
//! secret's value, naming the secret. Without secrets nothing of this happens.

use std::sync::Arc;

use toren_egress::{SystemResolver, UpstreamTrust};
use toren_protocol::{EgressPolicy, HostPattern, SecretRule};
use toren_sandbox::EgressHooks;
use toren_sandbox::egress::{CA_BUNDLE, RunningProxy, SANDBOX_EGRESS_DIR};

fn policy(secrets: bool) -> EgressPolicy {
    let host = HostPattern::parse("api.github.com").unwrap();
    EgressPolicy {
        allow: vec![host.clone()],
        ask: false,
        secrets: if secrets {
            vec![SecretRule {
                name: "GITHUB_TOKEN".to_owned(),
                hosts: vec![host],
                header: "Authorization".to_owned(),
                template: "Bearer ${value}".to_owned(),
            }]
        } else {
            Vec::new()
        },
    }
}

fn hooks(value: Option<&str>) -> EgressHooks {
    EgressHooks {
        secrets: value
            .map(|v| vec![("GITHUB_TOKEN".to_owned(), v.to_owned())])
            .unwrap_or_default(),
        ..EgressHooks::default()
    }
}

#[tokio::test]
async fn secrets_get_a_ca_bundle_and_the_variables_that_name_it() {
    let dir = tempfile::tempdir().unwrap();
    let egress = dir.path().join("egress");
    let value = "ghp_value-never-in-a-file-0123";
    let proxy = RunningProxy::start(
        &egress,
        &policy(true),
        Arc::new(SystemResolver),
        &UpstreamTrust::System,
        hooks(Some(value)),
    )
    .unwrap();
    let bundle = std::fs::read_to_string(egress.join(CA_BUNDLE)).unwrap();
    assert!(
        bundle.trim_end().ends_with("-----END CERTIFICATE-----"),
        "{bundle}"
    );
    assert!(!bundle.contains("PRIVATE KEY"), "no key in the bundle");
    for file in std::fs::read_dir(&egress).unwrap() {
        let path = file.unwrap().path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            assert!(!text.contains(value), "{} holds the value", path.display());
        }
    }
    let mut env = vec![("SSL_CERT_FILE".to_owned(), "/elsewhere".to_owned())];
    proxy.add_env(&mut env);
    let named = format!("{SANDBOX_EGRESS_DIR}/{CA_BUNDLE}");
    for name in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
    ] {
        let values: Vec<&str> = env
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(values, vec![named.as_str()], "{name}");
    }
    assert!(env.iter().all(|(_, v)| !v.contains(value)));
    assert!(env.iter().any(|(n, _)| n == "HTTPS_PROXY"));
}

#[tokio::test]
async fn without_secrets_there_is_no_bundle_and_no_ca_variable() {
    let dir = tempfile::tempdir().unwrap();
    let egress = dir.path().join("egress");
    let proxy = RunningProxy::start(
        &egress,
        &policy(false),
        Arc::new(SystemResolver),
        &UpstreamTrust::System,
        hooks(None),
    )
    .unwrap();
    assert!(!egress.join(CA_BUNDLE).exists());
    let mut env = Vec::new();
    proxy.add_env(&mut env);
    assert!(env.iter().all(|(n, _)| n != "SSL_CERT_FILE"), "{env:?}");
}

#[tokio::test]
async fn a_secret_without_its_value_stops_the_proxy_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let error = RunningProxy::start(
        &dir.path().join("egress"),
        &policy(true),
        Arc::new(SystemResolver),
        &UpstreamTrust::System,
        hooks(None),
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("`GITHUB_TOKEN` has no value"),
        "{error}"
    );
}
