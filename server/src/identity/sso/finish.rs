//! Finishing a sign-in the protocol module has verified: just-in-time user creation, the "only
//! these IdP groups may sign in" rule, group sync, and the session, all in one transaction with
//! their audit entries.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use sqlx::Row;

use app::model::*;

use super::*;

use super::link as sso_link;
use crate::audit::{self, Actor, Record};
use crate::http::error::{ApiResult, AppError};
use crate::http::text::{self};
use crate::identity::directory::{self, slug_ok, MemberSource};
use crate::identity::tokens;
use crate::store::{Store, WriteTx};

/// Who the IdP says signed in, after the protocol module verified it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ExternalLogin {
    pub subject: String,
    pub username: String,
    pub email: Option<String>,
    /// The IdP vouches for `email` (OIDC: `email_verified`; SAML and LDAP: the IdP's own
    /// attribute). Only a verified address may link a pre-provisioned user.
    #[serde(default)]
    pub email_verified: bool,
    pub display_name: Option<String>,
    /// As the IdP sent them (DNs allowed).
    pub groups: Vec<String>,
}

/// Why a verified sign-in was still refused; each has a page message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not in any of the provider's required groups.
    NotInRequiredGroup,
    /// A local account already has this username (an admin must resolve it).
    UsernameTaken,
    /// A user with this username is already linked to another IdP identity.
    LinkedElsewhere,
    /// A pre-provisioned user has this username, but the IdP's e-mail address does not link it
    /// (unverified, different, or not in one of the provider's allowed domains).
    EmailMismatch,
    /// The IdP sent no usable username.
    NoUsername,
    /// The linked account is disabled.
    Disabled,
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotInRequiredGroup => "sso_denied",
            Refusal::UsernameTaken => "sso_account",
            Refusal::LinkedElsewhere | Refusal::EmailMismatch => "sso_link",
            Refusal::NoUsername => "sso_username",
            Refusal::Disabled => "sso_disabled",
        }
    }

    pub(super) fn reason(&self) -> &'static str {
        match self {
            Refusal::NotInRequiredGroup => "not in a group allowed to sign in",
            Refusal::UsernameTaken => "a local account has this username",
            Refusal::LinkedElsewhere => {
                "the account with this username is linked to another sign-in identity"
            }
            Refusal::EmailMismatch => {
                "the account with this username was provisioned, and the IdP's e-mail address does not link it (verified, equal, in an allowed domain)"
            }
            Refusal::NoUsername => "the IdP sent no usable username",
            Refusal::Disabled => "the account is disabled",
        }
    }
}

/// `CN=ML Research,OU=Groups,DC=corp` → `ML Research`; other names unchanged.
pub fn group_name(raw: &str) -> String {
    let t = raw.trim();
    let looks_like_dn = t.contains('=') && t.contains(',');
    if looks_like_dn || t.to_ascii_lowercase().starts_with("cn=") {
        if let Some(first) = t.split(',').next() {
            if let Some((k, v)) = first.split_once('=') {
                if k.trim().eq_ignore_ascii_case("cn") {
                    return v.trim().to_string();
                }
            }
        }
    }
    t.to_string()
}

/// The Switchyard group names the IdP's groups map to.
pub fn mapped_groups(sync: &GroupSync, idp_groups: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for raw in idp_groups {
        let name = group_name(raw);
        if let Some(target) = sync.map.get(&name).or_else(|| sync.map.get(raw)) {
            out.insert(target.clone());
        } else if sync.by_name {
            out.insert(name.to_lowercase());
        }
    }
    out
}

/// Whether the provider's "required groups" rule lets this user in.
pub fn may_sign_in(sync: &GroupSync, idp_groups: &[String]) -> bool {
    sync.required_groups.is_empty()
        || idp_groups.iter().any(|g| {
            let n = group_name(g);
            sync.required_groups
                .iter()
                .any(|r| r == &n || r == g || r.eq_ignore_ascii_case(&n))
        })
}

/// A username the directory accepts, from what the IdP sent.
pub fn clean_username(raw: &str) -> Option<String> {
    let u: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    slug_ok(&u).then_some(u)
}

/// Audits a refused or failed SSO sign-in in the provider's tenant (best effort).
pub async fn audit_failure(
    store: &Store,
    provider: &ProviderRow,
    meta: &RequestMeta,
    who: &str,
    reason: &str,
) {
    let result: Result<(), sqlx::Error> = async {
        let mut tx = store.begin_write().await?;
        audit::append(
            &mut tx,
            store.now(),
            Record {
                tenant_id: &provider.tenant_id,
                actor: &Actor::system(who),
                action: "auth.login_failed",
                target_kind: "idp",
                target_id: &provider.id,
                summary: json!({"method": provider.kind, "provider": provider.name, "reason": reason}),
                meta,
            },
        )
        .await?;
        tx.commit().await
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not audit a failed sign-in");
    }
}

/// The outcome of a verified sign-in: a session, or a refusal (already audited).
pub enum Finished {
    Session { me: Box<Me>, session: String },
    Refused(Refusal),
}

/// Creates or updates the user, syncs groups and opens a session, in one transaction.
pub async fn finish_login(
    store: &Store,
    provider: &ProviderRow,
    login: ExternalLogin,
    meta: &RequestMeta,
    ttl_ms: i64,
) -> ApiResult<Finished> {
    // What the IdP calls the user is shown in pages and the audit log: no control or bidi
    // characters (dropped, not refused: the sign-in is the IdP's to allow).
    let mut login = login;
    login.display_name = login.display_name.map(|d| text::scrub(&d, 100));
    login.email = login
        .email
        .filter(|e| text::clean_text(e) && e.chars().count() <= 254);
    let who = if login.username.is_empty() {
        login.subject.clone()
    } else {
        login.username.clone()
    };
    if !may_sign_in(&provider.sync, &login.groups) {
        audit_failure(
            store,
            provider,
            meta,
            &who,
            Refusal::NotInRequiredGroup.reason(),
        )
        .await;
        return Ok(Finished::Refused(Refusal::NotInRequiredGroup));
    }
    let now = store.now();
    let mut tx = store.begin_write().await?;
    let linked: Option<String> = sqlx::query_scalar(
        "SELECT user_id FROM external_identities WHERE provider_id = $1 AND subject = $2",
    )
    .bind(&provider.id)
    .bind(&login.subject)
    .fetch_optional(&mut *tx.tx)
    .await?;
    let user_id = match linked {
        Some(id) => {
            sso_link::touch(&mut tx, &provider.id, &login.subject, now).await?;
            id
        }
        None => match sso_link::link_or_create(&mut tx, provider, &login, now, meta).await? {
            Ok(id) => id,
            Err(refusal) => {
                drop(tx);
                audit_failure(store, provider, meta, &who, refusal.reason()).await;
                return Ok(Finished::Refused(refusal));
            }
        },
    };
    let me = load_me(&mut tx, &provider.tenant_id, &user_id).await?;
    let Some((me, disabled)) = me else {
        return Err(AppError::Internal.into());
    };
    if disabled {
        drop(tx);
        audit_failure(store, provider, meta, &who, Refusal::Disabled.reason()).await;
        return Ok(Finished::Refused(Refusal::Disabled));
    }
    // Keep name and email as the IdP has them.
    let display = login
        .display_name
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.chars().take(100).collect::<String>());
    directory::set_profile_from_idp(
        &mut tx,
        &user_id,
        display.as_deref(),
        login.email.as_deref(),
    )
    .await?;
    let changes = sync_groups(&mut tx, provider, &me, &login.groups, now, meta).await?;
    let (session, _csrf) = tokens::insert_session(&mut tx, &me, now, ttl_ms).await?;
    audit::append(
        &mut tx,
        now,
        Record {
            tenant_id: &me.tenant_id,
            actor: &Actor {
                id: Some(me.user_id.clone()),
                name: me.username.clone(),
            },
            action: "auth.login",
            target_kind: "user",
            target_id: &me.user_id,
            summary: json!({"method": provider.kind, "provider": provider.name, "via": "web", "groups_added": changes.0, "groups_removed": changes.1}),
            meta,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Finished::Session {
        me: Box::new(me),
        session,
    })
}

async fn load_me(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
) -> Result<Option<(Me, bool)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT u.id AS user_id, u.username, u.display_name, u.email, u.is_tenant_admin, u.is_platform_admin, u.disabled,
            t.id AS tenant_id, t.slug AS tenant_slug, t.name AS tenant_name
         FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE u.tenant_id = $1 AND u.id = $2",
    )
    .bind(tenant_id)
    .bind(user_id)
    .fetch_optional(&mut *tx.tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    Ok(Some((
        Me {
            user_id: r.try_get("user_id")?,
            username: r.try_get("username")?,
            display_name: r.try_get("display_name")?,
            email: r.try_get("email")?,
            tenant_id: r.try_get("tenant_id")?,
            tenant_slug: r.try_get("tenant_slug")?,
            tenant_name: r.try_get("tenant_name")?,
            is_platform_admin: r.try_get::<i64, _>("is_platform_admin")? != 0,
            is_tenant_admin: r.try_get::<i64, _>("is_tenant_admin")? != 0,
        },
        r.try_get::<i64, _>("disabled")? != 0,
    )))
}

/// Adds the memberships the IdP's groups map to and removes those this provider added before
/// that the IdP no longer sends. Returns (added, removed) group names.
async fn sync_groups(
    tx: &mut WriteTx,
    provider: &ProviderRow,
    me: &Me,
    idp_groups: &[String],
    now: i64,
    meta: &RequestMeta,
) -> Result<(Vec<String>, Vec<String>), sqlx::Error> {
    let wanted = mapped_groups(&provider.sync, idp_groups);
    let groups: BTreeMap<String, String> =
        sqlx::query("SELECT id, name FROM groups WHERE tenant_id = $1")
            .bind(&me.tenant_id)
            .fetch_all(&mut *tx.tx)
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("name")?,
                    r.try_get::<String, _>("id")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()?;
    let current: Vec<(String, String)> = sqlx::query(
        "SELECT group_id, source FROM memberships WHERE tenant_id = $1 AND user_id = $2",
    )
    .bind(&me.tenant_id)
    .bind(&me.user_id)
    .fetch_all(&mut *tx.tx)
    .await?
    .iter()
    .map(|r| Ok((r.try_get("group_id")?, r.try_get("source")?)))
    .collect::<Result<_, sqlx::Error>>()?;
    let name_of: BTreeMap<&String, &String> = groups.iter().map(|(n, id)| (id, n)).collect();
    let wanted_ids: BTreeSet<&String> = wanted.iter().filter_map(|n| groups.get(n)).collect();
    let actor = provider.actor();
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for gid in &wanted_ids {
        if current.iter().any(|(g, _)| g == *gid) {
            continue;
        }
        directory::insert_membership(
            tx,
            &me.tenant_id,
            gid,
            &me.user_id,
            now,
            MemberSource::Provider(&provider.id),
        )
        .await?;
        let name = name_of.get(*gid).map(|s| s.as_str()).unwrap_or_default();
        added.push(name.to_string());
        audit::append(
            tx,
            now,
            Record {
                tenant_id: &me.tenant_id,
                actor: &actor,
                action: "group.member_add",
                target_kind: "group",
                target_id: gid,
                summary: json!({"group": name, "user_id": me.user_id, "username": me.username, "source": "idp"}),
                meta,
            },
        )
        .await?;
    }
    for (gid, source) in &current {
        if source != &provider.id || wanted_ids.contains(gid) {
            continue;
        }
        directory::delete_membership(tx, &me.tenant_id, gid, &me.user_id, "TRUE").await?;
        let name = name_of.get(gid).map(|s| s.as_str()).unwrap_or_default();
        removed.push(name.to_string());
        audit::append(
            tx,
            now,
            Record {
                tenant_id: &me.tenant_id,
                actor: &actor,
                action: "group.member_remove",
                target_kind: "group",
                target_id: gid,
                summary: json!({"group": name, "user_id": me.user_id, "username": me.username, "source": "idp", "reason": "no longer sent by the IdP"}),
                meta,
            },
        )
        .await?;
    }
    Ok((added, removed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_reduce_to_their_cn() {
        assert_eq!(
            group_name("CN=ML Research,OU=Groups,DC=corp,DC=example"),
            "ML Research"
        );
        assert_eq!(group_name("cn=ml-research"), "ml-research");
        assert_eq!(group_name("ml-research"), "ml-research");
        assert_eq!(group_name("OU=x,DC=y"), "OU=x,DC=y");
    }

    #[test]
    fn groups_map_explicitly_then_by_name() {
        let mut sync = GroupSync {
            by_name: true,
            ..Default::default()
        };
        sync.map.insert("ML Research".into(), "ml-research".into());
        let got = mapped_groups(
            &sync,
            &[
                "CN=ML Research,OU=Groups,DC=corp".into(),
                "Inference".into(),
            ],
        );
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            ["inference", "ml-research"]
        );
        sync.by_name = false;
        let got = mapped_groups(&sync, &["Inference".into()]);
        assert!(
            got.is_empty(),
            "unmapped groups are ignored without by_name"
        );
    }

    #[test]
    fn required_groups_gate_sign_in() {
        let mut sync = GroupSync::default();
        assert!(may_sign_in(&sync, &[]), "no rule: everyone");
        sync.required_groups = vec!["ml-research".into()];
        assert!(!may_sign_in(&sync, &[]));
        assert!(!may_sign_in(&sync, &["other".into()]));
        assert!(may_sign_in(
            &sync,
            &["cn=ml-research,ou=groups,dc=acme,dc=test".into()]
        ));
    }

    #[test]
    fn usernames_are_cleaned_or_refused() {
        assert_eq!(
            clean_username("Bob.Builder").as_deref(),
            Some("bob.builder")
        );
        assert_eq!(clean_username("o'neil").as_deref(), Some("o_neil"));
        assert_eq!(clean_username("  "), None);
    }
}
