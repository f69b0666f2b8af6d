//! The audit log: append-only, hash-chained per tenant and writer ([`Chain`]), written in the
//! same transaction as the change it records.
//!
//! Each entry's hash covers its fields and the previous entry's hash; `audit_heads` keeps the
//! last (seq, hash) of each chain, so [`verify`] detects an edited entry, a deleted entry in the
//! middle (a seq gap or broken link) and a deleted tail (head ahead of the last entry). A
//! transaction holds its chain's head until it commits, so appends to one chain are serialised
//! (across replicas too); the scheduler's driver has a chain of its own so that its large
//! admissions and the API's submits do not wait for each other, and on PostgreSQL batch
//! submits and the driver's second half of a large cycle have lanes of their own
//! ([`lanes`]). Entries are listed across chains by `id`.

pub mod api;
pub mod lanes;
mod verify;

pub use verify::{verify, ChainReport};

use sha2::{Digest, Sha256};
use sqlx::Row;

use app::model::{AuditEntry, AuditFilter, Page, Principal, RequestMeta};

use crate::http::error::{ApiResult, AppError};
use crate::store::{Dialect, Store, WriteTx};

pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A tenant's chains: one per writer that commits on its own schedule.
pub use app::model::AuditChain as Chain;

/// Who did it: a signed-in principal, or the system (CLI, demo seeding, a failed login).
#[derive(Clone, Debug)]
pub struct Actor {
    pub id: Option<String>,
    pub name: String,
}

impl Actor {
    pub fn of(p: &Principal) -> Actor {
        Actor {
            id: Some(p.me.user_id.clone()),
            name: p.me.username.clone(),
        }
    }
    pub fn system(name: &str) -> Actor {
        Actor {
            id: None,
            name: name.to_string(),
        }
    }
}

/// One entry to append.
pub struct Record<'a> {
    pub tenant_id: &'a str,
    pub actor: &'a Actor,
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub summary: serde_json::Value,
    pub meta: &'a RequestMeta,
}

struct Fields<'a> {
    tenant_id: &'a str,
    chain: Chain,
    seq: i64,
    at: i64,
    actor_id: &'a str,
    actor_name: &'a str,
    action: &'a str,
    target_kind: &'a str,
    target_id: &'a str,
    summary: &'a str,
    source_ip: &'a str,
    request_id: &'a str,
    prev_hash: &'a str,
}

fn entry_hash(f: &Fields) -> String {
    let mut h = Sha256::new();
    let seq = f.seq.to_string();
    let at = f.at.to_string();
    for part in [
        f.tenant_id,
        &seq,
        &at,
        f.actor_id,
        f.actor_name,
        f.action,
        f.target_kind,
        f.target_id,
        f.summary,
        f.source_ip,
        f.request_id,
        f.prev_hash,
    ] {
        // Length-prefixed so no two field lists hash alike.
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    // An entry of another chain than `api` carries its chain's name, so relabelling it breaks
    // its hash (`api` entries hash as they did before there were chains).
    if f.chain != Chain::Api {
        let c = f.chain.as_str();
        h.update((c.len() as u64).to_be_bytes());
        h.update(c.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Appends an entry for a change a signed-in principal made in their own tenant.
#[allow(clippy::too_many_arguments)]
pub async fn record(
    tx: &mut WriteTx,
    now: i64,
    p: &Principal,
    meta: &RequestMeta,
    action: &str,
    target_kind: &str,
    target_id: &str,
    summary: serde_json::Value,
) -> Result<(), sqlx::Error> {
    let actor = Actor::of(p);
    let r = Record {
        tenant_id: p.tenant_id(),
        actor: &actor,
        action,
        target_kind,
        target_id,
        summary,
        meta,
    };
    append(tx, now, r).await
}

/// Creates the chain's head if needed, takes its row lock (PostgreSQL; on SQLite the store's
/// write lock already serialises writers) and reads it: one statement, as the head is held
/// until commit.
async fn lock_head(
    tx: &mut WriteTx,
    tenant_id: &str,
    chain: Chain,
) -> Result<sqlx::any::AnyRow, sqlx::Error> {
    bind_head(sqlx::query(&head_lock_sql(1)), tenant_id, chain)
        .fetch_one(&mut *tx.tx)
        .await
}

/// The statement of [`lock_head`], its parameters numbered from `first` (tenant, chain,
/// genesis hash). PostgreSQL allows it as the last step of another write, `WITH w AS (…)
/// <this>` (see [`HeadLocked`]), which saves the transaction a round trip.
pub fn head_lock_sql(first: usize) -> String {
    format!(
        "INSERT INTO audit_heads (tenant_id, chain, seq, hash) VALUES (${}, ${}, 0, ${})
         ON CONFLICT (tenant_id, chain) DO UPDATE SET tenant_id = excluded.tenant_id RETURNING seq, hash",
        first,
        first + 1,
        first + 2
    )
}

/// Binds [`head_lock_sql`]'s parameters.
pub fn bind_head<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    tenant_id: &str,
    chain: Chain,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    q.bind(tenant_id.to_string())
        .bind(chain.as_str())
        .bind(GENESIS)
}

/// A tenant's chain head, already locked and read in this transaction by a statement that
/// ended with [`head_lock_sql`]: [`append_each_locked`] does not lock it again.
pub struct HeadLocked {
    pub tenant_id: String,
    pub chain: Chain,
    pub row: sqlx::any::AnyRow,
}

/// Appends an entry to the tenant's [`Chain::Api`] inside the caller's transaction.
pub async fn append(tx: &mut WriteTx, now: i64, r: Record<'_>) -> Result<(), sqlx::Error> {
    // Take the chain head's row lock first (PostgreSQL); on SQLite the store's write lock
    // already serialises writers.
    let chain = Chain::Api;
    let head = lock_head(tx, r.tenant_id, chain).await?;
    let prev_seq: i64 = head.try_get("seq")?;
    let prev_hash: String = head.try_get("hash")?;
    let seq = prev_seq + 1;
    let summary = r.summary.to_string();
    let actor_id = r.actor.id.clone().unwrap_or_default();
    let hash = entry_hash(&Fields {
        tenant_id: r.tenant_id,
        chain,
        seq,
        at: now,
        actor_id: &actor_id,
        actor_name: &r.actor.name,
        action: r.action,
        target_kind: r.target_kind,
        target_id: r.target_id,
        summary: &summary,
        source_ip: &r.meta.source_ip,
        request_id: &r.meta.request_id,
        prev_hash: &prev_hash,
    });
    sqlx::query(
        "INSERT INTO audit_log (tenant_id, chain, seq, at, actor_id, actor_name, action, target_kind, target_id, summary, source_ip, request_id, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(r.tenant_id)
    .bind(chain.as_str())
    .bind(seq)
    .bind(now)
    .bind(r.actor.id.clone())
    .bind(&r.actor.name)
    .bind(r.action)
    .bind(r.target_kind)
    .bind(r.target_id)
    .bind(&summary)
    .bind(&r.meta.source_ip)
    .bind(&r.meta.request_id)
    .bind(&prev_hash)
    .bind(&hash)
    .execute(&mut *tx.tx)
    .await?;
    sqlx::query("UPDATE audit_heads SET seq = $1, hash = $2 WHERE tenant_id = $3 AND chain = $4")
        .bind(seq)
        .bind(&hash)
        .bind(r.tenant_id)
        .bind(chain.as_str())
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// The action of the `api` entry that records a tenant's other chain being opened.
pub const CHAIN_OPEN: &str = "audit.chain_open";

/// Records in the tenant's `api` chain, in the transaction that writes its first entry, that
/// `chain` now exists: [`verify`] then finds it deleted whole (head and every entry), which a
/// chain alone cannot show. Takes the `api` head once per tenant and chain, ever.
async fn open_chain(
    tx: &mut WriteTx,
    now: i64,
    tenant_id: &str,
    chain: Chain,
) -> Result<(), sqlx::Error> {
    let actor = Actor::system(chain.as_str());
    let meta = RequestMeta::default();
    append(
        tx,
        now,
        Record {
            tenant_id,
            actor: &actor,
            action: CHAIN_OPEN,
            target_kind: "audit_chain",
            target_id: chain.as_str(),
            summary: serde_json::json!({ "chain": chain.as_str() }),
            meta: &meta,
        },
    )
    .await
}

/// One entry of a batch: the actor and request are shared by the batch (the scheduler).
pub struct BatchRecord {
    pub tenant_id: String,
    pub action: &'static str,
    pub target_kind: &'static str,
    pub target_id: String,
    pub summary: serde_json::Value,
}

/// Appends many entries to `chain` inside the caller's transaction: each tenant's chain head
/// is read and written once, and the rows go in multi-row inserts. The chain is the same as if
/// every entry had been appended alone, in the order given.
pub async fn append_many(
    tx: &mut WriteTx,
    now: i64,
    chain: Chain,
    actor: &Actor,
    meta: &RequestMeta,
    records: &[BatchRecord],
) -> Result<(), sqlx::Error> {
    let each: Vec<(&Actor, &RequestMeta, &BatchRecord)> =
        records.iter().map(|r| (actor, meta, r)).collect();
    append_each(tx, now, chain, &each).await
}

/// [`append_many`] for entries of different actors and requests (many requests' changes
/// committed together).
pub async fn append_each(
    tx: &mut WriteTx,
    now: i64,
    chain: Chain,
    records: &[(&Actor, &RequestMeta, &BatchRecord)],
) -> Result<(), sqlx::Error> {
    append_each_locked(tx, now, chain, records, None).await
}

/// The lanes a batch submit may take besides `api` itself ([`lanes`]).
pub const BATCH_LANES: [Chain; 3] = [Chain::Api1, Chain::Api2, Chain::Api3];

/// Whether a chain's opening is recorded with its first entry ([`append_each_locked`]).
/// `api` has none, and its lanes are opened together by [`lanes::open_missing`], while `api`
/// is held.
fn opens_with_first_entry(chain: Chain) -> bool {
    chain != Chain::Api && !BATCH_LANES.contains(&chain)
}

/// [`append_each`], with one tenant's head already locked and read by `locked` (of the same
/// chain; ignored otherwise).
pub async fn append_each_locked(
    tx: &mut WriteTx,
    now: i64,
    chain: Chain,
    records: &[(&Actor, &RequestMeta, &BatchRecord)],
    mut locked: Option<HeadLocked>,
) -> Result<(), sqlx::Error> {
    if records.is_empty() {
        return Ok(());
    }
    let mut tenants: Vec<&str> = records.iter().map(|r| r.2.tenant_id.as_str()).collect();
    tenants.sort_unstable();
    tenants.dedup();
    let mut heads = std::collections::HashMap::new();
    for t in &tenants {
        let head = match locked.take() {
            Some(l) if l.tenant_id == *t && l.chain == chain => l.row,
            other => {
                locked = other;
                lock_head(tx, t, chain).await?
            }
        };
        let seq = head.try_get::<i64, _>("seq")?;
        if seq == 0 && opens_with_first_entry(chain) {
            open_chain(tx, now, t, chain).await?;
        }
        heads.insert(t.to_string(), (seq, head.try_get::<String, _>("hash")?));
    }
    struct Row<'a> {
        tenant_id: String,
        seq: i64,
        actor: &'a Actor,
        meta: &'a RequestMeta,
        action: &'static str,
        target_kind: &'static str,
        target_id: String,
        summary: String,
        prev_hash: String,
        hash: String,
    }
    let mut rows = Vec::with_capacity(records.len());
    for &(actor, meta, r) in records {
        let Some((seq, prev)) = heads.get_mut(&r.tenant_id) else {
            continue;
        };
        let summary = r.summary.to_string();
        let actor_id = actor.id.clone().unwrap_or_default();
        let next = *seq + 1;
        let hash = entry_hash(&Fields {
            tenant_id: &r.tenant_id,
            chain,
            seq: next,
            at: now,
            actor_id: &actor_id,
            actor_name: &actor.name,
            action: r.action,
            target_kind: r.target_kind,
            target_id: &r.target_id,
            summary: &summary,
            source_ip: &meta.source_ip,
            request_id: &meta.request_id,
            prev_hash: prev,
        });
        rows.push(Row {
            tenant_id: r.tenant_id.clone(),
            seq: next,
            actor,
            meta,
            action: r.action,
            target_kind: r.target_kind,
            target_id: r.target_id.clone(),
            summary,
            prev_hash: std::mem::replace(prev, hash.clone()),
            hash,
        });
        *seq = next;
    }
    // 14 parameters per row; on SQLite still the 50 rows a statement always took (700
    // anonymous parameters, which cost nothing extra to bind).
    let per = (tx.dialect.statement_params() / 14).max(50);
    let mut heads: Vec<(String, (i64, String))> = heads.into_iter().collect();
    let chunks = rows.chunks(per).count();
    for (i, chunk) in rows.chunks(per).enumerate() {
        let insert = format!(
            "INSERT INTO audit_log (tenant_id, chain, seq, at, actor_id, actor_name, action, target_kind, target_id, summary, source_ip, request_id, prev_hash, hash) VALUES {}",
            tx.dialect.rows(1, chunk.len(), 14, None)
        );
        // PostgreSQL: the last rows and the one tenant's new head in one statement (one
        // round trip less per write).
        let fold = tx.dialect == Dialect::Postgres && i + 1 == chunks && heads.len() == 1;
        let sql = if fold {
            let b = chunk.len() * 14;
            format!(
                "WITH a AS ({insert}) UPDATE audit_heads SET seq = ${}, hash = ${} WHERE tenant_id = ${} AND chain = ${}",
                b + 1,
                b + 2,
                b + 3,
                b + 4
            )
        } else {
            insert
        };
        let mut q = sqlx::query(&sql);
        for r in chunk {
            q = q
                .bind(r.tenant_id.clone())
                .bind(chain.as_str())
                .bind(r.seq)
                .bind(now)
                .bind(r.actor.id.clone())
                .bind(r.actor.name.clone())
                .bind(r.action)
                .bind(r.target_kind)
                .bind(r.target_id.clone())
                .bind(r.summary.clone())
                .bind(r.meta.source_ip.clone())
                .bind(r.meta.request_id.clone())
                .bind(r.prev_hash.clone())
                .bind(r.hash.clone());
        }
        if fold {
            if let Some((t, (seq, hash))) = heads.pop() {
                q = q.bind(seq).bind(hash).bind(t).bind(chain.as_str());
            }
        }
        q.execute(&mut *tx.tx).await?;
    }
    for (t, (seq, hash)) in heads {
        sqlx::query(
            "UPDATE audit_heads SET seq = $1, hash = $2 WHERE tenant_id = $3 AND chain = $4",
        )
        .bind(seq)
        .bind(hash)
        .bind(t)
        .bind(chain.as_str())
        .execute(&mut *tx.tx)
        .await?;
    }
    Ok(())
}

const COLUMNS: &str = "id, tenant_id, chain, seq, at, actor_id, actor_name, action, target_kind, target_id, summary, source_ip, request_id, prev_hash, hash";

fn row_to_entry(row: &sqlx::any::AnyRow) -> Result<AuditEntry, sqlx::Error> {
    let summary: String = row.try_get("summary")?;
    let chain: String = row.try_get("chain")?;
    Ok(AuditEntry {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        chain: chain
            .parse()
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        seq: row.try_get("seq")?,
        at: row.try_get("at")?,
        actor_id: row.try_get("actor_id")?,
        actor_name: row.try_get("actor_name")?,
        action: row.try_get("action")?,
        target_kind: row.try_get("target_kind")?,
        target_id: row.try_get("target_id")?,
        summary: serde_json::from_str(&summary).unwrap_or(serde_json::Value::String(summary)),
        source_ip: row.try_get("source_ip")?,
        request_id: row.try_get("request_id")?,
        prev_hash: row.try_get("prev_hash")?,
        hash: row.try_get("hash")?,
    })
}

/// Lists one tenant's entries, newest first. `actor` matches the actor's name or id, `target`
/// the target's id or kind, `action` an exact action or a prefix ending in `.` (`group.`).
pub async fn list(store: &Store, tenant_id: &str, f: &AuditFilter) -> ApiResult<Page<AuditEntry>> {
    let limit = f.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(AppError::field("limit", "must be between 1 and 500").into());
    }
    let before: Option<i64> = match &f.cursor {
        Some(c) => Some(
            c.parse()
                .map_err(|_| AppError::field("cursor", "is not a cursor from this list"))?,
        ),
        None => None,
    };
    // Only the chains a writer uses: an entry relabelled to anything else is not listed (and
    // `verify` reports it) rather than failing the whole page.
    let known = Chain::ALL
        .iter()
        .map(|c| format!("'{}'", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let mut sql =
        format!("SELECT {COLUMNS} FROM audit_log WHERE tenant_id = $1 AND chain IN ({known})");
    let mut binds: Vec<Bind> = vec![Bind::Text(tenant_id.to_string())];
    let mut push = |clause: &str, b: Bind, sql: &mut String| {
        binds.push(b);
        sql.push_str(&clause.replace('?', &format!("${}", binds.len())));
    };
    if let Some(s) = before {
        push(" AND id < ?", Bind::Int(s), &mut sql);
    }
    if let Some(from) = f.from {
        push(" AND at >= ?", Bind::Int(from), &mut sql);
    }
    if let Some(to) = f.to {
        push(" AND at <= ?", Bind::Int(to), &mut sql);
    }
    if let Some(action) = f.action.as_deref().filter(|a| !a.is_empty()) {
        if let Some(prefix) = action
            .strip_suffix('*')
            .or(action.ends_with('.').then_some(action))
        {
            push(
                " AND action LIKE ?",
                Bind::Text(format!("{}%", escape_like(prefix))),
                &mut sql,
            );
            sql.push_str(" ESCAPE '\\'");
        } else {
            push(" AND action = ?", Bind::Text(action.to_string()), &mut sql);
        }
    }
    if let Some(actor) = f.actor.as_deref().filter(|a| !a.is_empty()) {
        binds.push(Bind::Text(actor.to_string()));
        let n = binds.len();
        sql.push_str(&format!(" AND (actor_name = ${n} OR actor_id = ${n})"));
    }
    if let Some(target) = f.target.as_deref().filter(|a| !a.is_empty()) {
        binds.push(Bind::Text(target.to_string()));
        let n = binds.len();
        sql.push_str(&format!(" AND (target_id = ${n} OR target_kind = ${n})"));
    }
    // By id: the entries of all chains, newest first. (Ids are taken at insert and chains
    // commit apart, so on PostgreSQL an entry may become visible below a page already read; a
    // reader that must see every entry once, an export, will page each chain by its `seq`:
    // not offered yet.)
    sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", limit + 1));
    let mut q = sqlx::query(&sql);
    for b in &binds {
        q = match b {
            Bind::Text(s) => q.bind(s.clone()),
            Bind::Int(i) => q.bind(*i),
        };
    }
    let rows = q.fetch_all(&store.pool).await?;
    let mut items = rows
        .iter()
        .map(row_to_entry)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(|e| e.id.to_string())
    } else {
        None
    };
    Ok(Page { items, next_cursor })
}

enum Bind {
    Text(String),
    Int(i64),
}

fn escape_like(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}
