//! `toren run AGENT TASK` (or `--input TASK`): create a run through the run service and drive it in
//! the foreground.

use anyhow::anyhow;

use crate::cli::RunArgs;
use crate::commands::host::Host;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn run(args: RunArgs) -> Result<u8, Failure> {
    // Everything that can be wrong with the configuration fails here, before a run exists.
    let settings = wiring::settings()?;
    let agent =
        toren_config::find_agent(&args.agent, &settings.agents_dir).map_err(Failure::usage)?;
    let service = wiring::service_for(&settings).await?;
    // Refused (exit 2) for an injected secret unset here, naming it (`require_secrets`).
    let policy = service.resolve_policy(&agent).map_err(Failure::usage)?;
    let host = Host::new(&agent, policy.as_ref(), &settings, &service).await?;

    let input = args.task.or(args.input).unwrap_or_default();
    let created = service
        .create(agent.clone(), input, &host.holder())
        .await
        .map_err(|e| Failure::failed(anyhow!(e).context("cannot create the run")))?;
    let sandbox = match &created.policy {
        Some(policy) if settings.sandbox_auto => format!("{} (TOREN_SANDBOX=auto)", policy.backend),
        Some(policy) => policy.backend.clone(),
        None => "none".to_owned(),
    };
    host.announce(&created.run_id, &agent, &sandbox);
    host.drive(created.lease, args.json).await
}
