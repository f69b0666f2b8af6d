//! The seeded pools and groups, and the load: submits (retried with their idempotency key
//! until a 201 answers them), reclaiming jobs and aborts, in rounds between kills.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::common::TestApp;
use crate::jobs::{group_queue, id, node, pool, profile, Setup};

/// A shared local pool of 4 GPUs granted to the tenant, a simulated pool of 2; the member's
/// `vision` group (1 GPU reserved, may borrow up to 4, on both pools) and the `nlp` group
/// (3 GPUs reserved on the local pool, which it reclaims by preempting vision's borrowers).
pub(super) async fn seed(app: &TestApp, s: &Setup, tenant_id: &str) -> (String, String) {
    let root = app.seed_platform_admin().await;
    let p = app
        .post(
            "/api/v1/pools",
            &root,
            json!({"name": "here", "executor": "local", "shared": true, "nodes": [node("localhost", 4)]}),
        )
        .await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.text);
    let local = id(&p.body);
    let g = app
        .call(
            axum::http::Method::PUT,
            &format!("/api/v1/pools/{local}/grants/{tenant_id}"),
            Some(&root),
            Some(json!({ "reservation_milli": 4000 })),
        )
        .await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text);
    let sim = pool(app, s, "sim", "simulated", json!([node("s1", 2)])).await;
    let flex = profile(
        app,
        s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 2000}),
    )
    .await;
    let vision = group_queue(
        app,
        s,
        "vision",
        json!({"reservation_milli": 1000, "limit_milli": 6000, "over_quota_weight": 1}),
        &flex,
        &[&local, &sim],
        true,
    )
    .await;
    let nlp = group_queue(
        app,
        s,
        "nlp",
        json!({"reservation_milli": 3000, "limit_milli": 3000, "over_quota_weight": 1}),
        &flex,
        &[&local],
        false,
    )
    .await;
    (vision, nlp)
}

/// A submit and what became of it.
#[derive(Clone)]
pub(super) struct Submit {
    key: String,
    token: String,
    body: Value,
}

#[derive(Default)]
pub(super) struct Book {
    /// Submits not answered yet (sent or about to be): retried with the same key.
    pub(super) pending: BTreeMap<String, Submit>,
    /// Key → the job id a 201 answered with.
    pub(super) answered: HashMap<String, String>,
    /// Keys whose retry was answered as a replay.
    pub(super) replayed: usize,
    pub(super) aborts: usize,
    /// Non-201 answers that were not connection failures (status, body).
    pub(super) refused: Vec<String>,
}

pub(super) struct Load {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) book: Arc<Mutex<Book>>,
    pub(super) member: String,
    pub(super) admin: String,
    pub(super) vision: String,
    pub(super) nlp: String,
    pub(super) callbacks: PathBuf,
    pub(super) next: usize,
}

/// The outcome of one request: answered (status, body, replayed) or unknown (no answer).
async fn send_submit(
    http: &reqwest::Client,
    base: &str,
    s: &Submit,
) -> Option<(reqwest::StatusCode, Value, bool)> {
    let r = http
        .post(format!("{base}/api/v1/jobs"))
        .bearer_auth(&s.token)
        .header("Idempotency-Key", &s.key)
        .json(&s.body)
        .send()
        .await
        .ok()?;
    let status = r.status();
    let replayed = r.headers().contains_key("idempotent-replayed");
    let body = r.json::<Value>().await.ok()?;
    Some((status, body, replayed))
}

impl Load {
    /// Sends a submit; it stays pending (to retry) until a 201 answers it.
    async fn submit(&self, s: Submit) {
        self.book
            .lock()
            .unwrap()
            .pending
            .insert(s.key.clone(), s.clone());
        let Some((status, body, replayed)) = send_submit(&self.http, &self.base, &s).await else {
            return;
        };
        let mut book = self.book.lock().unwrap();
        if status == reqwest::StatusCode::CREATED {
            book.pending.remove(&s.key);
            if replayed {
                book.replayed += 1;
            }
            let job_id = body["id"].as_str().unwrap_or_default().to_string();
            if let Some(before) = book.answered.insert(s.key.clone(), job_id.clone()) {
                assert_eq!(before, job_id, "two answers for one key {}", s.key);
            }
        } else if !status.is_server_error() {
            book.pending.remove(&s.key);
            book.refused.push(format!("{status}: {body}"));
        }
    }

    /// Retries every pending submit once.
    pub(super) async fn retry_pending(&self) {
        let pending: Vec<Submit> = self
            .book
            .lock()
            .unwrap()
            .pending
            .values()
            .cloned()
            .collect();
        for s in pending {
            self.submit(s).await;
        }
    }

    /// An abort callback, `bash` or `python`: each run appends `job attempt reason kind` to the
    /// callbacks' log (the checks count the runs per stop); with `save` it also writes the
    /// checkpoint and takes 0.3 s.
    fn callback(&self, python: bool, save: bool) -> Value {
        let log = self.callbacks.to_string_lossy();
        let command = if python {
            let mut code = format!(
                "import os, time\ne = os.environ\nwith open({log:?}, 'a') as f:\n    f.write('%s %s %s python\\n' % (e['SWITCHYARD_JOB_ID'], e['SWITCHYARD_RESUME_COUNT'], e['SWITCHYARD_STOP_REASON']))\n"
            );
            if save {
                code.push_str("with open(os.path.join(e['SWITCHYARD_CHECKPOINT_DIR'], 'saved'), 'w') as f:\n    f.write(e['SWITCHYARD_RESUME_COUNT'] + '\\n')\ntime.sleep(0.3)\n");
            }
            code
        } else {
            let mut code = format!(
                "echo \"$SWITCHYARD_JOB_ID $SWITCHYARD_RESUME_COUNT $SWITCHYARD_STOP_REASON bash\" >> {log}"
            );
            if save {
                code.push_str("; echo \"$SWITCHYARD_RESUME_COUNT\" > \"$SWITCHYARD_CHECKPOINT_DIR/saved\"; sleep 0.3");
            }
            code
        };
        let kind = if python { "python" } else { "bash" };
        json!({"kind": kind, "command": command, "timeout_ms": 5000})
    }

    /// A borrowing job of the member's (local or simulated pool), often preempted.
    fn vision_job(&mut self, python: bool) -> Submit {
        self.next += 1;
        let key = format!("v-{}", self.next);
        Submit {
            key: key.clone(),
            token: self.member.clone(),
            body: json!({"queue_id": self.vision, "name": key, "command": "sleep 1", "gpu_milli": 1000,
                "duration_ms": 1000, "checkpoint_dir": "ckpt", "abort": self.callback(python, true)}),
        }
    }

    /// A reclaiming job (local pool).
    fn nlp_job(&mut self, python: bool) -> Submit {
        self.next += 1;
        let key = format!("n-{}", self.next);
        Submit {
            key: key.clone(),
            token: self.admin.clone(),
            body: json!({"queue_id": self.nlp, "name": key, "command": "sleep 0.4", "gpu_milli": 1000,
                "abort": self.callback(python, false)}),
        }
    }

    /// A job (local pool) that runs far longer than its maximum runtime of `limit_ms`: the
    /// driver stops it (its callback runs) and it ends `failed`, unless aborted first. The
    /// checks know these jobs by the `r-` of their name.
    fn limited_job(&mut self, python: bool, limit_ms: i64) -> Submit {
        self.next += 1;
        let key = format!("r-{}", self.next);
        Submit {
            key: key.clone(),
            token: self.admin.clone(),
            body: json!({"queue_id": self.nlp, "name": key, "command": "sleep 30", "gpu_milli": 500,
                "max_runtime_ms": limit_ms, "abort": self.callback(python, false)}),
        }
    }

    /// Aborts one of the recently answered jobs (whatever its state; 409s are expected).
    async fn abort_one(&self, rng: &mut StdRng) {
        let ids: Vec<String> = {
            let book = self.book.lock().unwrap();
            let mut ids: Vec<&String> = book.answered.values().collect();
            ids.sort();
            ids.iter().rev().take(6).map(|s| s.to_string()).collect()
        };
        if ids.is_empty() {
            return;
        }
        let job = &ids[rng.gen_range(0..ids.len())];
        let sent = self
            .http
            .post(format!("{}/api/v1/jobs/{job}/abort", self.base))
            .bearer_auth(&self.admin)
            .json(&json!({}))
            .send()
            .await;
        if let Ok(r) = sent {
            if r.status() == reqwest::StatusCode::OK {
                self.book.lock().unwrap().aborts += 1;
            }
        }
    }

    /// One round of load: pending retries, two borrowing jobs, sometimes a job with a maximum
    /// runtime of 1 to 2 s, often a reclaiming job, sometimes an abort. Half the abort callbacks
    /// are python, half bash.
    pub(super) async fn round(&mut self, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        self.retry_pending().await;
        for _ in 0..2 {
            let v = self.vision_job(rng.gen_bool(0.5));
            self.submit(v).await;
            tokio::time::sleep(Duration::from_millis(rng.gen_range(10..60))).await;
        }
        // (Before the reclaiming job: a round cut short by the kill still sends it often.)
        if rng.gen_bool(0.4) {
            let r = self.limited_job(rng.gen_bool(0.5), rng.gen_range(1000..=2000));
            self.submit(r).await;
        }
        if rng.gen_bool(0.7) {
            let n = self.nlp_job(rng.gen_bool(0.5));
            self.submit(n).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..60))).await;
        if rng.gen_bool(0.5) {
            self.abort_one(&mut rng).await;
        }
    }
}
