//! The secrets category's part under e2b: the runtime holds the local E2B service's real
//! key, a canary like the others; and every request the service recorded is searched for
//! the canaries (the key only as the control plane's `X-API-Key`, the granted value only as
//! a command's `envs`), as are the disks of the sandboxes the runs used.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::Backend;
use super::harness::{self, contains, files_under};
use super::secrets::Canaries;
use crate::suite::common::Toren;

/// Under e2b the runtime needs the local E2B service's real key: it becomes a canary too
/// (a runtime credential that must never reach the sandbox).
pub(super) fn e2b_key(backend: &Backend, toren: Toren, canaries: &mut Canaries) -> Toren {
    if backend.sandbox != "e2b" {
        return toren;
    }
    for (name, value) in &mut canaries.vars {
        if *name == "E2B_API_KEY" {
            harness::E2B_KEY.clone_into(value);
        }
    }
    toren.env("E2B_API_KEY", harness::E2B_KEY)
}

/// Under e2b: the local E2B service recorded every request Toren made. The E2B key went
/// only to the control plane, as its `X-API-Key`; no other canary went anywhere; the
/// granted value only as a command's `envs` (never in its argv, `envVars`, a file upload
/// or the control plane); no sandbox was created with `envVars`. Nor is a canary on the
/// disk of any sandbox the runs used. Returns how many checks it made.
pub(super) fn requests(
    fake: &toren_test_support::e2b::FakeE2b,
    canaries: &Canaries,
    runs: &[&harness::Ran],
) -> usize {
    let requests = fake.requests();
    assert!(
        requests.iter().any(|r| r.plane == "control") && requests.iter().any(|r| r.plane == "envd"),
        "the runs made no E2B requests"
    );
    let mut granted_starts = 0;
    for request in &requests {
        let whole = request.text();
        let mut without_key = request.clone();
        if request.plane == "control" {
            let keys: Vec<&str> = request
                .headers
                .iter()
                .filter(|(k, _)| k == "x-api-key")
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(keys, vec![harness::E2B_KEY], "{whole}");
            without_key.headers.retain(|(k, _)| k != "x-api-key");
        }
        let rest = without_key.text();
        for value in canaries.never() {
            assert!(!rest.contains(value), "a request holds {value}:\n{whole}");
        }
        if request.plane == "control" && request.method == "POST" && request.uri == "/sandboxes" {
            let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
            let env_vars = &body["envVars"];
            assert!(
                env_vars.is_null() || env_vars.as_object().is_some_and(serde_json::Map::is_empty),
                "a sandbox was created with envVars: {body}"
            );
        }
        if !rest.contains(&canaries.my_app) {
            continue;
        }
        // The granted value: only as one command's `envs`.
        assert!(
            request.plane == "envd" && request.uri == "/process.Process/Start",
            "the granted value went elsewhere:\n{whole}"
        );
        // The envelope's 5-byte prefix (decoded lossily) comes before the JSON.
        let json_at = request.body.find('{').unwrap();
        let start: serde_json::Value = serde_json::from_str(&request.body[json_at..]).unwrap();
        let process = &start["process"];
        assert_eq!(process["envs"]["MY_APP_DB_URL"], json!(canaries.my_app));
        let mut others = process.clone();
        others["envs"]
            .as_object_mut()
            .unwrap()
            .remove("MY_APP_DB_URL");
        assert!(
            !others.to_string().contains(&canaries.my_app),
            "the granted value is in a command's argv: {process}"
        );
        granted_starts += 1;
    }
    // The granted run's four commands, and no more.
    assert_eq!(granted_starts, 4, "commands that carried the granted value");
    let mut checked = 4;
    let mut disks = 0;
    for ran in runs {
        for id in harness::sandbox_ids(&ran.events) {
            let disk = fake.disk(&id).unwrap();
            for dir in ["/workspace", "/home/user", "/tmp"] {
                let (host, _) = disk.host_path(dir).unwrap();
                for file in files_under(&host) {
                    let Ok(bytes) = std::fs::read(&file) else {
                        continue;
                    };
                    for value in canaries.values() {
                        assert!(!contains(&bytes, value), "{} holds {value}", file.display());
                    }
                }
            }
            disks += 1;
        }
    }
    assert_eq!(disks, runs.len(), "one sandbox per run");
    checked += 1;
    checked
}
