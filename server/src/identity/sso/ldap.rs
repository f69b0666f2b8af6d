//! LDAP sign-in (ldap3): bind as the user, either directly (a DN template) or after finding
//! the user's DN with a service account (search-then-bind), over `ldap://` (optionally
//! upgraded with StartTLS) or `ldaps://`. Groups come from the user's `memberOf` attribute or
//! from a search for groups that list the user as `member`.
//!
//! Usernames are escaped for DNs and filters (no LDAP injection), and an empty password is
//! refused before any bind: LDAP treats a simple bind with a DN and no password as an
//! anonymous bind that "succeeds".

use std::time::Duration;

use ldap3::{
    dn_escape, ldap_escape, Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry, StdStream,
};

use app::model::{ConnectionCheck, LdapSettings};

use super::outbound::{self, OutboundError};
use super::{ExternalLogin, ProviderRow};

/// Why an LDAP sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum LdapError {
    /// Wrong username or password (or no such user): one answer for all.
    #[error("invalid username or password")]
    Invalid,
    /// The directory could not be reached or answered an error.
    #[error("directory: {0}")]
    Directory(String),
}

fn settings(provider: &ProviderRow) -> Result<&LdapSettings, LdapError> {
    provider
        .ldap
        .as_ref()
        .ok_or_else(|| LdapError::Directory("the provider has no LDAP settings".into()))
}

/// Connects to the directory at an address the outbound check passed (ldap3 is handed the
/// connected socket; the URL's host name still names the server for TLS).
async fn connect(l: &LdapSettings, allow_private: bool) -> Result<Ldap, LdapError> {
    let timeout = Duration::from_secs(5);
    let unreachable = || LdapError::Directory(OutboundError::Unreachable.to_string());
    let url = url::Url::parse(l.url.trim())
        .map_err(|_| LdapError::Directory(OutboundError::NotAllowed.to_string()))?;
    let default_port = if url.scheme() == "ldaps" { 636 } else { 389 };
    let stream = outbound::connect_tcp(&url, default_port, allow_private, timeout)
        .await
        .map_err(|e| LdapError::Directory(e.to_string()))?
        .into_std()
        .map_err(|_| unreachable())?;
    let s = LdapConnSettings::new()
        .set_conn_timeout(timeout)
        .set_starttls(l.start_tls)
        .set_std_stream(StdStream::Tcp(stream));
    let (conn, ldap) = LdapConnAsync::with_settings(s, l.url.trim())
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, url = %l.url, "ldap connect");
            unreachable()
        })?;
    ldap3::drive!(conn);
    Ok(ldap)
}

fn is_invalid_credentials(e: &ldap3::LdapError) -> bool {
    matches!(e, ldap3::LdapError::LdapResult { result } if result.rc == 49)
}

async fn bind(ldap: &mut Ldap, dn: &str, password: &str) -> Result<(), ldap3::LdapError> {
    ldap.simple_bind(dn, password).await?.success().map(|_| ())
}

fn first(e: &SearchEntry, attr: &str) -> Option<String> {
    e.attrs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(attr))
        .and_then(|(_, v)| v.first().cloned())
        .filter(|v| !v.is_empty())
}

fn all(e: &SearchEntry, attr: &str) -> Vec<String> {
    e.attrs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(attr))
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// Checks the password against the directory and returns who it is, with their groups.
pub async fn authenticate(
    provider: &ProviderRow,
    username: &str,
    password: &str,
    allow_private: bool,
) -> Result<ExternalLogin, LdapError> {
    let l = settings(provider)?;
    let username = username.trim();
    if username.is_empty() || password.is_empty() || username.len() > 256 {
        return Err(LdapError::Invalid);
    }
    let dir = |e: ldap3::LdapError| LdapError::Directory(e.to_string());
    let mut ldap = connect(l, allow_private).await?;
    let user_dn = match &l.user_dn_template {
        Some(t) => t.replace("{username}", &dn_escape(username)),
        None => {
            let bind_dn = l.bind_dn.as_deref().unwrap_or_default();
            bind(
                &mut ldap,
                bind_dn,
                provider.secret.as_deref().unwrap_or_default(),
            )
            .await
            .map_err(|e| LdapError::Directory(format!("service account bind failed: {e}")))?;
            let filter = l
                .user_filter
                .as_deref()
                .unwrap_or("(uid={username})")
                .replace("{username}", &ldap_escape(username));
            let (entries, _) = ldap
                .search(&l.base_dn, Scope::Subtree, &filter, vec!["1.1"])
                .await
                .map_err(dir)?
                .success()
                .map_err(dir)?;
            if entries.len() != 1 {
                let _ = ldap.unbind().await;
                return Err(LdapError::Invalid);
            }
            SearchEntry::construct(entries.into_iter().next().ok_or(LdapError::Invalid)?).dn
        }
    };
    if let Err(e) = bind(&mut ldap, &user_dn, password).await {
        let _ = ldap.unbind().await;
        return Err(if is_invalid_credentials(&e) {
            LdapError::Invalid
        } else {
            dir(e)
        });
    }
    // Bound as the user: read their own entry.
    let username_attr = l.username_attr.as_deref().unwrap_or("uid");
    let email_attr = l.email_attr.as_deref().unwrap_or("mail");
    let name_attr = l.name_attr.as_deref().unwrap_or("cn");
    let (entries, _) = ldap
        .search(
            &user_dn,
            Scope::Base,
            "(objectClass=*)",
            vec![username_attr, email_attr, name_attr, "memberOf"],
        )
        .await
        .map_err(dir)?
        .success()
        .map_err(dir)?;
    let entry = entries
        .into_iter()
        .next()
        .map(SearchEntry::construct)
        .ok_or_else(|| LdapError::Directory("the user's entry cannot be read".into()))?;
    let groups = if l.group_lookup.as_deref() == Some("search") {
        bind(
            &mut ldap,
            l.bind_dn.as_deref().unwrap_or_default(),
            provider.secret.as_deref().unwrap_or_default(),
        )
        .await
        .map_err(|e| LdapError::Directory(format!("service account bind failed: {e}")))?;
        let filter = format!("(|(member={0})(uniqueMember={0}))", ldap_escape(&entry.dn));
        let (found, _) = ldap
            .search(
                l.group_base_dn.as_deref().unwrap_or(&l.base_dn),
                Scope::Subtree,
                &filter,
                vec!["cn"],
            )
            .await
            .map_err(dir)?
            .success()
            .map_err(dir)?;
        found
            .into_iter()
            .map(SearchEntry::construct)
            .filter_map(|g| first(&g, "cn"))
            .collect()
    } else {
        all(&entry, "memberOf")
    };
    let _ = ldap.unbind().await;
    Ok(ExternalLogin {
        subject: entry.dn.to_lowercase(),
        username: first(&entry, username_attr).unwrap_or_else(|| username.to_string()),
        email: first(&entry, email_attr),
        // The directory's own attribute, read bound as the user.
        email_verified: true,
        display_name: first(&entry, name_attr),
        groups,
    })
}

/// "Test connection": reach the server, bind the service account, find the base DN.
pub async fn test_connection(provider: &ProviderRow, allow_private: bool) -> Vec<ConnectionCheck> {
    let mut out = Vec::new();
    let Ok(l) = settings(provider) else {
        out.push(ConnectionCheck {
            step: "settings".into(),
            ok: false,
            detail: "the provider has no LDAP settings".into(),
        });
        return out;
    };
    let mut ldap = match connect(l, allow_private).await {
        Ok(c) => {
            out.push(ConnectionCheck {
                step: "connect".into(),
                ok: true,
                detail: format!(
                    "{}{}",
                    l.url,
                    if l.start_tls { " with StartTLS" } else { "" }
                ),
            });
            c
        }
        Err(e) => {
            out.push(ConnectionCheck {
                step: "connect".into(),
                ok: false,
                detail: e.to_string(),
            });
            return out;
        }
    };
    if let Some(bind_dn) = &l.bind_dn {
        match bind(
            &mut ldap,
            bind_dn,
            provider.secret.as_deref().unwrap_or_default(),
        )
        .await
        {
            Ok(()) => out.push(ConnectionCheck {
                step: "service account bind".into(),
                ok: true,
                detail: bind_dn.clone(),
            }),
            Err(e) => {
                out.push(ConnectionCheck {
                    step: "service account bind".into(),
                    ok: false,
                    detail: format!("{bind_dn}: {e}"),
                });
                let _ = ldap.unbind().await;
                return out;
            }
        }
        if !l.base_dn.is_empty() {
            let found = ldap
                .search(&l.base_dn, Scope::Base, "(objectClass=*)", vec!["1.1"])
                .await
                .and_then(|r| r.success());
            out.push(ConnectionCheck {
                step: "base DN".into(),
                ok: found.is_ok(),
                detail: match found {
                    Ok(_) => l.base_dn.clone(),
                    Err(e) => format!("{}: {e}", l.base_dn),
                },
            });
        }
    }
    let _ = ldap.unbind().await;
    out
}
