//! Server functions of the sign-in settings page: identity providers and password sign-in.

use super::*;

/// The tenant's identity providers and its sign-in options (tenant admins).
#[server(prefix = "/_sf", endpoint = "idp")]
pub async fn load_idps() -> Result<(Vec<IdentityProvider>, SignInOptions), AppError> {
    ctx::reading(|c| async move {
        let list = c.backend.list_idps(&c.principal).await?;
        let options = c
            .backend
            .sign_in_options(&c.principal.me.tenant_slug)
            .await?;
        Ok((list, options))
    })
    .await
}

#[cfg(feature = "ssr")]
fn lines(s: &str) -> Vec<String> {
    s.split([',', '\n'])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(feature = "ssr")]
fn opt(s: String) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// What a provider's form starts from: nothing for a new one (`id` empty), or the provider as
/// it is, so that settings the form does not show (scopes, claims, group mappings, e-mail
/// domains; made through the API) are kept. The stored secret is kept unless a new one is typed.
#[cfg(feature = "ssr")]
async fn base(c: &ctx::Call, id: &str, kind: &str) -> Result<SaveIdentityProvider, AppError> {
    if id.is_empty() {
        return Ok(SaveIdentityProvider {
            kind: kind.into(),
            ..Default::default()
        });
    }
    let p = c
        .backend
        .list_idps(&c.principal)
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or(AppError::NotFound)?;
    Ok(SaveIdentityProvider {
        name: p.name,
        display_name: p.display_name,
        kind: p.kind.as_str().into(),
        enabled: p.enabled,
        oidc: p.oidc,
        ldap: p.ldap,
        saml: p.saml,
        client_secret: None,
        sync: p.sync,
        allowed_email_domains: p.allowed_email_domains,
    })
}

/// Creates the provider (`id` empty) or saves the edited one.
#[cfg(feature = "ssr")]
async fn save(
    c: &ctx::Call,
    id: &str,
    input: SaveIdentityProvider,
) -> Result<IdentityProvider, AppError> {
    if id.is_empty() {
        c.backend.create_idp(&c.principal, &c.meta, input).await
    } else {
        c.backend.update_idp(&c.principal, &c.meta, id, input).await
    }
}

/// Add an OIDC provider from the settings page, or edit one (`id`).
#[server(prefix = "/_sf", endpoint = "idp/oidc")]
pub async fn create_oidc_idp(
    csrf: String,
    id: String,
    name: String,
    display_name: String,
    enabled: Option<String>,
    issuer: String,
    client_id: String,
    client_secret: String,
    groups_claim: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let b = base(&c, &id, "oidc").await?;
        let input = SaveIdentityProvider {
            name,
            display_name,
            enabled: enabled.is_some(),
            oidc: Some(OidcSettings {
                issuer: issuer.trim().to_string(),
                client_id,
                groups_claim: opt(groups_claim),
                ..b.oidc.clone().unwrap_or_default()
            }),
            client_secret: opt(client_secret),
            sync: GroupSync {
                required_groups: lines(&required_groups),
                ..b.sync.clone()
            },
            ..b
        };
        save(&c, &id, input).await
    })
    .await
}

/// Add an LDAP directory from the settings page, or edit one (`id`).
#[server(prefix = "/_sf", endpoint = "idp/ldap")]
pub async fn create_ldap_idp(
    csrf: String,
    id: String,
    name: String,
    display_name: String,
    enabled: Option<String>,
    url: String,
    start_tls: Option<String>,
    user_dn_template: String,
    base_dn: String,
    bind_dn: String,
    bind_password: String,
    group_lookup: String,
    group_base_dn: String,
) -> Result<IdentityProvider, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let b = base(&c, &id, "ldap").await?;
        let input = SaveIdentityProvider {
            name,
            display_name,
            enabled: enabled.is_some(),
            ldap: Some(LdapSettings {
                url: url.trim().to_string(),
                start_tls: start_tls.is_some(),
                user_dn_template: opt(user_dn_template),
                base_dn: base_dn.trim().to_string(),
                bind_dn: opt(bind_dn),
                group_lookup: opt(group_lookup),
                group_base_dn: opt(group_base_dn),
                ..b.ldap.clone().unwrap_or_default()
            }),
            client_secret: opt(bind_password),
            ..b
        };
        save(&c, &id, input).await
    })
    .await
}

/// Add a SAML 2.0 identity provider from the settings page (its metadata by URL or pasted),
/// or edit one (`id`; both metadata fields empty keep the metadata it has).
#[server(prefix = "/_sf", endpoint = "idp/saml")]
pub async fn create_saml_idp(
    csrf: String,
    id: String,
    name: String,
    display_name: String,
    enabled: Option<String>,
    metadata_url: String,
    metadata_xml: String,
    groups_attribute: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let b = base(&c, &id, "saml").await?;
        let current = b.saml.clone().unwrap_or_default();
        let (url, xml) = match (opt(metadata_url), opt(metadata_xml)) {
            (None, None) => (
                current.idp_metadata_url.clone(),
                current.idp_metadata_xml.clone(),
            ),
            given => given,
        };
        let input = SaveIdentityProvider {
            name,
            display_name,
            enabled: enabled.is_some(),
            saml: Some(SamlSettings {
                idp_metadata_url: url,
                idp_metadata_xml: xml,
                groups_attribute: opt(groups_attribute),
                ..current
            }),
            client_secret: None,
            sync: GroupSync {
                required_groups: lines(&required_groups),
                ..b.sync.clone()
            },
            ..b
        };
        save(&c, &id, input).await
    })
    .await
}

/// Issue the tenant's SCIM token (replacing the one it has): shown once, here.
#[server(prefix = "/_sf", endpoint = "scim/token")]
pub async fn issue_scim_token_form(csrf: String) -> Result<String, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.issue_scim_token(&c.principal, &c.meta).await
    })
    .await
}

/// Revoke the tenant's SCIM token: provisioning stops at its next request.
#[server(prefix = "/_sf", endpoint = "scim/revoke")]
pub async fn revoke_scim_token_form(csrf: String, id: String) -> Result<(), AppError> {
    let _ = id;
    ctx::writing(&csrf, move |c| async move {
        c.backend.revoke_scim_token(&c.principal, &c.meta).await
    })
    .await
}

/// When the tenant's SCIM token was issued, if it has one.
#[server(prefix = "/_sf", endpoint = "scim/status")]
pub async fn load_scim_token() -> Result<Option<i64>, AppError> {
    ctx::reading(|c| async move { c.backend.scim_token_issued_at(&c.principal).await }).await
}

/// Remove a provider: its links, sign-ins in flight and the memberships it manages go too.
#[server(prefix = "/_sf", endpoint = "idp/delete")]
pub async fn delete_idp(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_idp(&c.principal, &c.meta, &id).await
    })
    .await
}

/// "Test connection" for one provider.
#[server(prefix = "/_sf", endpoint = "idp/test")]
pub async fn test_idp(csrf: String, id: String) -> Result<Vec<ConnectionCheck>, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.test_idp(&c.principal, &id).await
    })
    .await
}

/// Turn password sign-in on or off for the tenant.
#[server(prefix = "/_sf", endpoint = "idp/passwords")]
pub async fn set_password_login(
    csrf: String,
    password_login: Option<String>,
) -> Result<SignInSettings, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = SignInSettings {
            password_login: password_login.is_some(),
        };
        c.backend
            .set_sign_in_settings(&c.principal, &c.meta, input)
            .await
    })
    .await
}

/// What a tenant's sign-in page offers (public).
#[server(prefix = "/_sf", endpoint = "sign-in-options")]
pub async fn load_sign_in_options(tenant: String) -> Result<SignInOptions, AppError> {
    ctx::answer(
        async move {
            let backend = ctx::backend()?;
            backend.sign_in_options(&tenant).await
        }
        .await,
    )
}
