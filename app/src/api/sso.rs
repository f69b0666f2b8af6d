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

/// Add an OIDC provider from the settings page.
#[server(prefix = "/_sf", endpoint = "idp/oidc")]
pub async fn create_oidc_idp(
    csrf: String,
    name: String,
    display_name: String,
    issuer: String,
    client_id: String,
    client_secret: String,
    groups_claim: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = SaveIdentityProvider {
            name,
            display_name,
            kind: "oidc".into(),
            enabled: true,
            oidc: Some(OidcSettings {
                issuer: issuer.trim().to_string(),
                client_id,
                groups_claim: opt(groups_claim),
                ..Default::default()
            }),
            ldap: None,
            saml: None,
            client_secret: opt(client_secret),
            sync: GroupSync {
                required_groups: lines(&required_groups),
                ..Default::default()
            },
            allowed_email_domains: Vec::new(),
        };
        c.backend.create_idp(&c.principal, &c.meta, input).await
    })
    .await
}

/// Add an LDAP directory from the settings page.
#[server(prefix = "/_sf", endpoint = "idp/ldap")]
pub async fn create_ldap_idp(
    csrf: String,
    name: String,
    display_name: String,
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
        let input = SaveIdentityProvider {
            name,
            display_name,
            kind: "ldap".into(),
            enabled: true,
            oidc: None,
            ldap: Some(LdapSettings {
                url: url.trim().to_string(),
                start_tls: start_tls.is_some(),
                user_dn_template: opt(user_dn_template),
                base_dn: base_dn.trim().to_string(),
                bind_dn: opt(bind_dn),
                group_lookup: opt(group_lookup),
                group_base_dn: opt(group_base_dn),
                ..Default::default()
            }),
            saml: None,
            client_secret: opt(bind_password),
            sync: GroupSync::default(),
            allowed_email_domains: Vec::new(),
        };
        c.backend.create_idp(&c.principal, &c.meta, input).await
    })
    .await
}

/// Add a SAML 2.0 identity provider from the settings page: its metadata by URL or pasted.
#[server(prefix = "/_sf", endpoint = "idp/saml")]
pub async fn create_saml_idp(
    csrf: String,
    name: String,
    display_name: String,
    metadata_url: String,
    metadata_xml: String,
    groups_attribute: String,
    required_groups: String,
) -> Result<IdentityProvider, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = SaveIdentityProvider {
            name,
            display_name,
            kind: "saml".into(),
            enabled: true,
            oidc: None,
            ldap: None,
            saml: Some(SamlSettings {
                idp_metadata_url: opt(metadata_url),
                idp_metadata_xml: opt(metadata_xml),
                groups_attribute: opt(groups_attribute),
                ..Default::default()
            }),
            client_secret: None,
            sync: GroupSync {
                required_groups: lines(&required_groups),
                ..Default::default()
            },
            allowed_email_domains: Vec::new(),
        };
        c.backend.create_idp(&c.principal, &c.meta, input).await
    })
    .await
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
