//! Caps on waiting jobs, so one user or one group cannot fill the store (and the scheduler's
//! snapshot) with queued jobs. Checked inside the submit's write transaction.

use std::collections::{BTreeMap, HashMap};

use app::model::Job;
use sqlx::Row;

use crate::config::Config;
use crate::http::error::AppError;
use crate::store::WriteTx;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingCaps {
    pub per_user: i64,
    pub per_group: i64,
}

impl Default for PendingCaps {
    fn default() -> Self {
        let c = Config::default();
        PendingCaps {
            per_user: c.max_pending_per_user,
            per_group: c.max_pending_per_group,
        }
    }
}

impl From<&Config> for PendingCaps {
    fn from(c: &Config) -> Self {
        PendingCaps {
            per_user: c.max_pending_per_user,
            per_group: c.max_pending_per_group,
        }
    }
}

fn db(e: sqlx::Error) -> AppError {
    tracing::error!(error = %e, "pending caps: counting waiting jobs");
    AppError::Internal
}

async fn user_waiting(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND user_id = $2 AND state = 'queued'",
    )
    .bind(tenant_id)
    .bind(user_id)
    .fetch_one(&mut *tx.tx)
    .await
}

async fn group_waiting(tx: &mut WriteTx, group_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE group_id = $1 AND state = 'queued'")
        .bind(group_id)
        .fetch_one(&mut *tx.tx)
        .await
}

fn user_full(caps: PendingCaps, mine: i64, adding: i64) -> AppError {
    AppError::Conflict(format!(
        "you have {mine} waiting jobs; at most {} may wait per user (these {adding} would exceed it)",
        caps.per_user
    ))
}

fn group_full(caps: PendingCaps, waiting: i64) -> AppError {
    AppError::Conflict(format!(
        "the group has {waiting} waiting jobs; at most {} may wait per group",
        caps.per_group
    ))
}

/// Refuses `new` jobs of one user when they would take the user's or a group's waiting jobs
/// past its cap.
pub async fn check(
    tx: &mut WriteTx,
    caps: PendingCaps,
    tenant_id: &str,
    user_id: &str,
    new: &[&Job],
) -> Result<(), AppError> {
    let adding = i64::try_from(new.len()).unwrap_or(i64::MAX);
    let mine = user_waiting(tx, tenant_id, user_id).await.map_err(db)?;
    if mine.saturating_add(adding) > caps.per_user {
        return Err(user_full(caps, mine, adding));
    }
    let mut per_group: BTreeMap<&str, i64> = BTreeMap::new();
    for j in new {
        *per_group.entry(j.group_id.as_str()).or_default() += 1;
    }
    for (group, n) in per_group {
        let waiting = group_waiting(tx, group).await.map_err(db)?;
        if waiting.saturating_add(n) > caps.per_group {
            return Err(group_full(caps, waiting));
        }
    }
    Ok(())
}

/// Waiting jobs as one transaction that stores many requests' jobs sees them: each user's and
/// group's count is read from the store once, then every job the transaction takes adds one,
/// so each request is checked against the jobs committed before and those taken before it in
/// the same transaction.
#[derive(Default)]
pub struct Tally {
    users: HashMap<(String, String), i64>,
    groups: HashMap<String, i64>,
}

/// The statement that reads a user's and a group's waiting jobs at once.
const MINE_AND_GROUP: &str = "SELECT (SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND user_id = $2 AND state = 'queued') AS mine,
        (SELECT COUNT(*) FROM jobs WHERE group_id = $3 AND state = 'queued') AS waiting";

impl Tally {
    /// Reads the waiting jobs of each (tenant, user, group) given, outside any transaction:
    /// on PostgreSQL (read committed) what a statement inside the writing transaction would
    /// see, had it started at the same moment, so a group commit reads them while its
    /// `BEGIN` is on its way instead of after it. Jobs a concurrent batch commits in between
    /// are not counted, as two concurrent batches do not count each other's.
    pub async fn read(
        pool: &sqlx::AnyPool,
        keys: &[(&str, &str, &str)],
    ) -> Result<Tally, sqlx::Error> {
        let mut t = Tally::default();
        for &(tenant_id, user_id, group_id) in keys {
            let user = (tenant_id.to_string(), user_id.to_string());
            if t.users.contains_key(&user) && t.groups.contains_key(group_id) {
                continue;
            }
            let row = sqlx::query(MINE_AND_GROUP)
                .bind(tenant_id)
                .bind(user_id)
                .bind(group_id)
                .fetch_one(pool)
                .await?;
            t.users.insert(user, row.try_get("mine")?);
            t.groups
                .insert(group_id.to_string(), row.try_get("waiting")?);
        }
        Ok(t)
    }

    /// Takes one more waiting job of this user in `job`'s group, or answers why not (the
    /// outer error is the store's).
    pub async fn take(
        &mut self,
        tx: &mut WriteTx,
        caps: PendingCaps,
        tenant_id: &str,
        user_id: &str,
        job: &Job,
    ) -> Result<Result<(), AppError>, sqlx::Error> {
        let user = (tenant_id.to_string(), user_id.to_string());
        let (mine, waiting) = match (self.users.get(&user), self.groups.get(&job.group_id)) {
            (Some(m), Some(w)) => (*m, Some(*w)),
            (Some(m), None) => (*m, None),
            (None, Some(w)) => (user_waiting(tx, tenant_id, user_id).await?, Some(*w)),
            // Both unknown (a group commit's first job of this user): one statement.
            (None, None) => {
                let row = sqlx::query(MINE_AND_GROUP)
                    .bind(tenant_id)
                    .bind(user_id)
                    .bind(&job.group_id)
                    .fetch_one(&mut *tx.tx)
                    .await?;
                (row.try_get("mine")?, Some(row.try_get("waiting")?))
            }
        };
        self.users.insert(user.clone(), mine);
        if let Some(w) = waiting {
            self.groups.insert(job.group_id.clone(), w);
        }
        if mine.saturating_add(1) > caps.per_user {
            return Ok(Err(user_full(caps, mine, 1)));
        }
        let waiting = match waiting {
            Some(n) => n,
            None => group_waiting(tx, &job.group_id).await?,
        };
        self.groups.insert(job.group_id.clone(), waiting);
        if waiting.saturating_add(1) > caps.per_group {
            return Ok(Err(group_full(caps, waiting)));
        }
        self.users.insert(user, mine + 1);
        self.groups.insert(job.group_id.clone(), waiting + 1);
        Ok(Ok(()))
    }
}
