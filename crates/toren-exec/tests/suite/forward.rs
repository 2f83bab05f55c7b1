//! `forward`: a loopback TCP port relayed to a unix socket, as the sandbox will reach the
//! egress proxy. Real sockets on both sides.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::thread;

use pretty_assertions::assert_eq;

#[test]
fn bytes_go_both_ways_and_each_side_sees_the_others_end() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let upstream = UnixListener::bind(&socket).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = socket;
    thread::spawn(move || toren_exec::forward(&listener, &target));

    // The "proxy": reads the whole request, answers, closes.
    let proxy = thread::spawn(move || {
        let (mut stream, _) = upstream.accept().unwrap();
        let mut request = String::new();
        stream.read_to_string(&mut request).unwrap();
        stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        request
    });
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client
        .write_all(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    client.read_to_string(&mut reply).unwrap();
    assert_eq!(
        (proxy.join().unwrap(), reply),
        (
            "CONNECT pypi.org:443 HTTP/1.1\r\n\r\n".to_owned(),
            "HTTP/1.1 200 OK\r\n\r\n".to_owned()
        )
    );
}

#[test]
fn a_missing_socket_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = dir.path().join("absent.sock");
    thread::spawn(move || toren_exec::forward(&listener, &target));
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut reply = Vec::new();
    let read = client.read_to_end(&mut reply);
    assert!(matches!(read, Ok(0)) || read.is_err(), "{read:?}");
}
