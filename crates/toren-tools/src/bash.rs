//! The `bash` tool: one fresh `bash -c` in the sandbox per call, with a timeout, and its
//! output rendered for the model (combined output, then a status line). Approval is not
//! this module's business; the orchestrator asks before calling it.

use std::fmt::Write as _;
use std::time::Duration;

use toren_protocol::BashArgs;
use toren_sandbox::{ExecRequest, Sandbox, check_command};

use crate::ToolSettings;
use crate::error::Result;
use crate::outcome::ToolOutcome;

pub(crate) const NAME: &str = toren_protocol::BASH;

pub(crate) async fn run(
    settings: &ToolSettings,
    sandbox: &dyn Sandbox,
    args: &serde_json::Value,
) -> Result<ToolOutcome> {
    // The same decoding the approval prompt showed the human (I-11).
    let args = match BashArgs::decode(args) {
        Ok(args) => args,
        Err(message) => return Ok(ToolOutcome::error(message)),
    };
    if args.command.trim().is_empty() {
        return Ok(ToolOutcome::error(
            "`command` is empty; give the shell command to run",
        ));
    }
    if let Err(err) = check_command(&args.command) {
        return Ok(ToolOutcome::error(err.to_string()));
    }
    let max = settings.bash_max_timeout.as_secs();
    let timeout = match args.timeout_secs {
        None => settings.bash_default_timeout,
        Some(secs) if (1..=max).contains(&secs) => Duration::from_secs(secs),
        Some(secs) => {
            return Ok(ToolOutcome::error(format!(
                "`timeout_secs` is {secs} but must be between 1 and {max}; for longer work, \
                 split it into several commands"
            )));
        }
    };
    let req = ExecRequest {
        command: args.command,
        timeout,
        output_limit: settings.output_limit,
    };
    let out = match sandbox.exec(req).await {
        Ok(out) => out,
        Err(err) if err.is_model_fixable() => return Ok(ToolOutcome::error(err.to_string())),
        Err(err) => return Err(err.into()),
    };

    let mut text = out.output;
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let status = if out.timed_out {
        format!(
            "[timed out: the command and everything it started were killed after {} s; \
             pass a larger timeout_secs (at most {max}) if it needs longer]",
            timeout.as_secs()
        )
    } else {
        match out.exit_code {
            Some(code) => format!("[exit code: {code}]"),
            None => "[killed by a signal]".to_owned(),
        }
    };
    text.push_str(&status);
    for hit in &out.limits_hit {
        let _ = write!(text, "\n[limit reached: {hit}]");
    }
    if out.truncated {
        text.push_str(
            "\n[output truncated: to see all of it, redirect it to a file and search or page \
             through it with grep or read_file]",
        );
    }
    Ok(ToolOutcome {
        output: text,
        is_error: out.timed_out || out.exit_code != Some(0),
        exit_code: out.exit_code,
        truncated: out.truncated,
    })
}
