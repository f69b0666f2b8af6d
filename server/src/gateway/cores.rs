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
        Cores::start_with(n, |b, f| b.spawn(f).map(drop))
    }

    /// [`Cores::start`] with the threads started by `thread` (tests make it fail). Each
    /// runtime is built on its own thread and only its handle comes back: a runtime dropped
    /// on the caller's (a tokio worker, in the accept loop) would panic there.
    fn start_with<S>(n: usize, mut thread: S) -> Cores
    where
        S: FnMut(std::thread::Builder, Box<dyn FnOnce() + Send>) -> std::io::Result<()>,
    {
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            // Its place among the runtimes that started: its share of per-core state.
            let index = handles.len();
            let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Handle>>(1);
            let run = Box::new(move || {
                let rt = match Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if tx.send(Ok(rt.handle().clone())).is_ok() {
                    INDEX.with(|c| c.set(Some(index)));
                    rt.block_on(std::future::pending::<()>());
                }
            });
            let named = std::thread::Builder::new().name(format!("gateway-{i}"));
            if let Err(e) = thread(named, run) {
                tracing::error!(error = %e, "gateway: a per-core thread cannot start");
                continue;
            }
            // The thread answers as soon as its runtime is built (or has failed to be).
            match rx.recv() {
                Ok(Ok(handle)) => handles.push(handle),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "gateway: a per-core runtime cannot start")
                }
                Err(_) => {
                    tracing::error!("gateway: a per-core thread ended before its runtime started")
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a task spawned on `cores` runs: the core's index, `None` on the caller's runtime.
    async fn ran_on(cores: &Cores) -> Option<usize> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        cores.spawn(async move {
            let _ = tx.send(index());
        });
        rx.await.unwrap_or(Some(usize::MAX))
    }

    #[tokio::test]
    async fn a_core_whose_thread_cannot_start_is_left_out_without_a_panic() {
        let mut calls = 0;
        let cores = Cores::start_with(2, |b, f| {
            calls += 1;
            if calls == 1 {
                // The closure (and whatever it holds) is dropped here, on a tokio worker.
                drop(f);
                return Err(std::io::Error::other("no thread for you"));
            }
            b.spawn(f).map(drop)
        });
        assert_eq!(cores.len(), 1);
        // The core that started takes the first place: its per-core state is index 0.
        assert_eq!(ran_on(&cores).await, Some(0));
        assert_eq!(ran_on(&cores).await, Some(0));
    }

    #[tokio::test]
    async fn with_no_core_started_connections_stay_on_the_callers_runtime() {
        let cores = Cores::start_with(2, |_, f| {
            drop(f);
            Err(std::io::Error::other("no threads at all"))
        });
        assert_eq!(cores.len(), 0);
        assert_eq!(ran_on(&cores).await, None);
    }

    #[tokio::test]
    async fn connections_go_round_the_cores() {
        let cores = Cores::start(3);
        assert_eq!(cores.len(), 3);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(ran_on(&cores).await);
        }
        assert_eq!(seen, [0, 1, 2, 0, 1, 2].map(Some));
    }
}
