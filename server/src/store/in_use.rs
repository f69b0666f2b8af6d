//! What still uses an object about to be deleted. Deletes check these inside their write
//! transaction and answer 409 naming the user, instead of letting a foreign key fail (which
//! [`super::is_foreign_key_violation`] still turns into a 409 as a safety net).

use super::WriteTx;

async fn count(tx: &mut WriteTx, sql: &str, tenant_id: &str, id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(sql)
        .bind(tenant_id)
        .bind(id)
        .fetch_one(&mut *tx.tx)
        .await
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Why a group cannot be deleted, if it cannot: its resource policy (and the queues and jobs
/// under it) refer to it. Memberships and access rules go with the group.
pub async fn group(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    let policies = count(
        tx,
        "SELECT COUNT(*) FROM policies WHERE tenant_id = $1 AND group_id = $2",
        tenant_id,
        id,
    )
    .await?;
    let queues = count(
        tx,
        "SELECT COUNT(*) FROM queues q JOIN policies p ON p.id = q.policy_id WHERE q.tenant_id = $1 AND p.group_id = $2",
        tenant_id,
        id,
    )
    .await?;
    let jobs = count(
        tx,
        "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND group_id = $2",
        tenant_id,
        id,
    )
    .await?;
    if policies == 0 && queues == 0 && jobs == 0 {
        return Ok(None);
    }
    let mut users = Vec::new();
    if policies > 0 {
        users.push("a resource policy".to_string());
    }
    if queues > 0 {
        users.push(plural(queues, "queue", "queues"));
    }
    if jobs > 0 {
        users.push(plural(jobs, "job", "jobs"));
    }
    Ok(Some(format!(
        "The group is in use: it has {}. Remove the group's policy, queues and jobs first.",
        users.join(", ")
    )))
}

/// Why a project cannot be deleted, if it cannot: sub-projects, models or datasets in it.
/// Access rules scoped to it go with the project.
pub async fn project(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    let mut users = Vec::new();
    for (sql, one, many) in [
        (
            "SELECT COUNT(*) FROM projects WHERE tenant_id = $1 AND parent_id = $2",
            "sub-project",
            "sub-projects",
        ),
        (
            "SELECT COUNT(*) FROM models WHERE tenant_id = $1 AND project_id = $2",
            "model",
            "models",
        ),
        (
            "SELECT COUNT(*) FROM datasets WHERE tenant_id = $1 AND project_id = $2",
            "dataset",
            "datasets",
        ),
    ] {
        let n = count(tx, sql, tenant_id, id).await?;
        if n > 0 {
            users.push(plural(n, one, many));
        }
    }
    if users.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "The project is in use: it has {}. Delete or move them first.",
        users.join(", ")
    )))
}
