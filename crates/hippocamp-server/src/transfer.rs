//! What bounds a reply after its headers are sent.
//!
//! A handler returns as soon as a download's headers are ready; its body
//! then streams for as long as the client reads. Three things keep a slow
//! or stalled reader from holding the server's resources for ever:
//!
//! - [`admit`]: the global concurrency permit is attached to the reply's
//!   body, so a request counts until its body is finished or dropped, not
//!   until its headers leave;
//! - [`until`]: a download's body ends with an error at the transfer
//!   deadline (`http.transfer_timeout_ms` or `?timeout_ms=`), whatever
//!   the client's pace;
//! - [`Listener`]: every connection's writes fail once one has waited for
//!   the client to read for `http.transfer_idle_timeout_ms`, which closes
//!   the connection and drops the body (a body that is not polled cannot
//!   notice its own deadline; the socket write that waits can).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::error::ApiError;

/// A reply body that holds its request's concurrency permit until it ends.
struct PermitBody {
    inner: Body,
    _permit: OwnedSemaphorePermit,
}

impl http_body::Body for PermitBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Admits a request if a concurrency permit is free (503 `overloaded` at
/// once otherwise: no queue), and keeps the permit until the reply's body
/// is done.
pub async fn admit(State(permits): State<Arc<Semaphore>>, req: Request, next: Next) -> Response {
    let Ok(permit) = permits.try_acquire_owned() else {
        return ApiError::from(hippocamp_core::Error::Overloaded(
            "the server's concurrency limit is reached",
        ))
        .into_response();
    };
    next.run(req).await.map(|inner| {
        Body::new(PermitBody {
            inner,
            _permit: permit,
        })
    })
}

/// A download body that ends with a `TimedOut` error at `deadline`.
struct Until<S> {
    inner: S,
    timer: Pin<Box<Sleep>>,
    done: bool,
}

impl<S: Stream<Item = io::Result<Bytes>> + Unpin> Stream for Until<S> {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            self.done = true;
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the transfer deadline expired",
            ))));
        }
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

/// `stream`, ended with an error at `deadline` (the connection is then
/// closed: the client sees a body shorter than its Content-Length).
pub fn until<S>(stream: S, deadline: Instant) -> impl Stream<Item = io::Result<Bytes>> + Send
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    Until {
        inner: stream,
        timer: Box::pin(tokio::time::sleep_until(deadline.into())),
        done: false,
    }
}

/// A connection whose writes fail once one has waited `idle` for the peer
/// to read.
#[derive(Debug)]
pub struct StallGuard<T> {
    io: T,
    idle: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> StallGuard<T> {
    /// Guards `io`.
    pub fn new(io: T, idle: Duration) -> Self {
        Self {
            io,
            idle,
            stalled: None,
        }
    }

    /// After a write returned `pending`: fails once it has waited `idle`.
    fn waited(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let idle = self.idle;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client stopped reading",
        ))
    }

    fn write_with<R>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut T>, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>>
    where
        T: Unpin,
    {
        match op(Pin::new(&mut self.io), cx) {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.waited(cx).map(Err),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write_with(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write_with(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.write_with(cx, AsyncWrite::poll_flush)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The server's listener: TCP, each connection behind a [`StallGuard`].
#[derive(Debug)]
pub struct Listener {
    inner: tokio::net::TcpListener,
    idle: Duration,
}

impl Listener {
    /// Guards the connections `inner` accepts with `idle`.
    pub fn new(inner: tokio::net::TcpListener, idle: Duration) -> Self {
        Self { inner, idle }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl axum::serve::Listener for Listener {
    type Io = StallGuard<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (StallGuard::new(io, self.idle), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}
