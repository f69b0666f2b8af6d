//! `/Groups`: Switchyard groups and their SCIM-managed members. A group SCIM creates is
//! named by the slug of its displayName (`ML Research` is `ml-research`), the name access
//! rules and queues refer to; the displayName itself is kept as sent and may change without
//! renaming the group. Memberships added here have source `scim`: sign-in group sync leaves
//! them alone, SCIM removes them.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sqlx::Row;

use app::model::RequestMeta;

use super::errors::{scim_json, unique_or, ScimError, ScimJson, ScimResult, ScimType};
use super::query::{get_ci, CmpOp, Filter, ListParams};
use super::schemas::GROUP;
use super::users::managed;
use super::{location, meta_of, patch, record, rfc3339, tenant, GROUP_SCHEMA};
use crate::http::text;
use crate::identity::directory::{self, slug_ok, MemberSource};
use crate::store::{new_id, Store, WriteTx};

struct ScimGroup {
    id: String,
    /// The Switchyard name.
    name: String,
    display_name: Option<String>,
    external_id: Option<String>,
    created_at: i64,
}

async fn load(
    store: &Store,
    tenant: &str,
    id: Option<&str>,
) -> Result<Vec<ScimGroup>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, name, display_name, external_id, created_at FROM groups WHERE tenant_id = $1 AND ($2 = '' OR id = $2) ORDER BY name",
    )
    .bind(tenant)
    .bind(id.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ScimGroup {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                display_name: r.try_get("display_name")?,
                external_id: r.try_get("external_id")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

async fn load_one(store: &Store, tenant: &str, id: &str) -> Result<ScimGroup, ScimError> {
    load(store, tenant, Some(id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)
}

/// The whole resource, before attribute selection (`members.display` is returned only when
/// asked for).
async fn doc(store: &Store, tenant: &str, g: &ScimGroup) -> Result<Value, sqlx::Error> {
    let members: Vec<Value> = sqlx::query(
        "SELECT u.id, u.username FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.tenant_id = $1 AND m.group_id = $2 ORDER BY u.username",
    )
    .bind(tenant)
    .bind(&g.id)
    .fetch_all(&store.pool)
    .await?
    .iter()
    .map(|m| {
        let uid: String = m.try_get("id")?;
        Ok(json!({"value": uid, "$ref": location("Users", &uid), "type": "User", "display": m.try_get::<String, _>("username")?}))
    })
    .collect::<Result<_, sqlx::Error>>()?;
    let mut v = json!({
        "schemas": [GROUP_SCHEMA],
        "id": g.id,
        "displayName": g.display_name.as_deref().unwrap_or(&g.name),
        "meta": {"resourceType": "Group", "created": rfc3339(g.created_at), "location": location("Groups", &g.id)},
    });
    if !members.is_empty() {
        v["members"] = json!(members);
    }
    if let Some(x) = &g.external_id {
        v["externalId"] = json!(x);
    }
    Ok(v)
}

/// Whether `filter` matches a group. `displayName eq "ML Research"` also finds the group
/// named `ml-research`, so an IdP pushing a group finds one made in Switchyard.
fn matches(filter: &Filter, g: &ScimGroup, v: &Value) -> bool {
    if let Filter::Compare(attr, CmpOp::Eq, Value::String(s)) = filter {
        if GROUP.strip_urn(attr).eq_ignore_ascii_case("displayName") && g.name == group_slug(s) {
            return true;
        }
    }
    filter.matches(v, &GROUP, None)
}

/// Every group of the tenant, whole, with those `filter` matches.
pub async fn all(
    store: &Store,
    tenant: &str,
    filter: Option<&Filter>,
) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::new();
    for g in load(store, tenant, None).await? {
        let v = doc(store, tenant, &g).await?;
        if filter.is_none_or(|f| matches(f, &g, &v)) {
            out.push(v);
        }
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
    let g = load_one(store, tenant, id).await?;
    let v = doc(store, tenant, &g).await?;
    Ok(scim_json(status, params.selection.apply(&GROUP, v)))
}

async fn list(store: &Store, tenant: &str, params: ListParams) -> ScimResult {
    params.check_filter(&[&GROUP])?;
    let items = all(store, tenant, params.filter.as_ref()).await?;
    let items = items
        .into_iter()
        .map(|g| params.selection.apply(&GROUP, g))
        .collect();
    Ok(params.respond(items))
}

pub async fn list_groups(State(store): State<Store>, headers: HeaderMap, uri: Uri) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    list(&store, &tenant, ListParams::from_query(&uri)?).await
}

pub async fn search_groups(
    State(store): State<Store>,
    headers: HeaderMap,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    list(&store, &tenant, ListParams::from_search(&body)?).await
}

pub async fn get_group(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

/// Switchyard group names are slugs: "ML Research" becomes `ml-research`.
pub fn group_slug(display: &str) -> String {
    let mut out = String::new();
    for c in display.trim().to_lowercase().chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(63).collect()
}

/// The attributes of a Group body that Switchyard keeps.
struct GroupInput {
    display_name: String,
    external_id: Option<String>,
    members: Vec<String>,
}

fn invalid(detail: impl Into<String>) -> ScimError {
    ScimError::bad(ScimType::InvalidValue, detail)
}

fn group_input(body: &Value) -> Result<GroupInput, ScimError> {
    let display_name = match get_ci(body, "displayName") {
        Some(Value::String(d)) if !d.trim().is_empty() => text::scrub(d, 200),
        _ => return Err(invalid("displayName is required")),
    };
    let external_id = match get_ci(body, "externalId") {
        None | Some(Value::Null) => None,
        Some(Value::String(x)) if x.len() <= 256 && text::clean_text(x) => Some(x.clone()),
        Some(_) => return Err(invalid("externalId: a string of at most 256 characters")),
    };
    let mut members = Vec::new();
    match get_ci(body, "members") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ms)) => {
            for m in ms {
                if let Some(t) = get_ci(m, "type").and_then(Value::as_str) {
                    if !t.eq_ignore_ascii_case("User") {
                        return Err(invalid("members are users; groups cannot be members"));
                    }
                }
                let uid = get_ci(m, "value")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("each member has a value, the user's id"))?;
                if !members.iter().any(|x| x == uid) {
                    members.push(uid.to_string());
                }
            }
        }
        Some(_) => return Err(invalid("members must be a list")),
    }
    Ok(GroupInput {
        display_name,
        external_id,
        members,
    })
}

/// Adds and removes members (only users SCIM manages), auditing each change.
async fn set_members(
    tx: &mut WriteTx,
    tenant: &str,
    meta: &RequestMeta,
    group: (&str, &str),
    add: &[String],
    remove: &[String],
) -> Result<(), ScimError> {
    let now = tx.now();
    for uid in add {
        let user: Option<String> = sqlx::query_scalar(&format!(
            "SELECT username FROM users WHERE tenant_id = $1 AND id = $2 AND {}",
            managed("users")
        ))
        .bind(tenant)
        .bind(uid)
        .fetch_optional(&mut *tx.tx)
        .await?;
        let Some(username) = user else {
            return Err(invalid(format!(
                "no user {uid} managed by SCIM in this tenant"
            )));
        };
        directory::insert_membership(tx, tenant, group.0, uid, now, MemberSource::Scim).await?;
        super::record(
            tx,
            tenant,
            meta,
            "group.member_add",
            "group",
            group.0,
            json!({"group": group.1, "user_id": uid, "username": username, "source": "scim"}),
        )
        .await?;
    }
    for uid in remove {
        let gone = directory::delete_membership(tx, tenant, group.0, uid, &managed("u")).await?;
        if gone > 0 {
            super::record(
                tx,
                tenant,
                meta,
                "group.member_remove",
                "group",
                group.0,
                json!({"group": group.1, "user_id": uid, "source": "scim"}),
            )
            .await?;
        }
    }
    Ok(())
}

async fn current_members(
    tx: &mut WriteTx,
    tenant: &str,
    gid: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT user_id FROM memberships WHERE tenant_id = $1 AND group_id = $2")
        .bind(tenant)
        .bind(gid)
        .fetch_all(&mut *tx.tx)
        .await
}

pub async fn create_group(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let input = group_input(&body)?;
    let name = group_slug(&input.display_name);
    if !slug_ok(&name) {
        return Err(invalid("displayName must contain letters or digits"));
    }
    let meta = meta_of(&headers);
    let id = new_id();
    let mut tx = store.begin_write().await?;
    let description = format!("Provisioned by SCIM as “{}”", input.display_name);
    let row = directory::NewGroupRow {
        id: &id,
        tenant_id: &tenant,
        name: &name,
        description: &description,
        display_name: Some(&input.display_name),
        external_id: input.external_id.as_deref(),
        created_at: tx.now(),
    };
    let r = directory::insert_group_row(&mut tx, &row).await;
    if let Err(e) = r {
        return Err(unique_or(e, "a group with this name exists"));
    }
    record(
        &mut tx,
        &tenant,
        &meta,
        "group.create",
        "group",
        &id,
        json!({"name": name, "display_name": input.display_name, "via": "scim"}),
    )
    .await?;
    set_members(&mut tx, &tenant, &meta, (&id, &name), &input.members, &[]).await?;
    tx.commit().await?;
    respond(&store, &tenant, &uri, &id, StatusCode::CREATED).await
}

/// Stores a group as `input` says: its displayName, externalId and members.
async fn write(
    store: &Store,
    tenant: &str,
    meta: &RequestMeta,
    g: &ScimGroup,
    input: &GroupInput,
) -> Result<(), ScimError> {
    let mut tx = store.begin_write().await?;
    let shown = g.display_name.as_deref().unwrap_or(&g.name);
    if shown != input.display_name || g.external_id != input.external_id {
        directory::set_group_scim_fields(
            &mut tx,
            tenant,
            &g.id,
            &input.display_name,
            input.external_id.as_deref(),
        )
        .await?;
        record(&mut tx, tenant, meta, "group.update", "group", &g.id,
            json!({"name": g.name, "display_name": input.display_name, "external_id": input.external_id, "via": "scim"})).await?;
    }
    let current = current_members(&mut tx, tenant, &g.id).await?;
    let add: Vec<String> = input
        .members
        .iter()
        .filter(|u| !current.contains(u))
        .cloned()
        .collect();
    let remove: Vec<String> = current
        .into_iter()
        .filter(|u| !input.members.contains(u))
        .collect();
    set_members(&mut tx, tenant, meta, (&g.id, &g.name), &add, &remove).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn replace_group(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let g = load_one(&store, &tenant, &id).await?;
    let input = group_input(&body)?;
    write(&store, &tenant, &meta_of(&headers), &g, &input).await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

pub async fn patch_group(
    State(store): State<Store>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let ops = patch::operations(&body)?;
    let g = load_one(&store, &tenant, &id).await?;
    let mut wanted = doc(&store, &tenant, &g).await?;
    patch::apply(&GROUP, &mut wanted, &ops)?;
    let input = group_input(&wanted)?;
    write(&store, &tenant, &meta_of(&headers), &g, &input).await?;
    respond(&store, &tenant, &uri, &id, StatusCode::OK).await
}

pub async fn delete_group(
    State(store): State<Store>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ScimError> {
    let tenant = tenant(&store, &headers).await?;
    let g = load_one(&store, &tenant, &id).await?;
    let mut tx = store.begin_write().await?;
    if let Some(why) = crate::store::in_use::group(&mut tx, &tenant, &id).await? {
        return Err(ScimError::new(StatusCode::CONFLICT, None, why));
    }
    directory::delete_group_row(&mut tx, &tenant, &id).await?;
    record(
        &mut tx,
        &tenant,
        &meta_of(&headers),
        "group.delete",
        "group",
        &id,
        json!({"name": g.name, "via": "scim"}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_and_bodies() {
        assert_eq!(group_slug("ML Research"), "ml-research");
        assert_eq!(group_slug("  Data / Eng  "), "data-eng");
        let g = group_input(&json!({"displayName": "ML", "externalId": "e1", "members": [{"value": "u1"}, {"value": "u1", "type": "User"}]})).unwrap();
        assert_eq!(
            (g.display_name.as_str(), g.external_id.as_deref(), g.members),
            ("ML", Some("e1"), vec!["u1".to_string()])
        );
        for bad in [
            json!({}),
            json!({"displayName": " "}),
            json!({"displayName": "a", "members": [{"value": "g", "type": "Group"}]}),
            json!({"displayName": "a", "members": [{"display": "x"}]}),
            json!({"displayName": "a", "externalId": 1}),
        ] {
            assert!(group_input(&bad).is_err(), "{bad}");
        }
    }
}
