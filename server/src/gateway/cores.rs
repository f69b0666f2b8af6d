//! The gateway's TLS connections are served on runtimes of their own, one per core, each a
//! current-thread runtime driven by one thread (as nginx runs a worker per core): a
//! connection's task never moves between threads, what wakes it runs on its own thread, and
//! the HTTP/1.1 path keeps its idle upstream connections per core ([`index`]). The
//! listeners' accept loops hand each new connection to the next core in turn. Plain HTTP
//! connections (development, tests) stay on the server's runtime: measured there, serving
//! them per core cost more CPU per request than it saved (BENCHMARKS.md, gateway).
//!
//! The runtimes are the process's, started once when first needed and kept for its life;
//! the listeners, their stop signals and the connections' state stay each gateway's own.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};

pub(super) struct Cores {
    handles: Vec<Handle>,
    next: AtomicUsize,
}

static CORES: OnceLock<Cores> = OnceLock::new();

thread_local! {
    /// The core this thread serves (`None` on the server's runtime threads).
    static INDEX: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The process's gateway runtimes, started on first use: as many as the server's runtime has
/// worker threads (`TOKIO_WORKER_THREADS`, else one per core).
pub(super) fn cores() -> &'static Cores {
    CORES.get_or_init(|| {
        let n = std::env::var("TOKIO_WORKER_THREADS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        Cores::start(n)
    })
}

/// The core the current thread serves, `None` outside the gateway's cores.
pub(super) fn index() -> Option<usize> {
    INDEX.with(Cell::get)
}

impl Cores {
    /// Starts `n` runtimes, each on a thread of its own. One that cannot start is left out
    /// (logged); with none, connections are served on the caller's runtime.
    fn start(n: usize) -> Cores {
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let rt = match Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "gateway: a per-core runtime cannot start");
                    continue;
                }
            };
            let handle = rt.handle().clone();
            // Its place among the runtimes that started: its share of per-core state.
            let index = handles.len();
            let started = std::thread::Builder::new()
                .name(format!("gateway-{i}"))
                .spawn(move || {
                    INDEX.with(|c| c.set(Some(index)));
                    rt.block_on(std::future::pending::<()>());
                });
            match started {
                Ok(_) => handles.push(handle),
                Err(e) => tracing::error!(error = %e, "gateway: a per-core thread cannot start"),
            }
        }
        Cores {
            handles,
            next: AtomicUsize::new(0),
        }
    }

    /// How many cores serve connections.
    pub(super) fn len(&self) -> usize {
        self.handles.len()
    }

    /// Runs a connection's task on the next core in turn.
    pub(super) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.handles.is_empty() {
            tokio::spawn(task);
            return;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        self.handles[i].spawn(task);
    }
}
