//! `toren run AGENT TASK` (or `--input TASK`): create a run through the run service and drive it in
//! the foreground; `--workspace-from DIR|URL` starts its workspace as a copy of a project.

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
    let created = match &args.workspace_from {
        Some(from) => service
            .create_seeded(
                agent.clone(),
                input,
                &host.holder(),
                &toren_worker::SeedSource::parse(from),
            )
            .await
            .map_err(|e| {
                // A project that cannot be copied (too large, a link out, a repository the
                // agent may not reach) is the caller's to fix: exit 2.
                if e.is_refusal() {
                    Failure::usage(anyhow!(e))
                } else {
                    Failure::failed(anyhow!(e).context("cannot create the run"))
                }
            })?,
        None => service
            .create(agent.clone(), input, &host.holder())
            .await
            .map_err(|e| Failure::failed(anyhow!(e).context("cannot create the run")))?,
    };
    let sandbox = match &created.policy {
        Some(policy) if settings.sandbox_auto => format!("{} (TOREN_SANDBOX=auto)", policy.backend),
        Some(policy) => policy.backend.clone(),
        None => "none".to_owned(),
    };
    host.announce(&created.run_id, &agent, &sandbox);
    host.drive(created.lease, args.json).await
}
