//! Caps on waiting jobs, so one user or one group cannot fill the store (and the scheduler's
//! snapshot) with queued jobs. Checked inside the submit's write transaction.

use std::collections::BTreeMap;

use app::model::Job;

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
    let mine: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND user_id = $2 AND state = 'queued'",
    )
    .bind(tenant_id)
    .bind(user_id)
    .fetch_one(&mut *tx.tx)
    .await
    .map_err(db)?;
    if mine.saturating_add(adding) > caps.per_user {
        return Err(AppError::Conflict(format!(
            "you have {mine} waiting jobs; at most {} may wait per user (these {adding} would exceed it)",
            caps.per_user
        )));
    }
    let mut per_group: BTreeMap<&str, i64> = BTreeMap::new();
    for j in new {
        *per_group.entry(j.group_id.as_str()).or_default() += 1;
    }
    for (group, n) in per_group {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM jobs WHERE group_id = $1 AND state = 'queued'",
        )
        .bind(group)
        .fetch_one(&mut *tx.tx)
        .await
        .map_err(db)?;
        if waiting.saturating_add(n) > caps.per_group {
            return Err(AppError::Conflict(format!(
                "the group has {waiting} waiting jobs; at most {} may wait per group",
                caps.per_group
            )));
        }
    }
    Ok(())
}
