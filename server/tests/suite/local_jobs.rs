//! Local pools: real processes run as the unprivileged job user, checkpoint on abort, and only
//! a platform admin may declare such a pool.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::*;

both_stores!(
    local_jobs_run_real_processes_and_checkpoint_on_abort,
    local_pools_are_a_platform_admins_decision
);

/// A shared local pool of one node with `gpus` GPUs (platform admins only) with a grant of
/// `grant` milli-GPUs for `tenant`.
pub(crate) async fn local_pool(app: &TestApp, tenant_id: &str, gpus: u32, grant: i64) -> String {
    let root = app.seed_platform_admin().await;
    let p = app
        .post(
            "/api/v1/pools",
            &root,
            json!({"name": "here", "executor": "local", "shared": true, "nodes": [node("localhost", gpus)]}),
        )
        .await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.text);
    let pool_id = id(&p.body);
    let g = app
        .call(
            axum::http::Method::PUT,
            &format!("/api/v1/pools/{pool_id}/grants/{tenant_id}"),
            Some(&root),
            Some(json!({ "reservation_milli": grant })),
        )
        .await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text);
    pool_id
}

async fn local_jobs_run_real_processes_and_checkpoint_on_abort(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let p = local_pool(&app, &tenant_id, 2, 2000).await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let q = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 2000, "limit_milli": 2000, "over_quota_weight": 1}),
        &one,
        &[&p],
        true,
    )
    .await;
    let quick = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "quick", "command": "echo hello; exit 3"}),
    )
    .await;
    let d = wait_state(&app, &s.member, &quick, "failed").await;
    assert_eq!(d["job"]["exit_code"], 3);
    let long = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "long", "command": "sleep 300", "checkpoint_dir": "ckpt",
               "abort": {"kind": "bash", "command": "echo \"$SWITCHYARD_STOP_REASON\" > \"$SWITCHYARD_CHECKPOINT_DIR/saved\"", "timeout_ms": 5000}}),
    )
    .await;
    wait_state(&app, &s.member, &long, "running").await;
    app.post(&format!("/api/v1/jobs/{long}/abort"), &s.member, json!({}))
        .await;
    wait_state(&app, &s.member, &long, "aborted").await;
    let saved = app
        .jobs_dir
        .as_ref()
        .unwrap()
        .path()
        .join(&long)
        .join("ckpt")
        .join("saved");
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap_or_default().trim(),
        "abort",
        "the abort callback wrote its checkpoint at {}",
        saved.display()
    );

    // A checkpoint folder outside the job's own is refused at submit.
    for bad in ["/etc", "../other-job", "ckpt/../../x"] {
        let r = app
            .post(
                "/api/v1/jobs",
                &s.member,
                json!({"queue_id": q, "name": "escape", "command": "true", "checkpoint_dir": bad}),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.text
        );
        assert_eq!(r.body["errors"][0]["field"], "checkpoint_dir", "{}", r.text);
    }

    // The job runs as the job user, with nothing of the server's environment, and cannot
    // read the database or list the other jobs' folders.
    let db_file = app.db.url.strip_prefix("sqlite://").map(str::to_string);
    if let Some(db) = &db_file {
        // As if the database's folder were world-searchable (data/ usually is).
        let folder = std::path::Path::new(db).parent().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let probe = format!(
        "echo UID=$(id -u); echo HOME=$HOME; env | sort; if [ -n '{db}' ]; then cat '{db}' >/dev/null 2>&1 && echo DB=READABLE || echo DB=DENIED; fi; ls .. >/dev/null 2>&1 && echo JOBS=LISTABLE || echo JOBS=UNLISTABLE",
        db = db_file.clone().unwrap_or_default()
    );
    let who = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "who", "command": probe, "env": {"MINE": "kept"}}),
    )
    .await;
    wait_state(&app, &s.member, &who, "succeeded").await;
    let out = std::fs::read_to_string(
        app.jobs_dir
            .as_ref()
            .unwrap()
            .path()
            .join(&who)
            .join("output.log"),
    )
    .unwrap();
    let (uid, _) = crate::common::job_user();
    assert!(
        out.contains(&format!("UID={uid}\n")),
        "runs as uid {uid}: {out}"
    );
    assert!(out.contains("MINE=kept"), "the job's own variables: {out}");
    assert!(
        !out.contains("SWITCHYARD_TEST_POSTGRES")
            && !out.contains("CARGO")
            && !out.contains("RUST"),
        "nothing of the server's environment: {out}"
    );
    assert!(out.contains(&format!(
        "HOME={}",
        app.jobs_dir.as_ref().unwrap().path().join(&who).display()
    )));
    if uid == 65534 {
        assert!(out.contains("JOBS=UNLISTABLE"), "{out}");
        if db_file.is_some() {
            assert!(
                out.contains("DB=DENIED"),
                "the database is not readable: {out}"
            );
        }
    }
    app.finish().await;
}

async fn local_pools_are_a_platform_admins_decision(kind: Kind) {
    // The scheduler-less app runs with the default settings: local pools off.
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let root = app.seed_platform_admin().await;
    let local = json!({"name": "here", "executor": "local", "nodes": [node("localhost", 1)]});
    let by_tenant_admin = app.post("/api/v1/pools", &s.admin, local.clone()).await;
    assert_eq!(
        by_tenant_admin.status,
        StatusCode::FORBIDDEN,
        "{}",
        by_tenant_admin.text
    );
    let off = app.post("/api/v1/pools", &root, local.clone()).await;
    assert_eq!(off.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", off.text);
    assert!(off.text.contains("allow_local_pools"), "{}", off.text);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM pools WHERE executor = 'local'")
            .await,
        0
    );
    app.finish().await;
}
