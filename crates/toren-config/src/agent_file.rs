//! Reading and validating one agent file into a [`toren_protocol::AgentSpec`].
//!
//! [`load_agent`] reads the file, parses it with serde-saphyr into the `raw` shape, and then
//! checks what serde cannot: the model string (and, for `scripted/FILE`, that the script
//! file is there), the agent name, the sandbox's variable names and the turn limit. Every
//! failure becomes one [`Diagnostic`] at the line and column of the offending value, and
//! the checks go on past a failure so that one pass reports every problem of the file. A
//! YAML syntax or shape error stops the parser, so it is reported alone. Finding the file
//! by name is `lookup`'s job.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde_saphyr::{Location, Spanned};
use toren_protocol::{AgentSpec, ApprovalPolicy, OnInterrupt, SandboxSpec};

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
    load(path, None)
}

/// Parses and validates agent file text; `path` only names the file in errors (and a
/// scripted model's file is not looked for). [`AgentSpec::source`] is left `None`.
pub fn parse_agent(path: &Path, source: &str) -> Result<AgentSpec> {
    let checker = Checker::new(path, source, None, None);
    parse(&checker)
}

/// Reads, parses and validates the agent file at `path`; with `expected`, the file's
/// `name` must be it (the name the file is looked up by), checked with the rest.
pub(crate) fn load(path: &Path, expected: Option<&str>) -> Result<AgentSpec> {
    let bytes = std::fs::read(path).map_err(|cause| Error::ReadAgent {
        path: path.to_path_buf(),
        cause,
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => return Err(not_utf8(path, error.as_bytes(), error.utf8_error())),
    };
    let absolute = std::fs::canonicalize(path).map_err(|cause| Error::ReadAgent {
        path: path.to_path_buf(),
        cause,
    })?;
    // A scripted model's file is named relative to the agent file, as the worker reads it.
    let agent_dir = absolute.parent();
    let checker = Checker::new(path, &text, expected, agent_dir);
    let mut spec = parse(&checker)?;
    spec.source = Some(absolute.display().to_string());
    Ok(spec)
}

/// The validated spec, or every problem found.
fn parse(checker: &Checker<'_>) -> Result<AgentSpec> {
    let (path, source) = (checker.path, checker.source);
    let error = match from_yaml(source) {
        Ok(raw) => {
            let spec = checker.agent(raw);
            checker.finish()?;
            return Ok(spec);
        }
        Err(error) => error,
    };
    // The parser stops at its first error. An unknown key is the common one, and often not
    // alone (a key misspelt twice, keys of another tool): the file is read again without
    // each unknown key's entry (its lines blanked, so positions stay), as long as the next
    // error is another unknown key; the checks then run on what is left when it parses. An
    // error of any other kind ends it, unreported: it could be one the blanking made.
    let problems = Checker::new(path, source, checker.expected_name, checker.agent_dir);
    problems.record(invalid(yaml_errors::diagnostic(path, source, &error)));
    let mut text = source.to_owned();
    let mut last = error;
    for _ in 0..MAX_UNKNOWN_KEYS {
        let Some(without) = yaml_errors::without_unknown_key(&text, &last) else {
            break;
        };
        text = without;
        match from_yaml(&text) {
            Ok(raw) => {
                let rest = Checker::new(path, &text, checker.expected_name, checker.agent_dir);
                rest.agent(raw);
                problems.errors.borrow_mut().0.extend(rest.errors.take().0);
                break;
            }
            Err(error) if yaml_errors::is_unknown_key(&error) => {
                problems.record(invalid(yaml_errors::diagnostic(path, &text, &error)));
                last = error;
            }
            Err(_) => break,
        }
    }
    problems.finish()?;
    // Unreachable in practice: the first error was recorded.
    Err(invalid(yaml_errors::diagnostic(path, source, &last)))
}

/// How many unknown keys one pass reports at most.
const MAX_UNKNOWN_KEYS: usize = 32;

/// The file's YAML in the `raw` shape.
fn from_yaml(source: &str) -> std::result::Result<RawAgent, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        // `sandbox: yes` is a string here, so it is refused instead of silently enabling.
        strict_booleans: true,
        // Snippets are rendered by `diagnostic`, the same way for every error.
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(source, options)
}

fn invalid(diagnostic: Diagnostic) -> Error {
    Error::InvalidAgent(vec![diagnostic])
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

/// Checks the raw file and builds the spec; holds what every diagnostic needs and the
/// problems found so far.
///
/// A check that fails returns its error; the caller hands it to [`Checker::keep`], which
/// records it and gives a stand-in value, so the checks after it still run. The spec built
/// with stand-ins is never returned: [`Checker::finish`] fails when anything was recorded.
pub(crate) struct Checker<'a> {
    path: &'a Path,
    source: &'a str,
    /// The name the file must carry, when it is looked up by name.
    expected_name: Option<&'a str>,
    /// The agent file's directory, when the file is on disk (a script is looked for there).
    agent_dir: Option<&'a Path>,
    errors: RefCell<Problems>,
}

/// The problems of several checks, gathered so that one failure does not hide the next.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<Diagnostic>);

impl Problems {
    pub(crate) fn add(&mut self, error: Error) {
        match error {
            Error::InvalidAgent(diagnostics) => self.0.extend(diagnostics),
            // The checks build only diagnostics; anything else is shown at the file.
            other => self.0.push(Diagnostic {
                path: PathBuf::new(),
                position: None,
                message: other.to_string(),
                help: None,
                snippet: None,
            }),
        }
    }

    /// The value of a check that passed; a failed one's problems are added.
    pub(crate) fn keep<T>(&mut self, checked: Result<T>) -> Option<T> {
        match checked {
            Ok(value) => Some(value),
            Err(error) => {
                self.add(error);
                None
            }
        }
    }

    /// `value` when no problem was added, else every problem added, as one error.
    pub(crate) fn into_result<T>(self, value: T) -> Result<T> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(Error::InvalidAgent(self.0))
        }
    }
}

impl<'a> Checker<'a> {
    fn new(
        path: &'a Path,
        source: &'a str,
        expected_name: Option<&'a str>,
        agent_dir: Option<&'a Path>,
    ) -> Self {
        Self {
            path,
            source,
            expected_name,
            agent_dir,
            errors: RefCell::new(Problems::default()),
        }
    }
}

impl Checker<'_> {
    /// The value of a check that passed; a failed one's problems are recorded (see the
    /// type's docs) and `None` stands in.
    pub(crate) fn keep<T>(&self, checked: Result<T>) -> Option<T> {
        self.errors.borrow_mut().keep(checked)
    }

    fn record(&self, error: Error) {
        self.errors.borrow_mut().add(error);
    }

    /// Fails with every recorded problem, in file order, if there is any.
    fn finish(&self) -> Result<()> {
        let mut problems = self.errors.take();
        // Stable: problems at one position stay in the order they were found.
        problems
            .0
            .sort_by_key(|d| d.position.map(|p| (p.line, p.column)));
        problems.into_result(())
    }

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

    /// The spec; meaningful only when nothing was recorded (see [`Checker::finish`]).
    fn agent(&self, raw: RawAgent) -> AgentSpec {
        if self.keep(self.name(&raw.name)).is_some() {
            self.keep(self.expected_name(&raw.name));
        }
        if self.keep(self.model(&raw.model)).is_some() {
            self.keep(self.script(&raw.model));
        }
        let instructions = match raw.instructions {
            Some(text) if text.value.trim().is_empty() => {
                self.record(self.error_with_help(
                    text.referenced,
                    "`instructions` is empty",
                    "write the agent's instructions, or remove the key to use Toren's default",
                ));
                None
            }
            other => other.map(|text| text.value),
        };
        let sandbox = raw
            .sandbox
            .and_then(|sandbox| self.keep(self.sandbox(sandbox)))
            .flatten();
        let max_turns = raw
            .max_turns
            .and_then(|count| self.keep(self.max_turns(count)))
            .unwrap_or(AgentSpec::DEFAULT_MAX_TURNS);
        let context_tokens = raw
            .context_tokens
            .and_then(|count| self.keep(self.context_tokens(count)));
        let budget = self
            .keep(self.budget(raw.budget, raw.pricing, &raw.model.value))
            .flatten();
        AgentSpec {
            name: raw.name.value,
            model: raw.model.value,
            instructions,
            sandbox,
            max_turns,
            context_tokens,
            budget,
            source: None,
        }
    }

    /// Fails unless the file's `name` is the name it is looked up by, if it is looked up so.
    fn expected_name(&self, name: &Spanned<String>) -> Result<()> {
        match self.expected_name {
            Some(expected) if name.value != expected => Err(self.error_with_help(
                name.referenced,
                format!(
                    "the agent in this file is named `{}`, but it was looked up as `{expected}`",
                    name.value
                ),
                format!("set `name: {expected}`, or rename the file after its agent"),
            )),
            _ => Ok(()),
        }
    }

    /// For `scripted/FILE`, fails unless FILE is a file beside the agent file (where the
    /// worker reads it). Whether it is a valid script is the model crate's to say.
    fn script(&self, model: &Spanned<String>) -> Result<()> {
        let (Some(dir), Some(file)) = (self.agent_dir, model.value.strip_prefix("scripted/"))
        else {
            return Ok(());
        };
        let script = dir.join(file);
        if script.is_file() {
            return Ok(());
        }
        let found = if script.exists() {
            "is not a file"
        } else {
            "does not exist"
        };
        Err(self.error_with_help(
            model.referenced,
            format!("the scripted model's file {} {found}", script.display()),
            "a scripted model is `scripted/FILE`, FILE relative to the agent file's directory",
        ))
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
                self.record(self.error_with_help(
                    image.referenced,
                    "`image` is empty",
                    "name an image, or remove the key to use the backend's default image",
                ));
                None
            }
            Some(image) if image.value.chars().any(char::is_control) => {
                self.record(self.error(
                    image.referenced,
                    format!(
                        "`image` must not contain control characters, found {:?}",
                        image.value
                    ),
                ));
                None
            }
            other => other.map(|image| image.value),
        };
        let approval = match mapping.approval {
            None => ApprovalPolicy::default(),
            Some(approval) => match approval.value.as_str() {
                "always" => ApprovalPolicy::Always,
                "never" => ApprovalPolicy::Never,
                other => {
                    self.record(self.error(
                        approval.referenced,
                        format!("`approval` must be `always` or `never`, found `{other}`"),
                    ));
                    ApprovalPolicy::default()
                }
            },
        };
        let on_interrupt = match mapping.on_interrupt {
            None => OnInterrupt::default(),
            Some(on_interrupt) => match on_interrupt.value.as_str() {
                "rerun" => OnInterrupt::Rerun,
                "ask" => OnInterrupt::Ask,
                other => {
                    self.record(self.error_with_help(
                        on_interrupt.referenced,
                        format!("`on_interrupt` must be `rerun` or `ask`, found `{other}`"),
                        "`rerun` runs a bash call interrupted mid-command again on resume (at-least-once); \
                         `ask` has a human approve it first",
                    ));
                    OnInterrupt::default()
                }
            },
        };
        let network = match mapping.network {
            None => Some((false, None)),
            Some(network) => self.keep(self.network(network)),
        };
        let env = self.env(mapping.env.unwrap_or_default());
        // Secrets are checked against the host list, so not when the list itself is wrong.
        let (network, egress) = match (network, mapping.secrets) {
            (Some((network, mut egress)), Some(secrets)) => {
                let rules = self.keep(self.secrets(secrets, egress.as_ref(), &env));
                if let (Some(egress), Some(rules)) = (egress.as_mut(), rules) {
                    egress.secrets = rules;
                }
                (network, egress)
            }
            (Some(network), None) => network,
            (None, _) => (false, None),
        };
        let limits = mapping
            .limits
            .and_then(|limits| self.keep(self.limits(limits)))
            .unwrap_or_default();
        let checkpoints = mapping
            .checkpoints
            .and_then(|checkpoints| self.keep(self.checkpoints(checkpoints)))
            .unwrap_or_default();
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

    /// The granted names; each bad one is recorded and left out.
    fn env(&self, names: Vec<Spanned<String>>) -> Vec<String> {
        let mut seen: Vec<&Spanned<String>> = Vec::with_capacity(names.len());
        for name in &names {
            if self.keep(self.env_name(name, &seen)).is_some() {
                seen.push(name);
            }
        }
        seen.into_iter().map(|name| name.value.clone()).collect()
    }

    /// Fails unless `name` may be granted and is not among the names `seen` before it.
    fn env_name(&self, name: &Spanned<String>, seen: &[&Spanned<String>]) -> Result<()> {
        {
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
        }
        Ok(())
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
