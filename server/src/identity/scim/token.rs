//! The tenant's SCIM token (REST under `/api/v1`, tenant admins): issued and shown once,
//! stored as SHA-256, replaced by the next one, revoked.

use serde_json::json;

use app::access::Action;
use app::model::{Principal, RequestMeta};

use crate::audit;
use crate::http::error::ApiResult;
use crate::http::require;
use crate::identity::secret;
use crate::store::Store;

/// When the tenant's SCIM token was issued; `None` when there is none.
pub async fn token_issued_at(store: &Store, p: &Principal) -> ApiResult<Option<i64>> {
    require(p, Action::ManageDirectory)?;
    Ok(
        sqlx::query_scalar("SELECT created_at FROM scim_tokens WHERE tenant_id = $1")
            .bind(p.tenant_id())
            .fetch_optional(&store.pool)
            .await?,
    )
}

/// Issues the tenant's SCIM token, replacing any earlier one; shown once.
pub async fn issue_token(store: &Store, p: &Principal, meta: &RequestMeta) -> ApiResult<String> {
    require(p, Action::ManageDirectory)?;
    let token = format!("scim_{}", secret::random());
    let now = store.now();
    let mut tx = store.begin_write().await?;
    sqlx::query("DELETE FROM scim_tokens WHERE tenant_id = $1")
        .bind(p.tenant_id())
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("INSERT INTO scim_tokens (tenant_id, token_hash, created_at) VALUES ($1, $2, $3)")
        .bind(p.tenant_id())
        .bind(secret::digest(&token))
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "scim.token_issue",
        "tenant",
        p.tenant_id(),
        json!({}),
    )
    .await?;
    tx.commit().await?;
    Ok(token)
}

pub async fn revoke_token(store: &Store, p: &Principal, meta: &RequestMeta) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    sqlx::query("DELETE FROM scim_tokens WHERE tenant_id = $1")
        .bind(p.tenant_id())
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "scim.token_revoke",
        "tenant",
        p.tenant_id(),
        json!({}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
