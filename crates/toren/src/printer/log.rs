//! The writer of `TOREN_LOG` lines: stderr, each line rendered like every other message
//! of [`super`] (log fields may quote what a model, a provider or a sandbox said). The
//! subscriber is set up without ANSI colours, so nothing in a line is Toren's own escape.
//! The values of every run's granted `env` variables and injected secrets this process
//! learnt are replaced by `[redacted:NAME]` first (`toren_worker::redact_log`).

use std::io::Write;

use toren_display::visible_lines;

/// Where `TOREN_LOG` lines go: stderr, each line rendered like every other message (log
/// fields may quote a model's or a sandbox's text). Used without ANSI colours.
pub(crate) struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine(Vec::new())
    }
}

/// One log line, written to stderr when it is complete.
pub(crate) struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        // Never a value a run of this process was granted or had injected.
        let text = toren_worker::redact_log(&text);
        let _ = std::io::stderr().write_all(visible_lines(&text).as_bytes());
    }
}
