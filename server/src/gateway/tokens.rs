//! Gateway tokens (`gateway_tokens`, written only here): what a client sends to a gateway.
//! A `user` token carries whatever its user may `use` at the time of each request; an
//! `endpoint` token only the endpoints named (and only while its user may still `use` them).
//! The secret (`syg_` + 256 random bits) is shown once; the table keeps its SHA-256.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{Action, Permission, ResourceKind};
use app::model::*;

use super::endpoints::{endpoint_rows, Rights};
use crate::access::is_admin;
use crate::audit;
use crate::http::error::{ApiError, ApiResult, AppError, Validator};
use crate::http::require;
use crate::http::text::{clean_text, UNCLEAN};
use crate::identity::secret;
use crate::store::{corrupt, new_id, text_enum, Store};

/// The prefix that marks a gateway token (so secret scanners can find leaked ones).
pub const GATEWAY_TOKEN_PREFIX: &str = "syg_";

const DAY_MS: i64 = 86_400_000;
const DEFAULT_DAYS: i64 = 90;
/// Most endpoints one endpoint token names.
const MAX_ENDPOINTS: usize = 100;

const TOKEN_SELECT: &str = "SELECT k.id, k.gateway_id, g.name AS gateway_name, k.user_id, k.name, k.kind, k.endpoint_ids, k.prefix,
    k.expires_at, k.revoked_at, k.created_at FROM gateway_tokens k JOIN gateways g ON g.id = k.gateway_id";

fn token_from_row(r: &AnyRow) -> Result<GatewayToken, sqlx::Error> {
    let ids: String = r.try_get("endpoint_ids")?;
    Ok(GatewayToken {
        id: r.try_get("id")?,
        user_id: r.try_get("user_id")?,
        gateway_id: r.try_get("gateway_id")?,
        gateway_name: r.try_get("gateway_name")?,
        name: r.try_get("name")?,
        kind: text_enum(r, "kind")?,
        endpoint_ids: serde_json::from_str(&ids).map_err(|e| corrupt("endpoint_ids", e))?,
        prefix: r.try_get("prefix")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
        created_at: r.try_get("created_at")?,
    })
}

/// Issues a token for the caller on one of the tenant's gateways: a user token without
/// `endpoint_ids`, else an endpoint token for those endpoints, each of which the caller must
/// be allowed to `use`. The answer is the only place the secret appears.
pub async fn issue_token(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    gateway_id: &str,
    input: CreateGatewayToken,
) -> ApiResult<IssuedGatewayToken> {
    require(p, Action::ManageOwnTokens)?;
    let gateway_name: String =
        sqlx::query_scalar("SELECT name FROM gateways WHERE tenant_id = $1 AND id = $2")
            .bind(p.tenant_id())
            .bind(gateway_id)
            .fetch_optional(&store.pool)
            .await?
            .ok_or(AppError::NotFound)?;
    let name = input.name.trim().to_string();
    let days = input.expires_in_days.unwrap_or(DEFAULT_DAYS);
    let mut v = Validator::default();
    v.check(
        !name.is_empty() && name.chars().count() <= 64,
        "name",
        "must be 1 to 64 characters",
    );
    v.check(clean_text(&name), "name", UNCLEAN);
    v.check(
        (1..=365).contains(&days),
        "expires_in_days",
        "must be between 1 and 365",
    );
    let (kind, endpoint_ids) = match input.endpoint_ids {
        None => (GatewayTokenKind::User, Vec::new()),
        Some(ids) => {
            let mut unique: Vec<String> = Vec::new();
            for id in ids {
                if !unique.contains(&id) {
                    unique.push(id);
                }
            }
            if unique.is_empty() || unique.len() > MAX_ENDPOINTS {
                v.check(
                    false,
                    "endpoint_ids",
                    "name 1 to 100 endpoints (leave it out for a token with all your rights)",
                );
            } else {
                let rights = Rights::load(store, p, ResourceKind::Endpoint).await?;
                let usable: Vec<String> = endpoint_rows(store, p.tenant_id(), None)
                    .await?
                    .iter()
                    .filter(|e| rights.on_endpoint(e).is_some_and(|x| x >= Permission::Use))
                    .map(|e| e.id.clone())
                    .collect();
                let refused: Vec<&String> =
                    unique.iter().filter(|id| !usable.contains(id)).collect();
                if let Some(first) = refused.first() {
                    v.check(
                        false,
                        "endpoint_ids",
                        &format!("no endpoint {first} that you may use"),
                    );
                }
            }
            (GatewayTokenKind::Endpoint, unique)
        }
    };
    v.finish()?;
    let token = format!("{GATEWAY_TOKEN_PREFIX}{}", secret::random());
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    let info = GatewayToken {
        id: new_id(),
        user_id: p.user_id().to_string(),
        gateway_id: gateway_id.to_string(),
        gateway_name,
        name,
        kind,
        endpoint_ids,
        prefix: token.chars().take(12).collect(),
        expires_at: Some(now + days * DAY_MS),
        revoked_at: None,
        created_at: now,
    };
    sqlx::query("INSERT INTO gateway_tokens (id, tenant_id, gateway_id, user_id, name, kind, endpoint_ids, token_hash, prefix, expires_at, created_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)")
        .bind(&info.id)
        .bind(p.tenant_id())
        .bind(&info.gateway_id)
        .bind(p.user_id())
        .bind(&info.name)
        .bind(info.kind.as_str())
        .bind(serde_json::to_string(&info.endpoint_ids).unwrap_or_else(|_| "[]".into()))
        .bind(secret::digest(&token))
        .bind(&info.prefix)
        .bind(info.expires_at)
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "gateway_token.issue",
        "gateway_token",
        &info.id,
        json!({"name": info.name, "prefix": info.prefix, "gateway": info.gateway_name, "gateway_id": info.gateway_id,
            "kind": info.kind.as_str(), "endpoint_ids": info.endpoint_ids, "expires_at": info.expires_at}),
    )
    .await?;
    tx.commit().await?;
    Ok(IssuedGatewayToken { token, info })
}

/// The caller's gateway tokens (never their secrets); with `all`, a tenant admin sees every
/// one of the tenant's.
pub async fn list_tokens(store: &Store, p: &Principal, all: bool) -> ApiResult<Vec<GatewayToken>> {
    require(p, Action::ManageOwnTokens)?;
    if all && !is_admin(p) {
        return Err(ApiError(AppError::Forbidden));
    }
    let rows = sqlx::query(&format!(
        "{TOKEN_SELECT} WHERE k.tenant_id = $1 AND ($2 = 1 OR k.user_id = $3) ORDER BY k.created_at DESC, k.id"
    ))
    .bind(p.tenant_id())
    .bind(i64::from(all))
    .bind(p.user_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.iter().map(token_from_row).collect::<Result<_, _>>()?)
}

/// Revokes a gateway token: its owner or a tenant admin; 404 for anyone else. The gateway
/// refuses it from its next request on.
pub async fn revoke_token(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageOwnTokens)?;
    let row = sqlx::query(&format!(
        "{TOKEN_SELECT} WHERE k.tenant_id = $1 AND k.id = $2 AND ($3 = 1 OR k.user_id = $4)"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .bind(i64::from(is_admin(p)))
    .bind(p.user_id())
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    let token = token_from_row(&row)?;
    let owner: String = row.try_get("user_id")?;
    if token.revoked_at.is_some() {
        return Ok(());
    }
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    sqlx::query("UPDATE gateway_tokens SET revoked_at = $1 WHERE tenant_id = $2 AND id = $3 AND revoked_at IS NULL")
        .bind(now)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "gateway_token.revoke",
        "gateway_token",
        id,
        json!({"name": token.name, "prefix": token.prefix, "gateway": token.gateway_name, "owner": owner}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
