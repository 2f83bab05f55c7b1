//! The helper binary: serve requests from stdin until it ends. Arguments are ignored (an
//! image's `CMD` may be appended to the entrypoint).

use std::io::{BufReader, stdin, stdout};
use std::process::ExitCode;

fn main() -> ExitCode {
    match toren_exec::serve(BufReader::new(stdin().lock()), stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            #[expect(clippy::print_stderr, reason = "the helper's diagnostics go to stderr")]
            {
                eprintln!("toren-exec: {err}");
            }
            ExitCode::FAILURE
        }
    }
}
