//! OpenID Connect sign-in (the openidconnect crate): discovery, the authorization code flow
//! with PKCE (S256), `state` bound to the browser by a cookie and kept server-side for single
//! use, `nonce`, and ID token validation (signature against the provider's JWKS, issuer,
//! audience, expiry, nonce). Discovery documents and their JWKS are cached per provider for
//! five minutes; a token signed by a key the cache does not know triggers one refetch (key
//! rotation) before it is refused.
//!
//! The claims that name the user and their groups are configurable per provider and read from
//! the verified ID token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde_json::Value;

use app::model::{ConnectionCheck, OidcSettings};

use super::outbound::{self, IdpHttp};
use super::requests::{self, NewRequest, Pending, REQUEST_TTL_MS};
use super::{self as sso, ExternalLogin, ProviderRow};
use crate::config::Config;
use crate::identity::secret;
use crate::store::Store;

const DISCOVERY_TTL: Duration = Duration::from_secs(300);

/// Why an OIDC sign-in failed; the page shows a message per kind, the audit log the detail.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// Unknown, used, expired or other-browser `state`.
    #[error("the sign-in request is unknown, expired, already used or from another browser")]
    State,
    /// The IdP answered with an error, or could not be reached.
    #[error("identity provider: {0}")]
    Provider(String),
    /// The ID token failed validation.
    #[error("ID token rejected: {0}")]
    Token(String),
    #[error("{0}")]
    Database(#[from] sqlx::Error),
}

impl OidcError {
    pub fn code(&self) -> &'static str {
        match self {
            OidcError::State => "sso_state",
            OidcError::Provider(_) => "sso_provider",
            OidcError::Token(_) => "sso_token",
            OidcError::Database(_) => "sso_failed",
        }
    }
}

/// Discovery documents (with their JWKS) by provider id.
#[derive(Default)]
pub struct DiscoveryCache {
    entries: Mutex<HashMap<String, (Instant, String, CoreProviderMetadata)>>,
}

/// The HTTP client for the IdP: every URL (the issuer's, and the JWKS and token endpoint the
/// discovery document names) passes the outbound address check; no redirects.
fn http_client(allow_private: bool) -> Result<IdpHttp, OidcError> {
    IdpHttp::new(allow_private).map_err(|e| OidcError::Provider(e.to_string()))
}

/// A generic message for a failed request to the IdP: whether its address was refused or it
/// could not be reached (or answered with something unusable). The detail goes to the log only.
fn provider_error(step: &str, e: &(dyn std::error::Error + 'static)) -> OidcError {
    tracing::warn!(error = %chain(e), step, "oidc request failed");
    OidcError::Provider(format!("{step} failed: {}", outbound::classify_error(e)))
}

impl DiscoveryCache {
    async fn metadata(
        &self,
        provider_id: &str,
        issuer: &str,
        fresh: bool,
        allow_private: bool,
    ) -> Result<CoreProviderMetadata, OidcError> {
        if !fresh {
            if let Ok(map) = self.entries.lock() {
                if let Some((at, iss, m)) = map.get(provider_id) {
                    if at.elapsed() < DISCOVERY_TTL && iss == issuer {
                        return Ok(m.clone());
                    }
                }
            }
        }
        let issuer_url =
            IssuerUrl::new(issuer.to_string()).map_err(|e| OidcError::Provider(e.to_string()))?;
        let m = CoreProviderMetadata::discover_async(issuer_url, &http_client(allow_private)?)
            .await
            .map_err(|e| provider_error("discovery", &e))?;
        if let Ok(mut map) = self.entries.lock() {
            map.insert(
                provider_id.to_string(),
                (Instant::now(), issuer.to_string(), m.clone()),
            );
        }
        Ok(m)
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn settings(provider: &ProviderRow) -> Result<&OidcSettings, OidcError> {
    provider
        .oidc
        .as_ref()
        .ok_or_else(|| OidcError::Provider("the provider has no OIDC settings".into()))
}

fn scopes(o: &OidcSettings) -> Vec<String> {
    if o.scopes.is_empty() {
        vec!["profile".into(), "email".into(), "groups".into()]
    } else {
        o.scopes
            .iter()
            .filter(|s| *s != "openid")
            .cloned()
            .collect()
    }
}

/// Starts a sign-in: stores the request and returns (the IdP URL to redirect to, the value
/// of the browser-binding cookie).
pub async fn start(
    store: &Store,
    cache: &DiscoveryCache,
    config: &Config,
    provider: &ProviderRow,
    next: &str,
) -> Result<(String, String), OidcError> {
    let o = settings(provider)?;
    let allow_private = config.allow_private_idp_addresses;
    let meta = cache
        .metadata(&provider.id, &o.issuer, false, allow_private)
        .await?;
    let client = CoreClient::from_provider_metadata(
        meta,
        ClientId::new(o.client_id.clone()),
        provider.secret.clone().map(ClientSecret::new),
    )
    .set_redirect_uri(
        RedirectUrl::new(sso::oidc_redirect_uri(config))
            .map_err(|e| OidcError::Provider(e.to_string()))?,
    );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut req = client.authorize_url(
        CoreAuthenticationFlow::AuthorizationCode,
        CsrfToken::new_random,
        Nonce::new_random,
    );
    for s in scopes(o) {
        req = req.add_scope(Scope::new(s));
    }
    let (url, state, nonce) = req.set_pkce_challenge(challenge).url();
    let browser = secret::random();
    let now = store.now();
    let mut tx = store.begin_write().await?;
    let browser_hash = secret::digest(&browser);
    let request = NewRequest {
        key: state.secret(),
        tenant_id: &provider.tenant_id,
        provider_id: &provider.id,
        browser_hash: &browser_hash,
        nonce: nonce.secret(),
        verifier: verifier.secret(),
        next,
        verified: None,
        expires_at: now + REQUEST_TTL_MS,
    };
    requests::insert(&mut tx, request, now).await?;
    tx.commit().await?;
    Ok((url.to_string(), browser))
}

/// Exchanges the code (with the PKCE verifier) and validates the ID token; returns who it
/// names.
pub async fn finish(
    cache: &DiscoveryCache,
    config: &Config,
    provider: &ProviderRow,
    pending: &Pending,
    code: &str,
) -> Result<ExternalLogin, OidcError> {
    let o = settings(provider)?;
    let mut fresh = false;
    let allow_private = config.allow_private_idp_addresses;
    let http = http_client(allow_private)?;
    // The code can be exchanged once; keep the token response for a JWKS-refresh retry.
    let mut token_response = None;
    loop {
        let meta = cache
            .metadata(&provider.id, &o.issuer, fresh, allow_private)
            .await?;
        let client = CoreClient::from_provider_metadata(
            meta,
            ClientId::new(o.client_id.clone()),
            provider.secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(
            RedirectUrl::new(sso::oidc_redirect_uri(config))
                .map_err(|e| OidcError::Provider(e.to_string()))?,
        );
        if token_response.is_none() {
            let req = client
                .exchange_code(AuthorizationCode::new(code.to_string()))
                .map_err(|e| OidcError::Provider(e.to_string()))?
                .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()));
            token_response = Some(req.request_async(&http).await.map_err(|e| match e {
                // The IdP's OAuth error code (e.g. invalid_grant), never its free text.
                openidconnect::RequestTokenError::ServerResponse(r) => OidcError::Provider(
                    format!("token exchange failed: the IdP answered {}", r.error()),
                ),
                e => provider_error("token exchange", &e),
            })?);
        }
        let Some(resp) = token_response.as_ref() else {
            return Err(OidcError::Provider("no token response".into()));
        };
        let id_token = resp
            .id_token()
            .ok_or_else(|| OidcError::Token("the IdP returned no ID token".into()))?;
        let verifier = client.id_token_verifier();
        match id_token.claims(&verifier, &Nonce::new(pending.nonce.clone())) {
            Ok(_) => return login_from(o, &id_token.to_string()),
            Err(e) => {
                let msg = chain(&e);
                let key_problem = msg.contains("signature") || msg.contains("key");
                if key_problem && !fresh {
                    // Perhaps the IdP rotated its keys: refetch discovery and JWKS once.
                    fresh = true;
                    continue;
                }
                return Err(OidcError::Token(msg));
            }
        }
    }
}

/// Reads the configured claims from a token whose signature and claims were verified.
fn login_from(o: &OidcSettings, jwt: &str) -> Result<ExternalLogin, OidcError> {
    let payload = jwt
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .ok_or_else(|| OidcError::Token("unreadable claims".into()))?;
    let text = |claim: &str| -> Option<String> {
        match payload.get(claim) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    };
    let subject = text(o.subject_claim.as_deref().unwrap_or("sub"))
        .ok_or_else(|| OidcError::Token("the subject claim is missing".into()))?;
    let email = text(o.email_claim.as_deref().unwrap_or("email"));
    let username = text(o.username_claim.as_deref().unwrap_or("preferred_username"))
        .or_else(|| {
            email
                .as_deref()
                .and_then(|e| e.split('@').next())
                .map(String::from)
        })
        .unwrap_or_default();
    let groups = match payload.get(o.groups_claim.as_deref().unwrap_or("groups")) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        Some(Value::String(s)) => s.split(',').map(|g| g.trim().to_string()).collect(),
        _ => Vec::new(),
    };
    // `email_verified` as a boolean (some IdPs send the string "true").
    let email_verified = match payload.get("email_verified") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    Ok(ExternalLogin {
        subject,
        username,
        email,
        email_verified,
        display_name: text(o.name_claim.as_deref().unwrap_or("name")),
        groups,
    })
}

/// "Test connection": discovery, the JWKS, and the endpoints the flow needs.
pub async fn test_connection(
    cache: &DiscoveryCache,
    provider: &ProviderRow,
    allow_private: bool,
) -> Vec<ConnectionCheck> {
    let mut out = Vec::new();
    let Some(o) = provider.oidc.as_ref() else {
        out.push(ConnectionCheck {
            step: "settings".into(),
            ok: false,
            detail: "the provider has no OIDC settings".into(),
        });
        return out;
    };
    match cache
        .metadata(&provider.id, &o.issuer, true, allow_private)
        .await
    {
        Err(e) => out.push(ConnectionCheck {
            step: "discovery".into(),
            ok: false,
            detail: format!("{e} (at {}/.well-known/openid-configuration)", o.issuer),
        }),
        Ok(m) => {
            out.push(ConnectionCheck {
                step: "discovery".into(),
                ok: true,
                detail: format!("issuer {}", m.issuer().as_str()),
            });
            let keys = m.jwks().keys().len();
            out.push(ConnectionCheck {
                step: "signing keys".into(),
                ok: keys > 0,
                detail: format!("{keys} key(s) at {}", m.jwks_uri().as_str()),
            });
            let token = m.token_endpoint().map(|t| t.as_str().to_string());
            out.push(ConnectionCheck {
                step: "token endpoint".into(),
                ok: token.is_some(),
                detail: token.unwrap_or_else(|| "missing from the discovery document".into()),
            });
            out.push(ConnectionCheck {
                step: "authorization endpoint".into(),
                ok: true,
                detail: m.authorization_endpoint().as_str().to_string(),
            });
            out.push(ConnectionCheck {
                step: "client secret".into(),
                ok: provider.secret.is_some(),
                detail: if provider.secret.is_some() {
                    "stored".into()
                } else {
                    "missing".into()
                },
            });
        }
    }
    out
}
