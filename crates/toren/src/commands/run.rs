//! `toren run AGENT --input TEXT`: create a run and drive it in the foreground.

use anyhow::anyhow;
use toren_protocol::{RunCreated, RunId};
use toren_sandbox::Workspace;
use toren_worker::holder;

use crate::cli::RunArgs;
use crate::commands::host::{Host, LEASE_TTL};
use crate::exit::Failure;
use crate::{printer, wiring};

pub(crate) async fn run(args: RunArgs) -> Result<u8, Failure> {
    // Everything that can be wrong with the configuration fails here, before a run exists.
    let settings = wiring::settings()?;
    let agent =
        toren_config::find_agent(&args.agent, &settings.agents_dir).map_err(Failure::usage)?;
    let policy = wiring::resolve_policy(&agent, &settings)?;
    let store = wiring::store(&settings).await?;
    let host = Host::new(&agent, policy.as_ref(), &settings, store.clone()).await?;

    let run_id = RunId::new();
    // The workspace is made with the run and its host path pinned in the run (I-4): a
    // resumed run works there or nowhere, whatever TOREN_SANDBOX_ROOT says later.
    let policy = match policy {
        Some(mut policy) => {
            let workspace =
                Workspace::create(&settings.sandbox_root, run_id.as_str()).map_err(|e| {
                    Failure::failed(anyhow!(e).context("cannot create the run's workspace"))
                })?;
            policy.workspace = Some(workspace.path().display().to_string());
            Some(policy)
        }
        None => None,
    };
    let created_policy = policy.clone();
    let created = RunCreated {
        agent: agent.clone(),
        policy,
        input: args.input,
    };
    let (_, lease) = store
        .create_run(&run_id, created, &holder::this_process(), LEASE_TTL)
        .await
        .map_err(|e| Failure::failed(anyhow!(e).context("cannot create the run")))?;
    let sandbox = match &created_policy {
        Some(policy) if settings.sandbox_auto => format!("{} (TOREN_SANDBOX=auto)", policy.backend),
        Some(policy) => policy.backend.clone(),
        None => "none".to_owned(),
    };
    printer::announce_run(&run_id, &agent, &sandbox);
    host.drive(lease, args.json).await
}
