//! Recomputing every tenant's audit chains: edited, missing and relabelled entries, a
//! deleted tail, and a chain other than `api` deleted whole (its opening is recorded in the
//! tenant's `api` chain, [`super::CHAIN_OPEN`]).

use std::collections::{BTreeMap, BTreeSet};

use sqlx::Row;

use super::{entry_hash, row_to_entry, Chain, Fields, CHAIN_OPEN, COLUMNS, GENESIS};
use crate::store::Store;

/// What [`verify`] found for one chain of one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub tenant_id: String,
    pub chain: Chain,
    pub entries: i64,
    /// Empty when the chain is intact.
    pub problems: Vec<String>,
}

/// A chain to check: its head (`None`: the head row is missing).
type Heads = BTreeMap<(String, String), Option<(i64, String)>>;

/// Recomputes every chain. Returns one report per chain that has entries or a head, or whose
/// opening the tenant's `api` chain records.
pub async fn verify(store: &Store) -> anyhow::Result<Vec<ChainReport>> {
    let mut chains: Heads = BTreeMap::new();
    for r in sqlx::query("SELECT tenant_id, chain, seq, hash FROM audit_heads")
        .fetch_all(&store.pool)
        .await?
    {
        chains.insert(
            (r.try_get("tenant_id")?, r.try_get("chain")?),
            Some((r.try_get("seq")?, r.try_get("hash")?)),
        );
    }
    // Chains whose head row was deleted are still checked.
    for r in sqlx::query("SELECT DISTINCT tenant_id, chain FROM audit_log")
        .fetch_all(&store.pool)
        .await?
    {
        chains
            .entry((r.try_get("tenant_id")?, r.try_get("chain")?))
            .or_insert(None);
    }
    // The chains each tenant's `api` chain says were opened (by the entry's seq).
    let mut opened: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in sqlx::query(
        "SELECT tenant_id, target_id, seq FROM audit_log WHERE chain = 'api' AND action = $1",
    )
    .bind(CHAIN_OPEN)
    .fetch_all(&store.pool)
    .await?
    {
        opened.insert(
            (r.try_get("tenant_id")?, r.try_get("target_id")?),
            r.try_get("seq")?,
        );
    }
    let mut reports = Vec::new();
    let mut unknown: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ((tenant_id, label), head) in &chains {
        let Some(chain) = Chain::parse(label) else {
            unknown
                .entry(tenant_id.clone())
                .or_default()
                .insert(label.clone());
            continue;
        };
        let mut report = check(store, tenant_id, chain, head.as_ref()).await?;
        if chain != Chain::Api && !opened.contains_key(&(tenant_id.clone(), label.clone())) {
            report.problems.push(format!(
                "the tenant's api chain does not record this chain being opened ({CHAIN_OPEN}): its entries were put in, not written"
            ));
        }
        reports.push(report);
    }
    // A chain opened but gone: its head and every entry were deleted.
    for ((tenant_id, label), seq) in &opened {
        if chains.contains_key(&(tenant_id.clone(), label.clone())) {
            continue;
        }
        let problem = format!(
            "opened at entry {seq} of the tenant's api chain, but its head and every entry are gone: they were deleted"
        );
        match Chain::parse(label) {
            Some(chain) => reports.push(ChainReport {
                tenant_id: tenant_id.clone(),
                chain,
                entries: 0,
                problems: vec![problem],
            }),
            None => {
                unknown
                    .entry(tenant_id.clone())
                    .or_default()
                    .insert(label.clone());
            }
        }
    }
    // Labels no writer uses (the schema forbids them): reported on the tenant's api chain.
    for (tenant_id, labels) in unknown {
        let problem = format!(
            "entries or heads carry chain labels no writer uses ({}): they were put in or relabelled",
            labels.into_iter().collect::<Vec<_>>().join(", ")
        );
        match reports
            .iter_mut()
            .find(|r| r.tenant_id == tenant_id && r.chain == Chain::Api)
        {
            Some(r) => r.problems.push(problem),
            None => reports.push(ChainReport {
                tenant_id,
                chain: Chain::Api,
                entries: 0,
                problems: vec![problem],
            }),
        }
    }
    reports.sort_by(|a, b| (&a.tenant_id, a.chain.as_str()).cmp(&(&b.tenant_id, b.chain.as_str())));
    Ok(reports)
}

/// One chain's entries against each other and against its head.
async fn check(
    store: &Store,
    tenant_id: &str,
    chain: Chain,
    head: Option<&(i64, String)>,
) -> anyhow::Result<ChainReport> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM audit_log WHERE tenant_id = $1 AND chain = $2 ORDER BY seq"
    ))
    .bind(tenant_id)
    .bind(chain.as_str())
    .fetch_all(&store.pool)
    .await?;
    let mut problems = Vec::new();
    let mut prev = GENESIS.to_string();
    let mut expected_seq = 1;
    let mut count = 0;
    for row in &rows {
        let e = row_to_entry(row)?;
        let summary: String = row.try_get("summary")?;
        count += 1;
        if e.seq != expected_seq {
            problems.push(format!(
                "entry {} follows {}: entries {}..{} are missing",
                e.seq,
                expected_seq - 1,
                expected_seq,
                e.seq - 1
            ));
        }
        if e.prev_hash != prev {
            problems.push(format!(
                "entry {} does not link to the entry before it",
                e.seq
            ));
        }
        let actor_id = e.actor_id.clone().unwrap_or_default();
        let computed = entry_hash(&Fields {
            tenant_id: &e.tenant_id,
            chain,
            seq: e.seq,
            at: e.at,
            actor_id: &actor_id,
            actor_name: &e.actor_name,
            action: &e.action,
            target_kind: &e.target_kind,
            target_id: &e.target_id,
            summary: &summary,
            source_ip: &e.source_ip,
            request_id: &e.request_id,
            prev_hash: &e.prev_hash,
        });
        if computed != e.hash {
            problems.push(format!("entry {} was changed after it was written", e.seq));
        }
        prev = e.hash.clone();
        expected_seq = e.seq + 1;
    }
    match head {
        None => problems.push("the chain head is missing".to_string()),
        Some((seq, hash)) if *seq != expected_seq - 1 || (*seq > 0 && *hash != prev) => problems
            .push(format!(
                "the chain ends at entry {} but its head records entry {}: entries were deleted",
                expected_seq - 1,
                seq
            )),
        Some(_) => {}
    }
    Ok(ChainReport {
        tenant_id: tenant_id.to_string(),
        chain,
        entries: count,
        problems,
    })
}
