//! Failures an operator must fix, each naming the fix: no daemon, no helper (or one that
//! is not static), no image.

use toren_sandbox_docker::{DockerBackend, DockerSettings, Error};

use super::support::{Env, helper, policy, settings, with_image};

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_daemon_names_the_fix() {
    let root = tempfile::tempdir().unwrap();
    let settings = DockerSettings {
        docker_host: Some("unix:///nonexistent/docker.sock".to_owned()),
        ..settings(&root, "test", "img")
    };
    let err = DockerBackend::connect(settings).await.unwrap_err();
    assert!(matches!(err, Error::DaemonUnreachable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("/nonexistent/docker.sock"), "{message}");
    assert!(message.contains("systemctl start docker"), "{message}");
    assert!(message.contains("DOCKER_HOST"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_dynamic_helper_names_the_build_script() {
    let env = Env::new().await;
    let status = env.backend.check().await.unwrap();
    assert!(!status.server_version.is_empty());
    assert!(status.default_image_present);

    for (path, variant) in [
        ("/nonexistent/toren-exec", "missing"),
        ("/bin/true", "dynamic"),
    ] {
        let settings = DockerSettings {
            exec_helper: path.into(),
            ..env.backend.settings().clone()
        };
        let backend = DockerBackend::connect(settings).await.unwrap();
        let err = backend.check().await.unwrap_err();
        match variant {
            "missing" => assert!(matches!(err, Error::HelperMissing { .. }), "{err:?}"),
            _ => assert!(matches!(err, Error::HelperNotStatic { .. }), "{err:?}"),
        }
        assert!(
            err.to_string().contains("scripts/build-exec-helper"),
            "{err}"
        );
        assert!(
            backend
                .open(&toren_protocol::RunId::new(), &policy(), Vec::new())
                .await
                .is_err()
        );
    }
    assert!(helper().is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_image_fails_naming_how_to_get_it() {
    let env = Env::new().await;
    let run = toren_protocol::RunId::new();
    let err = env
        .backend
        .open(&run, &with_image("toren-no-such-image:1"), Vec::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ImageMissing { .. }), "{err:?}");
    // What the run fails with, through the Sandbox seam.
    let message = toren_sandbox::Error::from(err).to_string();
    assert!(
        message.contains("docker pull toren-no-such-image:1"),
        "{message}"
    );

    let missing_default = Env::with_image("toren-no-such-default:1").await;
    let status = missing_default.backend.check().await.unwrap();
    assert!(!status.default_image_present);
    let err = missing_default
        .backend
        .open(&run, &policy(), Vec::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("scripts/build-sandbox-image"),
        "{err}"
    );
}

/// An image that goes away between `open` and the first command (the start path does not
/// inspect it again) still fails naming how to get it, through the Sandbox seam.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_removed_after_open_fails_naming_how_to_get_it() {
    let env = Env::new().await;
    let tag = format!(
        "toren-test-vanishing:{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let docker_cli = |args: &[&str]| {
        let status = std::process::Command::new("docker")
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "docker {args:?}");
    };
    docker_cli(&["tag", super::support::SH_IMAGE, &tag]);
    let (_run, sandbox) = env.open(&with_image(&tag)).await;
    docker_cli(&["rmi", &tag]);
    let err = sandbox
        .exec(toren_sandbox::ExecRequest {
            command: "true".to_owned(),
            timeout: std::time::Duration::from_secs(30),
            output_limit: 1000,
        })
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&format!("docker pull {tag}")), "{message}");
    assert!(env.containers().await.is_empty());
}
