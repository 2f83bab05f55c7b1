//! Writing to stdout and stderr without panicking when the reader has gone away.
//!
//! `println!` and friends panic when a write fails (`toren runs list | head -1`: "failed
//! printing to stdout: Broken pipe"). The binary does not restore the default SIGPIPE
//! action instead, because it writes to its children's pipes too (the local sandbox's warm
//! shell), where a reader that died is an error to handle, not a reason to die. So the
//! crate root shadows `print!`, `println!`, `eprint!` and `eprintln!` with macros that
//! call into this module, for every module of the binary:
//!
//! - stdout is the command's data: when its reader goes away there is nobody left to
//!   write for, and the command ends at once and quietly, with status 0 (as `head` expects
//!   of the commands it reads). Any other write error is said once on stderr, status 1.
//! - stderr is for people: a message that cannot be written is dropped, and the command
//!   goes on (a run keeps going when the terminal that watched it closes).

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes to stdout; ends the process quietly if stdout's reader has gone away.
pub(crate) fn stdout(args: fmt::Arguments<'_>) {
    let result = std::io::stdout().lock().write_fmt(args);
    if let Err(error) = result {
        stdout_failed(&error);
    }
}

/// Writes to stderr; a message nobody can read any more is dropped.
pub(crate) fn stderr(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Flushes stdout (a `print!` without a newline stays buffered), as [`stdout`] does.
pub(crate) fn flush_stdout() {
    if let Err(error) = std::io::stdout().lock().flush() {
        stdout_failed(&error);
    }
}

fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    stderr(format_args!("error: cannot write to stdout: {error}\n"));
    std::process::exit(i32::from(crate::exit::FAILED));
}
