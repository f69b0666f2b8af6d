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
        (
            "SELECT COUNT(*) FROM endpoints WHERE tenant_id = $1 AND project_id = $2",
            "endpoint",
            "endpoints",
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

/// The job states that still hold or wait for capacity.
const LIVE: &str = "('queued', 'admitted', 'starting', 'running', 'preempting')";
/// The live states of a job placed on a node.
const PLACED: &str = "('admitted', 'starting', 'running', 'preempting')";

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The tenant's queues that `sql` (binding tenant and id) finds, by name.
async fn queue_names(
    tx: &mut WriteTx,
    sql: &str,
    tenant_id: &str,
    id: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(sql)
        .bind(tenant_id)
        .bind(id)
        .fetch_all(&mut *tx.tx)
        .await
}

fn queues_phrase(names: &[String]) -> String {
    let word = if names.len() == 1 { "queue" } else { "queues" };
    format!("{word} {}", and_list(names))
}

/// Why a pool cannot be deleted, if it cannot: queues that list it (of every tenant: a shared
/// pool serves many; only the caller's are named), and live jobs placed on it.
pub async fn pool(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    // Pools are a JSON list of ids: `LIKE` narrows, the parsed list decides.
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT tenant_id, name, pools FROM queues WHERE pools LIKE $1 ORDER BY name",
    )
    .bind(format!("%{id}%"))
    .fetch_all(&mut *tx.tx)
    .await?;
    let mut own = Vec::new();
    let mut others = 0;
    for (tenant, name, pools) in rows {
        let pools: Vec<String> =
            serde_json::from_str(&pools).map_err(|e| super::corrupt("pools", e))?;
        if !pools.iter().any(|p| p == id) {
            continue;
        }
        if tenant == tenant_id {
            own.push(name);
        } else {
            others += 1;
        }
    }
    // Every tenant's: a shared pool runs many tenants' jobs.
    let jobs: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM jobs WHERE pool_id = $1 AND state IN {PLACED}"
    ))
    .bind(id)
    .fetch_one(&mut *tx.tx)
    .await?;
    let mut users = Vec::new();
    if !own.is_empty() {
        users.push(format!(
            "{} {} it",
            queues_phrase(&own),
            if own.len() == 1 { "uses" } else { "use" }
        ));
    }
    if others > 0 {
        users.push(format!(
            "{} of other organizations {} it",
            plural(others, "queue", "queues"),
            if others == 1 { "uses" } else { "use" }
        ));
    }
    if jobs > 0 {
        users.push(format!(
            "{} {} on it",
            plural(jobs, "job", "jobs"),
            if jobs == 1 { "runs" } else { "run" }
        ));
    }
    if users.is_empty() {
        return Ok(None);
    }
    let first = match (own.len() + others as usize > 0, jobs > 0) {
        (true, true) => "Take it out of those queues and let its jobs finish first.",
        (true, false) => "Take it out of those queues first.",
        _ => "Let its jobs finish (or abort them) first.",
    };
    Ok(Some(format!(
        "The pool is in use: {}. {first}",
        and_list(&users)
    )))
}

/// Why a pool cannot take `nodes` (and, with `executor_changes`, another executor) now: the
/// jobs placed on it keep their node by its place in the list, its name and their GPUs there.
pub async fn pool_nodes(
    tx: &mut WriteTx,
    id: &str,
    nodes: &[app::model::PoolNode],
    executor_changes: bool,
) -> Result<Option<String>, sqlx::Error> {
    let rows: Vec<(Option<i64>, Option<String>, Option<String>)> = sqlx::query_as(&format!(
        "SELECT node, node_name, slices FROM jobs WHERE pool_id = $1 AND state IN {PLACED}"
    ))
    .bind(id)
    .fetch_all(&mut *tx.tx)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    if executor_changes {
        return Ok(Some(format!(
            "{} {} on the pool: its executor cannot change until they have finished.",
            plural(rows.len() as i64, "job", "jobs"),
            if rows.len() == 1 { "runs" } else { "run" }
        )));
    }
    // Per node (by its place): its name, its jobs, the highest GPU they use.
    let mut used: std::collections::BTreeMap<i64, (String, i64, Option<u32>)> = Default::default();
    for (node, name, slices) in rows {
        let Some(node) = node else { continue };
        let slices: Vec<(u32, u32)> = match slices {
            Some(s) => serde_json::from_str(&s).map_err(|e| super::corrupt("slices", e))?,
            None => Vec::new(),
        };
        let e = used
            .entry(node)
            .or_insert((name.unwrap_or_default(), 0, None));
        e.1 += 1;
        e.2 = e.2.max(slices.iter().map(|(device, _)| *device).max());
    }
    let mut why = Vec::new();
    for (place, (name, jobs, top)) in used {
        let runs = format!(
            "{} {}",
            plural(jobs, "job", "jobs"),
            if jobs == 1 { "runs" } else { "run" }
        );
        match usize::try_from(place).ok().and_then(|i| nodes.get(i)) {
            Some(n) if n.name == name => {
                if let Some(top) = top.filter(|t| *t >= n.gpus) {
                    why.push(format!(
                        "{runs} on node {name} up to its GPU {top}, so it needs at least {} GPUs",
                        top + 1
                    ));
                }
            }
            _ => why.push(format!(
                "{runs} on node {name}, which must stay in the list, under its name and in its place (number {})",
                place + 1
            )),
        }
    }
    if why.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "This change would strand running jobs: {}. Let them finish (or abort them) first.",
        why.join("; ")
    )))
}

/// Why a profile cannot be deleted, if it cannot: the tenant's queues that give it.
pub async fn profile(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    let names = queue_names(
        tx,
        "SELECT name FROM queues WHERE tenant_id = $1 AND profile_id = $2 ORDER BY name",
        tenant_id,
        id,
    )
    .await?;
    Ok((!names.is_empty()).then(|| {
        format!(
            "The profile is in use: {} {} it. Give {them} another profile or delete {them} first.",
            queues_phrase(&names),
            if names.len() == 1 { "uses" } else { "use" },
            them = if names.len() == 1 { "it" } else { "them" }
        )
    }))
}

/// Why a group policy cannot be deleted, if it cannot: the tenant's queues under it.
pub async fn policy(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    let names = queue_names(
        tx,
        "SELECT name FROM queues WHERE tenant_id = $1 AND policy_id = $2 ORDER BY name",
        tenant_id,
        id,
    )
    .await?;
    Ok((!names.is_empty()).then(|| {
        format!(
            "The policy is in use: {} {} under it. Delete {} first.",
            queues_phrase(&names),
            if names.len() == 1 { "is" } else { "are" },
            if names.len() == 1 { "it" } else { "them" }
        )
    }))
}

/// Why a queue cannot be deleted, if it cannot: its live jobs, and the finished ones whose
/// history (the jobs list, usage) still names it.
pub async fn queue(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
) -> Result<Option<String>, sqlx::Error> {
    let live = count(
        tx,
        &format!(
            "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND queue_id = $2 AND state IN {LIVE}"
        ),
        tenant_id,
        id,
    )
    .await?;
    if live > 0 {
        return Ok(Some(format!(
            "The queue has {} (queued, running or being stopped). Let {} finish or abort {} first.",
            plural(live, "live job", "live jobs"),
            if live == 1 { "it" } else { "them" },
            if live == 1 { "it" } else { "them" }
        )));
    }
    let done = count(
        tx,
        "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND queue_id = $2",
        tenant_id,
        id,
    )
    .await?;
    Ok((done > 0).then(|| {
        format!(
            "The queue keeps the history of {}: jobs are not deleted, so neither is their queue. Change its pools or profile instead.",
            plural(done, "finished job", "finished jobs")
        )
    }))
}
