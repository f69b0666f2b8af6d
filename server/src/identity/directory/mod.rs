//! Users, groups, memberships and projects of one tenant. Every query is scoped by the caller's
//! tenant (from the principal); an id of another tenant is simply not found.

use app::model::*;

use serde_json::json;

use crate::http::error::{unique_violation_as, ApiResult, AppError, Validator};
pub(crate) use crate::http::text::slug_ok;
use crate::http::text::{clean_multiline, clean_text, UNCLEAN};
use crate::store::WriteTx;

mod groups;
mod projects;
mod users;

pub use groups::*;
pub use projects::*;
pub use users::*;

/// `limit` and `cursor` of a list request.
#[derive(Clone, Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl ListParams {
    pub fn all() -> Self {
        ListParams {
            limit: Some(500),
            cursor: None,
        }
    }
    fn limit(&self) -> ApiResult<i64> {
        let l = self.limit.unwrap_or(100);
        if (1..=500).contains(&l) {
            Ok(l)
        } else {
            Err(AppError::field("limit", "must be between 1 and 500").into())
        }
    }
}

fn paginate<T>(mut items: Vec<T>, limit: i64, key: impl Fn(&T) -> String) -> Page<T> {
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(key)
    } else {
        None
    };
    Page { items, next_cursor }
}

fn email_ok(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !s.contains(char::is_whitespace)
        && clean_text(s)
        && s.len() <= 254
}

/// The name and description a group or project takes: the request's, trimmed, else the current
/// ones (an update), checked with the messages at their fields.
pub(crate) fn named(name: &str, description: &str) -> ApiResult<(String, String)> {
    let (name, description) = (name.trim().to_string(), description.trim().to_string());
    let mut v = Validator::default();
    v.check(
        !name.is_empty() && name.chars().count() <= 64 && !name.contains(['/', '\n']),
        "name",
        "must be 1 to 64 characters, without '/'",
    );
    v.check(clean_text(&name), "name", UNCLEAN);
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
    v.check(clean_multiline(&description), "description", UNCLEAN);
    v.finish()?;
    Ok((name, description))
}

/// The two directory tables whose rows have a name and a description.
#[derive(Clone, Copy)]
pub(crate) enum Named {
    Group,
    Project,
}

impl Named {
    fn update_sql(self) -> &'static str {
        match self {
            Named::Group => {
                "UPDATE groups SET name = $1, description = $2 WHERE tenant_id = $3 AND id = $4"
            }
            Named::Project => {
                "UPDATE projects SET name = $1, description = $2 WHERE tenant_id = $3 AND id = $4"
            }
        }
    }
    fn taken(self) -> &'static str {
        match self {
            Named::Group => "a group with this name exists",
            Named::Project => "a project with this name exists",
        }
    }
}

/// Renames a group or project in `tx` (a name taken in the tenant is a 422 at `name`).
pub(crate) async fn rename_row(
    tx: &mut WriteTx,
    what: Named,
    tenant_id: &str,
    id: &str,
    name: &str,
    description: &str,
) -> ApiResult<()> {
    sqlx::query(what.update_sql())
        .bind(name)
        .bind(description)
        .bind(tenant_id)
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", what.taken())))?;
    Ok(())
}

/// The audit summary of a rename.
pub(crate) fn rename_summary(from: (&str, &str), to: (&str, &str)) -> serde_json::Value {
    json!({"name": {"from": from.0, "to": to.0}, "description": {"from": from.1, "to": to.1}})
}
