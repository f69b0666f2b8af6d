//! What keeps a local job away from the control plane: it runs as an unprivileged user and
//! group (never as the server's own user when the server is root), with a clean environment
//! (nothing of the server's, only `PATH`, `HOME`, `LANG` and the job's own variables), in a
//! private folder (`0700`, owned by the job user) under a jobs root others cannot list (`0711`).
//! Checkpoint paths are relative and stay inside the job's folder. The SQLite database is kept
//! `0600` by the store, so the job user cannot read it.
//!
//! Not isolated (documented in the README): the job shares the host's network, process list and
//! world-readable files; use a dedicated host (or the node agent, later) for untrusted code.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};

/// The unprivileged user and group a local job runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobUser {
    pub uid: u32,
    pub gid: u32,
}

/// The `PATH` a job starts with.
pub const JOB_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The real user id of this process, from `/proc/self/status` (no unsafe code needed).
pub fn current_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Real, effective, saved, filesystem: the effective one decides what we may do.
    line.split_whitespace().nth(2)?.parse().ok()
}

/// How the server can run local jobs as `user`: switching to it needs root; a server already
/// running as that user needs no switch. `Err` says why local jobs cannot run.
pub fn plan(user: JobUser) -> Result<Option<JobUser>, String> {
    match current_uid() {
        Some(0) if user.uid == 0 => Err(
            "job_uid is 0: local jobs must not run as root; set job_uid/job_gid to an unprivileged user".into(),
        ),
        Some(0) => Ok(Some(user)),
        Some(uid) if uid == user.uid => Ok(None),
        Some(uid) => Err(format!(
            "local jobs run as uid {} but the server runs as uid {uid} and cannot switch users; run the server as root or set job_uid to {uid} on a host dedicated to jobs",
            user.uid
        )),
        None => Err("cannot read this process's user id from /proc".into()),
    }
}

/// Whether a job's checkpoint path is relative and cannot leave the job's folder: no root, no
/// `..`, no `.` tricks, no empty parts, no NUL.
pub fn checkpoint_path_ok(p: &str) -> bool {
    if p.is_empty() || p.len() > 1000 || p.contains('\0') {
        return false;
    }
    let path = Path::new(p);
    path.components().count() > 0 && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The environment a job and its abort callback start from, before their own variables.
pub fn base_env(dir: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("PATH".into(), JOB_PATH.into()),
        ("HOME".into(), dir.as_os_str().to_owned()),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// Makes `root` traversable but not listable by others (`0711`) when this process owns it, so a
/// job user can enter its own folder without seeing the others.
pub fn prepare_root(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))
}

/// Gives a job's folder (or a folder inside it) to the job user, readable by it alone.
pub fn hand_over(path: &Path, user: Option<JobUser>) -> std::io::Result<()> {
    if let Some(u) = user {
        std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_paths_stay_inside_the_job_folder() {
        for ok in ["ckpt", "out/ckpt", "a.b/c-d_e"] {
            assert!(checkpoint_path_ok(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc",
            "/",
            "..",
            "../other-job",
            "ckpt/../../x",
            "./ckpt",
            "a\0b",
        ] {
            assert!(!checkpoint_path_ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn root_never_runs_jobs_as_root() {
        if current_uid() == Some(0) {
            assert!(plan(JobUser { uid: 0, gid: 0 }).is_err());
            assert_eq!(
                plan(JobUser {
                    uid: 65534,
                    gid: 65534
                }),
                Ok(Some(JobUser {
                    uid: 65534,
                    gid: 65534
                }))
            );
        } else {
            let me = current_uid().expect("uid");
            assert_eq!(plan(JobUser { uid: me, gid: 0 }), Ok(None));
            assert!(plan(JobUser {
                uid: me + 1,
                gid: 0
            })
            .is_err());
        }
    }
}
