//! The real `switchyard serve` process, and the job processes it starts, found through `/proc`.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::job_user;

/// Kills the job processes of a jobs folder when dropped (a test that fails leaves none).
pub(super) struct KillJobsOnDrop(pub(super) PathBuf);

impl Drop for KillJobsOnDrop {
    fn drop(&mut self) {
        kill_job_processes(&self.0);
    }
}

/// A job process of this test, found through `/proc` by its `HOME` under the test's jobs folder.
#[derive(Debug)]
pub(crate) struct JobProc {
    pub(crate) pid: u32,
    pub(crate) pgrp: u32,
    pub(crate) job_id: String,
    /// The executor's wrapper (the job's process group leader, `switchyard-job`).
    pub(crate) wrapper: bool,
}

/// Every live (not zombie) process whose `HOME` is a job folder under `jobs_dir`.
pub(crate) fn job_processes(jobs_dir: &Path) -> Vec<JobProc> {
    let home = format!("HOME={}/", jobs_dir.display());
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<String> = environ
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).to_string())
            .collect();
        if !vars.iter().any(|v| v.starts_with(&home)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if matches!(fields.first(), Some(&"Z") | Some(&"X") | Some(&"x") | None) {
            continue;
        }
        let pgrp = fields.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).to_string())
            .collect();
        let job_id = vars
            .iter()
            .find_map(|v| v.strip_prefix("SWITCHYARD_JOB_ID="))
            .unwrap_or_default()
            .to_string();
        out.push(JobProc {
            pid,
            pgrp,
            job_id,
            // (Its leader: a child it forked shows its command line until it execs.)
            wrapper: pgrp == pid && args.get(3).is_some_and(|a| a == "switchyard-job"),
        });
    }
    out
}

/// SIGKILL to every job process of `jobs_dir` and their groups, until none is left (2 s at most).
pub(crate) fn kill_job_processes(jobs_dir: &Path) {
    for _ in 0..40 {
        let procs = job_processes(jobs_dir);
        if procs.is_empty() {
            return;
        }
        for p in procs {
            for target in [format!("-{}", p.pgrp), p.pid.to_string()] {
                let _ = Command::new("kill")
                    .args(["-s", "KILL", "--", &target])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The real `switchyard serve` on the test's database and jobs folder. Dropping it kills the
/// server and every job process it left, so nothing outlives the test, even when it fails.
pub(crate) struct RealServer {
    child: Option<Child>,
    url: String,
    pub(crate) addr: String,
    pub(crate) jobs_dir: PathBuf,
    log: PathBuf,
    pub(crate) starts: usize,
}

impl RealServer {
    pub(crate) fn new(url: &str, jobs_dir: &Path, log: &Path) -> RealServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        RealServer {
            child: None,
            url: url.to_string(),
            addr: format!("127.0.0.1:{port}"),
            jobs_dir: jobs_dir.to_path_buf(),
            log: log.to_path_buf(),
            starts: 0,
        }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts the server and waits until `/readyz` answers 200 (30 s at most).
    pub(crate) async fn start(&mut self, http: &reqwest::Client) {
        assert!(self.child.is_none(), "the server is already running");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let (uid, gid) = job_user();
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("--database-url")
            .arg(&self.url)
            .arg("serve")
            .arg("--listen")
            .arg(&self.addr)
            .arg("--jobs-dir")
            .arg(&self.jobs_dir)
            .arg("--allow-local-pools=true")
            .arg("--job-uid")
            .arg(uid.to_string())
            .arg("--job-gid")
            .arg(gid.to_string())
            .args(["--scheduler-tick-ms", "100"])
            .args(["--min-runtime-ms", "0"])
            .args(["--stop-grace-ms", "500"])
            .args(["--sim-checkpoint-ms", "50"])
            .args(["--log-format", "text"])
            .env_remove("DATABASE_URL")
            .env_remove("SWITCHYARD_CONFIG")
            .env("RUST_LOG", "info,sqlx=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/readyz", self.base());
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status() == reqwest::StatusCode::OK {
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the server exited ({status}) before it was ready:\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                panic!("the server was not ready in 30 s:\n{}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL to the server (its jobs go on running, as after a real crash).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        self.kill();
        kill_job_processes(&self.jobs_dir);
    }
}
