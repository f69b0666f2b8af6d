//! The gateway's own HTTP/1.1 path. A connection's task reads each request head, routes,
//! authenticates and authorizes it from the snapshot as the hyper path does
//! ([`super::proxy`]), writes it to an idle connection of the chosen instance, and passes
//! the answer back as it arrives: no dispatch between tasks, no header maps, no body frames.
//! The instance's bytes pass through unchanged after the head (a chunked body stays chunked;
//! each read is written on at once, so server-sent events keep their spacing).
//!
//! It takes requests whose framing is plain (see [`head::parse_request`]); at the first one
//! it does not (HTTP/2, a WebSocket handshake, a chunked or large body, `Expect`, a malformed
//! head), the connection goes to hyper for good, with the bytes read so far. An idle
//! connection holds no read buffer.

mod chunked;
mod conn;
mod head;
mod pool;
mod rewind;

use std::sync::Arc;

use axum::Router;

pub use pool::Pool;

pub(super) use conn::serve;
use rewind::Rewind;

/// What a listener's connections share.
pub(super) struct Ctx {
    pub(super) gateways: Arc<super::Gateways>,
    pub(super) gateway_id: String,
    /// The hyper path, for the connections handed over.
    pub(super) app: Router,
}
