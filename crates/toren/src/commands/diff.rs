//! `toren diff RUN [--from STEP] [--to STEP]`: what changed in the run's workspace between
//! two points of its log (`RunService::workspace_diff`: a patch `git apply` takes, from the
//! project it was seeded with, else its first checkpoint, to now by default), shown with
//! hidden characters made visible.
//!
//! `toren export RUN DIR`: the workspace as it is now, copied into a new or empty directory
//! through a scratch checkpoint store beside it (read beneath a handle, symlinks copied as
//! links, never followed), removed after.

use anyhow::anyhow;
use toren_checkpoint::Store;

use crate::cli::{DiffArgs, ExportArgs};
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn export(args: &ExportArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    let workspace =
        toren_worker::host_workspace(&events).map_err(|e| Failure::usage(anyhow!(e)))?;
    let dest = std::path::absolute(&args.dir).map_err(|e| Failure::usage(anyhow!(e)))?;
    match std::fs::read_dir(&dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::usage(anyhow!(
                    "{} is not empty; give a new directory (or an empty one) to copy the \
                     workspace into",
                    dest.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&dest)
                .map_err(|e| Failure::usage(anyhow!("cannot create {}: {e}", dest.display())))?;
        }
        Err(e) => return Err(Failure::usage(anyhow!("{}: {e}", dest.display()))),
    }
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scratch = dest.with_file_name(format!(".{name}.toren-export"));
    let copied = {
        let (scratch, dest) = (scratch.clone(), dest.clone());
        tokio::task::spawn_blocking(move || Store::open(scratch)?.export(&workspace, &dest))
            .await
            .map_err(|e| Failure::failed(anyhow!(e)))?
    };
    if let Err(e) = std::fs::remove_dir_all(&scratch) {
        eprintln!("warning: could not remove {}: {e}", scratch.display());
    }
    let copied = copied.map_err(|e| Failure::failed(anyhow!(e)))?;
    eprintln!(
        "copied run {run_id}'s workspace into {} ({} files and directories, {} bytes{})",
        toren_display::visible(&dest.display().to_string()),
        copied.files,
        copied.bytes,
        if copied.skipped.is_empty() {
            String::new()
        } else {
            format!("; {} special files not copied", copied.skipped.len())
        }
    );
    Ok(0)
}

pub(crate) async fn diff(args: &DiffArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let patch = service
        .workspace_diff(&run_id, args.from, args.to)
        .await
        .map_err(|e| {
            if e.is_refusal() {
                Failure::usage(anyhow!(e))
            } else {
                Failure::failed(anyhow!(e))
            }
        })?;
    print!("{}", toren_display::visible_lines(&patch));
    Ok(0)
}
