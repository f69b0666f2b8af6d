//! Jobs end to end with the scheduler's driver running: submit through the API, the driver
//! admits, the simulated or local executor runs, over-quota jobs borrow and are reclaimed,
//! waiting jobs say why, aborts run the callback, and a restarted driver adopts what runs.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    borrowing_jobs_are_preempted_requeued_and_resumed,
    waiting_jobs_say_why_and_aborts_end_them,
    fractions_pack_onto_one_gpu_and_spill_over,
    a_restarted_scheduler_adopts_running_jobs,
    the_overview_counts_what_was_just_written
);

pub(crate) fn node(name: &str, gpus: u32) -> Value {
    json!({"name": name, "gpus": gpus, "gpu_model": "A100-80GB", "gpu_memory_mb": 81920, "cpu_cores": 64, "memory_mb": 524288})
}

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

pub(crate) struct Setup {
    pub(crate) admin: String,
    pub(crate) member: String,
}

pub(crate) async fn setup(app: &TestApp, tenant: &str) -> Setup {
    app.seed_tenant(tenant).await;
    let admin = app.login(tenant, "admin").await;
    let member = app.login(tenant, "member").await;
    Setup { admin, member }
}

/// A group with the member in it, its policy and a queue over `pools`.
pub(crate) async fn group_queue(
    app: &TestApp,
    s: &Setup,
    name: &str,
    policy: Value,
    profile_id: &str,
    pools: &[&str],
    with_member: bool,
) -> String {
    let g = app
        .post("/api/v1/groups", &s.admin, json!({"name": name}))
        .await;
    assert_eq!(g.status, StatusCode::CREATED, "{}", g.text);
    let gid = id(&g.body);
    if with_member {
        let member_id = app.user_id(&s.admin, "member").await;
        let add = app
            .post(
                &format!("/api/v1/groups/{gid}/members"),
                &s.admin,
                json!({ "user_id": member_id }),
            )
            .await;
        assert_eq!(add.status, StatusCode::CREATED, "{}", add.text);
    }
    let mut policy = policy;
    policy["group_id"] = json!(gid);
    let p = app.post("/api/v1/policies", &s.admin, policy).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    let q = app
        .post("/api/v1/queues", &s.admin, json!({"name": format!("{name}-q"), "policy_id": id(&p.body), "profile_id": profile_id, "pools": pools}))
        .await;
    assert_eq!(q.status, StatusCode::CREATED, "{}", q.text);
    id(&q.body)
}

pub(crate) async fn pool(
    app: &TestApp,
    s: &Setup,
    name: &str,
    executor: &str,
    nodes: Value,
) -> String {
    let p = app
        .post(
            "/api/v1/pools",
            &s.admin,
            json!({"name": name, "executor": executor, "nodes": nodes}),
        )
        .await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.text);
    id(&p.body)
}

pub(crate) async fn profile(app: &TestApp, s: &Setup, body: Value) -> String {
    let p = app.post("/api/v1/profiles", &s.admin, body).await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.text);
    id(&p.body)
}

/// A simulated pool of one 2-GPU node, a flexible profile and the vision group's queue on
/// them (2 GPUs reserved): the queue's id.
pub(crate) async fn small_queue(app: &TestApp, s: &Setup) -> String {
    let p = pool(app, s, "small", "simulated", json!([node("a1", 2)])).await;
    let flex = profile(
        app,
        s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 2000}),
    )
    .await;
    group_queue(
        app,
        s,
        "vision",
        json!({"reservation_milli": 2000, "limit_milli": 2000, "over_quota_weight": 1}),
        &flex,
        &[&p],
        true,
    )
    .await
}

pub(crate) async fn submit(app: &TestApp, token: &str, body: Value) -> String {
    let r = app.post("/api/v1/jobs", token, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["state"], "queued");
    id(&r.body)
}

pub(crate) async fn job(app: &TestApp, token: &str, job_id: &str) -> Value {
    app.get(&format!("/api/v1/jobs/{job_id}"), token).await.body
}

pub(crate) async fn wait_state(app: &TestApp, token: &str, job_id: &str, state: &str) -> Value {
    app.wait_for(
        &format!("/api/v1/jobs/{job_id}"),
        token,
        &format!("job {job_id} {state}"),
        |b| b["job"]["state"] == state,
    )
    .await
}

pub(crate) fn states(detail: &Value) -> Vec<String> {
    detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to_state"].as_str().unwrap().to_string())
        .collect()
}

async fn borrowing_jobs_are_preempted_requeued_and_resumed(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let pool_id = pool(&app, &s, "sim", "simulated", json!([node("n1", 4)])).await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let policy = json!({"reservation_milli": 2000, "limit_milli": 4000, "over_quota_weight": 1});
    let qa = group_queue(&app, &s, "vision", policy.clone(), &one, &[&pool_id], true).await;
    let qb = group_queue(&app, &s, "nlp", policy, &one, &[&pool_id], false).await;

    // Vision uses its 2 reserved GPUs and borrows nlp's 2 idle ones.
    let mut mine = Vec::new();
    for i in 0..4 {
        mine.push(
            submit(
                &app,
                &s.member,
                json!({"queue_id": qa, "name": format!("train-{i}"), "command": "python train.py", "duration_ms": 600000,
                       "abort": {"kind": "bash", "command": "save-checkpoint", "timeout_ms": 5000}, "checkpoint_dir": "ckpt"}),
            )
            .await,
        );
    }
    for j in &mine {
        wait_state(&app, &s.member, j, "running").await;
    }
    let over: usize = {
        let mut n = 0;
        for j in &mine {
            if job(&app, &s.member, j).await["job"]["over_quota"] == true {
                n += 1;
            }
        }
        n
    };
    assert_eq!(over, 2, "two of the four borrow beyond the reservation");
    let ov = app.get("/api/v1/scheduling/overview", &s.admin).await;
    assert_eq!(ov.status, StatusCode::OK, "{}", ov.text);
    assert_eq!(ov.body["pools"][0]["in_quota_milli"], 2000);
    assert_eq!(ov.body["pools"][0]["over_quota_milli"], 2000);
    assert_eq!(ov.body["pools"][0]["idle_milli"], 0);

    // Nlp wants its reservation back: two borrowed jobs are preempted, nothing more.
    let b1 = submit(
        &app,
        &s.admin,
        json!({"queue_id": qb, "name": "ft-1", "command": "ft", "duration_ms": 600000}),
    )
    .await;
    let b2 = submit(
        &app,
        &s.admin,
        json!({"queue_id": qb, "name": "ft-2", "command": "ft", "duration_ms": 600000}),
    )
    .await;
    wait_state(&app, &s.admin, &b1, "running").await;
    wait_state(&app, &s.admin, &b2, "running").await;
    let mut resumed = 0;
    let mut untouched = 0;
    for j in &mine {
        let d = job(&app, &s.member, j).await;
        match d["job"]["resume_count"].as_i64().unwrap() {
            0 => {
                assert_eq!(d["job"]["state"], "running", "in-quota jobs keep running");
                untouched += 1;
            }
            1 => {
                resumed += 1;
                assert_eq!(d["job"]["state"], "queued", "{d}");
                let st = states(&d);
                let tail: Vec<&str> = st.iter().rev().take(3).rev().map(|s| s.as_str()).collect();
                assert_eq!(tail, ["preempting", "preempted", "queued"], "{st:?}");
                let events = d["events"].as_array().unwrap();
                let preempted = events
                    .iter()
                    .find(|e| e["to_state"] == "preempted")
                    .unwrap();
                assert!(
                    preempted["detail"]
                        .as_str()
                        .unwrap()
                        .contains("checkpointed"),
                    "{preempted}"
                );
                // Back in the queue, it says why it waits.
                let w = app
                    .wait_for(
                        &format!("/api/v1/jobs/{j}"),
                        &s.member,
                        "a wait reason",
                        |b| b["job"]["wait_code"].is_string(),
                    )
                    .await;
                assert_eq!(w["job"]["wait_code"], "no_idle_capacity", "{w}");
            }
            n => panic!("resumed {n} times: a preemption loop"),
        }
    }
    assert_eq!((untouched, resumed), (2, 2));
    // `state=preempted` finds them: preempted, back in the queue to resume.
    let listed = app.get("/api/v1/jobs?state=preempted", &s.member).await;
    let mut listed: Vec<&str> = listed.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    listed.sort();
    let mut expected: Vec<&str> = Vec::new();
    for j in &mine {
        if job(&app, &s.member, j).await["job"]["resume_count"] == 1 {
            expected.push(j.as_str());
        }
    }
    expected.sort();
    assert_eq!(listed, expected, "state=preempted lists the preempted jobs");

    let ov = app.get("/api/v1/scheduling/overview", &s.admin).await;
    let pre = ov.body["preemptions"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{}", ov.text);
    assert_eq!(pre[0]["victim_group"], "vision");
    assert_eq!(pre[0]["for_group"], "nlp");
    assert!(pre[0]["reason"].as_str().unwrap().contains("borrowing"));
    let groups = ov.body["groups"].as_array().unwrap();
    let vision = groups.iter().find(|g| g["group_name"] == "vision").unwrap();
    assert_eq!(vision["used_milli"], 2000);
    assert_eq!(vision["waiting"], 2);
    let audit = app.get("/api/v1/audit?action=job.preempt", &s.admin).await;
    assert_eq!(
        audit.body["items"].as_array().unwrap().len(),
        2,
        "{}",
        audit.text
    );
    app.finish().await;
}

async fn waiting_jobs_say_why_and_aborts_end_them(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let pool_id = pool(&app, &s, "sim", "simulated", json!([node("n1", 2)])).await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let q = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 1000, "limit_milli": 1000, "over_quota_weight": 1}),
        &one,
        &[&pool_id],
        true,
    )
    .await;
    let spec = |name: &str, ms: i64| json!({"queue_id": q, "name": name, "command": "run", "duration_ms": ms, "abort": {"kind": "python", "command": "save()", "timeout_ms": 5000}});
    let first = submit(&app, &s.member, spec("first", 600000)).await;
    wait_state(&app, &s.member, &first, "running").await;
    let second = submit(&app, &s.member, spec("second", 300)).await;
    let w = app
        .wait_for(
            &format!("/api/v1/jobs/{second}"),
            &s.member,
            "a wait reason",
            |b| b["job"]["wait_code"].is_string(),
        )
        .await;
    assert_eq!(w["job"]["wait_code"], "over_limit", "{w}");
    let reason = w["job"]["wait_reason"].as_str().unwrap();
    assert!(
        reason.contains("vision would go over its limit of 1 GPUs"),
        "{reason}"
    );

    // Bad input is refused with the field named.
    for (body, field) in [
        (
            json!({"queue_id": q, "name": "x", "command": "run", "gpu_milli": 1500}),
            "gpu_milli",
        ),
        (
            json!({"queue_id": "nope", "name": "x", "command": "run"}),
            "queue_id",
        ),
        (json!({"queue_id": q, "name": "", "command": "run"}), "name"),
        (
            json!({"queue_id": q, "name": "x", "command": "run", "priority_class": "urgent"}),
            "priority_class",
        ),
        (
            json!({"queue_id": q, "name": "x", "command": "run", "abort": {"kind": "perl", "command": "x"}}),
            "abort.kind",
        ),
        (
            json!({"queue_id": q, "name": "x", "command": "run", "env": {"SWITCHYARD_TOKEN": "x"}}),
            "env",
        ),
    ] {
        let r = app.post("/api/v1/jobs", &s.member, body.clone()).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            r.text
        );
        assert!(
            r.body["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "{body}: {}",
            r.text
        );
    }

    // A waiting job is aborted at once; a running one runs its callback, then ends aborted.
    let r = app
        .post(
            &format!("/api/v1/jobs/{second}/abort"),
            &s.member,
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["state"], "aborted");
    let again = app
        .post(
            &format!("/api/v1/jobs/{second}/abort"),
            &s.member,
            json!({}),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    app.post(&format!("/api/v1/jobs/{first}/abort"), &s.member, json!({}))
        .await;
    let d = wait_state(&app, &s.member, &first, "aborted").await;
    assert!(d["job"]["finished_at"].is_i64());
    assert!(
        d["job"]["detail"]
            .as_str()
            .unwrap()
            .contains("abort callback checkpointed"),
        "{d}"
    );
    assert_eq!(
        states(&d),
        ["queued", "admitted", "starting", "running", "running", "aborted"]
    );

    // With the capacity free, a short job runs to success.
    let third = submit(&app, &s.member, spec("third", 200)).await;
    let d = wait_state(&app, &s.member, &third, "succeeded").await;
    assert_eq!(d["job"]["exit_code"], 0);

    // Members see only their own jobs; other tenants see nothing.
    let mine = app.get("/api/v1/jobs", &s.member).await;
    assert_eq!(mine.body["items"].as_array().unwrap().len(), 3);
    let filtered = app.get("/api/v1/jobs?state=succeeded", &s.member).await;
    assert_eq!(filtered.body["items"].as_array().unwrap().len(), 1);
    let bad = app.get("/api/v1/jobs?state=sleeping", &s.member).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let other = setup(&app, "globex").await;
    assert_eq!(
        app.get(&format!("/api/v1/jobs/{third}"), &other.admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.post(
            &format!("/api/v1/jobs/{third}/abort"),
            &other.admin,
            json!({})
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/v1/jobs", &other.admin).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let member_overview = app.get("/api/v1/scheduling/overview", &s.member).await;
    assert_eq!(member_overview.status, StatusCode::FORBIDDEN);
    app.finish().await;
}

async fn fractions_pack_onto_one_gpu_and_spill_over(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let p1 = pool(&app, &s, "first", "simulated", json!([node("a1", 1)])).await;
    let p2 = pool(&app, &s, "spill", "simulated", json!([node("b1", 1)])).await;
    let flex = profile(
        &app,
        &s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 1000}),
    )
    .await;
    let q = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 2000, "limit_milli": 2000, "over_quota_weight": 1}),
        &flex,
        &[&p1, &p2],
        true,
    )
    .await;
    let mut ids = Vec::new();
    for (i, m) in [500, 500, 250].iter().enumerate() {
        ids.push(
            submit(
                &app,
                &s.member,
                json!({"queue_id": q, "name": format!("f{i}"), "command": "x", "gpu_milli": m, "duration_ms": 600000}),
            )
            .await,
        );
        wait_state(&app, &s.member, &ids[i], "running").await;
    }
    let a = job(&app, &s.member, &ids[0]).await;
    let b = job(&app, &s.member, &ids[1]).await;
    let c = job(&app, &s.member, &ids[2]).await;
    assert_eq!(a["job"]["pool_id"], p1.as_str());
    assert_eq!(b["job"]["pool_id"], p1.as_str(), "two halves share one GPU");
    assert_eq!(a["job"]["slices"], json!([[0, 500]]));
    assert_eq!(b["job"]["slices"], json!([[0, 500]]));
    assert_eq!(
        c["job"]["pool_id"],
        p2.as_str(),
        "the full pool spills over"
    );
    assert_eq!(c["job"]["node_name"], "b1");
    let ov = app.get("/api/v1/scheduling/overview", &s.admin).await;
    let vision = &ov.body["groups"][0];
    assert_eq!(
        vision["used_milli"], 1250,
        "fractions count in quota exactly"
    );
    app.finish().await;
}

async fn a_restarted_scheduler_adopts_running_jobs(kind: Kind) {
    let mut app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(&app, &s, "sim", "simulated", json!([node("n1", 2)])).await;
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
    let j = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "long", "command": "x", "duration_ms": 1500}),
    )
    .await;
    wait_state(&app, &s.member, &j, "running").await;
    app.restart_scheduler().await;
    let d = wait_state(&app, &s.member, &j, "succeeded").await;
    let st = states(&d);
    assert_eq!(
        st,
        ["queued", "admitted", "starting", "running", "succeeded"],
        "adopted, not started twice"
    );
    app.finish().await;
}

/// The overview reads what the driver publishes: it includes a submit answered before it, and
/// a job written by another process (no wake-up, as the CLI or another replica would) is
/// counted and scheduled once the driver's refresh reads the changed row.
async fn the_overview_counts_what_was_just_written(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = |name: &str, gpu: i64| json!({"queue_id": q, "name": name, "command": "x", "gpu_milli": gpu, "duration_ms": 600000});
    let big = submit(&app, &s.member, body("big", 2000)).await;
    wait_state(&app, &s.member, &big, "running").await;
    let waiting = submit(&app, &s.member, body("small", 1000)).await;
    let counts = |ov: &Value| {
        let q = &ov["queues"][0];
        (
            q["running"].as_i64().unwrap(),
            q["waiting"].as_i64().unwrap(),
        )
    };
    let ov = app.get("/api/v1/scheduling/overview", &s.admin).await;
    assert_eq!(counts(&ov.body), (1, 1), "{}", ov.text);
    // A copy of the waiting job, written straight into the store.
    let copy = switchyard::store::new_id();
    sqlx::query(
        "INSERT INTO jobs (id, name, tenant_id, queue_id, group_id, user_id, username, command, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
            abort_timeout_ms, duration_ms, state, submitted_at, queued_at, updated_at)
         SELECT $1, 'copy', tenant_id, queue_id, group_id, user_id, username, command, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
            abort_timeout_ms, duration_ms, 'queued', $2, $2, $2 FROM jobs WHERE id = $3",
    )
    .bind(&copy)
    .bind(app.store().now())
    .bind(&waiting)
    .execute(&app.store().pool)
    .await
    .unwrap();
    app.wait_for(
        "/api/v1/scheduling/overview",
        &s.admin,
        "the copy counted",
        |b| counts(b) == (1, 2),
    )
    .await;
    let r = app
        .post(&format!("/api/v1/jobs/{big}/abort"), &s.member, json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    wait_state(&app, &s.member, &waiting, "running").await;
    wait_state(&app, &s.member, &copy, "running").await;
    let ov = app.get("/api/v1/scheduling/overview", &s.admin).await;
    assert_eq!(counts(&ov.body), (2, 0), "{}", ov.text);
}
