//! A running helper process: send requests, receive responses by id, close its stdin.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use toren_exec::protocol::{Finished, Request, Response, write_line};

pub(crate) struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    responses: Receiver<Response>,
    early: HashMap<String, Response>,
    next: u32,
}

impl Helper {
    pub(crate) fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toren-exec"))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, responses) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let line = line.unwrap();
                let response: Response = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a response: {line:?}: {e}"));
                if sender.send(response).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            responses,
            early: HashMap::new(),
            next: 0,
        }
    }

    /// A request for `command` with a plain environment, 20 s and 100 kB.
    pub(crate) fn request(&mut self, command: &str) -> Request {
        self.next += 1;
        Request {
            id: format!("r{}", self.next),
            command: command.to_owned(),
            cwd: std::env::temp_dir().display().to_string(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            timeout_ms: 20_000,
            output_limit: 100_000,
            cpu_secs: None,
        }
    }

    pub(crate) fn send(&mut self, req: &Request) {
        write_line(self.stdin.as_mut().unwrap(), req).unwrap();
    }

    pub(crate) fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The response to `id`, waiting up to 30 s.
    pub(crate) fn response(&mut self, id: &str) -> Response {
        if let Some(r) = self.early.remove(id) {
            return r;
        }
        loop {
            let r = self
                .responses
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("no response to {id}: {e}"));
            if r.id() == id {
                return r;
            }
            self.early.insert(r.id().to_owned(), r);
        }
    }

    /// The next response, whatever its id.
    pub(crate) fn next_response(&mut self) -> Response {
        self.responses
            .recv_timeout(Duration::from_secs(30))
            .unwrap()
    }

    pub(crate) fn run(&mut self, req: Request) -> Finished {
        self.send(&req);
        finished(self.response(&req.id))
    }

    pub(crate) fn run_command(&mut self, command: &str) -> Finished {
        let req = self.request(command);
        self.run(req)
    }

    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the helper to exit, up to 10 s.
    pub(crate) fn wait_exit(&mut self) -> std::process::ExitStatus {
        for _ in 0..1000 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the helper did not exit");
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn finished(r: Response) -> Finished {
    match r {
        Response::Finished(f) => f,
        Response::Failed { id, error } => panic!("request {id} failed: {error}"),
    }
}

/// Whether process `pid` exists (a zombie counts as gone).
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to 3 s for `pid` to be gone.
pub(crate) fn gone(pid: i32) -> bool {
    for _ in 0..300 {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
