//! Which Switchyard user a verified IdP identity is, the first time this provider sends it
//! (after that the `external_identities` link by the IdP's stable subject decides).
//!
//! - No user has the username: a new user is created and linked (just-in-time).
//! - A local account has it (one with a password that SCIM did not provision): refused; it is
//!   never taken over.
//! - A pre-provisioned user has it (pushed by SCIM, or made by an admin without a password)
//!   and is linked to no IdP identity yet: linked only when the IdP asserts a verified e-mail
//!   address equal to the user's stored one, in a domain the provider lists in
//!   `allowed_email_domains` (none listed: no linking). A username alone proves nothing: another
//!   IdP, or `alice@other-domain` cleaned to `alice`, would claim the account.
//! - A user already linked to an IdP identity (this provider's or another's): refused.

use serde_json::json;
use sqlx::Row;

use app::model::RequestMeta;

use super::{clean_username, ExternalLogin, ProviderRow, Refusal};
use crate::audit::{self, Record};
use crate::identity::directory;
use crate::store::{new_id, WriteTx};

/// Whether the IdP's e-mail address may link the pre-provisioned user whose address is
/// `stored`: verified, equal (case aside), and in one of `allowed_domains`.
pub fn email_links(
    login: &ExternalLogin,
    stored: Option<&str>,
    allowed_domains: &[String],
) -> bool {
    let (Some(asserted), Some(stored)) = (login.email.as_deref(), stored) else {
        return false;
    };
    let asserted = asserted.trim();
    let Some((local, domain)) = asserted.rsplit_once('@') else {
        return false;
    };
    login.email_verified
        && !local.is_empty()
        && asserted.eq_ignore_ascii_case(stored.trim())
        && allowed_domains
            .iter()
            .any(|d| d.trim().eq_ignore_ascii_case(domain))
}

/// The user an IdP identity without a link becomes (linked or created in `tx`, audited), or
/// why it is refused.
pub(super) async fn link_or_create(
    tx: &mut WriteTx,
    provider: &ProviderRow,
    login: &ExternalLogin,
    now: i64,
    meta: &RequestMeta,
) -> Result<Result<String, Refusal>, sqlx::Error> {
    let Some(username) = clean_username(&login.username) else {
        return Ok(Err(Refusal::NoUsername));
    };
    let actor = provider.actor();
    let existing = sqlx::query(
        "SELECT id, email, provisioned_by, password_hash FROM users WHERE tenant_id = $1 AND username = $2",
    )
    .bind(&provider.tenant_id)
    .bind(&username)
    .fetch_optional(&mut *tx.tx)
    .await?;
    if let Some(r) = existing {
        let id: String = r.try_get("id")?;
        let scim = r.try_get::<Option<String>, _>("provisioned_by")?.as_deref() == Some("scim");
        let password = r.try_get::<Option<String>, _>("password_hash")?.is_some();
        if !scim && password {
            return Ok(Err(Refusal::UsernameTaken));
        }
        let links: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM external_identities WHERE user_id = $1")
                .bind(&id)
                .fetch_one(&mut *tx.tx)
                .await?;
        if links > 0 {
            return Ok(Err(Refusal::LinkedElsewhere));
        }
        let stored: Option<String> = r.try_get("email")?;
        if !email_links(login, stored.as_deref(), &provider.allowed_email_domains) {
            return Ok(Err(Refusal::EmailMismatch));
        }
        link(tx, provider, &login.subject, &id, now).await?;
        audit::append(
            tx,
            now,
            Record {
                tenant_id: &provider.tenant_id,
                actor: &actor,
                action: "user.link",
                target_kind: "user",
                target_id: &id,
                summary: json!({"username": username, "via": provider.name, "subject": login.subject, "email": login.email}),
                meta,
            },
        )
        .await?;
        return Ok(Ok(id));
    }
    let id = new_id();
    let display = login
        .display_name
        .clone()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| username.clone());
    let display: String = display.chars().take(100).collect();
    let row = directory::NewUserRow {
        id: &id,
        tenant_id: &provider.tenant_id,
        username: &username,
        display_name: &display,
        email: login.email.as_deref(),
        password_hash: None,
        is_tenant_admin: false,
        is_platform_admin: false,
        disabled: false,
        external_id: None,
        provisioned_by: None,
        scim_name: None,
        created_at: now,
    };
    directory::insert_user_row(tx, &row).await?;
    link(tx, provider, &login.subject, &id, now).await?;
    audit::append(
        tx,
        now,
        Record {
            tenant_id: &provider.tenant_id,
            actor: &actor,
            action: "user.create",
            target_kind: "user",
            target_id: &id,
            summary: json!({"username": username, "display_name": display, "email": login.email, "via": provider.name, "subject": login.subject}),
            meta,
        },
    )
    .await?;
    Ok(Ok(id))
}

/// Records which IdP subject is which user.
async fn link(
    tx: &mut WriteTx,
    provider: &ProviderRow,
    subject: &str,
    user_id: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO external_identities (provider_id, subject, tenant_id, user_id, created_at, last_login_at) VALUES ($1, $2, $3, $4, $5, $5)")
        .bind(&provider.id)
        .bind(subject)
        .bind(&provider.tenant_id)
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// The allowed e-mail domains as stored: trimmed, lower-case, without a leading `@`.
pub fn normalize_domains(domains: &[String]) -> Vec<String> {
    domains
        .iter()
        .map(|d| d.trim().trim_start_matches('@').to_ascii_lowercase())
        .collect()
}

/// A domain name for `allowed_email_domains`.
pub fn domain_ok(d: &str) -> bool {
    d.len() <= 253
        && d.contains('.')
        && d.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Notes a sign-in through an existing link.
pub async fn touch(
    tx: &mut WriteTx,
    provider_id: &str,
    subject: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE external_identities SET last_login_at = $1 WHERE provider_id = $2 AND subject = $3",
    )
    .bind(now)
    .bind(provider_id)
    .bind(subject)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(email: &str, verified: bool) -> ExternalLogin {
        ExternalLogin {
            subject: "s".into(),
            username: "alice".into(),
            email: Some(email.into()),
            email_verified: verified,
            ..Default::default()
        }
    }

    #[test]
    fn only_a_verified_equal_email_in_an_allowed_domain_links() {
        let allowed = vec!["acme.test".to_string()];
        let stored = Some("alice@acme.test");
        assert!(email_links(
            &login("alice@acme.test", true),
            stored,
            &allowed
        ));
        assert!(email_links(
            &login("Alice@ACME.test", true),
            stored,
            &allowed
        ));
        assert!(!email_links(
            &login("alice@acme.test", false),
            stored,
            &allowed
        ));
        assert!(!email_links(
            &login("alice@other-domain.test", true),
            Some("alice@other-domain.test"),
            &allowed
        ));
        assert!(!email_links(
            &login("alice@acme.test", true),
            None,
            &allowed
        ));
        assert!(!email_links(&login("alice@acme.test", true), stored, &[]));
        assert!(!email_links(
            &login("bob@acme.test", true),
            stored,
            &allowed
        ));
        assert!(!email_links(
            &login("alice@sub.acme.test", true),
            Some("alice@sub.acme.test"),
            &allowed
        ));
        assert!(!email_links(
            &login("@acme.test", true),
            Some("@acme.test"),
            &allowed
        ));
    }

    #[test]
    fn allowed_domains_are_domain_names() {
        assert_eq!(
            normalize_domains(&[" @Acme.Test ".into()]),
            vec!["acme.test".to_string()]
        );
        assert!(domain_ok("acme.test"));
        assert!(domain_ok("mail.acme-corp.example"));
        assert!(!domain_ok("acme"));
        assert!(!domain_ok("acme..test"));
        assert!(!domain_ok("a@acme.test"));
        assert!(!domain_ok("-acme.test"));
        assert!(!domain_ok(""));
    }
}
