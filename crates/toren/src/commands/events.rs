//! `toren events RUN [--follow]`: the run's event log, oldest first, and with `--follow`
//! every new event as it is appended (and the model's text as it streams) until the run
//! ends. The human form is [`printer::describe`]'s (one line per event, nothing obeyed);
//! `--json` escapes every control, bidirectional and invisible character (`\uXXXX`), so it
//! is the same data and safe to print. Streamed text goes to stderr: it is not the log.

use anyhow::anyhow;
use toren_protocol::Event;
use toren_runtime::Followed;

use crate::cli::EventsArgs;
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::{printer, wiring};

pub(crate) async fn events(args: &EventsArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    if !args.follow {
        let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
        for event in &events {
            print_event(event, args.json)?;
        }
        return Ok(0);
    }
    let mut follow = service.follow(&run_id, 0);
    let mut streaming = false;
    while let Some(next) = follow.next().await.map_err(Failure::failed)? {
        match next {
            Followed::Event(event) => {
                // Its values, for this process's log lines (`run_created` names them).
                service.learn_values(std::slice::from_ref(&*event));
                if streaming {
                    printer::end_stream();
                    streaming = false;
                }
                print_event(&event, args.json)?;
            }
            Followed::Text(text) => {
                printer::stream(&text);
                streaming = true;
            }
        }
    }
    Ok(0)
}

fn print_event(event: &Event, as_json: bool) -> Result<(), Failure> {
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
    Ok(())
}
