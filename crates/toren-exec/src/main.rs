//! The helper binary: serve requests from stdin until it ends. Arguments are ignored (an
//! image's `CMD` may be appended to the entrypoint). No descriptor it inherited beyond the
//! standard three reaches a command.

use std::io::{BufReader, stdin, stdout};
use std::process::ExitCode;

fn main() -> ExitCode {
    // The commands run as the same user as this helper. Non-dumpable, its /proc entries
    // (fds, memory, environ) belong to root: a command cannot read the request pipe or
    // forge answers on the response pipe through /proc/1/fd. Commands it starts are
    // dumpable again after their exec.
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        #[expect(clippy::print_stderr, reason = "the helper's diagnostics go to stderr")]
        {
            eprintln!("toren-exec: cannot make itself non-dumpable: {err}");
        }
        return ExitCode::FAILURE;
    }
    toren_exec::close_inherited_on_exec();
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
