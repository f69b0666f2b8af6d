//! Server functions used by the pages. Each one resolves the caller from the request (the
//! server's auth middleware put the [`Principal`] into the request extensions) and calls the
//! [`crate::backend::Backend`]. State-changing ones check the session's CSRF token.

use leptos::prelude::*;

use crate::error::AppError;
use crate::model::{
    AuditEntry, AuditFilter, Group, GroupDetail, Page, SessionInfo, Tenant, TenantSummary, User,
};
#[cfg(feature = "ssr")]
use crate::model::{Auth, CreateGroup, CreateTenant, CreateUser, Principal, RequestMeta};

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
