//! A tenant's audit log is one hash chain per writer: the scheduler's driver appends to a
//! chain of its own, so its transactions (admissions of thousands of jobs, the executors'
//! reports) and the API's writes do not hold each other's chain head until they commit.
//! Each chain is verified on its own; the audit list pages through all chains by id.

use std::collections::HashSet;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{bounded, Kind, TestApp};
use crate::jobs::{setup, small_queue, submit, wait_state};
use app::model::RequestMeta;
use switchyard::audit::{self, verify, Actor, BatchRecord, Chain};
use switchyard::store::WriteTx;

both_stores!(
    the_scheduler_and_the_api_keep_chains_of_their_own,
    a_chain_deleted_whole_or_relabelled_is_found
);

async fn the_scheduler_and_the_api_keep_chains_of_their_own(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let mut jobs = Vec::new();
    for name in ["a", "b", "c"] {
        let body = json!({"queue_id": q, "name": name, "command": "x", "gpu_milli": 500, "duration_ms": 600000});
        jobs.push(submit(&app, &s.member, body).await);
    }
    for j in &jobs {
        wait_state(&app, &s.member, j, "running").await;
    }
    let tenant: String = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = 'acme'")
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
    let actions = |chain: &'static str| {
        let app = &app;
        let tenant = tenant.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT DISTINCT action FROM audit_log WHERE tenant_id = $1 AND chain = $2",
            )
            .bind(tenant)
            .bind(chain)
            .fetch_all(&app.store().pool)
            .await
            .unwrap()
            .into_iter()
            .collect::<HashSet<_>>()
        }
    };
    let api = actions("api").await;
    let scheduler = actions("scheduler").await;
    assert!(
        api.contains("job.submit") && api.contains("queue.create"),
        "{api:?}"
    );
    assert!(scheduler.contains("job.admit"), "{scheduler:?}");
    assert!(
        api.is_disjoint(&scheduler),
        "each writer's entries in its own chain: {api:?} / {scheduler:?}"
    );

    // Both chains verify on their own.
    let reports: Vec<_> = verify(app.store())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant_id == tenant)
        .collect();
    assert_eq!(
        reports.iter().map(|r| r.chain).collect::<Vec<_>>(),
        [Chain::Api, Chain::Scheduler]
    );
    assert!(reports.iter().all(|r| r.problems.is_empty()), "{reports:?}");

    // The list pages through every entry of both chains once, newest (highest id) first.
    let total = app
        .count(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE tenant_id = '{tenant}'"
        ))
        .await;
    let mut seen = Vec::new();
    let mut chains = HashSet::new();
    let mut path = "/api/v1/audit?limit=4".to_string();
    loop {
        let page = app.get(&path, &s.admin).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        for e in page.body["items"].as_array().unwrap() {
            seen.push(e["id"].as_i64().unwrap());
            chains.insert(e["chain"].as_str().unwrap().to_string());
        }
        match page.body["next_cursor"].as_str() {
            Some(c) => path = format!("/api/v1/audit?limit=4&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen.len() as i64, total, "every entry once");
    assert!(
        seen.windows(2).all(|w| w[0] > w[1]),
        "newest first: {seen:?}"
    );
    assert_eq!(
        chains,
        HashSet::from(["api".to_string(), "scheduler".to_string()])
    );

    // A deleted entry of the scheduler's chain breaks that chain only.
    sqlx::query("DELETE FROM audit_log WHERE tenant_id = $1 AND chain = 'scheduler' AND seq = 1")
        .bind(&tenant)
        .execute(&app.store().pool)
        .await
        .unwrap();
    let after: Vec<_> = verify(app.store())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant_id == tenant)
        .collect();
    let of = |c: Chain| after.iter().find(|r| r.chain == c).unwrap();
    assert!(of(Chain::Api).problems.is_empty(), "{after:?}");
    assert!(
        of(Chain::Scheduler)
            .problems
            .iter()
            .any(|p| p.contains("entries 1..1 are missing")),
        "{after:?}"
    );
    app.finish().await;
}

/// PostgreSQL only: there, writers run at once and wait only for the rows they lock. (On
/// SQLite one write lock serialises every write transaction whatever its chain.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_write_does_not_wait_for_an_open_scheduler_transaction() {
    bounded(
        "an_api_write_does_not_wait_for_an_open_scheduler_transaction",
        || async {
            let app = TestApp::new(Kind::Postgres).await;
            let tenant = app.seed_tenant("acme").await;
            let admin = app.login("acme", "admin").await;
            // The tenant's scheduler chain exists (its opening, recorded once in the api
            // chain, is behind it).
            scheduler_tx(&app, &tenant, "j0")
                .await
                .commit()
                .await
                .unwrap();
            // The scheduler's transaction has appended its entry and not committed yet (as
            // while a large admission is written).
            let tx = scheduler_tx(&app, &tenant, "j1").await;
            // A request's write commits meanwhile.
            let created = tokio::time::timeout(
                Duration::from_secs(5),
                app.post("/api/v1/groups", &admin, json!({"name": "meanwhile"})),
            )
            .await
            .expect("an API write does not wait for the scheduler's open transaction");
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
            tx.commit().await.unwrap();
            app.assert_audit_intact("both chains after the overlapping writes")
                .await;
            app.finish().await;
        },
    )
    .await;
}

/// A write transaction that has appended one entry to the tenant's scheduler chain, open.
async fn scheduler_tx(app: &TestApp, tenant: &str, job: &str) -> WriteTx {
    let mut tx = app.store().begin_write().await.unwrap();
    let now = tx.now();
    let meta = RequestMeta {
        source_ip: String::new(),
        request_id: "cycle".into(),
    };
    let record = BatchRecord {
        tenant_id: tenant.to_string(),
        action: "job.admit",
        target_kind: "job",
        target_id: job.to_string(),
        summary: json!({}),
    };
    let actor = Actor::system("scheduler");
    audit::append_many(&mut tx, now, Chain::Scheduler, &actor, &meta, &[record])
        .await
        .unwrap();
    tx
}

/// A chain's own links cannot show that it was deleted whole (its head with every entry): the
/// tenant's api chain records each other chain's opening, so `verify` finds it gone. Entries
/// moved to a label no writer uses are found too, and the audit list still answers.
async fn a_chain_deleted_whole_or_relabelled_is_found(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = json!({"queue_id": q, "name": "a", "command": "x", "gpu_milli": 500, "duration_ms": 600000});
    let job = submit(&app, &s.member, body).await;
    wait_state(&app, &s.member, &job, "running").await;
    let tenant: String = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = 'acme'")
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
    let opened = app
        .count(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE tenant_id = '{tenant}' AND chain = 'api' AND action = 'audit.chain_open' AND target_id = 'scheduler'"
        ))
        .await;
    assert_eq!(
        opened, 1,
        "the scheduler chain's opening is in the api chain, once"
    );
    app.assert_audit_intact("before any tampering").await;
    let reports_of = |app: &TestApp| {
        let store = app.store().clone();
        let tenant = tenant.clone();
        async move {
            verify(&store)
                .await
                .unwrap()
                .into_iter()
                .filter(|r| r.tenant_id == tenant)
                .collect::<Vec<_>>()
        }
    };

    // Relabelled: the entries leave their chain for a label no writer uses.
    sqlx::query(
        "UPDATE audit_log SET chain = 'elsewhere' WHERE tenant_id = $1 AND chain = 'scheduler'",
    )
    .bind(&tenant)
    .execute(&app.store().pool)
    .await
    .unwrap();
    let reports = reports_of(&app).await;
    let api = reports.iter().find(|r| r.chain == Chain::Api).unwrap();
    assert!(
        api.problems.iter().any(|p| p.contains("elsewhere")),
        "{reports:?}"
    );
    let list = app.get("/api/v1/audit?limit=500", &s.admin).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);

    // Deleted whole: no entry and no head left.
    sqlx::query("DELETE FROM audit_log WHERE tenant_id = $1 AND chain = 'elsewhere'")
        .bind(&tenant)
        .execute(&app.store().pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM audit_heads WHERE tenant_id = $1 AND chain = 'scheduler'")
        .bind(&tenant)
        .execute(&app.store().pool)
        .await
        .unwrap();
    let reports = reports_of(&app).await;
    let scheduler = reports
        .iter()
        .find(|r| r.chain == Chain::Scheduler)
        .unwrap_or_else(|| panic!("the deleted chain is reported: {reports:?}"));
    assert!(
        scheduler
            .problems
            .iter()
            .any(|p| p.contains("were deleted")),
        "{reports:?}"
    );
    assert!(reports
        .iter()
        .find(|r| r.chain == Chain::Api)
        .is_some_and(|r| r.problems.is_empty()));
    app.finish().await;
}
