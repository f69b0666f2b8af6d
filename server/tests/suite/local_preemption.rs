//! Preemption of a real local process, end to end: a borrowing job's abort callback runs once
//! and writes its checkpoint, the job's whole process group ends, the job goes back to the
//! queue, the reclaiming group's job runs, and the preempted job resumes with
//! `resume_count + 1` and finds its checkpoint.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, job, profile, states, submit, Setup};

both_stores!(a_preempted_local_process_checkpoints_ends_and_resumes_from_its_checkpoint);

/// The borrowing job: on start it records the resume count and the checkpoint it found (in
/// `starts.log` and its output), then counts steps into `current_step`, from the checkpoint's
/// step when there is one. The first attempt counts until it is stopped (bounded, so a failed
/// test leaves nothing running for long); a resumed one stops 5 steps later.
const TRAINER: &str = r#"ck="$SWITCHYARD_CHECKPOINT_DIR/step"
if [ -f "$ck" ]; then found=$(cat "$ck"); else found=none; fi
echo "resume=$SWITCHYARD_RESUME_COUNT found=$found pid=$$" >> starts.log
echo "resume=$SWITCHYARD_RESUME_COUNT found=$found"
step=0
if [ "$found" != none ]; then step=$found; fi
last=$((step + 1200))
if [ "$SWITCHYARD_RESUME_COUNT" -gt 0 ]; then last=$((step + 5)); fi
while [ "$step" -lt "$last" ]; do
  step=$((step + 1))
  echo "$step" > current_step.tmp && mv -f current_step.tmp current_step
  sleep 0.1
done
echo "finished at step $step""#;

/// The trainer's abort callback: records that it ran, waits (bounded) until the test has seen
/// the job `preempting`, then saves the current step into the checkpoint folder.
const SAVE: &str = r#"echo "$SWITCHYARD_STOP_REASON attempt=$SWITCHYARD_RESUME_COUNT" >> callback_runs
i=0
while [ ! -e release_callback ] && [ "$i" -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
cat current_step > "$SWITCHYARD_CHECKPOINT_DIR/step.tmp" && mv -f "$SWITCHYARD_CHECKPOINT_DIR/step.tmp" "$SWITCHYARD_CHECKPOINT_DIR/step""#;

/// The reclaiming job: runs until the test lets it finish (bounded).
const RECLAIMER: &str = r#"i=0
while [ ! -e release_b ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
echo b-done"#;

/// How long any one wait of this test may take.
const WAIT: Duration = Duration::from_secs(20);

/// Polls `check` (every 50 ms, `WAIT` at most) until it returns a value; panics with `what`
/// and the last observation otherwise.
async fn poll<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => {
                panic!(
                    "timed out after {} s waiting for {what}; last seen: {last}",
                    WAIT.as_secs()
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Waits for the job's state (`WAIT` at most) and returns its detail.
async fn wait_job_state(app: &TestApp, token: &str, job_id: &str, state: &str) -> Value {
    poll(&format!("job {job_id} to be {state}"), || async {
        let d = job(app, token, job_id).await;
        if d["job"]["state"] == state {
            Ok(d)
        } else {
            Err(d.to_string())
        }
    })
    .await
}

/// The live (not zombie) processes of process group `pgid`, read from `/proc`.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.get(stat.rfind(')')? + 1..)?.to_string();
                    let fields: Vec<&str> = rest.split_whitespace().collect();
                    let state = fields.first()?.chars().next()?;
                    let pgrp: u32 = fields.get(2)?.parse().ok()?;
                    Some(pgrp == pgid && state != 'Z' && state != 'X')
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .get(stat.rfind(')')? + 1..)?
                .split_whitespace()
                .next()?
                .chars()
                .next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn lines(path: &Path) -> Vec<String> {
    read(path).lines().map(str::to_string).collect()
}

fn number(path: &Path) -> Option<u64> {
    read(path).trim().parse().ok()
}

async fn a_preempted_local_process_checkpoints_ends_and_resumes_from_its_checkpoint(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let pool_id = crate::local_jobs::local_pool(&app, &tenant_id, 1, 1000).await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    // Vision reserves nothing but may borrow the idle GPU; nlp reserves it.
    let qa = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 0, "limit_milli": 1000, "over_quota_weight": 1}),
        &one,
        &[&pool_id],
        true,
    )
    .await;
    let qb = group_queue(
        &app,
        &s,
        "nlp",
        json!({"reservation_milli": 1000, "limit_milli": 1000, "over_quota_weight": 1}),
        &one,
        &[&pool_id],
        false,
    )
    .await;
    let jobs_dir = app.jobs_dir.as_ref().unwrap().path().to_path_buf();
    let dir_of = |job_id: &str| -> PathBuf { jobs_dir.join(job_id) };

    // The trainer borrows the idle GPU and works.
    let a = submit(
        &app,
        &s.member,
        json!({"queue_id": qa, "name": "trainer", "command": TRAINER, "checkpoint_dir": "ckpt",
               "abort": {"kind": "bash", "command": SAVE, "timeout_ms": 30000}}),
    )
    .await;
    let a_dir = dir_of(&a);
    let running = wait_job_state(&app, &s.member, &a, "running").await;
    assert_eq!(running["job"]["over_quota"], true, "it borrows: {running}");
    assert_eq!(running["job"]["resume_count"], 0, "{running}");
    poll("the trainer to reach step 3", || async {
        match number(&a_dir.join("current_step")) {
            Some(n) if n >= 3 => Ok(()),
            other => Err(format!(
                "step {other:?}; output: {}",
                read(&a_dir.join("output.log"))
            )),
        }
    })
    .await;
    let first_start = lines(&a_dir.join("starts.log"));
    assert_eq!(first_start.len(), 1, "{first_start:?}");
    assert!(
        first_start[0].starts_with("resume=0 found=none pid="),
        "the first attempt finds no checkpoint: {first_start:?}"
    );
    let job_pid: u32 = first_start[0]
        .rsplit("pid=")
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {first_start:?}"));
    let wrapper = read(&a_dir.join("wrapper_pid"));
    let mut parts = wrapper.split_whitespace();
    let pgid: u32 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("wrapper_pid holds no pid: {wrapper:?}"));
    assert_eq!(parts.next(), Some("0"), "the first attempt: {wrapper:?}");
    assert!(
        alive(job_pid) && group_members(pgid).contains(&job_pid),
        "the job's shell {job_pid} runs in the wrapper's group {pgid}: {:?}",
        group_members(pgid)
    );

    // Nlp wants its reserved GPU: the trainer is preempted. Its callback holds the stop until
    // the test has seen it `preempting`, with its processes still there and nlp's job waiting.
    let b = submit(
        &app,
        &s.admin,
        json!({"queue_id": qb, "name": "reclaimer", "command": RECLAIMER}),
    )
    .await;
    let b_dir = dir_of(&b);
    let preempting = wait_job_state(&app, &s.member, &a, "preempting").await;
    assert_eq!(preempting["job"]["stop_reason"], "preempt", "{preempting}");
    poll("the abort callback to start", || async {
        let runs = lines(&a_dir.join("callback_runs"));
        if runs.is_empty() {
            Err("no callback run recorded".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    assert!(
        group_members(pgid).contains(&job_pid),
        "the job still runs while its callback checkpoints: {:?}",
        group_members(pgid)
    );
    let waiting = job(&app, &s.admin, &b).await;
    assert_eq!(
        waiting["job"]["state"], "queued",
        "the reclaimer waits for the GPU until the stop ends: {waiting}"
    );
    std::fs::write(a_dir.join("release_callback"), "").unwrap();

    // The trainer is requeued; the reclaimer gets the GPU.
    let requeued = poll("the trainer requeued with resume_count 1", || async {
        let d = job(&app, &s.member, &a).await;
        if d["job"]["resume_count"] == 1 {
            Ok(d)
        } else {
            Err(d.to_string())
        }
    })
    .await;
    let b_running = wait_job_state(&app, &s.admin, &b, "running").await;
    assert_eq!(b_running["job"]["over_quota"], false, "{b_running}");
    let d = job(&app, &s.member, &a).await;
    assert_eq!(
        d["job"]["state"], "queued",
        "the trainer waits in the queue while the reclaimer runs: {d}"
    );
    assert_eq!(d["job"]["resume_count"], 1, "{d}");
    let st = states(&requeued);
    assert_eq!(
        st,
        [
            "queued",
            "admitted",
            "starting",
            "running",
            "preempting",
            "preempted",
            "queued"
        ]
        .map(String::from),
        "{requeued}"
    );
    let events = requeued["events"].as_array().unwrap();
    let event = |to: &str| {
        events
            .iter()
            .find(|e| e["to_state"] == to)
            .unwrap_or_else(|| panic!("no {to} event: {requeued}"))["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let preempted = event("preempted");
    assert!(
        preempted.contains("abort callback finished"),
        "the callback succeeded: {preempted}"
    );
    let back = events.last().unwrap()["detail"].as_str().unwrap();
    assert!(
        back.contains("from its checkpoint") && back.contains("attempt 2"),
        "{back}"
    );
    let runs = lines(&a_dir.join("callback_runs"));
    assert_eq!(
        runs,
        ["preempt attempt=0"],
        "the abort callback ran exactly once, for the preemption of the first attempt"
    );
    let saved = number(&a_dir.join("ckpt").join("step")).unwrap_or_else(|| {
        panic!(
            "the callback saved no step in the checkpoint folder; output: {}",
            read(&a_dir.join("output.log"))
        )
    });
    assert!(saved >= 3, "the checkpoint holds the step reached: {saved}");
    assert_eq!(
        group_members(pgid),
        Vec::<u32>::new(),
        "no process of the first attempt's group {pgid} is left"
    );
    assert!(!alive(pgid), "the first attempt's wrapper {pgid} is gone");
    assert!(
        !alive(job_pid),
        "the first attempt's shell {job_pid} is gone"
    );
    let stopped_at = number(&a_dir.join("current_step"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        number(&a_dir.join("current_step")),
        stopped_at,
        "nothing of the first attempt counts steps any more"
    );

    // The reclaimer finishes; the trainer resumes, finds its checkpoint and finishes.
    std::fs::write(b_dir.join("release_b"), "").unwrap();
    wait_job_state(&app, &s.admin, &b, "succeeded").await;
    let resumed = wait_job_state(&app, &s.member, &a, "succeeded").await;
    assert_eq!(resumed["job"]["resume_count"], 1, "{resumed}");
    let starts = lines(&a_dir.join("starts.log"));
    assert_eq!(starts.len(), 2, "two attempts started: {starts:?}");
    assert!(
        starts[1].starts_with(&format!("resume=1 found={saved} pid=")),
        "the second attempt found the checkpoint step {saved}: {starts:?}"
    );
    let output = read(&a_dir.join("output.log"));
    assert!(
        output.contains(&format!("resume=1 found={saved}\n"))
            && output.contains(&format!("finished at step {}", saved + 5)),
        "the resumed attempt continued from step {saved}: {output}"
    );
    assert_eq!(
        lines(&a_dir.join("callback_runs")).len(),
        1,
        "no further callback ran"
    );
    let tail = states(&resumed);
    assert_eq!(
        tail[tail.len() - 4..],
        ["admitted", "starting", "running", "succeeded"].map(String::from),
        "{resumed}"
    );
    app.finish().await;
}
