//! The command line: clap definitions only, no I/O and no logic.

use clap::{Args, Parser, Subcommand};

/// Toren: a durable runtime for LLM agents.
///
/// An agent file names a model and, with `sandbox: true`, gives the agent a computer: bash
/// and file tools on a private per-run workspace. Every step is recorded in an event log.
#[derive(Debug, Parser)]
#[command(name = "toren", version, about, long_about, max_term_width = 100)]
#[command(
    after_help = "Environment: TOREN_HOME (default ~/.toren), TOREN_AGENTS (default ./agents), \
TOREN_DATABASE_URL (default sqlite://$TOREN_HOME/toren.db), TOREN_SANDBOX (auto | docker | e2b | \
local | none), TOREN_SANDBOX_ROOT (default $TOREN_HOME/sandboxes), TOREN_EXEC_HELPER, DOCKER_HOST, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, \
OPENAI_API_KEY, OPENAI_BASE_URL, OLLAMA_HOST. Every variable: docs/configuration.md."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run an agent autonomously on one input and print its final answer.
    ///
    /// The run id is printed on stderr as soon as the run exists; progress and the model's
    /// streamed text go to stderr; the final answer goes to stdout. Exit status: 0 completed,
    /// 1 failed, 2 configuration or usage error, 130 interrupted.
    #[command(
        after_help = "Examples:\n  toren run hello \"say hi\"\n  toren run coder \"make the tests pass\" --workspace-from ~/src/myapp\n  toren run ./agents/coder.yaml --input \"fix the build\" --json"
    )]
    Run(RunArgs),
    /// Continue a run whose process died or was stopped, from its event log.
    ///
    /// Model answers and completed tool calls in the log are replayed, not repeated; a tool
    /// call that was started and never completed runs again (the model is told); a pending
    /// approval stays pending. The run keeps the agent spec and sandbox policy it was created
    /// with. Output and exit status are those of `toren run`.
    #[command(after_help = "Examples:\n  toren resume last\n  toren resume run_01j9")]
    Resume(ResumeArgs),
    /// Talk to an agent in a session that keeps its conversation and workspace.
    ///
    /// Creates the session SESSION (then `--agent` is required) or continues it. Each
    /// message is a turn; the model's text goes to stdout, progress to stderr. On a terminal
    /// it is a line editor (`/help` lists the commands; Ctrl-C cancels the running turn,
    /// Ctrl-D leaves); with stdin piped it reads one message per line and exits 0 at the end.
    #[command(
        after_help = "Examples:\n  toren chat notes --agent hello\n  toren chat work --agent coder --workspace-from ~/src/myapp\n  echo \"what changed?\" | toren chat notes"
    )]
    Chat(ChatArgs),
    /// List, inspect and remove sessions.
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  toren sessions list\n  toren sessions show notes --json\n  toren sessions rm notes --delete-workspace"
    )]
    Sessions(SessionsCommand),
    /// List and inspect runs.
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  toren runs list\n  toren runs show last\n  toren runs show run_01j9 --json"
    )]
    Runs(RunsCommand),
    /// Print a run's event log, oldest first.
    #[command(
        after_help = "Examples:\n  toren events last\n  toren events run_01j9 --json\n  toren events last --follow"
    )]
    Events(EventsArgs),
    /// Show what changed in a run's workspace between two steps (from its checkpoints).
    #[command(
        after_help = "Examples:\n  toren diff last > result.patch\n  toren diff run_01j9 --from 4 --to 12"
    )]
    Diff(DiffArgs),
    /// Copy a run's workspace as it is now into a new (or empty) directory: its result,
    /// taken out whole (`toren diff RUN` gives it as a patch).
    #[command(after_help = "Examples:\n  toren export last ~/src/myapp-result")]
    Export(ExportArgs),
    /// Take a run or a session back to an earlier step: its workspace and its conversation
    /// as they were then (later events stay in the log); `toren resume` continues a run,
    /// the session's next message continues a session.
    #[command(
        after_help = "Examples:\n  toren rewind last --to 7\n  toren rewind notes --to 3\n  toren rewind notes --to 2.5"
    )]
    Rewind(RewindArgs),
    /// Approve a bash command a run is waiting on.
    #[command(after_help = "Examples:\n  toren approve last call_1")]
    Approve(DecideArgs),
    /// Deny a bash command a run is waiting on; the reason goes to the model.
    #[command(after_help = "Examples:\n  toren deny last call_2 --reason \"do not delete files\"")]
    Deny(DenyArgs),
    /// Cancel a run: a running command is stopped and the run cannot be resumed.
    #[command(after_help = "Examples:\n  toren cancel last --reason \"wrong branch\"")]
    Cancel(CancelArgs),
    /// Raise the budget of a run paused at it (`awaiting_budget`); the process that drives
    /// it goes on from there (when none does, `toren resume` it).
    #[command(
        after_help = "Examples:\n  toren budget last --add-tokens 50000\n  toren budget run_01j9 --add-usd 0.50 --add-wall 30m"
    )]
    Budget(BudgetArgs),
    /// Validate agent files as `toren run` loads them, reporting every error of each file;
    /// exits non-zero if any has an error.
    #[command(after_help = "Examples:\n  toren check agents/hello.yaml\n  toren check agents/")]
    Check(CheckArgs),
    /// The docker backend's containers and their reaper.
    #[command(subcommand)]
    #[command(after_help = "Examples:\n  toren sandbox list\n  toren sandbox reap --dry-run")]
    Sandbox(SandboxCommand),
    /// Run the Telegram bot: chat with an agent from your phone (TELEGRAM_BOT_TOKEN).
    ///
    /// Each chat of a user in TOREN_TELEGRAM_USERS is a session of TOREN_TELEGRAM_AGENT;
    /// messages are turns driven by this process, approvals are buttons, files the agent
    /// sends arrive as photos or documents. SIGTERM or Ctrl-C stops it; turns left
    /// unfinished are resumed when it starts again.
    #[command(
        after_help = "Examples:\n  TELEGRAM_BOT_TOKEN=... TOREN_TELEGRAM_USERS=12345 TOREN_TELEGRAM_AGENT=hello toren telegram"
    )]
    Telegram(TelegramArgs),
    /// Serve the HTTP API on TOREN_API_ADDR and drive queued runs with in-process workers.
    #[command(
        after_help = "Examples:\n  toren serve\n  toren serve --workers 0\n  TOREN_API_ADDR=0.0.0.0:8080 toren serve --log-format json"
    )]
    Serve(ServeArgs),
    /// Drive queued and abandoned runs, with no API: one of many workers sharing a database.
    ///
    /// Claims runs of the workspace volume it serves (TOREN_WORKSPACE_VOLUME, default this
    /// machine) and of its sandbox backend, oldest first, at most `--concurrency` at once,
    /// under the identity TOREN_WORKER_ID (default the host name and a suffix kept in
    /// $TOREN_HOME/worker-id). SIGTERM or Ctrl-C drains like `toren serve`.
    #[command(
        after_help = "Examples:\n  TOREN_DATABASE_URL=postgres://toren@db/toren toren worker --concurrency 8"
    )]
    Worker(WorkerArgs),
    /// The live workers sharing this database.
    #[command(subcommand)]
    #[command(after_help = "Examples:\n  toren workers list\n  toren workers list --json")]
    Workers(WorkersCommand),
    /// Deploy Toren to AWS: the keys into Secrets Manager, then the CloudFormation stack of
    /// deploy/aws/toren.yaml (VPC, RDS Postgres, the API on ECS Fargate behind HTTPS, the
    /// workers, log groups).
    ///
    /// Reads ANTHROPIC_API_KEY, OPENAI_API_KEY, E2B_API_KEY (required) and TOREN_API_TOKEN
    /// (made when unset) from the environment, and AWS credentials, AWS_REGION and
    /// AWS_ENDPOINT_URL as the AWS tools do. Running it again changes only what differs;
    /// `--dry-run` changes nothing. Prints the API's URL on stdout.
    #[command(
        after_help = "Examples:\n  toren deploy-aws --stack toren --image 1234.dkr.ecr.eu-west-1.amazonaws.com/toren:1 --certificate-arn arn:aws:acm:... --dry-run"
    )]
    DeployAws(DeployAwsArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DeployAwsArgs {
    /// The stack's name, also the secrets' prefix (toren/STACK/...).
    #[arg(long, default_value = "toren")]
    pub(crate) stack: String,
    /// The Toren image the tasks run (e.g. an ECR URI).
    #[arg(long)]
    pub(crate) image: Option<String>,
    /// The ACM certificate of the load balancer's HTTPS listener.
    #[arg(long)]
    pub(crate) certificate_arn: Option<String>,
    /// Deploy into this VPC instead of making one (with --public-subnets and --private-subnets).
    #[arg(long)]
    pub(crate) vpc_id: Option<String>,
    /// With --vpc-id: the load balancer's subnets, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) public_subnets: Vec<String>,
    /// With --vpc-id: the tasks' and the database's subnets (with a NAT route), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) private_subnets: Vec<String>,
    /// How many worker tasks run.
    #[arg(long, default_value_t = 2)]
    pub(crate) workers: u32,
    /// Say what would be created or updated, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Delete the stack; the database's final snapshot and the secrets are kept.
    #[arg(long, conflicts_with = "dry_run")]
    pub(crate) delete: bool,
    /// With --delete: schedule the secrets for deletion too (7 days' recovery window).
    #[arg(long, requires = "delete")]
    pub(crate) delete_secrets: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// How many runs this process drives at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) concurrency: u32,
    /// On SIGTERM or Ctrl-C, how long the tool and model calls under way may take to
    /// finish (and be journaled) before they are stopped; e.g. `30s`, `2m`, `0s`.
    #[arg(long, default_value = "30s", value_parser = shutdown_timeout)]
    pub(crate) shutdown_timeout: std::time::Duration,
    /// How log lines are written on stderr: `text` for people, `json` (one object per
    /// line) for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkersCommand {
    /// List the workers whose heartbeat is live: id, host, volume, runs, last heartbeat.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct TelegramArgs {
    /// How log lines are written on stderr: `text` for people, `json` (one object per
    /// line) for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// How many runs this process drives at once (0: API only).
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: usize,
    /// Do not run the Telegram bot, even when TELEGRAM_BOT_TOKEN is set.
    #[arg(long)]
    pub(crate) no_telegram: bool,
    /// On SIGTERM or Ctrl-C, how long the tool and model calls under way may take to
    /// finish (and be journaled) before they are stopped; e.g. `30s`, `2m`, `0s`.
    #[arg(long, default_value = "30s", value_parser = shutdown_timeout)]
    pub(crate) shutdown_timeout: std::time::Duration,
    /// How log lines are written on stderr: `text` for people, `json` (one object per
    /// line) for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

/// The format of `toren serve`'s log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// `--shutdown-timeout`: a duration written with its unit, at most an hour.
fn shutdown_timeout(text: &str) -> Result<std::time::Duration, String> {
    text.trim()
        .parse::<jiff::SignedDuration>()
        .ok()
        .and_then(|d| std::time::Duration::try_from(d).ok())
        .filter(|d| *d <= std::time::Duration::from_secs(3600))
        .ok_or_else(|| {
            format!("`{text}` is not a duration up to 1h with its unit, such as `30s` or `2m`")
        })
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The agent: a name looked up in $TOREN_AGENTS (NAME.yaml or NAME/agent.yaml), or a
    /// path to an agent file.
    pub(crate) agent: String,
    /// The task for the agent (`toren run AGENT "task"`, or `--input "task"`).
    #[arg(
        value_name = "TASK",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub(crate) task: Option<String>,
    /// The task for the agent, as an option.
    #[arg(long, short)]
    pub(crate) input: Option<String>,
    /// Start the workspace as a copy of this directory, or a clone of this git repository
    /// (an https:// URL the agent's network policy lets it reach). Your directory is not
    /// changed: take the result out with `toren diff RUN` or `toren export RUN DIR`.
    #[arg(long, value_name = "DIR|URL")]
    pub(crate) workspace_from: Option<String>,
    /// Print one JSON object {run_id, status, output} on stdout instead of the answer.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The run: its id (see `toren runs list`), a unique prefix of it, or `last`.
    pub(crate) run: String,
    /// Print one JSON object {run_id, status, output} on stdout instead of the answer.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// The session's name (letters, digits, `-`, `_`, `.`).
    pub(crate) session: String,
    /// The agent (a name in TOREN_AGENTS or a path): required to create the session; if
    /// given for an existing one, it must be the session's agent.
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// When creating the session: start its workspace as a copy of this directory, or a
    /// clone of this git repository (as `toren run --workspace-from`).
    #[arg(long, value_name = "DIR|URL", requires = "agent")]
    pub(crate) workspace_from: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// List sessions, newest first.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show one session: its turns, status, workspace, container and usage.
    Show {
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Remove a session's record and its container; the workspace is kept unless
    /// `--delete-workspace` is given.
    Rm {
        name: String,
        /// Delete the session's workspace directory too.
        #[arg(long)]
        delete_workspace: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Print a JSON array of {id, agent, status, created_at, updated_at}.
        #[arg(long)]
        json: bool,
        /// Show at most this many runs.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one run: status, agent, policy, pending approvals and its answer.
    Show {
        /// The run id (see `toren runs list`).
        run: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// List this installation's sandbox containers and whether their runs are live.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove containers whose run is finished, and day-old containers of no known run.
    /// Never touches a live run's container; never deletes a workspace.
    Reap {
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    /// The run: its id (see `toren runs list`), a unique prefix of it, or `last`.
    pub(crate) run: String,
    /// Print one JSON object per line, exactly as stored.
    #[arg(long)]
    pub(crate) json: bool,
    /// Keep printing new events as they are appended, until the run ends.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RewindArgs {
    /// The run (its id, a prefix of it starting `run_`, or `last`), or a session's name.
    pub(crate) run: String,
    /// The step to go back to. For a run: an event's seq (see `toren events`), between
    /// turns or right after a model answer. For a session: TURN (before that turn began,
    /// e.g. 3) or TURN.SEQ (after event SEQ of that turn's run, e.g. 3.7; a step with no
    /// tool call pending); `toren sessions show` lists the turns.
    #[arg(long)]
    pub(crate) to: String,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The run: its id, a unique prefix of it, or `last` (the newest run).
    pub(crate) run: String,
    /// Where to copy it: a directory that does not exist yet, or an empty one.
    pub(crate) dir: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The run: its id, a unique prefix of it, or `last` (the newest run).
    pub(crate) run: String,
    /// The workspace as it was after this step (an event's seq); default: as it began (the
    /// project it was seeded with, else its first checkpoint).
    #[arg(long)]
    pub(crate) from: Option<u64>,
    /// The workspace as it was after this step; default: as it is now.
    #[arg(long)]
    pub(crate) to: Option<u64>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("raise").required(true).multiple(true)))]
pub(crate) struct BudgetArgs {
    /// The run: its id, a unique prefix of it, or `last` (the newest run).
    pub(crate) run: String,
    /// Tokens to add to the run's token limit.
    #[arg(long, group = "raise", value_name = "N")]
    pub(crate) add_tokens: Option<u64>,
    /// US dollars to add to the run's dollar limit, e.g. `2` or `0.50`.
    #[arg(long, group = "raise", value_name = "USD", value_parser = crate::commands::budget::parse_usd)]
    pub(crate) add_usd: Option<toren_protocol::Usd>,
    /// Wall time to add to the run's wall-time limit, e.g. `30m`.
    #[arg(long, group = "raise", value_name = "DURATION", value_parser = crate::commands::budget::parse_wall)]
    pub(crate) add_wall: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The run: its id, a unique prefix of it, or `last` (the newest run).
    pub(crate) run: String,
    /// Why, recorded in the log.
    #[arg(long)]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// The run: its id, a unique prefix of it, or `last` (the newest run).
    pub(crate) run: String,
    /// The tool call id the run is waiting on (shown by `toren run` and `toren runs show`).
    pub(crate) call: String,
}

#[derive(Debug, Args)]
pub(crate) struct DenyArgs {
    #[command(flatten)]
    pub(crate) target: DecideArgs,
    /// Why, in words the model will read.
    #[arg(long)]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Agent files, agent names, or directories (every agent file in them); default:
    /// every agent in $TOREN_AGENTS.
    pub(crate) paths: Vec<String>,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::Cli;

    /// The words of one example line, as a shell would split it (double quotes only),
    /// without the leading `NAME=value` assignments.
    fn words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                ' ' if !quoted => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        words
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect()
    }

    /// Every command's `--help` ends with examples, and every example is a command line
    /// the parser takes.
    #[test]
    fn every_command_shows_examples_that_parse() {
        let cli = Cli::command();
        let mut checked = 0;
        for command in cli.get_subcommands() {
            let name = command.get_name();
            let help = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                help.starts_with("Examples:\n"),
                "`toren {name} --help` shows no examples"
            );
            for line in help.lines().skip(1) {
                let line = line.split(" | ").last().unwrap_or(line).trim();
                let line = line.split(" > ").next().unwrap_or(line);
                let words = words(line);
                assert_eq!(words.first().map(String::as_str), Some("toren"), "{line}");
                assert!(
                    words.get(1).map(String::as_str) == Some(name),
                    "an example of `{name}` runs another command: {line}"
                );
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("the example `{line}` does not parse: {e}");
                }
                checked += 1;
            }
        }
        assert!(checked > 30, "{checked} examples");
    }
}
