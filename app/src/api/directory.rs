//! Server functions of the directory's edit and delete forms: users (profile, role, disable,
//! password reset), groups, and the access rules of a group. Each works as a plain form post.

use super::*;
#[cfg(feature = "ssr")]
use crate::access::{Permission, ResourceKind};
use crate::model::{AccessRule, User};
#[cfg(feature = "ssr")]
use crate::model::{CreateAccessRule, UpdateGroup, UpdateUser};

#[server(prefix = "/_sf", endpoint = "users/detail")]
pub async fn load_user(id: String) -> Result<User, AppError> {
    ctx::reading(move |c| async move { c.backend.get_user(&c.principal, &id).await }).await
}

/// A user's profile and role: display name, email, tenant administrator, disabled.
#[server(prefix = "/_sf", endpoint = "users/update")]
pub async fn update_user_form(
    csrf: String,
    id: String,
    display_name: String,
    email: String,
    is_tenant_admin: Option<String>,
    disabled: Option<String>,
) -> Result<User, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = UpdateUser {
            display_name: Some(display_name),
            email: Some(email.trim().to_string()),
            password: None,
            is_tenant_admin: Some(is_tenant_admin.is_some()),
            disabled: Some(disabled.is_some()),
        };
        c.backend
            .update_user(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

/// A new password for a user (their sessions and tokens stay: disable the user to end them).
#[server(prefix = "/_sf", endpoint = "users/password")]
pub async fn reset_password_form(
    csrf: String,
    id: String,
    password: String,
) -> Result<User, AppError> {
    ctx::writing(&csrf, move |c| async move {
        if password.is_empty() {
            return Err(AppError::field("password", "type the new password"));
        }
        let input = UpdateUser {
            password: Some(password),
            ..UpdateUser::default()
        };
        c.backend
            .update_user(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "users/delete")]
pub async fn delete_user_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_user(&c.principal, &c.meta, &id).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "groups/update")]
pub async fn update_group_form(
    csrf: String,
    id: String,
    name: String,
    description: String,
) -> Result<Group, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = UpdateGroup {
            name: Some(name),
            description: Some(description),
        };
        c.backend
            .update_group(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "groups/delete")]
pub async fn delete_group_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_group(&c.principal, &c.meta, &id).await
    })
    .await
}

/// A rule of a group: `scope` is `all` (every resource of the kind), `project:<id>` (that
/// project and every project below it) or `one:<id>` (one resource).
#[server(prefix = "/_sf", endpoint = "rules/create")]
pub async fn create_rule_form(
    csrf: String,
    group_id: String,
    permission: String,
    resource_kind: String,
    scope: String,
) -> Result<AccessRule, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let permission = Permission::parse(&permission)
            .ok_or_else(|| AppError::field("permission", "choose view, use, manage or admin"))?;
        let resource_kind = ResourceKind::parse(&resource_kind)
            .ok_or_else(|| AppError::field("resource_kind", "choose a kind of resource"))?;
        let (resource_id, project_id) = match scope.split_once(':') {
            _ if scope == "all" => (None, None),
            Some(("project", id)) if !id.is_empty() => (None, Some(id.to_string())),
            Some(("one", id)) if !id.is_empty() => (Some(id.to_string()), None),
            _ => return Err(AppError::field("scope", "choose what the rule covers")),
        };
        let input = CreateAccessRule {
            group_id,
            permission,
            resource_kind,
            resource_id,
            project_id,
        };
        c.backend.create_rule(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "rules/delete")]
pub async fn delete_rule_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_rule(&c.principal, &c.meta, &id).await
    })
    .await
}
