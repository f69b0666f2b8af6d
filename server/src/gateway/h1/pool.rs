//! Idle upstream connections of the HTTP/1.1 path, by instance address: plain TCP streams
//! the request's own task writes to and reads from. One the instance closed (or sent
//! something unasked on), or idle for a minute, is dropped when looked at. Each core keeps
//! its own ([`crate::gateway::cores`]), and the server's runtime its own: a connection is
//! registered with the reactor of the runtime that opened it, and only that runtime's tasks
//! take it again.

use std::sync::Mutex;
use std::time::Instant;

use tokio::net::TcpStream;

// The same limits as the hyper path's connections.
use crate::gateway::cores::{cores, index};
use crate::gateway::upstream::{CONNECT_TIMEOUT, IDLE_TIMEOUT, MAX_IDLE};

type Idle = crate::gateway::snapshot::FastMap<String, Vec<(TcpStream, Instant)>>;

pub struct Pool {
    /// One per core, and one for the server's runtime (the last).
    idle: Vec<Mutex<Idle>>,
}

impl Default for Pool {
    fn default() -> Pool {
        Pool {
            idle: (0..=cores().len()).map(|_| Mutex::default()).collect(),
        }
    }
}

/// Whether an idle connection can still take a request: nothing to read (an instance that
/// closed it makes it readable, at its end).
fn open(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

impl Pool {
    /// This core's idle connections.
    fn mine(&self) -> std::sync::MutexGuard<'_, Idle> {
        let last = self.idle.len() - 1;
        let shard = &self.idle[index().map_or(last, |i| i.min(last))];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection to `authority` that is still open.
    pub(super) fn checkout(&self, authority: &str) -> Option<TcpStream> {
        let mut idle = self.mine();
        let list = idle.get_mut(authority)?;
        while let Some((s, since)) = list.pop() {
            if since.elapsed() < IDLE_TIMEOUT && open(&s) {
                return Some(s);
            }
        }
        None
    }

    /// Puts back a connection whose last answer was read whole.
    pub(super) fn checkin(&self, authority: &str, stream: TcpStream) {
        let mut idle = self.mine();
        let list = match idle.get_mut(authority) {
            Some(l) => l,
            None => idle.entry(authority.to_string()).or_default(),
        };
        if list.len() < MAX_IDLE {
            list.push((stream, Instant::now()));
        }
    }
}

/// A new connection to `authority` (`None`: refused, unreachable or timed out).
pub(super) async fn connect(authority: &str) -> Option<TcpStream> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(authority))
        .await
        .ok()?
        .ok()?;
    let _ = stream.set_nodelay(true);
    Some(stream)
}
