//! Settings resolved from a map of variables: defaults, overrides and refused values.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use toren_config::{
    ENV_VARS, Error, QueueChoice, SandboxChoice, Secret, Settings, TelegramSettings, env_vars,
};

fn settings(vars: &[(&str, &str)]) -> Result<Settings, Error> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Settings::from_lookup(|name| map.get(name).cloned())
}

#[test]
fn defaults_follow_home() {
    let got = settings(&[("HOME", "/home/ada")]).expect("valid");
    assert_eq!(
        got,
        Settings {
            home: PathBuf::from("/home/ada/.toren"),
            agents_dir: PathBuf::from("./agents"),
            database_url: Secret::new("sqlite:///home/ada/.toren/toren.db"),
            database_pool_size: 10,
            sandbox: SandboxChoice::Docker,
            sandbox_auto: true,
            sandbox_root: PathBuf::from("/home/ada/.toren/sandboxes"),
            downloads: PathBuf::from("/home/ada/Downloads/toren"),
            exec_helper: None,
            docker_host: None,
            test_egress_hosts: None,
            test_egress_ca: None,
            e2b_api_key: None,
            e2b_api_url: "https://api.e2b.app".to_owned(),
            e2b_sandbox_url: "https://sandbox.e2b.app".to_owned(),
            anthropic_api_key: None,
            anthropic_base_url: "https://api.anthropic.com".to_owned(),
            openai_api_key: None,
            openai_base_url: "https://api.openai.com/v1".to_owned(),
            ollama_host: "http://localhost:11434".to_owned(),
            aws_endpoint_url: None,
            aws_region: None,
            lease_ttl: Duration::from_secs(30),
            max_tokens: 8192,
            approval_poll: Duration::from_millis(200),
            log: "warn".to_owned(),
            user: toren_config::UNNAMED_USER.to_owned(),
            api_addr: "127.0.0.1:7420".parse().unwrap(),
            api_token: None,
            api_tokens_file: None,
            queue: QueueChoice::Local,
            worker_id: None,
            workspace_volume: None,
            agent_concurrency: None,
        }
    );
}

#[test]
fn toren_queue_is_local_by_default_and_postgres_needs_a_postgres_store() {
    let queue = |value: &str| settings(&[("HOME", "/h"), ("TOREN_QUEUE", value)]);
    assert_eq!(
        settings(&[("HOME", "/h")]).unwrap().queue,
        QueueChoice::Local
    );
    assert_eq!(queue("local").unwrap().queue, QueueChoice::Local);
    for value in ["redis", "LOCAL"] {
        let error = queue(value).expect_err(value).to_string();
        assert!(
            error.contains("TOREN_QUEUE") && error.contains(value) && error.contains("`local`"),
            "{value}: {error}"
        );
    }
    let on_sqlite = queue("postgres")
        .expect_err("postgres on sqlite")
        .to_string();
    assert_eq!(
        on_sqlite,
        "TOREN_QUEUE=postgres is not valid: expected a Postgres store for it: set \
         TOREN_DATABASE_URL to a `postgres://` URL (it is `sqlite://…`), or use TOREN_QUEUE=local"
    );
    let on_postgres = settings(&[
        ("HOME", "/h"),
        ("TOREN_QUEUE", "postgres"),
        (
            "TOREN_DATABASE_URL",
            "postgresql://toren:secret@db:5432/toren",
        ),
    ])
    .unwrap();
    assert_eq!(on_postgres.queue, QueueChoice::Postgres);
}

#[test]
fn agent_concurrency_is_unlimited_or_a_positive_count() {
    let limit = |value: &str| settings(&[("HOME", "/h"), ("TOREN_AGENT_CONCURRENCY", value)]);
    assert_eq!(settings(&[("HOME", "/h")]).unwrap().agent_concurrency, None);
    assert_eq!(limit("unlimited").unwrap().agent_concurrency, None);
    assert_eq!(limit("4").unwrap().agent_concurrency, Some(4));
    for bad in ["0", "-1", "lots", "1.5"] {
        let error = limit(bad).expect_err(bad).to_string();
        assert_eq!(
            error,
            format!(
                "TOREN_AGENT_CONCURRENCY={bad} is not valid: expected a whole number from 1 \
                 to 100000, or `unlimited`"
            )
        );
    }
}

#[test]
fn every_variable_overrides_its_default() {
    let got = settings(&[
        ("HOME", "/home/ada"),
        ("TOREN_HOME", "/srv/toren"),
        ("TOREN_AGENTS", "/etc/toren/agents"),
        ("TOREN_DATABASE_URL", "postgres://toren:pw@db/toren"),
        ("TOREN_DATABASE_POOL_SIZE", "25"),
        ("TOREN_SANDBOX", "none"),
        ("TOREN_SANDBOX_ROOT", "/data/workspaces"),
        ("TOREN_DOWNLOADS", "/srv/inbox"),
        ("TOREN_EXEC_HELPER", "/opt/toren/toren-exec"),
        ("DOCKER_HOST", "tcp://10.0.0.2:2375"),
        ("ANTHROPIC_API_KEY", "sk-ant-1"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9000/"),
        ("OPENAI_API_KEY", "sk-2"),
        ("OPENAI_BASE_URL", "https://openrouter.ai/api/v1"),
        ("OLLAMA_HOST", "127.0.0.1:11500"),
        ("TOREN_LEASE_TTL", "2m"),
        ("TOREN_MAX_TOKENS", "1024"),
        ("TOREN_APPROVAL_POLL", "1s"),
        ("TOREN_LOG", "toren_sandbox=info,warn"),
        ("USER", "ada"),
        ("LOGNAME", "ada-login"),
        ("TOREN_API_ADDR", "0.0.0.0:8080"),
        ("TOREN_API_TOKEN", "tok-3"),
        ("TOREN_API_TOKENS_FILE", "/etc/toren/tokens"),
        ("TOREN_QUEUE", "postgres"),
        ("TOREN_WORKER_ID", "worker-7"),
        ("TOREN_WORKSPACE_VOLUME", "nfs-a"),
        ("TOREN_AGENT_CONCURRENCY", "3"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_DEFAULT_REGION", "us-east-2"),
    ])
    .expect("valid");
    assert_eq!(
        got,
        Settings {
            home: PathBuf::from("/srv/toren"),
            agents_dir: PathBuf::from("/etc/toren/agents"),
            database_url: Secret::new("postgres://toren:pw@db/toren"),
            database_pool_size: 25,
            sandbox: SandboxChoice::None,
            sandbox_auto: false,
            sandbox_root: PathBuf::from("/data/workspaces"),
            downloads: PathBuf::from("/srv/inbox"),
            exec_helper: Some(PathBuf::from("/opt/toren/toren-exec")),
            docker_host: Some("tcp://10.0.0.2:2375".to_owned()),
            test_egress_hosts: None,
            test_egress_ca: None,
            e2b_api_key: None,
            e2b_api_url: "https://api.e2b.app".to_owned(),
            e2b_sandbox_url: "https://sandbox.e2b.app".to_owned(),
            anthropic_api_key: Some(Secret::new("sk-ant-1")),
            anthropic_base_url: "http://127.0.0.1:9000".to_owned(),
            openai_api_key: Some(Secret::new("sk-2")),
            openai_base_url: "https://openrouter.ai/api/v1".to_owned(),
            ollama_host: "http://127.0.0.1:11500".to_owned(),
            aws_endpoint_url: Some("http://127.0.0.1:4566".to_owned()),
            aws_region: Some("eu-west-1".to_owned()),
            lease_ttl: Duration::from_secs(120),
            max_tokens: 1024,
            approval_poll: Duration::from_secs(1),
            log: "toren_sandbox=info,warn".to_owned(),
            user: "ada".to_owned(),
            api_addr: "0.0.0.0:8080".parse().unwrap(),
            api_token: Some(Secret::new("tok-3")),
            api_tokens_file: Some(PathBuf::from("/etc/toren/tokens")),
            queue: QueueChoice::Postgres,
            worker_id: Some("worker-7".to_owned()),
            workspace_volume: Some("nfs-a".to_owned()),
            agent_concurrency: Some(3),
        }
    );
}

#[test]
fn toren_home_moves_the_database_and_workspaces_and_needs_no_home() {
    let got = settings(&[("TOREN_HOME", "/srv/toren")]).expect("valid");
    assert_eq!(got.database_url.expose(), "sqlite:///srv/toren/toren.db");
    assert_eq!(got.sandbox_root, PathBuf::from("/srv/toren/sandboxes"));
    // Without a home directory, downloads go beside the data.
    assert_eq!(got.downloads, PathBuf::from("/srv/toren/downloads"));
}

#[test]
fn empty_values_count_as_unset() {
    let got = settings(&[
        ("HOME", "/home/ada"),
        ("TOREN_HOME", ""),
        ("TOREN_SANDBOX", ""),
        ("ANTHROPIC_API_KEY", ""),
        ("OPENAI_BASE_URL", ""),
    ])
    .expect("valid");
    assert_eq!(got.home, PathBuf::from("/home/ada/.toren"));
    assert_eq!(got.sandbox, SandboxChoice::Docker, "unset means auto");
    assert_eq!(got.anthropic_api_key, None);
    assert_eq!(got.openai_base_url, "https://api.openai.com/v1");
}

#[test]
fn no_home_at_all_is_a_clear_error() {
    let error = settings(&[("HOME", "")]).expect_err("no home");
    assert!(matches!(error, Error::NoHome));
    assert_snapshot!(error.to_string());
}

#[test]
fn each_toren_sandbox_value() {
    let choice = |value: &str| settings(&[("HOME", "/h"), ("TOREN_SANDBOX", value)]);
    for (value, expected, auto) in [
        ("auto", SandboxChoice::Docker, true),
        ("docker", SandboxChoice::Docker, false),
        ("e2b", SandboxChoice::E2b, false),
        ("local", SandboxChoice::Local, false),
        ("none", SandboxChoice::None, false),
    ] {
        let got = choice(value).expect("valid");
        assert_eq!(
            (value, got.sandbox, got.sandbox_auto),
            (value, expected, auto)
        );
    }
    let error = choice("kubernetes").expect_err("unknown");
    assert_snapshot!("sandbox_unknown", error.to_string());
}

#[test]
fn auto_picks_e2b_when_its_key_is_set() {
    let got = settings(&[("HOME", "/h"), ("E2B_API_KEY", "e2b_x")]).expect("valid");
    assert_eq!((got.sandbox, got.sandbox_auto), (SandboxChoice::E2b, true));
    assert_eq!(got.e2b_api_key, Some(Secret::new("e2b_x")));
    assert!(
        !format!("{got:?}").contains("e2b_x"),
        "the key is never printed"
    );
    // An explicit choice does not look at the key.
    let got = settings(&[
        ("HOME", "/h"),
        ("E2B_API_KEY", "e2b_x"),
        ("TOREN_SANDBOX", "local"),
    ])
    .expect("valid");
    assert_eq!(got.sandbox, SandboxChoice::Local);
}

#[test]
fn e2b_addresses_follow_the_domain_unless_set() {
    let got = settings(&[("HOME", "/h"), ("E2B_DOMAIN", "e2b.example.org")]).expect("valid");
    assert_eq!(
        (got.e2b_api_url.as_str(), got.e2b_sandbox_url.as_str()),
        (
            "https://api.e2b.example.org",
            "https://sandbox.e2b.example.org"
        )
    );
    let got = settings(&[
        ("HOME", "/h"),
        ("E2B_API_URL", "http://127.0.0.1:3000/"),
        ("E2B_SANDBOX_URL", "http://127.0.0.1:3001"),
    ])
    .expect("valid");
    assert_eq!(
        (got.e2b_api_url.as_str(), got.e2b_sandbox_url.as_str()),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3001")
    );
    let error = settings(&[("HOME", "/h"), ("E2B_API_URL", "api.e2b.app")]).expect_err("bad");
    assert!(error.to_string().contains("E2B_API_URL"), "{error}");
}

#[test]
fn a_base_url_must_be_http() {
    let error = settings(&[("HOME", "/h"), ("OPENAI_BASE_URL", "api.openai.com/v1")])
        .expect_err("no scheme");
    assert_snapshot!(error.to_string());
}

#[test]
fn durations_are_written_with_their_unit() {
    let ttl = |value: &str| settings(&[("HOME", "/h"), ("TOREN_LEASE_TTL", value)]);
    for (value, expected) in [
        ("30s", Duration::from_secs(30)),
        ("1s", Duration::from_secs(1)),
        ("90 seconds", Duration::from_secs(90)),
        ("1m 30s", Duration::from_secs(90)),
        ("1500ms", Duration::from_millis(1500)),
        ("24h", Duration::from_secs(24 * 3600)),
        ("PT45S", Duration::from_secs(45)),
    ] {
        assert_eq!(
            (value, ttl(value).expect("valid").lease_ttl),
            (value, expected)
        );
    }
    let poll = |value: &str| settings(&[("HOME", "/h"), ("TOREN_APPROVAL_POLL", value)]);
    assert_eq!(
        poll("50ms").expect("valid").approval_poll,
        Duration::from_millis(50)
    );
    assert_eq!(
        poll("60s").expect("valid").approval_poll,
        Duration::from_secs(60)
    );
}

#[test]
fn a_bad_duration_names_the_variable_the_form_and_the_bounds() {
    let ttl = |value: &str| settings(&[("HOME", "/h"), ("TOREN_LEASE_TTL", value)]);
    // A bare number, a negative or zero length, one out of bounds, and words.
    for value in ["30", "-5s", "0s", "999ms", "25h", "soon", "30 parsecs"] {
        let error = ttl(value).expect_err(value);
        assert!(
            matches!(&error, Error::InvalidSetting { var: "TOREN_LEASE_TTL", value: v, .. } if v == value),
            "{value}: {error:?}"
        );
    }
    assert_snapshot!("lease_ttl_bare_number", ttl("30").unwrap_err().to_string());
    let poll = |value: &str| settings(&[("HOME", "/h"), ("TOREN_APPROVAL_POLL", value)]);
    for value in ["200", "5ms", "2m"] {
        assert!(
            matches!(
                poll(value),
                Err(Error::InvalidSetting {
                    var: "TOREN_APPROVAL_POLL",
                    ..
                })
            ),
            "{value}"
        );
    }
    assert_snapshot!(
        "approval_poll_too_fast",
        poll("5ms").unwrap_err().to_string()
    );
}

#[test]
fn max_tokens_is_a_positive_whole_number() {
    let tokens = |value: &str| settings(&[("HOME", "/h"), ("TOREN_MAX_TOKENS", value)]);
    assert_eq!(tokens("1").expect("valid").max_tokens, 1);
    assert_eq!(tokens("1000000").expect("valid").max_tokens, 1_000_000);
    for value in ["0", "-1", "8k", "1e4", "1000001", "99999999999"] {
        assert!(
            matches!(
                tokens(value),
                Err(Error::InvalidSetting {
                    var: "TOREN_MAX_TOKENS",
                    ..
                })
            ),
            "{value}"
        );
    }
    assert_snapshot!("max_tokens_zero", tokens("0").unwrap_err().to_string());
}

#[test]
fn the_deciding_user_is_user_else_logname_else_says_neither_is_set() {
    let user = |vars: &[(&str, &str)]| {
        let mut vars = vars.to_vec();
        vars.push(("HOME", "/h"));
        settings(&vars).expect("valid").user
    };
    assert_eq!(user(&[("USER", "ada"), ("LOGNAME", "lovelace")]), "ada");
    assert_eq!(user(&[("LOGNAME", "lovelace")]), "lovelace");
    assert_eq!(user(&[("USER", ""), ("LOGNAME", "lovelace")]), "lovelace");
    // Recorded with the front door (`… via cli`): what is known, never a bare `unknown`.
    assert_eq!(user(&[]), "unnamed (no USER or LOGNAME)");
}

#[test]
fn toren_log_is_read_on_its_own_too() {
    let lookup =
        |value: &'static str| move |name: &str| (name == "TOREN_LOG").then(|| value.to_owned());
    assert_eq!(Settings::log_filter(lookup("debug")), "debug");
    assert_eq!(
        Settings::log_filter(lookup("")),
        "warn",
        "empty counts as unset"
    );
    assert_eq!(Settings::log_filter(|_| None), "warn");
    let got = settings(&[("HOME", "/h"), ("TOREN_LOG", "toren_worker=debug")]).expect("valid");
    assert_eq!(got.log, "toren_worker=debug");
}

#[test]
fn debug_output_never_shows_a_secret() {
    let got = settings(&[
        ("HOME", "/h"),
        ("ANTHROPIC_API_KEY", "sk-ant-SECRET"),
        ("OPENAI_API_KEY", "sk-SECRET"),
        ("TOREN_DATABASE_URL", "postgres://u:SECRET@db/t"),
    ])
    .expect("valid");
    let debug = format!("{got:?}");
    assert!(!debug.contains("SECRET"), "{debug}");
    assert!(debug.contains("anthropic_api_key: Some(***)"), "{debug}");
}

#[test]
fn only_registered_variables_are_read() {
    let asked = std::cell::RefCell::new(Vec::new());
    let lookup = |name: &str| {
        asked.borrow_mut().push(name.to_owned());
        (name == "HOME").then(|| "/h".to_owned())
    };
    // The runtime's settings and the Telegram bot's (read only by the processes that run
    // the bot) together read the whole registry.
    Settings::from_lookup(lookup).expect("valid");
    TelegramSettings::from_lookup(lookup).expect("valid");
    let mut asked = asked.into_inner();
    asked.sort();
    asked.dedup();
    let mut registered: Vec<String> = ENV_VARS.iter().map(|var| var.name.to_owned()).collect();
    registered.sort();
    assert_eq!(
        asked, registered,
        "every registered variable is read, and nothing else"
    );
}

#[test]
fn the_registry_documents_every_variable_once() {
    let mut names: Vec<&str> = ENV_VARS.iter().map(|var| var.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ENV_VARS.len(), "duplicate names in ENV_VARS");
    assert!(ENV_VARS.iter().all(|var| !var.description.is_empty()));
    let secrets: Vec<&str> = ENV_VARS
        .iter()
        .filter(|v| v.secret)
        .map(|v| v.name)
        .collect();
    assert_eq!(
        secrets,
        [
            "TOREN_DATABASE_URL",
            "TOREN_API_TOKEN",
            "E2B_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "TELEGRAM_BOT_TOKEN"
        ]
    );
    assert_snapshot!(env_vars::markdown_table());
}

#[test]
fn the_aws_region_falls_back_to_aws_default_region() {
    let region = |vars: &[(&str, &str)]| {
        let mut all = vec![("HOME", "/h")];
        all.extend_from_slice(vars);
        settings(&all).expect("valid").aws_region
    };
    assert_eq!(region(&[]), None);
    assert_eq!(
        region(&[("AWS_DEFAULT_REGION", "us-east-2")]),
        Some("us-east-2".to_owned())
    );
    assert_eq!(
        region(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "us-east-2")]),
        Some("us-east-2".to_owned())
    );
    assert_eq!(
        region(&[
            ("AWS_REGION", "eu-west-1"),
            ("AWS_DEFAULT_REGION", "us-east-2")
        ]),
        Some("eu-west-1".to_owned())
    );
}

#[test]
fn the_database_pool_size_is_range_checked() {
    let pool = |value: &str| settings(&[("HOME", "/h"), ("TOREN_DATABASE_POOL_SIZE", value)]);
    assert_eq!(pool("1").unwrap().database_pool_size, 1);
    assert_eq!(pool("1000").unwrap().database_pool_size, 1000);
    for bad in ["0", "1001", "-3", "many"] {
        let error = pool(bad).expect_err(bad).to_string();
        assert_eq!(
            error,
            format!(
                "TOREN_DATABASE_POOL_SIZE={bad} is not valid: expected a whole number from 1 \
                 to 1000"
            )
        );
    }
}
