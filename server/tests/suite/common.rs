//! Test harness: a fresh database per test (a SQLite file, or a PostgreSQL schema), the real
//! router driven with `oneshot`, and helpers to seed tenants and sign in.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use app::model::{CreateTenant, RequestMeta};
use switchyard::audit::Actor;
use switchyard::clock::Clock;
use switchyard::config::Config;
use switchyard::identity::{directory, password};
use switchyard::store::Store;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Sqlite,
    Postgres,
}

pub const PASSWORD: &str = "correct-horse-battery";

/// Where manual clocks start: 2026-01-01T00:00:00Z.
pub const START_MS: i64 = 1_767_225_600_000;

pub fn postgres_base() -> String {
    std::env::var("SWITCHYARD_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The wall clock's seconds (the system clock, never a test's manual one).
fn unix_secs() -> u64 {
    u64::try_from(Clock::system().now_ms() / 1000).unwrap_or(0)
}

/// Drops, once per test process, the schemas of runs that ended without dropping theirs (a
/// test that panicked before its cleanup, a run killed): those named more than an hour ago,
/// and those of the naming before the time was in the name. A run takes minutes, so a
/// schema of a run still going is never one of them.
async fn sweep_stale_schemas(admin: &sqlx::AnyPool) {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT
        .get_or_init(|| async {
            let Ok(rows) = sqlx::query_scalar::<_, String>(
                "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'sy\\_test\\_%'",
            )
            .fetch_all(admin)
            .await
            else {
                return;
            };
            let hour_ago = unix_secs().saturating_sub(3600);
            for name in rows {
                let rest = &name["sy_test_".len()..];
                let stale = match rest.split_once('_') {
                    Some((secs, _)) => secs.parse::<u64>().is_ok_and(|t| t < hour_ago),
                    None => true,
                };
                if stale {
                    let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .execute(admin)
                        .await;
                }
            }
        })
        .await;
}

pub struct TestDb {
    pub store: Store,
    pub url: String,
    schema: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn new(kind: Kind) -> TestDb {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/sy.db", dir.path().display());
                let store = Store::connect(&url).await.unwrap();
                TestDb {
                    store,
                    url,
                    schema: None,
                    _dir: Some(dir),
                }
            }
            Kind::Postgres => {
                sqlx::any::install_default_drivers();
                let base = postgres_base();
                let admin = sqlx::AnyPool::connect(&base).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL is required for the store suite at {base}: {e}. Start it or set SWITCHYARD_TEST_POSTGRES.")
                });
                sweep_stale_schemas(&admin).await;
                // 51 bytes: longer than the 45 a schema's change-feed channel takes whole, so
                // every PostgreSQL test also runs with the channel's digest form.
                let schema = format!("sy_test_{}_{}", unix_secs(), uuid::Uuid::new_v4().simple());
                sqlx::query(&format!("CREATE SCHEMA {schema}"))
                    .execute(&admin)
                    .await
                    .unwrap();
                admin.close().await;
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
                let store = Store::connect(&url).await.unwrap();
                TestDb {
                    store,
                    url,
                    schema: Some(schema),
                    _dir: None,
                }
            }
        }
    }

    /// Drops the PostgreSQL schema (SQLite's folder goes with the TempDir).
    pub async fn cleanup(mut self) {
        if let Some(schema) = self.schema.take() {
            let pool = self.store.pool.clone();
            if tokio::time::timeout(std::time::Duration::from_secs(20), pool.close())
                .await
                .is_err()
            {
                panic!(
                    "the test left {} of {} database connections checked out (a task still holds them)",
                    pool.size() as usize - pool.num_idle(),
                    pool.size()
                );
            }
            drop_schema(&schema).await;
        }
    }
}

/// A test that ends without [`TestDb::cleanup`] (it returned early, or panicked) still drops
/// its schema: on a thread of its own, as the test's runtime may be the one dropping this.
impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.take() {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(drop_schema(&schema));
                }
            })
            .join();
        }
    }
}

/// Drops a test's schema. A connection of the test's still open may hold a lock on it
/// (a task not yet stopped): each of 3 tries waits at most 10 s for the lock; after the third
/// it says so and leaves the schema to the next run's sweep.
async fn drop_schema(schema: &str) {
    let Ok(admin) = sqlx::AnyPool::connect(&postgres_base()).await else {
        return;
    };
    let mut done = Err(String::new());
    for _ in 0..3 {
        let r = async {
            let mut c = admin.acquire().await?;
            sqlx::query("SET lock_timeout = '10s'")
                .execute(&mut *c)
                .await?;
            sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .execute(&mut *c)
                .await
        }
        .await;
        done = r.map(drop).map_err(|e| e.to_string());
        if done.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    if let Err(e) = done {
        eprintln!("test schema {schema} not dropped: {e}");
    }
    admin.close().await;
}

pub struct TestApp {
    pub db: TestDb,
    pub router: axum::Router,
    pub state: switchyard::state::AppState,
    pub driver: Option<tokio::task::JoinHandle<()>>,
    pub jobs_dir: Option<tempfile::TempDir>,
}

/// The user local jobs run as in the tests: `nobody` when the tests run as root (as in CI),
/// else the tests' own user (which cannot switch users).
pub fn job_user() -> (u32, u32) {
    match switchyard::nodes::executor::sandbox::current_uid() {
        Some(0) | None => (65534, 65534),
        Some(uid) => (uid, uid),
    }
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

/// The configuration test apps start from: the defaults, except that identity providers may
/// live on loopback (the sign-in suites start theirs on 127.0.0.1). The SSRF suite turns that
/// off again.
pub fn test_config() -> Config {
    Config {
        allow_private_idp_addresses: true,
        // Plain HTTP on the gateways' listeners, as in development; the TLS test turns it off.
        gateway: switchyard::config::GatewayConfig {
            plain_http: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

impl TestApp {
    pub async fn new(kind: Kind) -> TestApp {
        TestApp::with_config(kind, test_config()).await
    }

    pub async fn with_config(kind: Kind, config: Config) -> TestApp {
        TestApp::serving(TestDb::new(kind).await, config)
    }

    /// The app over `db` with `config`, no scheduler running.
    fn serving(db: TestDb, config: Config) -> TestApp {
        let state = switchyard::state(db.store.clone(), config);
        let router = switchyard::routes::app(state.clone());
        TestApp {
            db,
            router,
            state,
            driver: None,
            jobs_dir: None,
        }
    }

    /// The same database served by an app with another configuration (as after a restart
    /// with other settings).
    pub fn reconfigure(&mut self, change: impl FnOnce(&mut Config)) {
        let mut config = (*self.state.config).clone();
        change(&mut config);
        self.state = switchyard::state(self.db.store.clone(), config);
        self.router = switchyard::routes::app(self.state.clone());
    }

    /// An app with these settings changed from the test defaults.
    pub async fn with_settings(kind: Kind, change: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = test_config();
        change(&mut config);
        TestApp::with_config(kind, config).await
    }

    /// An app whose clock stands still until the test moves it (`app.advance_clock(ms)`).
    pub async fn with_manual_clock(kind: Kind) -> TestApp {
        let mut db = TestDb::new(kind).await;
        db.store.clock = Clock::manual(START_MS);
        TestApp::serving(db, test_config())
    }

    /// Moves the app's manual clock (the one the app and its scheduler read) forward.
    pub fn advance_clock(&self, ms: i64) {
        assert!(
            self.db.store.clock.advance(ms),
            "this app runs on the system clock"
        );
    }

    /// An app whose scheduler runs: a fast tick, no minimum runtime, a short simulated
    /// checkpoint, local jobs in a temporary folder.
    pub async fn with_scheduler(kind: Kind) -> TestApp {
        TestApp::scheduler_with_clock(kind, Clock::system()).await
    }

    /// [`TestApp::with_scheduler`] on a manual clock.
    pub async fn with_scheduler_and_manual_clock(kind: Kind) -> TestApp {
        TestApp::scheduler_with_clock(kind, Clock::manual(START_MS)).await
    }

    async fn scheduler_with_clock(kind: Kind, clock: Clock) -> TestApp {
        let mut db = TestDb::new(kind).await;
        db.store.clock = clock;
        let jobs_dir = tempfile::tempdir().unwrap();
        let mut config = test_config();
        config.scheduler.tick_ms = 100;
        config.scheduler.min_runtime_ms = 0;
        config.scheduler.sim_checkpoint_ms = 50;
        config.scheduler.stop_grace_ms = 500;
        config.scheduler.jobs_dir = jobs_dir.path().to_path_buf();
        config.scheduler.allow_local_pools = true;
        let (uid, gid) = job_user();
        config.scheduler.job_uid = uid;
        config.scheduler.job_gid = gid;
        let state = switchyard::state(db.store.clone(), config);
        let router = switchyard::routes::app(state.clone());
        let driver = Some(switchyard::start_scheduler(&state));
        TestApp {
            db,
            router,
            state,
            driver,
            jobs_dir: Some(jobs_dir),
        }
    }

    /// Stops the scheduler (as a crash would) and starts a fresh one on the same database.
    pub async fn restart_scheduler(&mut self) {
        if let Some(d) = self.driver.take() {
            d.abort();
            let _ = d.await;
        }
        self.driver = Some(switchyard::start_scheduler(&self.state));
    }

    /// Polls `GET path` until `pred` holds (10 s at most) and returns the last body.
    pub async fn wait_for(
        &self,
        path: &str,
        token: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let r = self.get(path, token).await;
            if pred(&r.body) {
                return r.body;
            }
            if std::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; last {path}: {}", r.text);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    pub fn store(&self) -> &Store {
        &self.db.store
    }

    /// Every tenant's audit chain verifies (`what`: what should have kept it intact).
    pub async fn assert_audit_intact(&self, what: &str) {
        let chains = switchyard::audit::verify(self.store()).await.unwrap();
        assert!(
            chains.iter().all(|c| c.problems.is_empty()),
            "{what}: {:?}",
            chains.iter().map(|c| &c.problems).collect::<Vec<_>>()
        );
    }

    pub async fn raw(&self, req: Request<Body>) -> Resp {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).to_string();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = match body {
            Some(v) => b
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(v.to_string()))
                .unwrap(),
            None => b.body(Body::empty()).unwrap(),
        };
        self.raw(req).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Resp {
        self.call(Method::GET, path, Some(token), None).await
    }
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }
    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Resp {
        self.call(Method::PATCH, path, Some(token), Some(body))
            .await
    }
    pub async fn delete(&self, path: &str, token: &str) -> Resp {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// Signs in through the API and returns the token.
    pub async fn login(&self, tenant: &str, username: &str) -> String {
        let r = self
            .call(
                Method::POST,
                "/api/v1/auth/login",
                None,
                Some(json!({"tenant": tenant, "username": username, "password": PASSWORD})),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "login {tenant}/{username}: {}",
            r.text
        );
        r.body["token"].as_str().unwrap().to_string()
    }

    /// The id of a user of the admin's tenant, by username.
    pub async fn user_id(&self, admin: &str, username: &str) -> String {
        let users = self.get("/api/v1/users", admin).await;
        users.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["username"] == username)
            .unwrap_or_else(|| panic!("no user {username}: {}", users.text))["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// A tenant with an admin and a member; returns the tenant id.
    pub async fn seed_tenant(&self, slug: &str) -> String {
        let actor = Actor::system("test");
        let meta = RequestMeta::default();
        let t = switchyard::tenancy::insert_tenant(
            self.store(),
            &actor,
            &meta,
            CreateTenant {
                slug: slug.into(),
                name: slug.to_uppercase(),
            },
        )
        .await
        .unwrap();
        let hash = password::hash(PASSWORD).unwrap();
        directory::insert_user(
            self.store(),
            &t.id,
            &actor,
            &meta,
            "admin",
            "Admin",
            None,
            Some(hash.clone()),
            true,
            false,
        )
        .await
        .unwrap();
        directory::insert_user(
            self.store(),
            &t.id,
            &actor,
            &meta,
            "member",
            "Member",
            None,
            Some(hash),
            false,
            false,
        )
        .await
        .unwrap();
        t.id
    }

    pub async fn seed_platform_admin(&self) -> String {
        let actor = Actor::system("test");
        let meta = RequestMeta::default();
        let t = switchyard::tenancy::insert_tenant(
            self.store(),
            &actor,
            &meta,
            CreateTenant {
                slug: "platform".into(),
                name: "Platform".into(),
            },
        )
        .await
        .unwrap();
        let hash = password::hash(PASSWORD).unwrap();
        directory::insert_user(
            self.store(),
            &t.id,
            &actor,
            &meta,
            "root",
            "Root",
            None,
            Some(hash),
            false,
            true,
        )
        .await
        .unwrap();
        self.login("platform", "root").await
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.store().pool)
            .await
            .unwrap()
    }

    pub async fn finish(mut self) {
        if let Some(d) = self.driver.take() {
            d.abort();
            let _ = d.await;
        }
        self.db.cleanup().await;
    }
}

/// The request as if it came over a connection from `ip` (what `axum::serve` records as
/// `ConnectInfo`); requests without it have no known client address.
pub fn from_ip(mut req: Request<Body>, ip: &str) -> Request<Body> {
    let addr = std::net::SocketAddr::new(ip.parse().unwrap(), 40000);
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(addr));
    req
}

/// A JSON `POST /api/v1/auth/login` request.
pub fn login_request(tenant: &str, username: &str, password: &str) -> Request<Body> {
    Request::post("/api/v1/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"tenant": tenant, "username": username, "password": password}).to_string(),
        ))
        .unwrap()
}

/// A test that has not finished after 120 s is stuck: it fails with its name (no rerun, so a
/// hang is never hidden).
pub async fn bounded<F, Fut>(name: &str, test: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let limit = std::time::Duration::from_secs(120);
    if tokio::time::timeout(limit, test()).await.is_err() {
        panic!("{name} stalled: no result after {} s", limit.as_secs());
    }
}

/// Runs an async test body once on SQLite and once on PostgreSQL.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    $crate::common::bounded(stringify!($name), || super::$name($crate::common::Kind::Sqlite)).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    $crate::common::bounded(stringify!($name), || super::$name($crate::common::Kind::Postgres)).await
                }
            }
        )*
    };
}
