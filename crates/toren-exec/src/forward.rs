//! The in-sandbox end of Toren's egress proxy (`toren-exec --forward`, started
//! so by the local and docker backends for a run with a host list):
//! a sandbox with `network: [hosts…]` keeps its own network namespace, where nothing but
//! loopback exists, and reaches the proxy through a unix socket bound into it. Tools that
//! honour `HTTP_PROXY` want a TCP address, so [`forward`] listens on a loopback port inside
//! the sandbox and copies each connection to the socket, byte for byte, both ways. It
//! makes no decision: the proxy outside does.

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread;

/// Accepts connections on `listener` until it fails, each copied to a new connection to
/// the unix socket at `target` (two threads per connection; a refused socket closes the
/// client's connection).
pub fn forward(listener: &TcpListener, target: &Path) -> io::Result<()> {
    loop {
        let (client, _) = listener.accept()?;
        let target = target.to_path_buf();
        thread::spawn(move || relay(client, &target));
    }
}

fn relay(client: TcpStream, target: &Path) {
    let Ok(upstream) = UnixStream::connect(target) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut client_read), Ok(mut upstream_write)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let outbound = thread::spawn(move || {
        let _ = io::copy(&mut client_read, &mut upstream_write);
        let _ = upstream_write.shutdown(Shutdown::Write);
    });
    let (mut upstream_read, mut client_write) = (upstream, client);
    let _ = io::copy(&mut upstream_read, &mut client_write);
    let _ = client_write.shutdown(Shutdown::Write);
    let _ = outbound.join();
}
