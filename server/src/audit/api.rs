//! `GET /api/v1/audit`.

use axum::extract::{FromRef, State};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::access::Action;
use app::model::{AuditEntry, AuditFilter, Page};
use app::time::parse_time;

use crate::http::error::{ApiResult, AppError, Problem};
use crate::http::extract::ApiQuery;
use crate::http::require;
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(list_audit))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Earliest time: RFC 3339 (`2026-12-01T00:00:00Z`), a date, or epoch milliseconds, in the
    /// years 0000 to 9999 (the pattern shows days 01 to 28; every real calendar day is accepted).
    #[param(
        pattern = "^(-?[0-9]{1,13}|[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,9})?)?Z?)?)?$"
    )]
    from: Option<String>,
    /// Latest time, inclusive (a bare date means its end).
    #[param(
        pattern = "^(-?[0-9]{1,13}|[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,9})?)?Z?)?)?$"
    )]
    to: Option<String>,
    /// Actor username or user id.
    actor: Option<String>,
    /// Exact action (`group.create`) or a prefix ending in `.` or `*` (`group.`).
    action: Option<String>,
    /// Target id or kind (`group`).
    target: Option<String>,
    /// Page size, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^[0-9]{0,18}$")]
    cursor: Option<String>,
}

/// The tenant's audit log, newest first.
#[utoipa::path(get, path = "/audit", tag = "audit", params(AuditParams),
    responses((status = 200, body = Page<AuditEntry>), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn list_audit(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<AuditParams>,
) -> ApiResult<Json<Page<AuditEntry>>> {
    require(&p, Action::ViewAudit)?;
    let time = |v: &Option<String>, field: &str, end: bool| -> ApiResult<Option<i64>> {
        match v.as_deref().filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(text) => parse_time(text, end).map(Some).ok_or_else(|| {
                AppError::field(field, "is not a time (RFC 3339, YYYY-MM-DD or epoch ms)").into()
            }),
        }
    };
    let filter = AuditFilter {
        from: time(&q.from, "from", false)?,
        to: time(&q.to, "to", true)?,
        actor: q.actor,
        action: q.action,
        target: q.target,
        limit: q.limit,
        cursor: q.cursor.filter(|c| !c.is_empty()),
    };
    Ok(Json(super::list(&store, p.tenant_id(), &filter).await?))
}
