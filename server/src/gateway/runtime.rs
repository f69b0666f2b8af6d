//! The gateways at run time: one listener per gateway (started and stopped as gateways come
//! and go, without a restart; a stopped listener lets its in-flight requests and streams
//! finish), its TLS, the instances' active probes, and following the running serving jobs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::listener::Listener;
use super::listener::TcpListenerHandle;
use super::proxy;
use super::refused::{Key, Refused};
use super::shared::Gateways;
use super::snapshot::{GatewaySnap, Snapshot};
use super::tls::{self, Tls};

/// How often listeners are reconciled with the gateways and instances are probed.
const RECONCILE_EVERY: Duration = Duration::from_millis(100);
const PROBE_EVERY: Duration = Duration::from_secs(2);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the running serving jobs are compared with the snapshot's instances.
const SERVING_POLL: Duration = Duration::from_secs(1);

impl Gateways {
    /// Starts a listener for each gateway that has none, stops those of gateways gone.
    async fn reconcile(self: &Arc<Self>, snap: &Snapshot) {
        let mut listeners = self.listeners.lock().await;
        listeners.retain(|id, l| {
            let keep = snap.gateways.get(id).is_some_and(|g| g.port == l.port);
            if !keep {
                tracing::info!(gateway = %id, port = l.port, "gateway: listener stopped");
            }
            keep
        });
        for g in snap.gateways.values() {
            if listeners.contains_key(&g.id) || g.port == 0 {
                continue;
            }
            let key = Refused::gateway(&g.id);
            let tls = match self.tls_of(g) {
                Ok(t) => t,
                Err(e) => {
                    // Fail closed: no listener (its port not even bound) rather than one without
                    // its certificate.
                    if self.news(&key, &e) {
                        tracing::error!(gateway = %g.name, tenant = %g.tenant_slug, error = %e, "gateway: its certificate cannot be read; not listening");
                    }
                    continue;
                }
            };
            let addr = SocketAddr::new(self.bind, g.port);
            let tcp = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    if self.news(&key, &e.to_string()) {
                        tracing::error!(gateway = %g.name, %addr, error = %e, "gateway: cannot listen");
                    }
                    continue;
                }
            };
            self.started(&key);
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let ctx = Arc::new(super::h1::Ctx {
                gateways: self.clone(),
                gateway_id: g.id.clone(),
                app: proxy::router(self.clone(), g.id.clone()),
            });
            super::listener::spawn(tcp, ctx, tls.as_ref().map(|t| t.config.clone()), stopped);
            tracing::info!(gateway = %g.name, tenant = %g.tenant_slug, %addr, tls = tls.is_some(), "gateway: listening");
            listeners.insert(
                g.id.clone(),
                Listener {
                    port: g.port,
                    certificate_pem: tls.map(|t| t.certificate_pem.clone()),
                    _stop: stop,
                },
            );
        }
    }

    /// A gateway's TLS: none with plain HTTP, else [`Gateways::certificate_of`].
    fn tls_of(&self, g: &GatewaySnap) -> Result<Option<Arc<Tls>>, String> {
        if self.plain_http {
            return Ok(None);
        }
        self.certificate_of(g).map(Some)
    }

    /// A gateway's certificate from the operator's folder, else a self-signed one for the
    /// listeners' address and `localhost` (made once per process for each gateway).
    fn certificate_of(&self, g: &GatewaySnap) -> Result<Arc<Tls>, String> {
        if let Some(dir) = &self.tls_dir {
            if let Some(t) = tls::from_dir(dir, &g.tenant_slug, &g.name) {
                return t.map(Arc::new);
            }
        }
        let mut made = match self.self_signed.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(t) = made.get(&g.id) {
            return Ok(t.clone());
        }
        let t = Arc::new(tls::self_signed(&[
            self.bind.to_string(),
            "localhost".into(),
        ])?);
        made.insert(g.id.clone(), t.clone());
        Ok(t)
    }

    /// Starts a listener for each raw TCP route that has none, stops those of routes gone
    /// (or whose TLS changed). Endpoint and networks are read per connection.
    async fn reconcile_tcp(self: &Arc<Self>, snap: &Snapshot) {
        if let Ok(mut made) = self.self_signed.lock() {
            made.retain(|id, _| snap.gateways.contains_key(id));
        }
        if let Ok(mut refused) = self.refused.lock() {
            refused.keep(|key| match key {
                Key::Gateway(id) => snap.gateways.contains_key(id),
                Key::Tcp(port) => snap.tcp.contains_key(port),
            });
        }
        let mut listeners = self.tcp_listeners.lock().await;
        listeners.retain(|port, l| {
            let keep = snap
                .tcp
                .get(port)
                .is_some_and(|r| r.tls == l.tls && r.client_ca == l.client_ca);
            if !keep {
                tracing::info!(port, "gateway: TCP route's listener stopped");
            }
            keep
        });
        for r in snap.tcp.values() {
            if listeners.contains_key(&r.port) {
                continue;
            }
            let Some(g) = snap.gateways.get(&r.gateway_id) else {
                continue;
            };
            let key = Refused::tcp(r.port);
            let tls = if r.tls {
                match self.certificate_of(g) {
                    Ok(t) => match tls::for_tcp(&t, r.client_ca.as_deref()) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            if self.news(&key, &e) {
                                tracing::error!(gateway = %g.name, port = r.port, error = %e, "gateway: a TCP route's client certificate authorities cannot be read; not listening");
                            }
                            continue;
                        }
                    },
                    Err(e) => {
                        if self.news(&key, &e) {
                            tracing::error!(gateway = %g.name, port = r.port, error = %e, "gateway: its certificate cannot be read; TCP route not listening");
                        }
                        continue;
                    }
                }
            } else {
                None
            };
            let addr = SocketAddr::new(self.bind, r.port);
            let tcp = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    if self.news(&key, &e.to_string()) {
                        tracing::error!(%addr, error = %e, "gateway: cannot listen for a TCP route");
                    }
                    continue;
                }
            };
            self.started(&key);
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            super::tcp::spawn(self.clone(), tcp, r.port, tls, stopped);
            tracing::info!(gateway = %g.name, %addr, tls = r.tls, "gateway: TCP route listening");
            listeners.insert(
                r.port,
                TcpListenerHandle {
                    tls: r.tls,
                    client_ca: r.client_ca.clone(),
                    _stop: stop,
                },
            );
        }
    }

    /// The certificate a gateway's listeners present (PEM; `None`: plain HTTP and no TCP
    /// route with TLS, or not listening).
    pub async fn certificate(&self, gateway_id: &str) -> Option<String> {
        let http = self
            .listeners
            .lock()
            .await
            .get(gateway_id)
            .and_then(|l| l.certificate_pem.clone());
        // With plain HTTP, a TCP route with TLS still presents one.
        http.or_else(|| {
            let made = self.self_signed.lock().ok()?;
            made.get(gateway_id).map(|t| t.certificate_pem.clone())
        })
    }

    /// Probes every instance with a TCP connection: one that does not answer is skipped until
    /// it does again.
    async fn probe(&self, snap: &Snapshot) {
        let checks = snap
            .endpoints
            .values()
            .flat_map(|e| e.targets.iter())
            .map(|t| {
                let state = t.state.clone();
                let address = t.address.clone();
                async move {
                    let ok = matches!(
                        tokio::time::timeout(
                            PROBE_TIMEOUT,
                            tokio::net::TcpStream::connect(&address)
                        )
                        .await,
                        Ok(Ok(_))
                    );
                    state.down.store(!ok, Ordering::Relaxed);
                    if ok {
                        state.seen_up.store(true, Ordering::Relaxed);
                    }
                }
            });
        futures::future::join_all(checks).await;
    }

    /// Renews the snapshot when the running serving jobs are not those it counts (a job
    /// started, ended or was preempted): the scheduler's commits do not say so themselves.
    async fn follow_serving_jobs(&self) {
        // A serving job serves an endpoint: with none (and none served before), nothing to read.
        let cached = self.cached();
        if cached.endpoints.is_empty() && cached.serving.is_empty() {
            return;
        }
        let running: Result<Vec<String>, _> = sqlx::query_scalar(
            "SELECT id FROM jobs WHERE serve_endpoint_id IS NOT NULL AND state = 'running' ORDER BY id",
        )
        .fetch_all(&self.store.pool)
        .await;
        match running {
            Ok(ids) if ids != cached.serving => self.store.note_access_change(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "gateway: reading the serving jobs failed"),
        }
    }

    /// Whether a listener's failure to start, `why`, differs from the last one noted for it:
    /// a failure is logged once, not at every reconcile.
    fn news(&self, key: &Key, why: &str) -> bool {
        match self.refused.lock() {
            Ok(mut r) => r.note(key, why),
            Err(_) => true,
        }
    }

    /// A listener started: its next failure is logged again.
    fn started(&self, key: &Key) {
        if let Ok(mut r) = self.refused.lock() {
            r.started(key);
        }
    }

    /// The ports the gateways listen on now, by gateway id.
    pub async fn listening(&self) -> HashMap<String, u16> {
        self.listeners
            .lock()
            .await
            .iter()
            .map(|(id, l)| (id.clone(), l.port))
            .collect()
    }
}

/// Starts the gateways' reconcile loop: listeners follow the gateways in the store (within
/// [`RECONCILE_EVERY`] of a commit in this process), instances are probed every
/// [`PROBE_EVERY`]; and the sampler of the endpoints' traffic over time.
pub fn start(g: Arc<Gateways>) -> JoinHandle<()> {
    super::sampler::spawn(g.clone());
    tokio::spawn(async move {
        let mut seen = u64::MAX;
        let mut probed = tokio::time::Instant::now() - PROBE_EVERY;
        let mut polled = tokio::time::Instant::now();
        loop {
            if polled.elapsed() >= SERVING_POLL {
                polled = tokio::time::Instant::now();
                g.follow_serving_jobs().await;
            }
            let now_gen = g.store.access_generation();
            let changed = now_gen != seen;
            if changed || probed.elapsed() >= PROBE_EVERY {
                match g.current().await {
                    Ok(snap) => {
                        seen = snap.generation;
                        g.reconcile(&snap).await;
                        g.reconcile_tcp(&snap).await;
                        // New instances (a serving job that started) are probed at once.
                        if changed || probed.elapsed() >= PROBE_EVERY {
                            probed = tokio::time::Instant::now();
                            g.probe(&snap).await;
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "gateway: reading its configuration failed")
                    }
                }
            }
            tokio::time::sleep(RECONCILE_EVERY).await;
        }
    })
}
