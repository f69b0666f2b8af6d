//! The states and kinds the API speaks, as enums with one checked mapping to their stored and
//! wire text (`as_str` / `parse`). A stored value that no variant names is an error, never a
//! default.

use std::fmt;

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A text that names no variant of an enum (a corrupt stored value, or bad input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
}

impl fmt::Display for UnknownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a {}", self.value, self.kind)
    }
}

impl std::error::Error for UnknownValue {}

/// Declares a text-backed enum: serde, `as_str`, `parse`, `Display` and `ALL` from one table.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "ssr", derive(ToSchema))]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The text stored in the database and sent on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The variant a stored or submitted text names; `None` for anything else.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                $name::parse(s).ok_or_else(|| UnknownValue {
                    kind: stringify!($name),
                    value: s.chars().take(64).collect(),
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum! {
    /// Where a job is in its life. `queued → admitted → starting → running`, then a terminal
    /// state; a running job being stopped is `preempting` (reclaimed, it goes back to `queued`)
    /// or keeps its state with a `stop_reason` while an abort or runtime limit stops it.
    JobState {
        Queued = "queued",
        Admitted = "admitted",
        Starting = "starting",
        Running = "running",
        Preempting = "preempting",
        Preempted = "preempted",
        Succeeded = "succeeded",
        Failed = "failed",
        Aborted = "aborted",
        Lost = "lost",
    }
}

text_enum! {
    /// What a gateway token may call.
    GatewayTokenKind {
        /// Whatever its user may `use` at the time of each request.
        User = "user",
        /// Only the endpoints named (and only while its user may still `use` them).
        Endpoint = "endpoint",
    }
}

impl JobState {
    /// States that hold or wait for capacity.
    pub const LIVE: &'static [JobState] = &[
        JobState::Queued,
        JobState::Admitted,
        JobState::Starting,
        JobState::Running,
        JobState::Preempting,
    ];
    /// States a job never leaves.
    pub const TERMINAL: &'static [JobState] = &[
        JobState::Succeeded,
        JobState::Failed,
        JobState::Aborted,
        JobState::Lost,
    ];

    pub fn is_live(self) -> bool {
        Self::LIVE.contains(&self)
    }

    pub fn is_terminal(self) -> bool {
        Self::TERMINAL.contains(&self)
    }
}

text_enum! {
    /// Why a job is being stopped, or was.
    StopReason {
        Abort = "abort",
        Preempt = "preempt",
        MaxRuntime = "max_runtime",
    }
}

text_enum! {
    /// What runs a pool's jobs.
    ExecutorKind {
        /// No processes: jobs run for a declared time (demos, tests, capacity planning).
        Simulated = "simulated",
        /// Real processes on the server's host, as an unprivileged user.
        Local = "local",
    }
}

text_enum! {
    /// The interpreter of an abort callback.
    AbortKind {
        Bash = "bash",
        Python = "python",
    }
}

text_enum! {
    /// The protocol of an identity provider.
    ProviderKind {
        Oidc = "oidc",
        Saml = "saml",
        Ldap = "ldap",
    }
}

text_enum! {
    /// One of a tenant's audit hash chains: each writer that commits on its own schedule
    /// appends to its own, so their transactions do not wait for each other.
    AuditChain {
        /// Requests, the CLI, sign-in: everything but the scheduler's driver.
        Api = "api",
        /// Lanes of `api` for batch submits on PostgreSQL: a batch takes whichever lane no
        /// other transaction holds, so concurrent batches do not wait for each other.
        Api1 = "api.1",
        Api2 = "api.2",
        Api3 = "api.3",
        /// The scheduler's driver: admissions, preemptions, the executors' reports, job ends.
        Scheduler = "scheduler",
        /// The driver's second lane: the second half of a large cycle's writes, committed
        /// beside the first (PostgreSQL).
        Scheduler1 = "scheduler.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_reads_back_from_its_text() {
        for s in JobState::ALL {
            assert_eq!(JobState::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(JobState::parse("Running"), None);
        assert_eq!(
            StopReason::parse("max_runtime"),
            Some(StopReason::MaxRuntime)
        );
        assert_eq!(ProviderKind::parse("kerberos"), None);
    }

    #[test]
    fn live_and_terminal_do_not_overlap() {
        for s in JobState::ALL {
            assert!(!(s.is_live() && s.is_terminal()), "{s}");
        }
        assert!(!JobState::Preempted.is_live() && !JobState::Preempted.is_terminal());
    }
}
