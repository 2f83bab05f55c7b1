//! The real `toren` binary on a pseudo-terminal: its stdin, stdout and stderr are the
//! terminal's slave side, and the test holds the master side, so it reads every byte a
//! person's terminal would receive and types as a person would (with the terminal's own
//! line discipline: echo, line editing, a kernel input queue). Output post-processing is
//! off, so the bytes read are exactly the bytes written (no `\n` → `\r\n`).
//!
//! [`raw_controls`] is the tests' own list of what must never reach a terminal raw, kept
//! independent of `toren-display` so that a gap in the renderer is not a gap in the test.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::pty::openpty;
use nix::sys::termios::{OutputFlags, SetArg, tcgetattr, tcsetattr};

use super::common::Toren;

/// What the terminal received so far, and whether the other side is gone.
#[derive(Default)]
struct Screen {
    bytes: Vec<u8>,
    closed: bool,
}

/// A `toren` command running on a pseudo-terminal.
pub(crate) struct Terminal {
    master: File,
    screen: Arc<(Mutex<Screen>, Condvar)>,
    /// Where the next [`Terminal::wait_for`] starts looking.
    cursor: usize,
    child: Child,
}

/// Which of the command's standard streams are the terminal.
#[derive(Clone, Copy)]
pub(crate) struct Streams {
    pub(crate) stdin: bool,
    pub(crate) stderr: bool,
}

pub(crate) const ALL: Streams = Streams {
    stdin: true,
    stderr: true,
};

impl Terminal {
    /// `toren ARGS` with stdin, stdout and stderr on the terminal.
    pub(crate) fn spawn(toren: &Toren, args: &[&str]) -> Self {
        Self::spawn_with(toren, args, ALL)
    }

    /// `toren ARGS` with stdout and the chosen streams on the terminal; the others are
    /// a closed stdin and a discarded stderr.
    pub(crate) fn spawn_with(toren: &Toren, args: &[&str], streams: Streams) -> Self {
        let pty = openpty(None, None).unwrap();
        let mut modes = tcgetattr(&pty.slave).unwrap();
        modes.output_flags.remove(OutputFlags::OPOST);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &modes).unwrap();
        let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let child = {
            let mut cmd = toren.command(args);
            cmd.stdout(slave(&pty.slave));
            cmd.stdin(if streams.stdin {
                slave(&pty.slave)
            } else {
                Stdio::null()
            });
            cmd.stderr(if streams.stderr {
                slave(&pty.slave)
            } else {
                Stdio::null()
            });
            cmd.spawn().unwrap()
            // `cmd` and `pty.slave` drop here: only the child holds the slave side.
        };
        let master = File::from(pty.master);
        let screen = Arc::new((Mutex::new(Screen::default()), Condvar::new()));
        let mut reader = master.try_clone().unwrap();
        let shared = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // EIO once every slave descriptor is closed.
                let n = reader.read(&mut buf).unwrap_or(0);
                let (lock, changed) = &*shared;
                let mut screen = lock.lock().unwrap();
                if n == 0 {
                    screen.closed = true;
                    changed.notify_all();
                    return;
                }
                screen.bytes.extend_from_slice(&buf[..n]);
                changed.notify_all();
            }
        });
        Self {
            master,
            screen,
            cursor: 0,
            child,
        }
    }

    /// Waits until `needle` arrives after what earlier waits found, and returns the
    /// terminal's text up to the end of it. Fails with the screen if the command ends or
    /// 30 seconds pass first.
    pub(crate) fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let (lock, changed) = &*self.screen;
        let mut screen = lock.lock().unwrap();
        loop {
            if let Some(at) = find(&screen.bytes[self.cursor..], needle.as_bytes()) {
                self.cursor += at + needle.len();
                return String::from_utf8_lossy(&screen.bytes[..self.cursor]).into_owned();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !screen.closed && !left.is_zero(),
                "the terminal never showed {needle:?}; it shows:\n{}",
                String::from_utf8_lossy(&screen.bytes)
            );
            screen = changed.wait_timeout(screen, left).unwrap().0;
        }
    }

    /// Types `keys` on the terminal's keyboard.
    pub(crate) fn type_keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits for the command to end and for all its output; returns its status and
    /// everything the terminal received.
    pub(crate) fn finish(mut self) -> (ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let (lock, changed) = &*self.screen;
        let mut screen = lock.lock().unwrap();
        while !screen.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the terminal was never closed");
            screen = changed.wait_timeout(screen, left).unwrap().0;
        }
        (status, String::from_utf8_lossy(&screen.bytes).into_owned())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Every character in `screen` that a terminal would obey or hide rather than show: C0
/// controls but newline and tab (carriage returns included: output post-processing is
/// off, so Toren wrote every one), DEL, C1 controls, bidirectional controls, zero-width,
/// invisible and separator characters, tags and variation selectors.
pub(crate) fn raw_controls(screen: &str) -> Vec<char> {
    screen
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n' && *c != '\t')
                || matches!(
                    *c,
                    '\u{00AD}'
                        | '\u{034F}'
                        | '\u{061C}'
                        | '\u{115F}'
                        | '\u{1160}'
                        | '\u{17B4}'
                        | '\u{17B5}'
                        | '\u{180B}'..='\u{180F}'
                        | '\u{200B}'..='\u{200F}'
                        | '\u{2028}'..='\u{202E}'
                        | '\u{2060}'..='\u{206F}'
                        | '\u{2800}'
                        | '\u{3164}'
                        | '\u{FE00}'..='\u{FE0F}'
                        | '\u{FEFF}'
                        | '\u{FFA0}'
                        | '\u{FFF9}'..='\u{FFFB}'
                        | '\u{E0000}'..='\u{E0FFF}'
                )
        })
        .collect()
}
