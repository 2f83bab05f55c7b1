//! Which bearer tokens `toren serve` accepts: `TOREN_API_TOKEN` (named `api`), the
//! `name:token` lines of `TOREN_API_TOKENS_FILE`, or — on a loopback address with neither —
//! a token generated once and kept in `TOREN_HOME/api-token` (0600), so that `toren serve`
//! with no configuration works and still lets no other local user in without reading a file
//! only its owner can read. A non-loopback address without a configured token is refused.

use std::fs::{self, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use toren_config::Settings;
use toren_config::env_vars::{TOREN_API_TOKEN, TOREN_API_TOKENS_FILE};
use toren_server::{MIN_TOKEN_LEN, Token, parse_tokens};

use crate::exit::Failure;

/// The name requests made with `TOREN_API_TOKEN` act as.
const API_TOKEN_NAME: &str = "api";
/// The name requests made with the generated token act as.
const LOCAL_TOKEN_NAME: &str = "local";
/// The generated token's file, in `TOREN_HOME`.
const TOKEN_FILE: &str = "api-token";

/// Where the accepted tokens came from, for the startup line.
pub(crate) enum Source {
    Configured(usize),
    Generated(PathBuf),
}

/// The tokens this server accepts (see the module's documentation).
pub(crate) fn tokens(settings: &Settings) -> Result<(Vec<Token>, Source), Failure> {
    let mut tokens = Vec::new();
    if let Some(secret) = &settings.api_token {
        let secret = secret.expose().trim();
        if secret.len() < MIN_TOKEN_LEN {
            return Err(Failure::usage(anyhow!(
                "{} must be at least {MIN_TOKEN_LEN} characters (e.g. `openssl rand -hex 24`)",
                TOREN_API_TOKEN.name
            )));
        }
        tokens.push(Token {
            name: API_TOKEN_NAME.to_owned(),
            secret: secret.to_owned(),
        });
    }
    if let Some(path) = &settings.api_tokens_file {
        for token in from_file(path)? {
            if tokens
                .iter()
                .any(|t| t.name == token.name || t.secret == token.secret)
            {
                return Err(Failure::usage(anyhow!(
                    "{}={}: `{}` is also {}'s name or token; give each client its own",
                    TOREN_API_TOKENS_FILE.name,
                    path.display(),
                    token.name,
                    TOREN_API_TOKEN.name
                )));
            }
            tokens.push(token);
        }
    }
    if !tokens.is_empty() {
        let count = tokens.len();
        return Ok((tokens, Source::Configured(count)));
    }
    if !settings.api_addr.ip().is_loopback() {
        return Err(Failure::usage(anyhow!(
            "TOREN_API_ADDR={} is reachable from other machines: set {} (or {}) so that the \
             API requires a token",
            settings.api_addr,
            TOREN_API_TOKEN.name,
            TOREN_API_TOKENS_FILE.name
        )));
    }
    let path = settings.home.join(TOKEN_FILE);
    let secret = generated(&path).map_err(Failure::usage)?;
    Ok((
        vec![Token {
            name: LOCAL_TOKEN_NAME.to_owned(),
            secret,
        }],
        Source::Generated(path),
    ))
}

fn from_file(path: &Path) -> Result<Vec<Token>, Failure> {
    let var = TOREN_API_TOKENS_FILE.name;
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read {var}={}", path.display()))
        .map_err(Failure::usage)?;
    if let Ok(meta) = fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            "{var}={} can be read by other users; `chmod 600` it",
            path.display()
        );
    }
    let tokens =
        parse_tokens(&text).map_err(|e| Failure::usage(anyhow!("{var}={}:{e}", path.display())))?;
    if tokens.is_empty() {
        return Err(Failure::usage(anyhow!(
            "{var}={} holds no `name:token` line",
            path.display()
        )));
    }
    Ok(tokens)
}

/// The token kept in `path`, made (random, hex, mode 0600) if there is none yet.
fn generated(path: &Path) -> anyhow::Result<String> {
    if let Ok(existing) = fs::read_to_string(path) {
        let existing = existing.trim();
        if existing.len() >= MIN_TOKEN_LEN {
            return Ok(existing.to_owned());
        }
    }
    // Made private, as the store makes `TOREN_HOME` when it comes first: on a fresh machine
    // this is the first thing `toren serve` writes there.
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut bytes = [0u8; 24];
    fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for a new API token")?;
    let secret = hex::encode(bytes);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write the API token to {}", path.display()))?;
    file.write_all(format!("{secret}\n").as_bytes())
        .with_context(|| format!("cannot write the API token to {}", path.display()))?;
    Ok(secret)
}
