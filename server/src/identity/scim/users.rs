//! `/Users`: the accounts an IdP provisions. SCIM sees and changes only the users it
//! provisioned or that signed in through an IdP, never local accounts or admins.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use sqlx::Row;

use app::model::RequestMeta;

use super::errors::{scim_json, unique_or, ScimError, ScimJson, ScimResult, ScimType};
use super::query::{get_ci, ListParams};
use super::schemas::USER;
use super::{location, meta_of, patch, record, rfc3339, tenant, USER_SCHEMA};
use crate::http::text;
use crate::identity::directory::{self, slug_ok};
use crate::store::{new_id, Store, WriteTx};

/// A user as SCIM sees it.
pub struct ScimUser {
    id: String,
    username: String,
    display_name: String,
    email: Option<String>,
    external_id: Option<String>,
    name: Option<Value>,
    active: bool,
    created_at: i64,
}

/// The users SCIM may see and change, as a condition on the `users` row named `u`: those SCIM
/// provisioned or an IdP signed in, never local accounts and never admins (those stay under
/// the tenant's own control; a SCIM token must not disable or delete them).
pub fn managed(u: &str) -> String {
    format!(
        "{u}.is_tenant_admin = 0 AND {u}.is_platform_admin = 0 AND ({u}.provisioned_by = 'scim' OR EXISTS (SELECT 1 FROM external_identities x WHERE x.user_id = {u}.id))"
    )
}

async fn load(store: &Store, tenant: &str, id: Option<&str>) -> Result<Vec<ScimUser>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT id, username, display_name, email, external_id, scim_name, disabled, created_at FROM users
         WHERE tenant_id = $1 AND ($2 = '' OR id = $2) AND {} ORDER BY username",
        managed("users")
    ))
    .bind(tenant)
    .bind(id.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let name: Option<String> = r.try_get("scim_name")?;
            Ok(ScimUser {
                id: r.try_get("id")?,
                username: r.try_get("username")?,
                display_name: r.try_get("display_name")?,
                email: r.try_get("email")?,
                external_id: r.try_get("external_id")?,
                name: name.and_then(|n| serde_json::from_str(&n).ok()),
                active: r.try_get::<i64, _>("disabled")? == 0,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

async fn load_one(store: &Store, tenant: &str, id: &str) -> Result<ScimUser, ScimError> {
    load(store, tenant, Some(id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)
}

async fn groups_of(store: &Store, tenant: &str, user_id: &str) -> Result<Vec<Value>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT g.id, g.name FROM memberships m JOIN groups g ON g.id = m.group_id WHERE m.tenant_id = $1 AND m.user_id = $2 ORDER BY g.name",
    )
    .bind(tenant)
    .bind(user_id)
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let id: String = r.try_get("id")?;
            Ok(json!({"value": id, "$ref": location("Groups", &id), "display": r.try_get::<String, _>("name")?}))
        })
        .collect()
}

/// The whole resource, before attribute selection.
async fn doc(store: &Store, tenant: &str, u: &ScimUser) -> Result<Value, sqlx::Error> {
    let mut v = json!({
        "schemas": [USER_SCHEMA],
        "id": u.id,
        "userName": u.username,
        "active": u.active,
        "meta": {"resourceType": "User", "created": rfc3339(u.created_at), "location": location("Users", &u.id)},
    });
    // Without a display name of its own a user shows its userName: displayName unassigned.
    if u.display_name != u.username && !u.display_name.is_empty() {
        v["displayName"] = json!(u.display_name);
    }
    if let Some(n) = &u.name {
        v["name"] = n.clone();
    }
    if let Some(e) = &u.email {
        v["emails"] = json!([{"value": e}]);
    }
    if let Some(x) = &u.external_id {
        v["externalId"] = json!(x);
    }
    let groups = groups_of(store, tenant, &u.id).await?;
    if !groups.is_empty() {
        v["groups"] = json!(groups);
    }
    Ok(v)
}

/// Every user SCIM manages in the tenant, whole.
pub async fn all(store: &Store, tenant: &str) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::new();
    for u in load(store, tenant, None).await? {
        out.push(doc(store, tenant, &u).await?);
    }
    Ok(out)
}

async fn respond(
    store: &Store,
    tenant: &str,
    uri: &Uri,
    id: &str,
    status: StatusCode,
) -> ScimResult {
    let params = ListParams::from_query(uri)?;
    let u = load_one(store, tenant, id).await?;
    let v = doc(store, tenant, &u).await?;
    Ok(scim_json(status, params.selection.apply(&USER, v)))
}

/// Lists, filtered and paged (`GET /Users` and `POST /Users/.search`).
async fn list(store: &Store, tenant: &str, params: ListParams) -> ScimResult {
    params.check_filter(&[&USER])?;
    let mut items = all(store, tenant).await?;
    if let Some(f) = &params.filter {
        items.retain(|u| f.matches(u, &USER, None));
    }
    let items = items
        .into_iter()
        .map(|u| params.selection.apply(&USER, u))
        .collect();
    Ok(params.respond(items))
}

pub async fn list_users(State(store): State<Store>, headers: HeaderMap, uri: Uri) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    list(&store, &tenant, ListParams::from_query(&uri)?).await
}

pub async fn search_users(
    State(store): State<Store>,
    headers: HeaderMap,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    list(&store, &tenant, ListParams::from_search(&body)?).await
}

pub async fn get_user(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

/// The attributes of a User body that Switchyard keeps.
struct UserInput {
    username: String,
    display_name: String,
    email: Option<String>,
    external_id: Option<String>,
    name: Option<Value>,
    active: bool,
}

fn invalid(detail: impl Into<String>) -> ScimError {
    ScimError::bad(ScimType::InvalidValue, detail)
}

/// An optional string attribute; anything but a string or null is refused.
fn opt_str<'a>(body: &'a Value, key: &str) -> Result<Option<&'a str>, ScimError> {
    match get_ci(body, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    }
}

/// Reads a User body. `current_active` is the user's state for a PUT or PATCH (a PUT without
/// `active` leaves it as it is); `None` for a POST, which also takes a display name from
/// `name` when `displayName` is absent.
fn user_input(body: &Value, current_active: Option<bool>) -> Result<UserInput, ScimError> {
    let raw = opt_str(body, "userName")?.ok_or_else(|| invalid("userName is required"))?;
    let username = crate::identity::sso::clean_username(raw)
        .filter(|u| slug_ok(u))
        .ok_or_else(|| {
            invalid("userName: use letters, digits, '-', '_' or '.' (an email's local part works)")
        })?;
    let name = match get_ci(body, "name") {
        None | Some(Value::Null) => None,
        Some(Value::Object(n)) => {
            let mut kept = Map::new();
            for (k, v) in n {
                let Some(sub) = USER.attr("name").and_then(|a| a.sub_attr(k)) else {
                    continue;
                };
                match v {
                    Value::String(s) => {
                        kept.insert(sub.name.into(), json!(text::scrub(s, 200)));
                    }
                    Value::Null => {}
                    _ => return Err(invalid(format!("name.{k} must be a string"))),
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Some(_) => return Err(invalid("name must be an object")),
    };
    let display = opt_str(body, "displayName")?
        .map(|d| text::scrub(d, 100))
        .filter(|d| !d.trim().is_empty());
    let derived = || {
        let n = name.as_ref()?;
        let part = |k: &str| n[k].as_str().unwrap_or("").to_string();
        let formatted = part("formatted");
        let full = if formatted.trim().is_empty() {
            format!("{} {}", part("givenName"), part("familyName"))
        } else {
            formatted
        };
        let full = text::scrub(full.trim(), 100);
        (!full.is_empty()).then_some(full)
    };
    // An IdP's names are dropped of control and bidi characters, not refused.
    let display_name = match (display, current_active) {
        (Some(d), _) => d,
        (None, None) => derived().unwrap_or_else(|| username.clone()),
        (None, Some(_)) => username.clone(),
    };
    let email = match get_ci(body, "emails") {
        None | Some(Value::Null) => None,
        Some(Value::Array(es)) => {
            let pick = es
                .iter()
                .find(|e| get_ci(e, "primary").and_then(Value::as_bool) == Some(true))
                .or_else(|| es.first());
            match pick.map(|e| get_ci(e, "value")) {
                None | Some(None) | Some(Some(Value::Null)) => None,
                Some(Some(Value::String(e)))
                    if text::clean_text(e) && e.len() <= 254 && e.contains('@') =>
                {
                    Some(e.trim().to_string())
                }
                Some(Some(_)) => return Err(invalid("emails: value must be an email address")),
            }
        }
        Some(_) => return Err(invalid("emails must be a list")),
    };
    let external_id = match opt_str(body, "externalId")? {
        Some(x) if x.len() > 256 || !text::clean_text(x) => {
            return Err(invalid(
                "externalId: at most 256 characters, no control characters",
            ))
        }
        x => x.map(str::to_string),
    };
    let active = match get_ci(body, "active") {
        None | Some(Value::Null) => current_active.unwrap_or(true),
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(_) => return Err(invalid("active must be true or false")),
    };
    Ok(UserInput {
        username,
        display_name,
        email,
        external_id,
        name,
        active,
    })
}

fn name_json(input: &UserInput) -> Option<String> {
    input.name.as_ref().map(Value::to_string)
}

pub async fn create_user(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let input = user_input(&body, None)?;
    let meta = meta_of(&headers);
    let id = new_id();
    let mut tx = store.begin_write().await?;
    let scim_name = name_json(&input);
    let row = directory::NewUserRow {
        id: &id,
        tenant_id: &tenant,
        username: &input.username,
        display_name: &input.display_name,
        email: input.email.as_deref(),
        password_hash: None,
        is_tenant_admin: false,
        is_platform_admin: false,
        disabled: !input.active,
        external_id: input.external_id.as_deref(),
        provisioned_by: Some("scim"),
        scim_name: scim_name.as_deref(),
        created_at: tx.now(),
    };
    let inserted = directory::insert_user_row(&mut tx, &row).await;
    if let Err(e) = inserted {
        return Err(unique_or(e, "a user with this userName exists"));
    }
    record(&mut tx, &tenant, &meta, "user.create", "user", &id, json!({"username": input.username, "display_name": input.display_name, "email": input.email, "via": "scim", "active": input.active})).await?;
    tx.commit().await?;
    respond(&store, &tenant, &uri, &id, StatusCode::CREATED).await
}

/// Writes every kept attribute; disabling also ends the user's sessions and API tokens.
async fn write(
    tx: &mut WriteTx,
    tenant: &str,
    meta: &RequestMeta,
    id: &str,
    input: &UserInput,
) -> Result<(), ScimError> {
    let scim_name = name_json(input);
    let fields = directory::ScimUserFields {
        display_name: &input.display_name,
        email: input.email.as_deref(),
        external_id: input.external_id.as_deref(),
        disabled: !input.active,
        scim_name: scim_name.as_deref(),
    };
    let changed = directory::set_scim_fields(tx, tenant, id, &fields, &managed("users")).await?;
    if changed == 0 {
        return Err(ScimError::not_found());
    }
    let renamed = directory::rename_user(tx, tenant, id, &input.username).await;
    if let Err(e) = renamed {
        return Err(unique_or(e, "a user with this userName exists"));
    }
    if !input.active {
        directory::end_access(tx, tenant, id, tx.now(), true).await?;
    }
    record(tx, tenant, meta, "user.update", "user", id, json!({"username": input.username, "display_name": input.display_name, "email": input.email, "active": input.active, "via": "scim"})).await?;
    Ok(())
}

pub async fn replace_user(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let current = load_one(&store, &tenant, &id).await?;
    let input = user_input(&body, Some(current.active))?;
    let mut tx = store.begin_write().await?;
    write(&mut tx, &tenant, &meta_of(&headers), &id, &input).await?;
    tx.commit().await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

pub async fn patch_user(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let ops = patch::operations(&body)?;
    let current = load_one(&store, &tenant, &id).await?;
    let mut wanted = doc(&store, &tenant, &current).await?;
    patch::apply(&USER, &mut wanted, &ops)?;
    let input = user_input(&wanted, Some(current.active))?;
    let mut tx = store.begin_write().await?;
    write(&mut tx, &tenant, &meta_of(&headers), &id, &input).await?;
    tx.commit().await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

pub async fn delete_user(
    State(store): State<Store>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ScimError> {
    let tenant = tenant(&store, &headers).await?;
    let u = load_one(&store, &tenant, &id).await?;
    let mut tx = store.begin_write().await?;
    directory::purge_user(&mut tx, &tenant, &id).await?;
    record(
        &mut tx,
        &tenant,
        &meta_of(&headers),
        "user.delete",
        "user",
        &id,
        json!({"username": u.username, "via": "scim"}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_bodies_are_read_as_sent_or_refused() {
        let u = user_input(&json!({"userName": "Grace.Hopper", "name": {"givenName": "Grace", "familyName": "Hopper", "nickName": "x"},
            "emails": [{"value": "a@x.test"}, {"value": "g@x.test", "primary": true}]}), None).unwrap();
        assert_eq!(u.username, "grace.hopper");
        assert_eq!(u.display_name, "Grace Hopper");
        assert_eq!(u.email.as_deref(), Some("g@x.test"));
        assert_eq!(
            u.name,
            Some(json!({"givenName": "Grace", "familyName": "Hopper"}))
        );
        assert!(u.active);
        // A PUT without displayName or active: no display name, the state kept.
        let u = user_input(
            &json!({"userName": "g", "name": {"formatted": "G"}}),
            Some(false),
        )
        .unwrap();
        assert_eq!((u.display_name.as_str(), u.active), ("g", false));
        for bad in [
            json!({}),
            json!({"userName": 5}),
            json!({"userName": "g", "active": "maybe"}),
            json!({"userName": "g", "emails": "g@x"}),
            json!({"userName": "g", "emails": [{"value": "no-at"}]}),
            json!({"userName": "g", "externalId": 7}),
            json!({"userName": "g", "name": {"givenName": 1}}),
        ] {
            let e = user_input(&bad, None)
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert_eq!(e.scim_type, Some(ScimType::InvalidValue), "{bad}");
        }
    }
}
