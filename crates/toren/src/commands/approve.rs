//! `toren approve RUN CALL` and `toren deny RUN CALL [--reason TEXT]`: record a decision
//! for a waiting run, from any terminal. The first decision wins; a second is refused.

use anyhow::anyhow;
use toren_protocol::ApprovalDecided;

use crate::cli::DecideArgs;
use crate::commands::parse_run_id;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn decide(
    target: &DecideArgs,
    approved: bool,
    reason: Option<String>,
) -> Result<u8, Failure> {
    let run_id = parse_run_id(&target.run)?;
    let settings = wiring::settings()?;
    let store = wiring::store(&settings).await?;
    let decision = ApprovalDecided {
        call_id: target.call.clone(),
        approved,
        by: std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned()),
        via: "cli".to_owned(),
        reason,
    };
    store
        .decide_approval(&run_id, decision)
        .await
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    #[expect(clippy::print_stderr, reason = "confirmation for people")]
    {
        eprintln!(
            "{} call {} of run {run_id}",
            if approved { "approved" } else { "denied" },
            target.call
        );
    }
    Ok(0)
}
