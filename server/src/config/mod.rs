//! Configuration: command-line flags, then `SWITCHYARD_*` environment variables (and
//! `DATABASE_URL`), then an optional TOML file (`--config`), then defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

mod ipnet;
pub use ipnet::IpNet;

/// Settings shared by `serve` and `admin`.
#[derive(Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// TOML file with any of the settings below (flags and environment win over it).
    #[arg(long, env = "SWITCHYARD_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// `sqlite://data/switchyard.db` (default) or `postgres://user@host:5432/db`.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:3000].
    #[arg(long, env = "SWITCHYARD_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Folder with the built site (`pkg/`, assets) [default: target/site].
    #[arg(long, env = "SWITCHYARD_SITE_ROOT")]
    pub site_root: Option<String>,
    /// The URL users reach Switchyard at; `https://…` makes session cookies `Secure`.
    #[arg(long, env = "SWITCHYARD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Lifetime of a browser session in hours [default: 12].
    #[arg(long, env = "SWITCHYARD_SESSION_TTL_HOURS")]
    pub session_ttl_hours: Option<i64>,
    /// Seed a demo platform (tenants, users, groups, projects) into an empty database.
    #[arg(long, env = "SWITCHYARD_DEMO", num_args = 0..=1, default_missing_value = "true")]
    pub demo: Option<bool>,
    /// `json` (default) or `text`.
    #[arg(long, env = "SWITCHYARD_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Largest accepted request body in bytes [default: 1048576].
    #[arg(long, env = "SWITCHYARD_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Take the client address from `X-Forwarded-For` (only behind a trusted proxy).
    #[arg(long, env = "SWITCHYARD_TRUST_FORWARDED_FOR", num_args = 0..=1, default_missing_value = "true")]
    pub trust_forwarded_for: Option<bool>,
    /// Scheduler: a cycle at least this often, in ms, besides the ones changes trigger [default: 1000].
    #[arg(long, env = "SWITCHYARD_SCHEDULER_TICK_MS")]
    pub scheduler_tick_ms: Option<u64>,
    /// Scheduler: over-quota jobs younger than this are not preempted, in ms [default: 10000].
    #[arg(long, env = "SWITCHYARD_MIN_RUNTIME_MS")]
    pub min_runtime_ms: Option<i64>,
    /// Scheduler: an in-quota multi-GPU job that has waited this long gets a node held for it so
    /// smaller jobs cannot starve it, in ms; 0 turns holding off [default: 300000].
    #[arg(long, env = "SWITCHYARD_HOLD_AFTER_MS")]
    pub hold_after_ms: Option<i64>,
    /// Scheduler history: how often the leader samples allocation, queue depth and waits for
    /// the history charts, in ms [default: 60000].
    #[arg(long, env = "SWITCHYARD_HISTORY_SAMPLE_MS")]
    pub history_sample_ms: Option<i64>,
    /// Local pools: time between SIGTERM and SIGKILL when a job is stopped, in ms [default: 10000].
    #[arg(long, env = "SWITCHYARD_STOP_GRACE_MS")]
    pub stop_grace_ms: Option<i64>,
    /// Simulated pools: how long a job's abort callback takes to checkpoint, in ms [default: 2000].
    #[arg(long, env = "SWITCHYARD_SIM_CHECKPOINT_MS")]
    pub sim_checkpoint_ms: Option<i64>,
    /// Local pools: folder for each job's working directory and output [default: data/jobs].
    #[arg(long, env = "SWITCHYARD_JOBS_DIR")]
    pub jobs_dir: Option<PathBuf>,
    /// Allow pools with the `local` executor (platform admins only) [default: false].
    #[arg(long, env = "SWITCHYARD_ALLOW_LOCAL_POOLS", num_args = 0..=1, default_missing_value = "true")]
    pub allow_local_pools: Option<bool>,
    /// Local pools: the user id jobs run as [default: 65534, `nobody`].
    #[arg(long, env = "SWITCHYARD_JOB_UID")]
    pub job_uid: Option<u32>,
    /// Local pools: the group id jobs run as [default: 65534, `nogroup`].
    #[arg(long, env = "SWITCHYARD_JOB_GID")]
    pub job_gid: Option<u32>,
    /// Let identity providers (discovery, JWKS, metadata, LDAP) live on loopback or private
    /// addresses (RFC 1918, CGNAT, fc00::/7), and be reached over plain http there; link-local
    /// addresses (cloud metadata) stay refused [default: false].
    #[arg(long, env = "SWITCHYARD_ALLOW_PRIVATE_IDP_ADDRESSES", num_args = 0..=1, default_missing_value = "true")]
    pub allow_private_idp_addresses: Option<bool>,
    /// Bearer token `/metrics` requires; without one `/metrics` answers only loopback clients.
    #[arg(long, env = "SWITCHYARD_METRICS_TOKEN")]
    pub metrics_token: Option<String>,
    /// Proxies whose `X-Forwarded-For` is believed (IP addresses or CIDR ranges, comma-separated).
    #[arg(long, env = "SWITCHYARD_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Option<Vec<String>>,
    /// Most waiting jobs one user may have [default: 10000].
    #[arg(long, env = "SWITCHYARD_MAX_PENDING_PER_USER")]
    pub max_pending_per_user: Option<i64>,
    /// Most waiting jobs one group (its queues) may have [default: 100000].
    #[arg(long, env = "SWITCHYARD_MAX_PENDING_PER_GROUP")]
    pub max_pending_per_group: Option<i64>,
    /// Address the gateways' listeners bind [default: 127.0.0.1].
    #[arg(long, env = "SWITCHYARD_GATEWAY_BIND")]
    pub gateway_bind: Option<std::net::IpAddr>,
    /// Ports the gateways' listeners are given, FIRST-LAST [default: 18400-18499].
    #[arg(long, env = "SWITCHYARD_GATEWAY_PORTS")]
    pub gateway_ports: Option<String>,
    /// Ports raw TCP routes are given, FIRST-LAST [default: 18500-18599].
    #[arg(long, env = "SWITCHYARD_GATEWAY_TCP_PORTS")]
    pub gateway_tcp_ports: Option<String>,
    /// Folder of the gateways' certificates: `TENANT-GATEWAY.crt` and `TENANT-GATEWAY.key`
    /// (PEM); a gateway without them gets a self-signed certificate [default: none].
    #[arg(long, env = "SWITCHYARD_GATEWAY_TLS_DIR")]
    pub gateway_tls_dir: Option<PathBuf>,
    /// Gateways listen with plain HTTP, no TLS (development, tests) [default: false].
    #[arg(long, env = "SWITCHYARD_GATEWAY_PLAIN_HTTP", num_args = 0..=1, default_missing_value = "true")]
    pub gateway_plain_http: Option<bool>,
    /// Seconds a gateway keeps a client connection open with no request [default: 75].
    #[arg(long, env = "SWITCHYARD_GATEWAY_IDLE_TIMEOUT_S")]
    pub gateway_idle_timeout_s: Option<u64>,
    /// Seconds a client has to send a request's head (and a body read whole) once it began,
    /// or the connection closes [default: 30].
    #[arg(long, env = "SWITCHYARD_GATEWAY_REQUEST_TIMEOUT_S")]
    pub gateway_request_timeout_s: Option<u64>,
}

/// The TOML file: the same settings, snake_case.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    database_url: Option<String>,
    listen: Option<SocketAddr>,
    site_root: Option<String>,
    public_url: Option<String>,
    session_ttl_hours: Option<i64>,
    demo: Option<bool>,
    log_format: Option<String>,
    max_body_bytes: Option<usize>,
    trust_forwarded_for: Option<bool>,
    scheduler_tick_ms: Option<u64>,
    min_runtime_ms: Option<i64>,
    hold_after_ms: Option<i64>,
    history_sample_ms: Option<i64>,
    stop_grace_ms: Option<i64>,
    sim_checkpoint_ms: Option<i64>,
    jobs_dir: Option<PathBuf>,
    allow_local_pools: Option<bool>,
    job_uid: Option<u32>,
    job_gid: Option<u32>,
    allow_private_idp_addresses: Option<bool>,
    metrics_token: Option<String>,
    trusted_proxies: Option<Vec<String>>,
    max_pending_per_user: Option<i64>,
    max_pending_per_group: Option<i64>,
    gateway_bind: Option<std::net::IpAddr>,
    gateway_ports: Option<String>,
    gateway_tcp_ports: Option<String>,
    gateway_tls_dir: Option<PathBuf>,
    gateway_plain_http: Option<bool>,
    gateway_idle_timeout_s: Option<u64>,
    gateway_request_timeout_s: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: String,
    pub listen: SocketAddr,
    pub site_root: String,
    pub public_url: Option<String>,
    pub session_ttl_hours: i64,
    pub demo: bool,
    pub log_json: bool,
    pub max_body_bytes: usize,
    pub trust_forwarded_for: bool,
    /// Proxies whose `X-Forwarded-For` entries are believed (with `trust_forwarded_for`; empty:
    /// only the directly connected peer is trusted).
    pub trusted_proxies: Vec<IpNet>,
    /// Identity providers may live on loopback or private addresses (tests, labs); see
    /// `identity::sso::outbound`.
    pub allow_private_idp_addresses: bool,
    /// The bearer token `/metrics` requires (`None`: loopback clients only).
    pub metrics_token: Option<String>,
    /// Caps on waiting jobs, so one user or group cannot fill the store.
    pub max_pending_per_user: i64,
    pub max_pending_per_group: i64,
    pub scheduler: DriverConfig,
    pub gateway: GatewayConfig,
}

/// Where the gateways listen: each gateway (prod, dev, ...) gets a port of the range when it
/// is created; its listener starts and stops with it, without a restart.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub bind: std::net::IpAddr,
    pub ports: std::ops::RangeInclusive<u16>,
    /// The ports raw TCP routes are given (each route its own).
    pub tcp_ports: std::ops::RangeInclusive<u16>,
    /// Where each gateway's certificate and key are looked for (`TENANT-GATEWAY.crt`/`.key`).
    pub tls_dir: Option<PathBuf>,
    /// No TLS at all (development, tests).
    pub plain_http: bool,
    /// A client connection with no request for this long is closed (nginx's
    /// `keepalive_timeout`).
    pub idle_timeout: std::time::Duration,
    /// A request whose head (and body, when read whole) has not arrived this long after its
    /// first byte closes its connection: slow clients cannot hold connections open
    /// (nginx's `client_header_timeout`, hyper's `header_read_timeout`).
    pub request_timeout: std::time::Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            bind: std::net::IpAddr::from([127, 0, 0, 1]),
            ports: 18400..=18499,
            tcp_ports: 18500..=18599,
            tls_dir: None,
            plain_http: false,
            idle_timeout: std::time::Duration::from_secs(75),
            request_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// A timeout given in whole seconds: at least one second and at most a day.
fn seconds(
    name: &str,
    given: Option<u64>,
    default: std::time::Duration,
) -> anyhow::Result<std::time::Duration> {
    match given {
        None => Ok(default),
        Some(s) if (1..=86_400).contains(&s) => Ok(std::time::Duration::from_secs(s)),
        Some(s) => anyhow::bail!("{name} must be between 1 and 86400 seconds, not {s}"),
    }
}

/// A port range, `FIRST-LAST`.
fn port_range(s: &str) -> Option<std::ops::RangeInclusive<u16>> {
    let (a, b) = s.trim().split_once('-')?;
    let (a, b): (u16, u16) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a > 0 && a <= b).then_some(a..=b)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: "sqlite://data/switchyard.db".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            site_root: "target/site".into(),
            public_url: None,
            session_ttl_hours: 12,
            demo: false,
            log_json: true,
            max_body_bytes: 1 << 20,
            trust_forwarded_for: false,
            trusted_proxies: Vec::new(),
            allow_private_idp_addresses: false,
            metrics_token: None,
            max_pending_per_user: 10_000,
            max_pending_per_group: 100_000,
            scheduler: Default::default(),
            gateway: Default::default(),
        }
    }
}

impl Config {
    pub fn resolve(store: &StoreArgs, serve: &ServeArgs) -> anyhow::Result<Config> {
        let file: FileConfig = match &store.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let d = Config::default();
        let log_format = serve
            .log_format
            .clone()
            .or(file.log_format)
            .unwrap_or_else(|| "json".into());
        if log_format != "json" && log_format != "text" {
            anyhow::bail!("log_format must be json or text, not {log_format}");
        }
        let c = Config {
            database_url: store
                .database_url
                .clone()
                .or(file.database_url)
                .unwrap_or(d.database_url),
            listen: serve.listen.or(file.listen).unwrap_or(d.listen),
            site_root: serve
                .site_root
                .clone()
                .or(file.site_root)
                .unwrap_or(d.site_root),
            public_url: serve.public_url.clone().or(file.public_url),
            session_ttl_hours: serve
                .session_ttl_hours
                .or(file.session_ttl_hours)
                .unwrap_or(d.session_ttl_hours),
            demo: serve.demo.or(file.demo).unwrap_or(d.demo),
            log_json: log_format == "json",
            max_body_bytes: serve
                .max_body_bytes
                .or(file.max_body_bytes)
                .unwrap_or(d.max_body_bytes),
            trust_forwarded_for: serve
                .trust_forwarded_for
                .or(file.trust_forwarded_for)
                .unwrap_or(false),
            trusted_proxies: Vec::new(),
            allow_private_idp_addresses: serve
                .allow_private_idp_addresses
                .or(file.allow_private_idp_addresses)
                .unwrap_or(false),
            metrics_token: serve
                .metrics_token
                .clone()
                .or(file.metrics_token)
                .filter(|t| !t.is_empty()),
            max_pending_per_user: serve
                .max_pending_per_user
                .or(file.max_pending_per_user)
                .unwrap_or(d.max_pending_per_user),
            max_pending_per_group: serve
                .max_pending_per_group
                .or(file.max_pending_per_group)
                .unwrap_or(d.max_pending_per_group),
            scheduler: DriverConfig {
                tick_ms: serve
                    .scheduler_tick_ms
                    .or(file.scheduler_tick_ms)
                    .unwrap_or(d.scheduler.tick_ms),
                min_runtime_ms: serve
                    .min_runtime_ms
                    .or(file.min_runtime_ms)
                    .unwrap_or(d.scheduler.min_runtime_ms),
                hold_after_ms: serve
                    .hold_after_ms
                    .or(file.hold_after_ms)
                    .unwrap_or(d.scheduler.hold_after_ms),
                history_sample_ms: serve
                    .history_sample_ms
                    .or(file.history_sample_ms)
                    .unwrap_or(d.scheduler.history_sample_ms),
                stop_grace_ms: serve
                    .stop_grace_ms
                    .or(file.stop_grace_ms)
                    .unwrap_or(d.scheduler.stop_grace_ms),
                sim_checkpoint_ms: serve
                    .sim_checkpoint_ms
                    .or(file.sim_checkpoint_ms)
                    .unwrap_or(d.scheduler.sim_checkpoint_ms),
                jobs_dir: serve
                    .jobs_dir
                    .clone()
                    .or(file.jobs_dir)
                    .unwrap_or(d.scheduler.jobs_dir),
                allow_local_pools: serve
                    .allow_local_pools
                    .or(file.allow_local_pools)
                    .unwrap_or(false),
                job_uid: serve
                    .job_uid
                    .or(file.job_uid)
                    .unwrap_or(d.scheduler.job_uid),
                job_gid: serve
                    .job_gid
                    .or(file.job_gid)
                    .unwrap_or(d.scheduler.job_gid),
            },
            gateway: GatewayConfig {
                bind: serve
                    .gateway_bind
                    .or(file.gateway_bind)
                    .unwrap_or(d.gateway.bind),
                ports: match serve.gateway_ports.clone().or(file.gateway_ports) {
                    Some(s) => port_range(&s).ok_or_else(|| {
                        anyhow::anyhow!("gateway_ports must be FIRST-LAST, such as 18400-18499")
                    })?,
                    None => d.gateway.ports,
                },
                tcp_ports: match serve.gateway_tcp_ports.clone().or(file.gateway_tcp_ports) {
                    Some(s) => port_range(&s).ok_or_else(|| {
                        anyhow::anyhow!("gateway_tcp_ports must be FIRST-LAST, such as 18500-18599")
                    })?,
                    None => d.gateway.tcp_ports,
                },
                tls_dir: serve.gateway_tls_dir.clone().or(file.gateway_tls_dir),
                plain_http: serve
                    .gateway_plain_http
                    .or(file.gateway_plain_http)
                    .unwrap_or(d.gateway.plain_http),
                idle_timeout: seconds(
                    "gateway_idle_timeout_s",
                    serve.gateway_idle_timeout_s.or(file.gateway_idle_timeout_s),
                    d.gateway.idle_timeout,
                )?,
                request_timeout: seconds(
                    "gateway_request_timeout_s",
                    serve
                        .gateway_request_timeout_s
                        .or(file.gateway_request_timeout_s),
                    d.gateway.request_timeout,
                )?,
            },
        };
        let (h, t) = (&c.gateway.ports, &c.gateway.tcp_ports);
        if h.start() <= t.end() && t.start() <= h.end() {
            anyhow::bail!(
                "gateway_ports ({}-{}) and gateway_tcp_ports ({}-{}) overlap: give them separate ranges",
                h.start(),
                h.end(),
                t.start(),
                t.end()
            );
        }
        let mut c = c;
        for p in serve
            .trusted_proxies
            .clone()
            .or(file.trusted_proxies)
            .unwrap_or_default()
        {
            match IpNet::parse(&p) {
                Some(net) => c.trusted_proxies.push(net),
                None => anyhow::bail!("trusted_proxies: {p:?} is not an IP address or CIDR range"),
            }
        }
        for (name, v) in [
            ("max_pending_per_user", c.max_pending_per_user),
            ("max_pending_per_group", c.max_pending_per_group),
        ] {
            if !(1..=10_000_000).contains(&v) {
                anyhow::bail!("{name} must be between 1 and 10000000");
            }
        }
        if !(1..=24 * 30).contains(&c.session_ttl_hours) {
            anyhow::bail!("session_ttl_hours must be between 1 and 720");
        }
        if !(10..=60_000).contains(&c.scheduler.tick_ms) {
            anyhow::bail!("scheduler_tick_ms must be between 10 and 60000");
        }
        for (name, v) in [
            ("min_runtime_ms", c.scheduler.min_runtime_ms),
            ("stop_grace_ms", c.scheduler.stop_grace_ms),
            ("sim_checkpoint_ms", c.scheduler.sim_checkpoint_ms),
        ] {
            if !(0..=3_600_000).contains(&v) {
                anyhow::bail!("{name} must be between 0 and 3600000");
            }
        }
        if !(1_000..=3_600_000).contains(&c.scheduler.history_sample_ms) {
            anyhow::bail!("history_sample_ms must be between 1000 and 3600000");
        }
        if c.max_body_bytes < 1024 {
            anyhow::bail!("max_body_bytes must be at least 1024");
        }
        Ok(c)
    }

    /// The URL users reach Switchyard at (for redirect URIs registered at IdPs): `public_url`,
    /// else the listen address over http.
    pub fn base_url(&self) -> String {
        match &self.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("http://{}", self.listen),
        }
    }

    /// Session cookies get `Secure` when users reach Switchyard over HTTPS.
    pub fn secure_cookies(&self) -> bool {
        self.public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_file_beats_defaults() {
        let dir = std::env::temp_dir().join(format!("sy-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("switchyard.toml");
        std::fs::write(&file, "listen = \"0.0.0.0:8080\"\nsession_ttl_hours = 4\npublic_url = \"https://sy.example\"\n").expect("write");
        let store = StoreArgs {
            config: Some(file.clone()),
            database_url: None,
        };
        let serve = ServeArgs {
            session_ttl_hours: Some(2),
            ..Default::default()
        };
        let c = Config::resolve(&store, &serve).expect("config");
        assert_eq!(c.listen.to_string(), "0.0.0.0:8080");
        assert_eq!(c.session_ttl_hours, 2);
        assert!(c.secure_cookies());
        assert_eq!(c.database_url, "sqlite://data/switchyard.db");
        std::fs::write(&file, "no_such_setting = 1\n").expect("write");
        assert!(
            Config::resolve(&store, &ServeArgs::default()).is_err(),
            "unknown keys are rejected"
        );
    }

    #[test]
    fn the_gateways_port_ranges_must_not_overlap() {
        let store = StoreArgs::default();
        let serve = |http: &str, tcp: &str| ServeArgs {
            gateway_ports: Some(http.into()),
            gateway_tcp_ports: Some(tcp.into()),
            ..Default::default()
        };
        let c = Config::resolve(&store, &serve("18400-18409", "18410-18419")).expect("config");
        assert_eq!(c.gateway.tcp_ports, 18410..=18419);
        let Err(err) = Config::resolve(&store, &serve("18400-18409", "18409-18419")) else {
            panic!("overlapping ranges are refused");
        };
        let err = err.to_string();
        assert!(err.contains("overlap"), "{err}");
        assert!(Config::resolve(&store, &serve("18400-18409", "18419-18410")).is_err());
        let timeouts = |idle: u64, request: u64| ServeArgs {
            gateway_idle_timeout_s: Some(idle),
            gateway_request_timeout_s: Some(request),
            ..Default::default()
        };
        let c = Config::resolve(&store, &timeouts(600, 10)).expect("config");
        assert_eq!(c.gateway.idle_timeout, std::time::Duration::from_secs(600));
        assert_eq!(
            c.gateway.request_timeout,
            std::time::Duration::from_secs(10)
        );
        let Err(err) = Config::resolve(&store, &timeouts(0, 10)) else {
            panic!("an idle timeout of 0 is refused");
        };
        assert!(err.to_string().contains("gateway_idle_timeout_s"), "{err}");
    }
}

/// What the driver needs from the configuration.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub tick_ms: u64,
    pub min_runtime_ms: i64,
    /// Hold a node for an in-quota multi-GPU job that waited this long (0: never).
    pub hold_after_ms: i64,
    /// Sample the scheduler's counts for the history this often (the leader only).
    pub history_sample_ms: i64,
    pub stop_grace_ms: i64,
    pub sim_checkpoint_ms: i64,
    pub jobs_dir: PathBuf,
    /// Pools with the `local` executor may be created (by platform admins) and run.
    pub allow_local_pools: bool,
    /// The unprivileged user and group local jobs run as.
    pub job_uid: u32,
    pub job_gid: u32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            tick_ms: 1000,
            min_runtime_ms: 10_000,
            hold_after_ms: 300_000,
            history_sample_ms: 60_000,
            stop_grace_ms: 10_000,
            sim_checkpoint_ms: 2_000,
            jobs_dir: PathBuf::from("data/jobs"),
            allow_local_pools: false,
            job_uid: 65534,
            job_gid: 65534,
        }
    }
}
