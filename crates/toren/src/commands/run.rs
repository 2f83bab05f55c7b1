//! `toren run AGENT --input TEXT`: create a run and drive it in the foreground.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use tokio_util::sync::CancellationToken;
use toren_protocol::{RunCreated, RunId, RunStatus};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Approver, Outcome, RunDriver, WorkerConfig};

use crate::cli::RunArgs;
use crate::exit::{FAILED, Failure, INTERRUPTED};
use crate::printer::{self, StderrObserver, TerminalApprover};
use crate::wiring;

pub(crate) async fn run(args: RunArgs) -> Result<u8, Failure> {
    // Everything that can be wrong with the configuration fails here, before a run exists.
    let settings = wiring::settings()?;
    let agent =
        toren_config::find_agent(&args.agent, &settings.agents_dir).map_err(Failure::usage)?;
    let policy = wiring::resolve_policy(&agent, &settings)?;
    let backend = match policy {
        Some(_) => wiring::sandbox_backend(&settings)?,
        None => None,
    };
    let model = wiring::model(&agent, &settings)?;
    let store = wiring::store(&settings).await?;

    let run_id = RunId::new();
    let created = RunCreated {
        agent: agent.clone(),
        policy,
        input: args.input,
    };
    store
        .create_run(&run_id, created)
        .await
        .map_err(|e| Failure::failed(anyhow!(e).context("cannot create the run")))?;
    printer::announce_run(&run_id, &agent);

    let observer = Arc::new(StderrObserver::new());
    let approver: Option<Arc<dyn Approver>> = if std::io::stdin().is_terminal() {
        Some(Arc::new(TerminalApprover::new()))
    } else {
        None
    };
    let driver = RunDriver::new(WorkerConfig {
        store,
        model,
        sandbox: backend,
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(wiring::env_lookup),
        observer: observer.clone(),
        approver,
        max_tokens: 8192,
        approval_poll: Duration::from_millis(200),
    });

    let cancel = CancellationToken::new();
    tokio::spawn(stop_on_signal(cancel.clone()));
    let outcome = driver
        .drive(&run_id, &cancel)
        .await
        .map_err(|e| Failure::failed(anyhow!(e).context(format!("run {run_id} stopped"))))?;
    observer.finish_line();
    report(&run_id, outcome, args.json)
}

/// Prints the outcome (stdout: the answer or the JSON object) and picks the exit status.
#[expect(
    clippy::print_stdout,
    reason = "the run's answer is the command's data"
)]
fn report(run_id: &RunId, outcome: Outcome, json: bool) -> Result<u8, Failure> {
    let (status, output, code) = match outcome {
        Outcome::Ended { status, output } => {
            let code = if status == RunStatus::Completed {
                0
            } else {
                FAILED
            };
            (status.to_string(), output, code)
        }
        Outcome::Interrupted => {
            printer::interrupted(run_id);
            ("interrupted".to_owned(), String::new(), INTERRUPTED)
        }
    };
    if json {
        let object = serde_json::json!({"run_id": run_id, "status": status, "output": output});
        println!("{object}");
    } else if code == 0 {
        println!("{output}");
    } else if code == FAILED {
        printer::failed(run_id, &output);
    }
    Ok(code)
}

/// Cancels the run on Ctrl-C or SIGTERM.
async fn stop_on_signal(cancel: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    cancel.cancel();
}
