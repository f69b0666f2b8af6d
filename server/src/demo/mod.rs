//! Demo data for a first look: three tenants with users, groups, memberships, projects, a
//! catalog of models and datasets with the rules that share them, pools, queues and jobs.
//! Seeded only into an empty database, through the same audited paths as real changes.

mod catalog;

use app::model::{
    AbortSpec, Auth, CreatePool, CreateProfile, CreateQueue, CreateTenant, Me, PoolNode, Principal,
    RequestMeta, SetPolicy, SubmitJob,
};
use serde_json::json;

use crate::audit::{self, Actor, Record};
use crate::identity::{directory, password};
use crate::store::{new_id, Store};

pub const PASSWORD: &str = "switchyard-demo";

struct DemoTenant {
    slug: &'static str,
    name: &'static str,
    // (username, display name, tenant admin, platform admin)
    users: &'static [(&'static str, &'static str, bool, bool)],
    // (group, description, members)
    groups: &'static [(&'static str, &'static str, &'static [&'static str])],
    // (project, parent)
    projects: &'static [(&'static str, Option<&'static str>)],
}

const TENANTS: &[DemoTenant] = &[
    DemoTenant {
        slug: "acme",
        name: "Acme Robotics",
        users: &[
            ("alice", "Alice Martin", true, false),
            ("bob", "Bob Chen", false, false),
            ("carol", "Carol Diaz", false, false),
            ("dan", "Dan Okafor", false, false),
        ],
        groups: &[
            ("ml-research", "Training and experiments", &["alice", "bob"]),
            ("inference", "Serving models to products", &["carol"]),
            ("data-eng", "Datasets and pipelines", &["dan"]),
        ],
        projects: &[
            ("vision", None),
            ("vision-detection", Some("vision")),
            ("llm-finetune", None),
        ],
    },
    DemoTenant {
        slug: "globex",
        name: "Globex",
        users: &[
            ("erin", "Erin Walsh", true, false),
            ("frank", "Frank Meyer", false, false),
        ],
        groups: &[("research", "Forecasting research", &["erin", "frank"])],
        projects: &[("forecasting", None)],
    },
    DemoTenant {
        slug: "platform",
        name: "Platform operations",
        users: &[("root", "Platform Admin", true, true)],
        groups: &[],
        projects: &[],
    },
];

/// Seeds the demo if the database has no tenant yet. Returns whether it seeded.
pub async fn seed(store: &Store) -> anyhow::Result<bool> {
    let tenants: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tenants")
        .fetch_one(&store.pool)
        .await?;
    if tenants > 0 {
        return Ok(false);
    }
    let actor = Actor::system("demo-seed");
    let meta = RequestMeta {
        source_ip: "local".into(),
        request_id: "demo-seed".into(),
    };
    let hash = password::hash(PASSWORD)?;
    let mut people: People = std::collections::HashMap::new();
    let err = |e: crate::http::error::ApiError| anyhow::anyhow!("demo seed: {:?}", e.0);
    for t in TENANTS {
        let tenant = crate::tenancy::insert_tenant(
            store,
            &actor,
            &meta,
            CreateTenant {
                slug: t.slug.into(),
                name: t.name.into(),
            },
        )
        .await
        .map_err(err)?;
        let mut ids = std::collections::HashMap::new();
        for (username, name, admin, platform) in t.users {
            let u = directory::insert_user(
                store,
                &tenant.id,
                &actor,
                &meta,
                username,
                name,
                Some(format!("{username}@{}.example", t.slug)),
                Some(hash.clone()),
                *admin,
                *platform,
            )
            .await
            .map_err(err)?;
            ids.insert(*username, u.id);
        }
        let mut project_ids = std::collections::HashMap::new();
        let now = store.now();
        let mut tx = store.begin_write().await?;
        for (group, description, members) in t.groups {
            let gid = new_id();
            let row = directory::NewGroupRow {
                id: &gid,
                tenant_id: &tenant.id,
                name: group,
                description,
                display_name: None,
                external_id: None,
                created_at: now,
            };
            directory::insert_group_row(&mut tx, &row).await?;
            audit::append(
                &mut tx,
                now,
                Record {
                    tenant_id: &tenant.id,
                    actor: &actor,
                    action: "group.create",
                    target_kind: "group",
                    target_id: &gid,
                    summary: json!({"name": group}),
                    meta: &meta,
                },
            )
            .await?;
            for m in *members {
                let uid = &ids[m];
                directory::insert_membership(
                    &mut tx,
                    &tenant.id,
                    &gid,
                    uid,
                    now,
                    directory::MemberSource::Local,
                )
                .await?;
                audit::append(
                    &mut tx,
                    now,
                    Record {
                        tenant_id: &tenant.id,
                        actor: &actor,
                        action: "group.member_add",
                        target_kind: "group",
                        target_id: &gid,
                        summary: json!({"group": group, "user_id": uid, "username": m}),
                        meta: &meta,
                    },
                )
                .await?;
            }
        }
        for (project, parent) in t.projects {
            let pid = new_id();
            let parent_id = parent.and_then(|p| project_ids.get(p).cloned());
            directory::insert_project_row(
                &mut tx,
                &pid,
                &tenant.id,
                project,
                "",
                parent_id.as_deref(),
                now,
            )
            .await?;
            audit::append(
                &mut tx,
                now,
                Record {
                    tenant_id: &tenant.id,
                    actor: &actor,
                    action: "project.create",
                    target_kind: "project",
                    target_id: &pid,
                    summary: json!({"name": project, "parent_id": parent_id}),
                    meta: &meta,
                },
            )
            .await?;
            project_ids.insert(*project, pid);
        }
        tx.commit().await?;
        people.insert(t.slug, (tenant, ids));
    }
    seed_scheduling(store, &people, &meta).await?;
    catalog::seed_catalog(store, &people, &meta).await?;
    seed_history(store).await?;
    Ok(true)
}

type People = std::collections::HashMap<
    &'static str,
    (
        app::model::Tenant,
        std::collections::HashMap<&'static str, String>,
    ),
>;

/// A principal for a demo user, as if they had signed in.
fn principal(people: &People, tenant: &str, username: &str) -> anyhow::Result<Principal> {
    let (t, ids) = people
        .get(tenant)
        .ok_or_else(|| anyhow::anyhow!("demo: no tenant {tenant}"))?;
    let def = TENANTS
        .iter()
        .find(|d| d.slug == tenant)
        .and_then(|d| d.users.iter().find(|u| u.0 == username))
        .ok_or_else(|| anyhow::anyhow!("demo: no user {username}"))?;
    Ok(Principal {
        me: Me {
            user_id: ids[username].clone(),
            username: username.into(),
            display_name: def.1.into(),
            email: None,
            tenant_id: t.id.clone(),
            tenant_slug: t.slug.clone(),
            tenant_name: t.name.clone(),
            is_platform_admin: def.3,
            is_tenant_admin: def.2,
        },
        auth: Auth::Token {
            token_id: "demo-seed".into(),
        },
    })
}

fn nodes(prefix: &str, count: u32, gpus: u32, model: &str, memory_mb: u32) -> Vec<PoolNode> {
    (1..=count)
        .map(|i| PoolNode {
            name: format!("{prefix}-{i}"),
            gpus,
            gpu_model: model.into(),
            gpu_memory_mb: memory_mb,
            cpu_cores: 96,
            memory_mb: 1_048_576,
        })
        .collect()
}

fn job(queue_id: &str, name: &str, gpu_milli: i64, duration_ms: i64) -> SubmitJob {
    SubmitJob {
        queue_id: queue_id.into(),
        name: name.into(),
        command: format!("python train.py --run {name} --resume-from $SWITCHYARD_CHECKPOINT_DIR"),
        gpu_milli: Some(gpu_milli),
        duration_ms: Some(duration_ms),
        abort: Some(AbortSpec {
            kind: "bash".into(),
            command: "kill -USR1 $SWITCHYARD_JOB_PID; sleep 2 # the trainer saves a checkpoint"
                .into(),
            timeout_ms: Some(30_000),
        }),
        checkpoint_dir: Some("ckpt".into()),
        ..Default::default()
    }
}

/// Pools, profiles, policies, queues and jobs: acme's research group borrows idle GPUs on the
/// shared pool and spills over to acme's own pool, data engineering waits at its quota, and
/// [`reclaim_later`] makes inference take its reservation back (a live preemption).
async fn seed_scheduling(store: &Store, people: &People, meta: &RequestMeta) -> anyhow::Result<()> {
    use crate::policy as res;
    use crate::scheduler::jobs;
    let err = |e: crate::http::error::ApiError| anyhow::anyhow!("demo seed: {:?}", e.0);
    let root = principal(people, "platform", "root")?;
    let alice = principal(people, "acme", "alice")?;
    let erin = principal(people, "globex", "erin")?;
    let shared = res::create_pool(
        store,
        &root,
        meta,
        CreatePool {
            name: "h100-shared".into(),
            executor: "simulated".into(),
            nodes: nodes("h100", 2, 8, "H100-80GB", 81920),
            gpu_hour_cost_cents: 350,
            shared: true,
        },
        false,
    )
    .await
    .map_err(err)?;
    let own = res::create_pool(
        store,
        &alice,
        meta,
        CreatePool {
            name: "acme-a100".into(),
            executor: "simulated".into(),
            nodes: nodes("a100", 1, 4, "A100-40GB", 40960),
            gpu_hour_cost_cents: 180,
            shared: false,
        },
        false,
    )
    .await
    .map_err(err)?;
    // What each tenant may reserve on the shared pool (its 16 GPUs, all granted).
    for (tenant, grant) in [(&alice, 14_000), (&erin, 2_000)] {
        crate::policy::grants::set(store, &root, meta, &shared.id, tenant.tenant_id(), grant)
            .await
            .map_err(err)?;
    }
    let group_id = |tenant: &str, name: &str| {
        let tenant = tenant.to_string();
        let name = name.to_string();
        async move {
            sqlx::query_scalar::<_, String>("SELECT g.id FROM groups g JOIN tenants t ON t.id = g.tenant_id WHERE t.slug = $1 AND g.name = $2")
                .bind(tenant)
                .bind(name)
                .fetch_one(&store.pool)
                .await
        }
    };
    let mut queues = std::collections::HashMap::new();
    for (who, tenant, group, reservation, limit, weight, borrow, queue, profile, pools) in [
        (
            &alice,
            "acme",
            "ml-research",
            8000,
            16000,
            2,
            true,
            "train",
            (0, 125, 8000),
            vec![shared.id.clone(), own.id.clone()],
        ),
        (
            &alice,
            "acme",
            "inference",
            6000,
            8000,
            1,
            true,
            "serve",
            (1000, 0, 0),
            vec![shared.id.clone()],
        ),
        (
            &alice,
            "acme",
            "data-eng",
            2000,
            2000,
            1,
            false,
            "etl",
            (1000, 0, 0),
            vec![own.id.clone()],
        ),
        (
            &erin,
            "globex",
            "research",
            2000,
            8000,
            1,
            true,
            "forecast",
            (0, 125, 8000),
            vec![shared.id.clone()],
        ),
    ] {
        let gid = group_id(tenant, group).await?;
        let policy = res::set_policy(
            store,
            who,
            meta,
            SetPolicy {
                group_id: gid,
                reservation_milli: reservation,
                limit_milli: limit,
                over_quota_weight: weight,
                over_quota_allowed: borrow,
                exceed_users: Vec::new(),
                pools: None,
            },
        )
        .await
        .map_err(err)?;
        let (fixed, min, max) = profile;
        let profile = res::create_profile(
            store,
            who,
            meta,
            CreateProfile {
                name: format!("{queue}-profile"),
                gpu_milli: fixed,
                min_gpu_milli: (fixed == 0).then_some(min),
                max_gpu_milli: (fixed == 0).then_some(max),
                ..Default::default()
            },
        )
        .await
        .map_err(err)?;
        let q = res::create_queue(
            store,
            who,
            meta,
            CreateQueue {
                name: queue.into(),
                policy_id: policy.id,
                profile_id: profile.id,
                pools,
                over_quota: borrow,
                classes: None,
                min_runtime_ms: None,
            },
        )
        .await
        .map_err(err)?;
        queues.insert(queue, q.id);
    }
    let hour = 3_600_000;
    let bob = principal(people, "acme", "bob")?;
    let carol = principal(people, "acme", "carol")?;
    let dan = principal(people, "acme", "dan")?;
    let frank = principal(people, "globex", "frank")?;
    let mut submit = Vec::new();
    for i in 1..=14 {
        submit.push((
            &bob,
            job(
                &queues["train"],
                &format!("resnet-sweep-{i:02}"),
                1000,
                hour,
            ),
        ));
    }
    submit.push((&bob, job(&queues["train"], "tokenizer-check", 500, 20_000)));
    for i in 1..=2 {
        submit.push((
            &carol,
            job(
                &queues["serve"],
                &format!("llama-serve-{i}"),
                1000,
                4 * hour,
            ),
        ));
    }
    for i in 1..=3 {
        submit.push((
            &dan,
            job(&queues["etl"], &format!("embed-batch-{i}"), 1000, hour),
        ));
    }
    submit.push((
        &frank,
        job(&queues["forecast"], "demand-forecast", 1000, hour),
    ));
    for (who, j) in submit {
        jobs::submit(store, who, meta, j, Default::default(), None)
            .await
            .map_err(err)?;
    }
    Ok(())
}

/// Half a minute after the demo starts, inference asks for 4 more GPUs within its reservation
/// while research is borrowing: the scheduler preempts research's over-quota jobs (abort
/// callback, checkpoint, requeue), which the Policy Manager shows as it happens.
pub fn reclaim_later(store: Store, after: std::time::Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let meta = RequestMeta {
            source_ip: "local".into(),
            request_id: "demo-reclaim".into(),
        };
        let result: anyhow::Result<()> = async {
            let row = sqlx::query("SELECT u.id, u.tenant_id, t.slug, t.name FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE t.slug = 'acme' AND u.username = 'carol'")
                .fetch_one(&store.pool)
                .await?;
            use sqlx::Row;
            let carol = Principal {
                me: Me {
                    user_id: row.try_get("id")?,
                    username: "carol".into(),
                    display_name: "Carol Diaz".into(),
                    email: None,
                    tenant_id: row.try_get("tenant_id")?,
                    tenant_slug: row.try_get("slug")?,
                    tenant_name: row.try_get("name")?,
                    is_platform_admin: false,
                    is_tenant_admin: false,
                },
                auth: Auth::Token { token_id: "demo".into() },
            };
            let queue: String = sqlx::query_scalar("SELECT id FROM queues WHERE tenant_id = $1 AND name = 'serve'")
                .bind(carol.tenant_id())
                .fetch_one(&store.pool)
                .await?;
            for i in 3..=6 {
                crate::scheduler::jobs::submit(&store, &carol, &meta, job(&queue, &format!("llama-serve-{i}"), 1000, 4 * 3_600_000), Default::default(), None)
                    .await
                    .map_err(|e| anyhow::anyhow!("{:?}", e.0))?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "demo: the delayed reclaim did not run");
        } else {
            tracing::info!("demo: inference reclaims its reserved GPUs now");
        }
    });
}

/// The demo's past week of scheduling history, invented (the samples are marked generated and
/// the history page says so), so that a fresh demo's charts are not empty for their first
/// hours. What it looks like is `scheduler::history::generated`'s.
async fn seed_history(store: &Store) -> anyhow::Result<()> {
    use crate::scheduler::history::generated::{invented_week, DemoIds};
    let ids = |sql: &'static str| async move {
        let rows: Vec<(String, String)> = sqlx::query_as(sql).fetch_all(&store.pool).await?;
        Ok::<_, sqlx::Error>(
            rows.into_iter()
                .collect::<std::collections::HashMap<_, _>>(),
        )
    };
    let (pools, tenants) = (
        ids("SELECT name, id FROM pools").await?,
        ids("SELECT slug, id FROM tenants").await?,
    );
    let groups = ids(
        "SELECT t.slug || '/' || g.name, g.id FROM groups g JOIN tenants t ON t.id = g.tenant_id",
    )
    .await?;
    let queues = ids(
        "SELECT t.slug || '/' || q.name, q.id FROM queues q JOIN tenants t ON t.id = q.tenant_id",
    )
    .await?;
    let all = [&pools, &tenants, &groups, &queues];
    let id = |i: usize, k: &str| {
        all[i]
            .get(k)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("demo history: no {k}"))
    };
    let team = |t: &str, g: &str, q: &str| -> anyhow::Result<(String, String, String)> {
        Ok((
            id(1, t)?,
            id(2, &format!("{t}/{g}"))?,
            id(3, &format!("{t}/{q}"))?,
        ))
    };
    let ids = DemoIds {
        shared: id(0, "h100-shared")?,
        a100: id(0, "acme-a100")?,
        research: team("acme", "ml-research", "train")?,
        inference: team("acme", "inference", "serve")?,
        etl: team("acme", "data-eng", "etl")?,
        forecast: team("globex", "research", "forecast")?,
    };
    let mut tx = store.begin_write().await?;
    crate::scheduler::history::write(&mut tx, &invented_week(&ids, store.now())).await?;
    tx.commit().await?;
    Ok(())
}
