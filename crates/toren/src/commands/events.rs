//! `toren events RUN`: the run's event log, oldest first. The human form is
//! [`printer::describe`]'s (one line per event, nothing obeyed); `--json` escapes every
//! control, bidirectional and invisible character (`\uXXXX`), so it is the same data and
//! safe to print.
#![expect(clippy::print_stdout, reason = "events are the command's data")]

use anyhow::anyhow;

use crate::commands::parse_run_id;
use crate::exit::Failure;
use crate::{printer, wiring};

pub(crate) async fn events(run: &str, as_json: bool) -> Result<u8, Failure> {
    let run_id = parse_run_id(run)?;
    let settings = wiring::settings()?;
    let store = wiring::store(&settings).await?;
    let events = store.read(&run_id, 0).await.map_err(Failure::failed)?;
    for event in &events {
        if as_json {
            let line = serde_json::to_string(event).map_err(|e| Failure::failed(anyhow!(e)))?;
            println!("{}", toren_display::escape_json(&line));
        } else {
            println!(
                "{:>4}  {}  {:<19}  {}",
                event.seq,
                event.at.strftime("%H:%M:%S%.3f"),
                event.kind.name(),
                printer::describe(event)
            );
        }
    }
    Ok(0)
}
