//! Users, groups, memberships and projects of one tenant. Every query is scoped by the caller's
//! tenant (from the principal); an id of another tenant is simply not found.

use app::model::*;

use crate::http::error::{ApiResult, AppError};
use crate::http::text::clean_text;
pub(crate) use crate::http::text::slug_ok;

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
