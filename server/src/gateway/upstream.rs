//! Upstream HTTP/1.1 connections driven by the request that uses them. hyper's pooled client
//! runs each connection on a task of its own, so a request and each frame of its answer cross
//! between tasks (a wake-up each way); here the request's own task drives its connection,
//! first while it waits for the answer's head, then while the client reads the body, and puts
//! it back among the idle ones once the body has ended. An idle connection is looked at
//! before it is used again (one the instance closed, or idle for a minute, is dropped), and a
//! request that a reused connection could not take is sent on a new one. A client that goes
//! away drops the connection with its answer, which closes it: the instance sees the
//! disconnect.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::uri::{self, Authority};
use axum::http::{header, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long connecting to an instance may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// An idle connection older than this is closed rather than used.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections kept per instance.
pub(super) const MAX_IDLE: usize = 256;

type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Body>>>;

struct Conn {
    send: http1::SendRequest<Body>,
    drive: Driver,
    idle_since: Instant,
}

impl Conn {
    /// Whether it can take a request now. Polled once: an instance that closed it is seen
    /// here, and one whose last answer was read whole becomes ready.
    fn usable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if self.drive.as_mut().poll(&mut cx).is_ready() {
            return false;
        }
        self.send.is_ready()
    }
}

/// Why a request got no answer from an instance.
#[derive(Debug)]
pub enum UpError {
    /// No connection could be made (refused, unreachable, timed out): another instance may
    /// be tried.
    Connect,
    /// The instance closed the connection before it answered.
    Closed,
    Failed(hyper::Error),
    /// Through hyper's pooled client.
    Other(String),
}

impl fmt::Display for UpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpError::Connect => f.write_str("could not connect"),
            UpError::Closed => f.write_str("closed the connection before answering"),
            UpError::Failed(e) => write!(f, "{e}"),
            UpError::Other(e) => f.write_str(e),
        }
    }
}

/// Idle upstream connections, by instance address.
#[derive(Default)]
pub struct Upstreams {
    idle: Mutex<HashMap<String, Vec<Conn>>>,
}

enum SendError {
    /// Not taken (the connection was no longer ready): the request, to send elsewhere.
    NotTaken(Box<Request<Body>>),
    Failed(UpError),
}

impl Upstreams {
    fn checkout(&self, authority: &str) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(authority)?;
        while let Some(mut c) = list.pop() {
            if c.idle_since.elapsed() < IDLE_TIMEOUT && c.usable() {
                return Some(c);
            }
        }
        None
    }

    fn checkin(&self, authority: String, mut c: Conn) {
        if !c.usable() {
            return;
        }
        c.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(authority).or_default();
        if list.len() < MAX_IDLE {
            list.push(c);
        }
    }

    async fn connect(authority: &str) -> Result<Conn, UpError> {
        let stream =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(authority)).await {
                Ok(Ok(s)) => s,
                _ => return Err(UpError::Connect),
            };
        let _ = stream.set_nodelay(true);
        let (send, drive) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(UpError::Failed)?;
        Ok(Conn {
            send,
            drive: Box::pin(drive),
            idle_since: Instant::now(),
        })
    }

    /// Sends `req` (origin-form URI, `Host` set) to the instance at `authority` and waits
    /// for the head of its answer; the body is read through the [`Lease`].
    pub async fn request(
        self: &Arc<Self>,
        authority: &str,
        req: Request<Body>,
    ) -> Result<(Response<Incoming>, Lease), UpError> {
        let mut req = req;
        if let Some(mut c) = self.checkout(authority) {
            match send(&mut c, req).await {
                Ok(resp) => return Ok((resp, self.lease(authority, c))),
                Err(SendError::NotTaken(r)) => req = *r,
                Err(SendError::Failed(e)) => return Err(e),
            }
        }
        let mut c = Self::connect(authority).await?;
        match send(&mut c, req).await {
            Ok(resp) => Ok((resp, self.lease(authority, c))),
            Err(SendError::NotTaken(_)) => Err(UpError::Closed),
            Err(SendError::Failed(e)) => Err(e),
        }
    }

    fn lease(self: &Arc<Self>, authority: &str, c: Conn) -> Lease {
        Lease {
            pool: self.clone(),
            authority: authority.to_string(),
            conn: Some(c),
            done: false,
        }
    }
}

/// Sends `req` on `c`, driving the connection until the answer's head is in.
async fn send(c: &mut Conn, req: Request<Body>) -> Result<Response<Incoming>, SendError> {
    let mut answer = std::pin::pin!(c.send.try_send_request(req));
    let drive = &mut c.drive;
    std::future::poll_fn(|cx| {
        let driven = drive.as_mut().poll(cx);
        if let Poll::Ready(r) = answer.as_mut().poll(cx) {
            return Poll::Ready(r.map_err(|mut e| match e.take_message() {
                Some(req) => SendError::NotTaken(Box::new(req)),
                None => SendError::Failed(UpError::Failed(e.into_error())),
            }));
        }
        match driven {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(Err(SendError::Failed(UpError::Closed))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(SendError::Failed(UpError::Failed(e)))),
        }
    })
    .await
}

/// The connection an answer's body is read from: driven as the body is polled, back among
/// the idle connections once the body has ended ([`Lease::finished`]), closed otherwise.
pub struct Lease {
    pool: Arc<Upstreams>,
    authority: String,
    conn: Option<Conn>,
    done: bool,
}

impl Lease {
    /// Lets the connection read (and write) what it can.
    pub fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(c) = self.conn.as_mut() {
            if c.drive.as_mut().poll(cx).is_ready() {
                self.conn = None;
            }
        }
    }

    /// The body was read to its end: the connection may serve another request.
    pub fn finished(&mut self) {
        self.done = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let (true, Some(c)) = (self.done, self.conn.take()) {
            self.pool.checkin(std::mem::take(&mut self.authority), c);
        }
    }
}

/// One request to an instance at `authority`: on a connection this task drives
/// ([`Upstreams`]), or, for a WebSocket handshake (whose connection hyper hands over after
/// the 101), through hyper's pooled client. `req` carries an origin-form URI.
pub async fn exchange(
    client: &Client<HttpConnector, Body>,
    upstreams: &Arc<Upstreams>,
    upgrade: bool,
    authority: &Authority,
    mut req: Request<Body>,
) -> Result<(Response<Incoming>, Option<Lease>), UpError> {
    if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
        req.headers_mut().insert(header::HOST, host);
    }
    if !upgrade {
        let (resp, lease) = upstreams.request(authority.as_str(), req).await?;
        return Ok((resp, Some(lease)));
    }
    let mut uri = uri::Parts::default();
    uri.scheme = Some(uri::Scheme::HTTP);
    uri.authority = Some(authority.clone());
    uri.path_and_query = req.uri().path_and_query().cloned();
    *req.uri_mut() = Uri::from_parts(uri).map_err(|e| UpError::Other(e.to_string()))?;
    match client.request(req).await {
        Ok(resp) => Ok((resp, None)),
        Err(e) if e.is_connect() => Err(UpError::Connect),
        Err(e) => Err(UpError::Other(e.to_string())),
    }
}
