//! The helper binary: serve requests from stdin until it ends. Arguments are ignored (an
//! image's `CMD` may be appended to the entrypoint), except a leading
//! `--forward ADDR=SOCKET`: then it also relays the loopback TCP address `ADDR` to the
//! unix socket `SOCKET` (the egress proxy, see `forward`) on threads of its own, and fails
//! at once if it cannot listen there. No descriptor it inherited beyond the standard three
//! reaches a command.

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
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, spec, ..] = args.as_slice()
        && flag == "--forward"
        && let Err(err) = start_forward(spec)
    {
        #[expect(clippy::print_stderr, reason = "the helper's diagnostics go to stderr")]
        {
            eprintln!("toren-exec: cannot relay to the egress proxy ({spec}): {err}");
        }
        return ExitCode::FAILURE;
    }
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

/// Listens on `ADDR` (from `ADDR=SOCKET`) now, and relays its connections to `SOCKET` on a
/// thread for the helper's lifetime.
fn start_forward(spec: &str) -> std::io::Result<()> {
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not ADDR=SOCKET");
    let (address, socket) = spec.split_once('=').ok_or_else(invalid)?;
    let address: std::net::SocketAddr = address.parse().map_err(|_| invalid())?;
    let listener = std::net::TcpListener::bind(address)?;
    let socket = std::path::PathBuf::from(socket);
    std::thread::Builder::new()
        .name("egress-forward".into())
        .spawn(move || {
            if let Err(err) = toren_exec::forward(&listener, &socket) {
                #[expect(clippy::print_stderr, reason = "the helper's diagnostics go to stderr")]
                {
                    eprintln!("toren-exec: the egress relay stopped: {err}");
                }
            }
        })?;
    Ok(())
}
