//! Server functions used by the pages. Each one resolves the caller from the request (the
//! server's auth middleware put the [`Principal`] into the request extensions) and calls the
//! [`crate::backend::Backend`]. State-changing ones check the session's CSRF token.

// Server functions take a form's fields as arguments, one per input.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;

use crate::error::AppError;
#[cfg(feature = "ssr")]
use crate::form;
#[cfg(feature = "ssr")]
use crate::model::{
    AbortSpec, Auth, CreateGroup, CreatePool, CreateProfile, CreateQueue, CreateTenant, CreateUser,
    GroupSync, LdapSettings, OidcSettings, PoolNode, Principal, RequestMeta, SamlSettings,
    SaveIdentityProvider, SetPolicy, SubmitJob,
};
use crate::model::{
    AuditEntry, AuditFilter, ConnectionCheck, Group, GroupDetail, IdentityProvider, Job, JobDetail,
    Page, Policy, PolicyConfig, PolicyOverview, Pool, PortalOverview, Profile, Queue, SessionInfo,
    SignInOptions, SignInSettings, Tenant, TenantSummary, User, UserAccess,
};

#[cfg(feature = "ssr")]
mod ctx {
    use super::*;
    use crate::backend::SharedBackend;

    pub struct Call {
        pub backend: SharedBackend,
        pub principal: Principal,
        pub meta: RequestMeta,
    }

    fn parts() -> Result<http::request::Parts, AppError> {
        use_context::<http::request::Parts>().ok_or(AppError::Internal)
    }

    pub fn principal() -> Result<Option<Principal>, AppError> {
        Ok(parts()?.extensions.get::<Principal>().cloned())
    }

    /// A read: any authenticated caller (the backend checks the permission).
    pub fn read() -> Result<Call, AppError> {
        let parts = parts()?;
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or(AppError::Unauthorized)?;
        let backend = use_context::<SharedBackend>().ok_or(AppError::Internal)?;
        let meta = parts
            .extensions
            .get::<RequestMeta>()
            .cloned()
            .unwrap_or_default();
        Ok(Call {
            backend,
            principal,
            meta,
        })
    }

    /// No caller needed (public data such as a tenant's sign-in options).
    pub fn backend() -> Result<SharedBackend, AppError> {
        use_context::<SharedBackend>().ok_or(AppError::Internal)
    }

    /// A write: also requires the session's CSRF token (tokens in headers are not ambient
    /// credentials and need none).
    pub fn write(csrf: &str) -> Result<Call, AppError> {
        let call = read()?;
        if let Auth::Session { csrf: expected, .. } = &call.principal.auth {
            if !constant_time_eq(expected.as_bytes(), csrf.as_bytes()) {
                return Err(AppError::Forbidden);
            }
        }
        Ok(call)
    }

    /// Gives a failed call its real HTTP status (422, 403, 404…) instead of server_fn's 500,
    /// so that logs, metrics and proxies see a client error as one. Plain form posts
    /// (no JavaScript) are left alone: they are answered with a redirect back to the page.
    pub fn answer<T>(result: Result<T, AppError>) -> Result<T, AppError> {
        if let Err(e) = &result {
            let html = parts()
                .ok()
                .and_then(|p| {
                    p.headers
                        .get(http::header::ACCEPT)
                        .and_then(|v| v.to_str().ok())
                        .map(|v| v.contains("text/html"))
                })
                .unwrap_or(false);
            if !html {
                if let (Some(res), Ok(code)) = (
                    use_context::<leptos_axum::ResponseOptions>(),
                    http::StatusCode::from_u16(e.status()),
                ) {
                    res.set_status(code);
                }
            }
        }
        result
    }

    fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// What can this user do (tenant admins).
#[server(prefix = "/_sf", endpoint = "users/access")]
pub async fn load_user_access(user_id: String) -> Result<UserAccess, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.user_access(&c.principal, &user_id).await
        }
        .await,
    )
}

/// The tenant's identity providers and its sign-in options (tenant admins).
#[server(prefix = "/_sf", endpoint = "idp")]
pub async fn load_idps() -> Result<(Vec<IdentityProvider>, SignInOptions), AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            let list = c.backend.list_idps(&c.principal).await?;
            let options = c
                .backend
                .sign_in_options(&c.principal.me.tenant_slug)
                .await?;
            Ok((list, options))
        }
        .await,
    )
}

#[cfg(feature = "ssr")]
fn lines(s: &str) -> Vec<String> {
    s.split([',', '\n'])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(feature = "ssr")]
fn opt(s: String) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Add an OIDC provider from the settings page.
#[server(prefix = "/_sf", endpoint = "idp/oidc")]
pub async fn create_oidc_idp(
    csrf: String,
    name: String,
    display_name: String,
    issuer: String,
    client_id: String,
    client_secret: String,
    groups_claim: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = SaveIdentityProvider {
                name,
                display_name,
                kind: "oidc".into(),
                enabled: true,
                oidc: Some(OidcSettings {
                    issuer: issuer.trim().to_string(),
                    client_id,
                    groups_claim: opt(groups_claim),
                    ..Default::default()
                }),
                ldap: None,
                saml: None,
                client_secret: opt(client_secret),
                sync: GroupSync {
                    required_groups: lines(&required_groups),
                    ..Default::default()
                },
                allowed_email_domains: Vec::new(),
            };
            c.backend.create_idp(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

/// Add an LDAP directory from the settings page.
#[server(prefix = "/_sf", endpoint = "idp/ldap")]
pub async fn create_ldap_idp(
    csrf: String,
    name: String,
    display_name: String,
    url: String,
    start_tls: Option<String>,
    user_dn_template: String,
    base_dn: String,
    bind_dn: String,
    bind_password: String,
    group_lookup: String,
    group_base_dn: String,
) -> Result<IdentityProvider, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = SaveIdentityProvider {
                name,
                display_name,
                kind: "ldap".into(),
                enabled: true,
                oidc: None,
                ldap: Some(LdapSettings {
                    url: url.trim().to_string(),
                    start_tls: start_tls.is_some(),
                    user_dn_template: opt(user_dn_template),
                    base_dn: base_dn.trim().to_string(),
                    bind_dn: opt(bind_dn),
                    group_lookup: opt(group_lookup),
                    group_base_dn: opt(group_base_dn),
                    ..Default::default()
                }),
                saml: None,
                client_secret: opt(bind_password),
                sync: GroupSync::default(),
                allowed_email_domains: Vec::new(),
            };
            c.backend.create_idp(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

/// Add a SAML 2.0 identity provider from the settings page: its metadata by URL or pasted.
#[server(prefix = "/_sf", endpoint = "idp/saml")]
pub async fn create_saml_idp(
    csrf: String,
    name: String,
    display_name: String,
    metadata_url: String,
    metadata_xml: String,
    groups_attribute: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = SaveIdentityProvider {
                name,
                display_name,
                kind: "saml".into(),
                enabled: true,
                oidc: None,
                ldap: None,
                saml: Some(SamlSettings {
                    idp_metadata_url: opt(metadata_url),
                    idp_metadata_xml: opt(metadata_xml),
                    groups_attribute: opt(groups_attribute),
                    ..Default::default()
                }),
                client_secret: None,
                sync: GroupSync {
                    required_groups: lines(&required_groups),
                    ..Default::default()
                },
                allowed_email_domains: Vec::new(),
            };
            c.backend.create_idp(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

/// Remove a provider: its links, sign-ins in flight and the memberships it manages go too.
#[server(prefix = "/_sf", endpoint = "idp/delete")]
pub async fn delete_idp(csrf: String, id: String) -> Result<(), AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend.delete_idp(&c.principal, &c.meta, &id).await
        }
        .await,
    )
}

/// "Test connection" for one provider.
#[server(prefix = "/_sf", endpoint = "idp/test")]
pub async fn test_idp(csrf: String, id: String) -> Result<Vec<ConnectionCheck>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend.test_idp(&c.principal, &id).await
        }
        .await,
    )
}

/// Turn password sign-in on or off for the tenant.
#[server(prefix = "/_sf", endpoint = "idp/passwords")]
pub async fn set_password_login(
    csrf: String,
    password_login: Option<String>,
) -> Result<SignInSettings, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = SignInSettings {
                password_login: password_login.is_some(),
            };
            c.backend
                .set_sign_in_settings(&c.principal, &c.meta, input)
                .await
        }
        .await,
    )
}

/// What a tenant's sign-in page offers (public).
#[server(prefix = "/_sf", endpoint = "sign-in-options")]
pub async fn load_sign_in_options(tenant: String) -> Result<SignInOptions, AppError> {
    ctx::answer(
        async move {
            let backend = ctx::backend()?;
            backend.sign_in_options(&tenant).await
        }
        .await,
    )
}

/// The signed-in user and the CSRF token for forms; `None` when not signed in.
#[server(prefix = "/_sf", endpoint = "session")]
pub async fn get_session() -> Result<Option<SessionInfo>, AppError> {
    Ok(ctx::principal()?.map(|p| {
        // Token-authenticated callers need no CSRF token: the header is not an ambient credential.
        let csrf = match p.auth {
            Auth::Session { csrf, .. } => csrf,
            Auth::Token { .. } => String::new(),
        };
        SessionInfo { me: p.me, csrf }
    }))
}

#[server(prefix = "/_sf", endpoint = "users")]
pub async fn list_users() -> Result<Vec<User>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.list_users(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "users/create")]
pub async fn submit_user(
    csrf: String,
    username: String,
    display_name: String,
    email: String,
    password: String,
    is_tenant_admin: Option<String>,
) -> Result<User, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let non_empty = |s: String| (!s.trim().is_empty()).then_some(s);
            let input = CreateUser {
                username,
                display_name: non_empty(display_name),
                email: non_empty(email),
                password: non_empty(password),
                is_tenant_admin: is_tenant_admin.is_some(),
            };
            c.backend.create_user(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups")]
pub async fn list_groups() -> Result<Vec<Group>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.list_groups(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups/mine")]
pub async fn my_groups() -> Result<Vec<Group>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.my_groups(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups/create")]
pub async fn submit_group(
    csrf: String,
    name: String,
    description: String,
) -> Result<Group, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = CreateGroup {
                name,
                description: Some(description),
            };
            c.backend.create_group(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups/detail")]
pub async fn load_group(group_id: String) -> Result<GroupDetail, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.group_detail(&c.principal, &group_id).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups/members/add")]
pub async fn add_member(csrf: String, group_id: String, user_id: String) -> Result<(), AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend
                .add_member(&c.principal, &c.meta, &group_id, &user_id)
                .await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "groups/members/remove")]
pub async fn remove_member(
    csrf: String,
    group_id: String,
    user_id: String,
) -> Result<(), AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend
                .remove_member(&c.principal, &c.meta, &group_id, &user_id)
                .await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "audit")]
pub async fn list_audit(filter: AuditFilter) -> Result<Page<AuditEntry>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.list_audit(&c.principal, filter).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "tenants")]
pub async fn list_tenants() -> Result<Vec<TenantSummary>, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.list_tenants(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "tenants/create")]
pub async fn submit_tenant(csrf: String, slug: String, name: String) -> Result<Tenant, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend
                .create_tenant(&c.principal, &c.meta, CreateTenant { slug, name })
                .await
        }
        .await,
    )
}

/// An optional whole number from a form field: empty is `None`, anything else must parse.
#[cfg(feature = "ssr")]
fn int_field(field: &str, value: &str) -> Result<Option<i64>, AppError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<i64>()
        .map(Some)
        .map_err(|_| AppError::field(field, "must be a whole number"))
}

#[cfg(feature = "ssr")]
fn text_field(value: String) -> Option<String> {
    (!value.trim().is_empty()).then_some(value)
}

#[server(prefix = "/_sf", endpoint = "scheduling/overview")]
pub async fn load_policy_overview() -> Result<PolicyOverview, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.policy_overview(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "scheduling/config")]
pub async fn load_policy_config() -> Result<PolicyConfig, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.policy_config(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "portal")]
pub async fn load_portal() -> Result<PortalOverview, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.portal_overview(&c.principal).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "jobs/detail")]
pub async fn load_job(job_id: String) -> Result<JobDetail, AppError> {
    ctx::answer(
        async move {
            let c = ctx::read()?;
            c.backend.job_detail(&c.principal, &job_id).await
        }
        .await,
    )
}

/// The portal's submit form. Times are in seconds here; the API takes milliseconds.
#[server(prefix = "/_sf", endpoint = "jobs/submit")]
pub async fn submit_job_form(
    csrf: String,
    queue_id: String,
    name: String,
    command: String,
    gpu_milli: String,
    priority_class: String,
    duration_s: String,
    max_runtime_s: String,
    checkpoint_dir: String,
    abort_kind: String,
    abort_command: String,
    abort_timeout_s: String,
) -> Result<Job, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let gpu_milli = int_field("gpu_milli", &gpu_milli)?;
            // Checked and in range here, in the form's own unit and field names: `s * 1000`
            // on a huge or negative number would overflow (a panic, or a silent wrap).
            let duration_ms = form::seconds_as_ms("duration_s", &duration_s, form::DURATION_S)?;
            let max_runtime_ms =
                form::seconds_as_ms("max_runtime_s", &max_runtime_s, form::MAX_RUNTIME_S)?;
            let abort_timeout =
                form::seconds_as_ms("abort_timeout_s", &abort_timeout_s, form::ABORT_TIMEOUT_S)?;
            let abort = text_field(abort_command).map(|command| AbortSpec {
                kind: if abort_kind.is_empty() {
                    "bash".into()
                } else {
                    abort_kind
                },
                command,
                timeout_ms: abort_timeout,
            });
            let input = SubmitJob {
                queue_id,
                name,
                command,
                image: None,
                env: Default::default(),
                gpu_milli,
                priority_class: text_field(priority_class),
                abort,
                checkpoint_dir: text_field(checkpoint_dir),
                max_runtime_ms,
                duration_ms,
            };
            c.backend.submit_job(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "jobs/abort")]
pub async fn abort_job_form(csrf: String, job_id: String) -> Result<Job, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            c.backend.abort_job(&c.principal, &c.meta, &job_id).await
        }
        .await,
    )
}

/// A pool of identical nodes (the API takes any list of nodes).
#[server(prefix = "/_sf", endpoint = "pools/create")]
pub async fn create_pool_form(
    csrf: String,
    name: String,
    executor: String,
    node_count: String,
    gpus_per_node: String,
    gpu_model: String,
    gpu_memory_mb: String,
    gpu_hour_cost_cents: String,
    shared: Option<String>,
) -> Result<Pool, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let count = int_field("nodes", &node_count)?.unwrap_or(0);
            if !(1..=5000).contains(&count) {
                return Err(AppError::field("nodes", "give 1 to 5000 nodes"));
            }
            let gpus = int_field("gpus_per_node", &gpus_per_node)?.unwrap_or(0);
            if !(0..=16).contains(&gpus) {
                return Err(AppError::field("gpus_per_node", "must be between 0 and 16"));
            }
            let memory = int_field("gpu_memory_mb", &gpu_memory_mb)?.unwrap_or(0);
            if !(0..=1_048_576).contains(&memory) {
                return Err(AppError::field(
                    "gpu_memory_mb",
                    "must be between 0 and 1048576",
                ));
            }
            let prefix = name.trim().to_string();
            let nodes = (1..=count)
                .map(|i| PoolNode {
                    name: format!("{prefix}-{i}"),
                    gpus: gpus as u32,
                    gpu_model: gpu_model.trim().to_string(),
                    gpu_memory_mb: memory as u32,
                    cpu_cores: 0,
                    memory_mb: 0,
                })
                .collect();
            let input = CreatePool {
                name,
                executor,
                nodes,
                gpu_hour_cost_cents: int_field("gpu_hour_cost_cents", &gpu_hour_cost_cents)?
                    .unwrap_or(0),
                shared: shared.is_some(),
            };
            c.backend.create_pool(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "profiles/create")]
pub async fn create_profile_form(
    csrf: String,
    name: String,
    gpu_milli: String,
    min_gpu_milli: String,
    max_gpu_milli: String,
) -> Result<Profile, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = CreateProfile {
                name,
                gpu_milli: int_field("gpu_milli", &gpu_milli)?.unwrap_or(0),
                min_gpu_milli: int_field("min_gpu_milli", &min_gpu_milli)?,
                max_gpu_milli: int_field("max_gpu_milli", &max_gpu_milli)?,
                ..Default::default()
            };
            c.backend.create_profile(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "policies/set")]
pub async fn set_policy_form(
    csrf: String,
    group_id: String,
    reservation_milli: String,
    limit_milli: String,
    over_quota_weight: String,
    over_quota_allowed: Option<String>,
) -> Result<Policy, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let input = SetPolicy {
                group_id,
                reservation_milli: int_field("reservation_milli", &reservation_milli)?
                    .ok_or_else(|| AppError::field("reservation_milli", "required"))?,
                limit_milli: int_field("limit_milli", &limit_milli)?
                    .ok_or_else(|| AppError::field("limit_milli", "required"))?,
                over_quota_weight: int_field("over_quota_weight", &over_quota_weight)?.unwrap_or(1),
                over_quota_allowed: over_quota_allowed.is_some(),
                exceed_users: Vec::new(),
            };
            c.backend.set_policy(&c.principal, &c.meta, input).await
        }
        .await,
    )
}

#[server(prefix = "/_sf", endpoint = "queues/create")]
pub async fn create_queue_form(
    csrf: String,
    name: String,
    policy_id: String,
    profile_id: String,
    pool: String,
    spillover: String,
    over_quota: Option<String>,
) -> Result<Queue, AppError> {
    ctx::answer(
        async move {
            let c = ctx::write(&csrf)?;
            let pools = [pool, spillover]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect();
            let input = CreateQueue {
                name,
                policy_id,
                profile_id,
                pools,
                over_quota: over_quota.is_some(),
                classes: None,
            };
            c.backend.create_queue(&c.principal, &c.meta, input).await
        }
        .await,
    )
}
