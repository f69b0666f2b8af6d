//! The database: one sqlx `AnyPool` over SQLite (embedded default, WAL) or PostgreSQL
//! (production, shared by replicas), with the migrations of the matching dialect.
//!
//! Writes go through [`Store::begin_write`]. On SQLite it also takes a process-wide lock: SQLite
//! has one writer anyway, and a deferred transaction that reads before it writes would otherwise
//! fail with `SQLITE_BUSY` under concurrency instead of waiting. On PostgreSQL row locks do the
//! serialising (see the audit chain head).

use std::fmt::Write as _;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{Any, AnyPool, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::clock::Clock;

pub mod config_cache;
pub mod dialects;
mod feed;
pub mod in_use;
pub mod owners;
#[cfg(test)]
pub(crate) mod scratch;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection idle longer than this is checked (a ping) before it is handed out again.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(30);

/// Pool settings of both stores: sqlx pings every connection before handing it out, a round
/// trip as long as a statement's on PostgreSQL (a submit's few statements each paid two);
/// only a connection idle for [`CHECK_IDLE_AFTER`] is pinged (one a server restart or an
/// idle timeout may have closed), others are used at once.
fn pool_options() -> AnyPoolOptions {
    AnyPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > CHECK_IDLE_AFTER {
                    use sqlx::Connection;
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
}

/// PostgreSQL connections kept for write transactions (see `Store::write_pool`): the submits'
/// group commit, the scheduler's driver and the API's other writes.
const WRITE_CONNECTIONS: u32 = 4;

#[derive(Clone)]
pub struct Store {
    pub pool: AnyPool,
    /// PostgreSQL: the connections write transactions ([`Store::begin_write`]) take, apart
    /// from `pool`, so that a burst of requests reading (each submit's checks) never makes a
    /// writer wait for a connection (SQLite: `None`, its one writer is `write_lock`).
    write_pool: Option<AnyPool>,
    pub dialect: Dialect,
    write_lock: Option<Arc<Mutex<()>>>,
    /// Signalled after a commit that changed what the scheduler decides on (the driver waits
    /// on it): domain operations say so with [`WriteTx::wake_scheduler`].
    pub scheduling_changed: Arc<tokio::sync::Notify>,
    /// Counts the commits that signalled `scheduling_changed`: what the scheduler publishes
    /// for the pages says which of them it includes (see
    /// [`crate::scheduler::driver::SchedulerHandle::summary`]).
    scheduling_generation: Arc<AtomicU64>,
    /// Counts the commits that changed who may call what (memberships, users, access rules,
    /// projects, endpoints, gateways, routes, gateway tokens): the gateway's in-memory
    /// snapshot is rebuilt when it moves (see [`WriteTx::access_changed`]).
    access_generation: Arc<AtomicU64>,
    /// The `NOTIFY` channel of access changes (PostgreSQL; see `feed`).
    access_channel: Arc<str>,
    /// What it was connected with (the change feed opens its own connection).
    url: Arc<str>,
    /// Configuration read per request, kept until a configuration change commits.
    pub config: Arc<config_cache::ConfigCache>,
    /// Identities read per request (API tokens), kept until access changes.
    pub access: Arc<config_cache::AccessCache>,
    /// The time source ([`Clock::system`] unless a test swaps in a manual one).
    pub clock: Clock,
}

/// A write transaction; dropping it without `commit` rolls back.
pub struct WriteTx {
    pub tx: Transaction<'static, Any>,
    _guard: Option<OwnedMutexGuard<()>>,
    /// The store's `scheduling_changed`, signalled on commit when `wake` is set.
    scheduling_changed: Arc<tokio::sync::Notify>,
    scheduling_generation: Arc<AtomicU64>,
    wake: bool,
    config: Arc<config_cache::ConfigCache>,
    config_changed: bool,
    access_generation: Arc<AtomicU64>,
    access_changed: bool,
    access_channel: Arc<str>,
    now: i64,
    pub dialect: Dialect,
}

impl WriteTx {
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        if self.access_changed && self.dialect == Dialect::Postgres {
            // Delivered to the other replicas only if this commits (see `feed`).
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(self.access_channel.to_string())
                .execute(&mut *self.tx)
                .await?;
        }
        self.tx.commit().await?;
        if self.config_changed {
            self.config.changed();
        }
        if self.access_changed {
            self.access_generation.fetch_add(1, Ordering::SeqCst);
        }
        if self.wake {
            self.scheduling_generation.fetch_add(1, Ordering::SeqCst);
            self.scheduling_changed.notify_one();
        }
        Ok(())
    }

    /// This transaction changes scheduling state (jobs, pools, policies, queues, grants): the
    /// scheduler runs a cycle once it commits (not if it rolls back).
    pub fn wake_scheduler(&mut self) {
        self.wake = true;
    }

    /// This transaction changes configuration that submits read (queues, profiles, pools,
    /// grants, groups): what [`Store::config`] remembers is forgotten once it commits.
    pub fn config_changed(&mut self) {
        self.config_changed = true;
    }

    /// This transaction changes who may call what through the gateway (memberships, users,
    /// access rules, projects, endpoints, gateways, routes, gateway tokens): the gateway's
    /// snapshot is rebuilt before its next request once it commits.
    pub fn access_changed(&mut self) {
        self.access_changed = true;
    }

    /// The time this transaction began, read once from the store's clock: every row and audit
    /// entry it writes carries the same instant.
    pub fn now(&self) -> i64 {
        self.now
    }
}

impl std::ops::Deref for WriteTx {
    type Target = Transaction<'static, Any>;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl Store {
    /// Connects, creating the SQLite file (and its folder) if needed, and migrates.
    pub async fn connect(url: &str) -> anyhow::Result<Store> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Dialect::Postgres
        } else if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else {
            anyhow::bail!("unsupported database URL (expected sqlite:… or postgres://…)");
        };
        let pool = match dialect {
            Dialect::Sqlite => {
                let memory = url.contains(":memory:") || url.contains("mode=memory");
                let mut url = url.to_string();
                if !memory {
                    if let Some(path) = sqlite_path(&url) {
                        if let Some(dir) = Path::new(&path).parent() {
                            if !dir.as_os_str().is_empty() {
                                std::fs::create_dir_all(dir)?;
                            }
                        }
                    }
                    if !url.contains('?') {
                        url.push_str("?mode=rwc");
                    }
                }
                // WAL for concurrent readers, a busy timeout so writers wait rather than fail,
                // foreign keys on (SQLite leaves them off by default).
                let opts = AnyConnectOptions::from_str(&url)?;
                pool_options()
                    .max_connections(if memory { 1 } else { 8 })
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            use sqlx::Executor;
                            conn.execute("PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;")
                                .await?;
                            Ok(())
                        })
                    })
                    .connect_with(opts)
                    .await?
            }
            Dialect::Postgres => {
                pool_options()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect(url)
                    .await?
            }
        };
        if dialect == Dialect::Sqlite {
            use sqlx::Executor;
            pool.execute("PRAGMA journal_mode = WAL;").await?;
            // The database (and its WAL files, which SQLite creates with the database's mode)
            // is readable by this process's user alone: local jobs run as another user.
            if let Some(path) = sqlite_path(url) {
                for suffix in ["", "-wal", "-shm"] {
                    let file = format!("{path}{suffix}");
                    if Path::new(&file).exists() {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
                    }
                }
            }
        }
        match dialect {
            Dialect::Sqlite => SQLITE_MIGRATIONS.run(&pool).await?,
            Dialect::Postgres => POSTGRES_MIGRATIONS.run(&pool).await?,
        }
        let write_pool = match dialect {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some(
                pool_options()
                    .max_connections(WRITE_CONNECTIONS)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect(url)
                    .await?,
            ),
        };
        let mut store = Store {
            pool,
            write_pool,
            dialect,
            write_lock: (dialect == Dialect::Sqlite).then(|| Arc::new(Mutex::new(()))),
            scheduling_changed: Default::default(),
            scheduling_generation: Default::default(),
            access_generation: Default::default(),
            access_channel: Arc::from(""),
            url: Arc::from(url),
            config: Default::default(),
            access: Default::default(),
            clock: Clock::system(),
        };
        if dialect == Dialect::Postgres {
            store.access_channel = Arc::from(feed::channel(&store).await?);
        }
        Ok(store)
    }

    pub async fn begin_write(&self) -> Result<WriteTx, sqlx::Error> {
        let guard = match &self.write_lock {
            Some(lock) => Some(lock.clone().lock_owned().await),
            None => None,
        };
        // SQLite: take the write lock at BEGIN (IMMEDIATE), so a write that another connection
        // slipped in first (an autocommit statement, the CLI in another process) makes this
        // transaction wait its busy timeout instead of failing at its first write.
        let tx = match self.dialect {
            Dialect::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Dialect::Postgres => {
                self.write_pool
                    .as_ref()
                    .unwrap_or(&self.pool)
                    .begin()
                    .await?
            }
        };
        Ok(WriteTx {
            tx,
            _guard: guard,
            scheduling_changed: self.scheduling_changed.clone(),
            scheduling_generation: self.scheduling_generation.clone(),
            wake: false,
            config: self.config.clone(),
            config_changed: false,
            access_generation: self.access_generation.clone(),
            access_changed: false,
            access_channel: self.access_channel.clone(),
            now: self.clock.now_ms(),
            dialect: self.dialect,
        })
    }

    /// How many commits that change scheduling state this process has seen (a commit
    /// counts once it is visible to readers).
    pub fn scheduling_generation(&self) -> u64 {
        self.scheduling_generation.load(Ordering::SeqCst)
    }

    /// How many commits that change who may call what this process has seen.
    pub fn access_generation(&self) -> u64 {
        self.access_generation.load(Ordering::SeqCst)
    }

    /// Counts a change to what the gateway serves that no write of this process announced
    /// (a serving job that started or ended).
    pub fn note_access_change(&self) {
        self.access_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a committed scheduling change that did not wake the scheduler (the scheduler's
    /// own), so that readers of its summary wait for one that includes it.
    pub fn note_scheduling_change(&self) {
        self.scheduling_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Now, by the store's clock: what handlers, the driver and the CLI pass to domain code.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn ping(&self) -> bool {
        sqlx::query_scalar::<_, i64>("SELECT 1")
            .fetch_one(&self.pool)
            .await
            .is_ok()
    }
}

const POSTGRES_STATEMENT_PARAMS: usize = 4000;

fn sqlite_path(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next()?;
    (!path.is_empty()).then(|| path.to_string())
}

impl Dialect {
    /// Parameters per multi-row statement. SQLite: a few hundred (each statement is prepared
    /// and stepped on the connection's worker thread; more per statement measured no faster).
    /// PostgreSQL: thousands, as each statement is a round trip to the server, and a driver
    /// cycle that admits thousands of jobs writes each of them three times.
    pub const fn statement_params(self) -> usize {
        match self {
            Dialect::Sqlite => 400,
            Dialect::Postgres => POSTGRES_STATEMENT_PARAMS,
        }
    }

    /// `n` bind parameters numbered from `start`, for a statement that binds its values in the
    /// order its parameters appear, each once: `$start, …` on PostgreSQL, `?, …` on SQLite.
    /// Binding a named SQLite parameter (`$n`) scans the statement's list of names, so a
    /// statement of many costs the square of their count (`sqlite3_bind_parameter_name` was
    /// 13 % of a batch-submit run's CPU in `perf`); anonymous ones cost nothing.
    pub fn params(self, start: usize, n: usize) -> String {
        let mut sql = String::with_capacity(n * 7);
        self.push_params(&mut sql, start, n);
        sql
    }

    /// [`Dialect::params`] written onto `sql`: one string for a whole statement, instead of
    /// one per parameter (a 100-job insert has 3,600).
    fn push_params(self, sql: &mut String, start: usize, n: usize) {
        for i in 0..n {
            if i > 0 {
                sql.push_str(", ");
            }
            match self {
                Dialect::Sqlite => sql.push('?'),
                Dialect::Postgres => {
                    // Formats into `sql` itself: no string of its own.
                    let _ = write!(sql, "${}", start + i);
                }
            }
        }
    }

    /// `(…), (…)`: `rows` rows of `arity` [`Dialect::params`] from `start`, each row ending
    /// with the SQL expression `last` when given.
    pub fn rows(self, start: usize, rows: usize, arity: usize, last: Option<&str>) -> String {
        let per_row = arity * 7 + 4 + last.map_or(0, |l| l.len() + 2);
        let mut sql = String::with_capacity(rows * per_row);
        for r in 0..rows {
            if r > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            self.push_params(&mut sql, start + r * arity, arity);
            if let Some(l) = last {
                sql.push_str(", ");
                sql.push_str(l);
            }
            sql.push(')');
        }
        sql
    }

    /// The `n`th parameter of such a statement (`$n`, or `?`): see [`Dialect::params`]; a
    /// value used at two places is bound twice.
    pub fn param(self, n: usize) -> String {
        self.params(n, 1)
    }
}

/// Whether a database error is a unique-key violation (turned into 409 by the callers).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.code()
                .is_some_and(|c| c == "23505" || c == "2067" || c == "1555")
                || db.message().contains("UNIQUE constraint failed")
        }
        _ => false,
    }
}

/// Whether a database error is a foreign-key violation: a delete of something still in use
/// (PostgreSQL SQLSTATE 23503, SQLite extended code 787).
pub fn is_foreign_key_violation(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|c| c == "23503" || c == "787")
                || db.message().contains("FOREIGN KEY constraint failed")
        }
        _ => false,
    }
}

pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Reads a text column into its enum (`JobState`, `StopReason`…). A value no variant names is
/// a decode error (logged and answered as an internal error), never a default.
pub fn text_enum<T>(r: &sqlx::any::AnyRow, col: &str) -> Result<T, sqlx::Error>
where
    T: std::str::FromStr<Err = app::model::UnknownValue>,
{
    use sqlx::Row;
    let s: String = r.try_get(col)?;
    s.parse()
        .map_err(|e: app::model::UnknownValue| corrupt(col, e))
}

/// [`text_enum`] for a nullable column.
pub fn opt_text_enum<T>(r: &sqlx::any::AnyRow, col: &str) -> Result<Option<T>, sqlx::Error>
where
    T: std::str::FromStr<Err = app::model::UnknownValue>,
{
    use sqlx::Row;
    let s: Option<String> = r.try_get(col)?;
    s.map(|s| {
        s.parse()
            .map_err(|e: app::model::UnknownValue| corrupt(col, e))
    })
    .transpose()
}

/// A stored value that cannot be what its column says: an error naming the column.
pub fn corrupt(col: &str, e: impl std::fmt::Display) -> sqlx::Error {
    tracing::error!(column = col, error = %e, "corrupt stored value");
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: e.to_string().into(),
    }
}

/// 0/1 flags as the store keeps them.
pub fn flag(b: bool) -> i64 {
    i64::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_row_parameters_are_numbered_on_postgres_and_anonymous_on_sqlite() {
        assert_eq!(
            Dialect::Postgres.rows(2, 2, 2, Some("NOW()")),
            "($2, $3, NOW()), ($4, $5, NOW())"
        );
        assert_eq!(Dialect::Sqlite.rows(2, 2, 2, None), "(?, ?), (?, ?)");
        assert_eq!(Dialect::Postgres.param(1), "$1");
        assert_eq!(Dialect::Sqlite.params(5, 3), "?, ?, ?");
        // Across digit counts, up to PostgreSQL's last parameter.
        assert_eq!(Dialect::Postgres.params(8, 4), "$8, $9, $10, $11");
        assert_eq!(Dialect::Postgres.params(99, 2), "$99, $100");
        assert_eq!(Dialect::Postgres.param(65535), "$65535");
        assert_eq!(Dialect::Postgres.rows(1, 1, 0, None), "()");
        assert_eq!(Dialect::Postgres.rows(1, 0, 3, None), "");
    }

    #[test]
    fn sqlite_paths() {
        assert_eq!(
            sqlite_path("sqlite://data/x.db").as_deref(),
            Some("data/x.db")
        );
        assert_eq!(
            sqlite_path("sqlite:data/x.db?mode=rwc").as_deref(),
            Some("data/x.db")
        );
        assert_eq!(sqlite_path("sqlite::memory:").as_deref(), Some(":memory:"));
    }
}
