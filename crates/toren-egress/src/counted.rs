//! The upstream side of an allowed connection, counting the bytes it carries and telling
//! the [`Recorder`] once when it is dropped: when its tunnel or forwarded exchange ends, or
//! the proxy stops. One record per connection, whatever the traffic.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{Decision, Recorder, Traffic};

/// `inner`, counted; reports `decision` with the totals on drop.
pub(crate) struct Counted<S> {
    inner: S,
    traffic: Traffic,
    report: Option<(Arc<dyn Recorder>, Decision)>,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, recorder: Arc<dyn Recorder>, decision: Decision) -> Self {
        Self {
            inner,
            traffic: Traffic::default(),
            report: Some((recorder, decision)),
        }
    }
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        if let Some((recorder, decision)) = self.report.take() {
            recorder.closed(decision, self.traffic);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = buf.filled().len().saturating_sub(before);
            self.traffic.down += read as u64;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.traffic.up += written as u64;
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
