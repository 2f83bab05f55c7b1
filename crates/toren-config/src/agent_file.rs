//! Reading and validating one agent file into a [`toren_protocol::AgentSpec`].
//!
//! [`load_agent`] reads the file, parses it with serde-saphyr into the `raw` shape, and then
//! checks what serde cannot: the model string, the agent name, the sandbox's variable names
//! and the turn limit. Every failure becomes one [`Diagnostic`] at the line and column of the
//! offending value. Finding the file by name is `lookup`'s job.

use std::path::Path;

use serde_saphyr::{Location, Spanned};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, CheckpointPolicy, OnInterrupt, ResourceLimits, SandboxSpec,
};

use crate::diagnostic::{Diagnostic, Position};
use crate::error::{Error, Result};
use crate::raw::{RawAgent, RawCount, RawSandbox, RawSandboxMapping};
use crate::{env_vars, yaml_errors};

/// The model providers an agent file may name, as in `anthropic/claude-sonnet-5`.
pub const PROVIDERS: &[&str] = &["anthropic", "openai", "ollama", "scripted"];

/// Longest agent name accepted.
pub const MAX_NAME_LEN: usize = 64;

fn name_help() -> String {
    format!(
        "a name is 1 to {MAX_NAME_LEN} ASCII letters, digits, `-` and `_`, starting with a \
         letter or digit, e.g. `name: code-reviewer`"
    )
}

/// Reads, parses and validates the agent file at `path`.
///
/// Errors name `path` as given, with the line and column of the problem.
/// [`AgentSpec::source`] is set to the file's canonical absolute path.
pub fn load_agent(path: &Path) -> Result<AgentSpec> {
    load(path).map(|loaded| loaded.spec)
}

/// Parses and validates agent file text; `path` only names the file in errors.
/// [`AgentSpec::source`] is left `None`.
pub fn parse_agent(path: &Path, source: &str) -> Result<AgentSpec> {
    parse(path, source).map(|(spec, _)| spec)
}

/// A loaded agent with what a later check of its name needs.
pub(crate) struct Loaded {
    pub(crate) spec: AgentSpec,
    text: String,
    name_at: Location,
}

impl Loaded {
    /// Fails unless the file's `name` is `expected` (the name it was looked up by).
    pub(crate) fn require_name(self, path: &Path, expected: &str) -> Result<AgentSpec> {
        if self.spec.name == expected {
            return Ok(self.spec);
        }
        let message = format!(
            "the agent in this file is named `{}`, but it was looked up as `{expected}`",
            self.spec.name
        );
        let help = format!("set `name: {expected}`, or rename the file after its agent");
        Err(invalid(
            Diagnostic::at(path, &self.text, Some(self.name_at), message).with_help(help),
        ))
    }
}

pub(crate) fn load(path: &Path) -> Result<Loaded> {
    let bytes = std::fs::read(path).map_err(|cause| Error::ReadAgent {
        path: path.to_path_buf(),
        cause,
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => return Err(not_utf8(path, error.as_bytes(), error.utf8_error())),
    };
    let (mut spec, name_at) = parse(path, &text)?;
    let absolute = std::fs::canonicalize(path).map_err(|cause| Error::ReadAgent {
        path: path.to_path_buf(),
        cause,
    })?;
    spec.source = Some(absolute.display().to_string());
    Ok(Loaded {
        spec,
        text,
        name_at,
    })
}

/// The validated spec and where its `name` value is.
fn parse(path: &Path, source: &str) -> Result<(AgentSpec, Location)> {
    let options = serde_saphyr::options! {
        // `sandbox: yes` is a string here, so it is refused instead of silently enabling.
        strict_booleans: true,
        // Snippets are rendered by `diagnostic`, the same way for every error.
        with_snippet: false,
    };
    let raw: RawAgent = serde_saphyr::from_str_with_options(source, options)
        .map_err(|error| invalid(yaml_errors::diagnostic(path, source, &error)))?;
    let name_at = raw.name.referenced;
    let spec = Checker { path, source }.agent(raw)?;
    Ok((spec, name_at))
}

fn invalid(diagnostic: Diagnostic) -> Error {
    Error::InvalidAgent(Box::new(diagnostic))
}

fn not_utf8(path: &Path, bytes: &[u8], error: std::str::Utf8Error) -> Error {
    let valid = bytes.get(..error.valid_up_to()).unwrap_or_default();
    let valid = String::from_utf8_lossy(valid);
    let line = valid.matches('\n').count() + 1;
    let column = valid
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    invalid(Diagnostic {
        path: path.to_path_buf(),
        position: Some(Position {
            line: line as u64,
            column: column as u64,
        }),
        message: "the file is not valid UTF-8 text".to_owned(),
        help: Some("save the agent file as UTF-8".to_owned()),
        snippet: None,
    })
}

/// Checks the raw file and builds the spec; holds what every diagnostic needs.
pub(crate) struct Checker<'a> {
    path: &'a Path,
    source: &'a str,
}

impl Checker<'_> {
    pub(crate) fn error(&self, at: Location, message: impl Into<String>) -> Error {
        invalid(Diagnostic::at(self.path, self.source, Some(at), message))
    }

    pub(crate) fn error_with_help(
        &self,
        at: Location,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Error {
        invalid(Diagnostic::at(self.path, self.source, Some(at), message).with_help(help))
    }

    fn agent(&self, raw: RawAgent) -> Result<AgentSpec> {
        self.name(&raw.name)?;
        self.model(&raw.model)?;
        let instructions = match raw.instructions {
            Some(text) if text.value.trim().is_empty() => {
                return Err(self.error_with_help(
                    text.referenced,
                    "`instructions` is empty",
                    "write the agent's instructions, or remove the key to use Toren's default",
                ));
            }
            other => other.map(|text| text.value),
        };
        let sandbox = match raw.sandbox {
            None => None,
            Some(sandbox) => self.sandbox(sandbox)?,
        };
        let max_turns = match raw.max_turns {
            None => AgentSpec::DEFAULT_MAX_TURNS,
            Some(count) => self.max_turns(count)?,
        };
        let context_tokens = match raw.context_tokens {
            None => None,
            Some(count) => Some(self.context_tokens(count)?),
        };
        let budget = self.budget(raw.budget, raw.pricing, &raw.model.value)?;
        Ok(AgentSpec {
            name: raw.name.value,
            model: raw.model.value,
            instructions,
            sandbox,
            max_turns,
            context_tokens,
            budget,
            source: None,
        })
    }

    fn name(&self, name: &Spanned<String>) -> Result<()> {
        match check_name(&name.value) {
            Ok(()) => Ok(()),
            Err(_) if name.value.is_empty() => {
                Err(self.error_with_help(name.referenced, "`name` is empty", name_help()))
            }
            Err(problem) => Err(self.error_with_help(
                name.referenced,
                format!("invalid agent name `{}`: {problem}", name.value),
                name_help(),
            )),
        }
    }

    fn model(&self, model: &Spanned<String>) -> Result<()> {
        let at = model.referenced;
        let value = model.value.as_str();
        if value.chars().any(char::is_control) {
            // Printed as is, such a value could rewrite the terminal of whoever reads it.
            return Err(self.error(
                at,
                format!("`model` must not contain control characters, found {value:?}"),
            ));
        }
        let providers = PROVIDERS.join(", ");
        let Some((provider, id)) = value.split_once('/') else {
            return Err(self.error_with_help(
                at,
                format!("`model` must be `provider/model-id`, found `{value}`"),
                format!("e.g. `model: anthropic/claude-sonnet-5`; providers: {providers}"),
            ));
        };
        if !PROVIDERS.contains(&provider) {
            return Err(self.error(
                at,
                format!(
                    "unknown model provider `{provider}` in `{value}`; \
                     expected `provider/model-id` with provider one of: {providers}"
                ),
            ));
        }
        if id.trim().is_empty() {
            return Err(self.error_with_help(
                at,
                format!("the model id after `{provider}/` is empty; expected `provider/model-id`"),
                format!("e.g. `model: {provider}/{}`", example_model(provider)),
            ));
        }
        if value.chars().any(char::is_whitespace) {
            return Err(self.error(
                at,
                format!("`model` must not contain spaces, found `{value}`"),
            ));
        }
        Ok(())
    }

    fn sandbox(&self, sandbox: Spanned<RawSandbox>) -> Result<Option<SandboxSpec>> {
        match sandbox.value {
            RawSandbox::Flag(false) => Ok(None),
            RawSandbox::Flag(true) => Ok(Some(SandboxSpec::default())),
            RawSandbox::Mapping(mapping) => self.sandbox_mapping(*mapping).map(Some),
            RawSandbox::Other(found) => Err(self.error_with_help(
                sandbox.referenced,
                format!("`sandbox` must be true, false or a mapping, found {found}"),
                "`sandbox: true` gives the agent a sandbox with the defaults; a mapping sets \
                 `image`, `network`, `approval`, `env`, `limits`, `on_interrupt` and `checkpoints`",
            )),
        }
    }

    fn sandbox_mapping(&self, mapping: RawSandboxMapping) -> Result<SandboxSpec> {
        let image = match mapping.image {
            Some(image) if image.value.trim().is_empty() => {
                return Err(self.error_with_help(
                    image.referenced,
                    "`image` is empty",
                    "name an image, or remove the key to use the backend's default image",
                ));
            }
            Some(image) if image.value.chars().any(char::is_control) => {
                return Err(self.error(
                    image.referenced,
                    format!(
                        "`image` must not contain control characters, found {:?}",
                        image.value
                    ),
                ));
            }
            other => other.map(|image| image.value),
        };
        let approval = match mapping.approval {
            None => ApprovalPolicy::default(),
            Some(approval) => match approval.value.as_str() {
                "always" => ApprovalPolicy::Always,
                "never" => ApprovalPolicy::Never,
                other => {
                    return Err(self.error(
                        approval.referenced,
                        format!("`approval` must be `always` or `never`, found `{other}`"),
                    ));
                }
            },
        };
        let on_interrupt = match mapping.on_interrupt {
            None => OnInterrupt::default(),
            Some(on_interrupt) => match on_interrupt.value.as_str() {
                "rerun" => OnInterrupt::Rerun,
                "ask" => OnInterrupt::Ask,
                other => {
                    return Err(self.error_with_help(
                        on_interrupt.referenced,
                        format!("`on_interrupt` must be `rerun` or `ask`, found `{other}`"),
                        "`rerun` runs a bash call interrupted mid-command again on resume (at-least-once); \
                         `ask` has a human approve it first",
                    ));
                }
            },
        };
        let (network, mut egress) = match mapping.network {
            None => (false, None),
            Some(network) => self.network(network)?,
        };
        let env = self.env(mapping.env.unwrap_or_default())?;
        if let Some(secrets) = mapping.secrets {
            let rules = self.secrets(secrets, egress.as_ref(), &env)?;
            if let Some(egress) = egress.as_mut() {
                egress.secrets = rules;
            }
        }
        let limits = match mapping.limits {
            None => ResourceLimits::default(),
            Some(limits) => self.limits(limits)?,
        };
        let checkpoints = match mapping.checkpoints {
            None => CheckpointPolicy::default(),
            Some(checkpoints) => self.checkpoints(checkpoints)?,
        };
        Ok(SandboxSpec {
            image,
            network,
            egress,
            approval,
            env,
            limits,
            on_interrupt,
            checkpoints,
        })
    }

    fn env(&self, names: Vec<Spanned<String>>) -> Result<Vec<String>> {
        let mut seen: Vec<&Spanned<String>> = Vec::with_capacity(names.len());
        for name in &names {
            let value = name.value.as_str();
            if !is_env_name(value) {
                return Err(self.error_with_help(
                    name.referenced,
                    format!("`{value}` is not a valid environment variable name"),
                    "a name is letters, digits and `_`, not starting with a digit \
                     (`[A-Za-z_][A-Za-z0-9_]*`); list names only, never values",
                ));
            }
            if env_vars::is_reserved(value) {
                let what = if env_vars::is_secret(value) {
                    "credentials"
                } else {
                    "variables"
                };
                return Err(self.error_with_help(
                    name.referenced,
                    format!("`{value}` is one of Toren's own {what} and never enters a sandbox"),
                    "grant the sandbox a variable of its own instead",
                ));
            }
            if let Some(first) = seen.iter().find(|earlier| earlier.value == value) {
                return Err(self.error(
                    name.referenced,
                    format!(
                        "`{value}` is listed twice in `env` (first at line {}, column {})",
                        first.referenced.line(),
                        first.referenced.column()
                    ),
                ));
            }
            seen.push(name);
        }
        Ok(names.into_iter().map(|name| name.value).collect())
    }

    fn max_turns(&self, count: Spanned<RawCount>) -> Result<u32> {
        let message = match count.value {
            RawCount::Integer(value) => match u32::try_from(value) {
                Ok(turns) if turns > 0 => return Ok(turns),
                Ok(_) => format!("`max_turns` must be a positive integer, found {value}"),
                Err(_) if value > 0 => {
                    format!("`max_turns` is {value}, over the limit of {}", u32::MAX)
                }
                Err(_) => format!("`max_turns` must be a positive integer, found {value}"),
            },
            RawCount::Other(found) => {
                format!("`max_turns` must be a positive integer, found {found}")
            }
        };
        Err(self.error(count.referenced, message))
    }
}

/// Why `name` is not an acceptable agent name, if it is not ("it may not contain ' '").
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let Some(first) = name.chars().next() else {
        return Err("it is empty".to_owned());
    };
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "it is {} characters long, over the limit of {MAX_NAME_LEN}",
            name.chars().count()
        ));
    }
    if !first.is_ascii_alphanumeric() {
        return Err("it must start with a letter or digit".to_owned());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!("it may not contain {bad:?}"));
    }
    Ok(())
}

/// Whether `name` has the shape `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn example_model(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "claude-sonnet-5",
        "openai" => "gpt-5",
        "ollama" => "llama3.2",
        _ => "turns.yaml",
    }
}
