//! Server functions of the directory pages: users, groups, members, tenants, audit, the session.

use super::*;

/// What can this user do (tenant admins).
#[server(prefix = "/_sf", endpoint = "users/access")]
pub async fn load_user_access(user_id: String) -> Result<UserAccess, AppError> {
    ctx::reading(move |c| async move { c.backend.user_access(&c.principal, &user_id).await }).await
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
    ctx::reading(|c| async move { c.backend.list_users(&c.principal).await }).await
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
    ctx::writing(&csrf, move |c| async move {
        let non_empty = |s: String| (!s.trim().is_empty()).then_some(s);
        let input = CreateUser {
            username,
            display_name: non_empty(display_name),
            email: non_empty(email),
            password: non_empty(password),
            is_tenant_admin: is_tenant_admin.is_some(),
        };
        c.backend.create_user(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "groups")]
pub async fn list_groups() -> Result<Vec<Group>, AppError> {
    ctx::reading(|c| async move { c.backend.list_groups(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "groups/mine")]
pub async fn my_groups() -> Result<Vec<Group>, AppError> {
    ctx::reading(|c| async move { c.backend.my_groups(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "groups/create")]
pub async fn submit_group(
    csrf: String,
    name: String,
    description: String,
) -> Result<Group, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateGroup {
            name,
            description: Some(description),
        };
        c.backend.create_group(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "groups/detail")]
pub async fn load_group(group_id: String) -> Result<GroupDetail, AppError> {
    ctx::reading(move |c| async move { c.backend.group_detail(&c.principal, &group_id).await })
        .await
}

#[server(prefix = "/_sf", endpoint = "groups/members/add")]
pub async fn add_member(csrf: String, group_id: String, user_id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .add_member(&c.principal, &c.meta, &group_id, &user_id)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "groups/members/remove")]
pub async fn remove_member(
    csrf: String,
    group_id: String,
    user_id: String,
) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .remove_member(&c.principal, &c.meta, &group_id, &user_id)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "audit")]
pub async fn list_audit(filter: AuditFilter) -> Result<Page<AuditEntry>, AppError> {
    ctx::reading(move |c| async move { c.backend.list_audit(&c.principal, filter).await }).await
}

#[server(prefix = "/_sf", endpoint = "tenants")]
pub async fn list_tenants() -> Result<Vec<TenantSummary>, AppError> {
    ctx::reading(|c| async move { c.backend.list_tenants(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "tenants/create")]
pub async fn submit_tenant(csrf: String, slug: String, name: String) -> Result<Tenant, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .create_tenant(&c.principal, &c.meta, CreateTenant { slug, name })
            .await
    })
    .await
}
