//! SAML 2.0 service provider (samael, with xmlsec verifying the XML signatures).
//!
//! - Each provider is its own SP: entity ID `{base}/auth/saml/{tenant}/{name}/metadata` (where
//!   its metadata is served) and assertion consumer service `{base}/auth/saml/{tenant}/{name}/acs`.
//! - The IdP is described by its metadata (by URL or uploaded), reduced on save to its entity ID,
//!   its HTTP-Redirect single sign-on URL and its signing certificates.
//! - Sign-in is SP-initiated: an `AuthnRequest` by HTTP-Redirect with a random ID, and a random
//!   `RelayState` that names the sign-in request kept server-side (digest only, single use, ten
//!   minutes). Unsolicited (IdP-initiated) responses are refused.
//! - The ACS takes the HTTP-POST. The response or its assertion must be signed by a certificate
//!   from the metadata (RSA or ECDSA with SHA-2), and only the signed part is read, which defeats
//!   signature wrapping. samael then checks the issuer, the audience, the bearer subject
//!   confirmation's recipient, the time window (with [`CLOCK_SKEW_SECS`] of skew) and
//!   `InResponseTo` against the request the RelayState names. Each assertion ID is accepted once.
//! - The IdP's POST is cross-site, so the browser's `SameSite=Lax` binding cookie does not come
//!   with it. The ACS parks the verified login under a new one-time key and sends the browser on
//!   to `/auth/saml/finish` by a top-level GET, which carries the cookie. There the cookie must
//!   match the one that started the sign-in (login CSRF), and only then is a session made.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use samael::schema::Assertion;

use app::model::{ConnectionCheck, SamlSettings};

use super::outbound;
use super::requests::{self, NewRequest, REQUEST_TTL_MS};
use super::{ExternalLogin, ProviderRow};
use crate::config::Config;
use crate::identity::secret;
use crate::store::Store;

mod metadata;
pub use metadata::*;

/// How far the IdP's clock may be off from ours.
pub const CLOCK_SKEW_SECS: i64 = 120;
/// How long after issue an assertion is still taken.
const MAX_ISSUE_DELAY_SECS: i64 = 300;
/// Between the ACS and the browser's hop to `/auth/saml/finish`.
const FINISH_TTL_MS: i64 = 2 * 60_000;
const NAMEID_UNSPECIFIED: &str = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified";
const METADATA_MAX_BYTES: usize = 1024 * 1024;

/// Why a SAML sign-in failed; the page shows a message per kind, the audit log the detail.
#[derive(Debug, thiserror::Error)]
pub enum SamlError {
    /// Unknown, used, expired or other-browser sign-in request.
    #[error("the sign-in request is unknown, expired, already used or from another browser")]
    State,
    #[error("identity provider: {0}")]
    Provider(String),
    /// The SAML response failed verification.
    #[error("SAML response rejected: {0}")]
    Response(String),
    #[error("{0}")]
    Database(#[from] sqlx::Error),
}

impl SamlError {
    pub fn code(&self) -> &'static str {
        match self {
            SamlError::State => "sso_state",
            SamlError::Provider(_) => "sso_provider",
            SamlError::Response(_) => "sso_token",
            SamlError::Database(_) => "sso_failed",
        }
    }
}

/// This SP's entity ID for a provider; its metadata is served there.
pub fn sp_entity_id(config: &Config, tenant: &str, name: &str) -> String {
    format!("{}/auth/saml/{tenant}/{name}/metadata", config.base_url())
}

/// Where the IdP posts its response for a provider.
pub fn acs_url(config: &Config, tenant: &str, name: &str) -> String {
    format!("{}/auth/saml/{tenant}/{name}/acs", config.base_url())
}

fn settings(provider: &ProviderRow) -> Result<&SamlSettings, SamlError> {
    provider
        .saml
        .as_ref()
        .ok_or_else(|| SamlError::Provider("the provider has no SAML settings".into()))
}

/// The redirect to the IdP (an HTTP-Redirect `AuthnRequest` carrying `relay_state`) and the
/// request ID the response must answer.
pub fn authn_redirect(
    config: &Config,
    provider: &ProviderRow,
    relay_state: &str,
) -> Result<(String, String), SamlError> {
    let s = settings(provider)?;
    let sp = service_provider(config, provider, s);
    let mut req = sp
        .make_authentication_request(&s.idp_sso_url)
        .map_err(|e| SamlError::Provider(e.to_string()))?;
    // samael's default ID has 32 bits of randomness; InResponseTo deserves more.
    req.id = format!("_{}", secret::random());
    let url = req
        .redirect(relay_state)
        .map_err(|e| SamlError::Provider(e.to_string()))?
        .ok_or_else(|| SamlError::Provider("the AuthnRequest has no destination".into()))?;
    Ok((url.to_string(), req.id))
}

/// Starts a sign-in: stores the request and returns (the IdP URL to redirect to, the value
/// of the browser-binding cookie).
pub async fn start(
    store: &Store,
    config: &Config,
    provider: &ProviderRow,
    next: &str,
) -> Result<(String, String), SamlError> {
    let relay_state = secret::random();
    let (url, request_id) = authn_redirect(config, provider, &relay_state)?;
    let browser = secret::random();
    let now = store.now();
    let mut tx = store.begin_write().await?;
    let browser_hash = secret::digest(&browser);
    let request = NewRequest {
        key: &relay_state,
        tenant_id: &provider.tenant_id,
        provider_id: &provider.id,
        browser_hash: &browser_hash,
        nonce: &request_id,
        verifier: "",
        next,
        verified: None,
        expires_at: now + REQUEST_TTL_MS,
    };
    requests::insert(&mut tx, request, now).await?;
    tx.commit().await?;
    Ok((url, browser))
}

/// A response that passed every check: who it names, the assertion's ID and until when it
/// was valid.
#[derive(Debug)]
pub struct Verified {
    pub login: ExternalLogin,
    pub assertion_id: String,
    pub valid_until_ms: i64,
}

/// Verifies a base64 `SAMLResponse` answering `request_id` (CPU only: run it off the async
/// workers).
pub fn verify(
    config: &Config,
    provider: &ProviderRow,
    saml_response: &str,
    request_id: &str,
    now: i64,
) -> Result<Verified, SamlError> {
    let s = settings(provider)?;
    let sp = service_provider(config, provider, s);
    let cleaned: String = saml_response
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let xml = STANDARD
        .decode(&cleaned)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| SamlError::Response("SAMLResponse is not base64 XML".into()))?;
    shape_ok(&xml).map_err(SamlError::Response)?;
    let assertion = sp
        .parse_base64_response(&cleaned, Some(&[request_id]))
        .map_err(|e| SamlError::Response(e.to_string()))?;
    // samael passes an assertion without an AudienceRestriction; a bearer assertion must
    // carry one (SAML 2.0 profiles, 4.1.4.2), and it must name us.
    let audience = sp.entity_id.clone().unwrap_or_default();
    let names_us = assertion
        .conditions
        .as_ref()
        .and_then(|c| c.audience_restrictions.as_ref())
        .is_some_and(|rs| rs.iter().any(|r| r.audience.contains(&audience)));
    if !names_us {
        return Err(SamlError::Response(format!(
            "the assertion is not restricted to this service provider ({audience})"
        )));
    }
    let valid_until_ms = assertion
        .conditions
        .as_ref()
        .and_then(|c| c.not_on_or_after)
        .map(|t| t.timestamp_millis())
        .unwrap_or(now + 3_600_000)
        + CLOCK_SKEW_SECS * 1000;
    Ok(Verified {
        login: login_from(s, &assertion)?,
        assertion_id: assertion.id.clone(),
        valid_until_ms,
    })
}

/// Refuses a response that is not plainly one response with one assertion: a DTD (entity
/// tricks), or more or fewer than one `Assertion` anywhere in the document. Signature
/// wrapping needs a second assertion beside the signed one; even though only the signed one
/// would be read, such a response is forged and is refused as a whole.
pub fn shape_ok(xml: &str) -> Result<(), String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut assertions = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::DocType(_)) => return Err("the response has a DTD".into()),
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let local = e.local_name();
                if local.as_ref() == b"Assertion" || local.as_ref() == b"EncryptedAssertion" {
                    assertions += 1;
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the response is not well-formed XML: {e}")),
        }
    }
    match assertions {
        1 => Ok(()),
        0 => Err("the response carries no assertion".into()),
        n => Err(format!(
            "the response carries {n} assertions; exactly one is taken (signature wrapping?)"
        )),
    }
}

/// The values of an attribute, matched by `Name` or `FriendlyName`.
fn attribute(assertion: &Assertion, name: &str) -> Vec<String> {
    assertion
        .attribute_statements
        .iter()
        .flatten()
        .flat_map(|st| st.attributes.iter())
        .filter(|a| a.name.as_deref() == Some(name) || a.friendly_name.as_deref() == Some(name))
        .flat_map(|a| a.values.iter())
        .filter_map(|v| v.value.as_ref().map(|x| x.trim().to_string()))
        .filter(|v| !v.is_empty())
        .collect()
}

fn login_from(s: &SamlSettings, assertion: &Assertion) -> Result<ExternalLogin, SamlError> {
    let name_id = assertion
        .subject
        .as_ref()
        .and_then(|sub| sub.name_id.as_ref())
        .map(|n| n.value.trim().to_string())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| SamlError::Response("the assertion names no subject (NameID)".into()))?;
    let first = |name: &str| attribute(assertion, name).into_iter().next();
    let email = first(s.email_attribute.as_deref().unwrap_or("email"));
    let username = match s.username_attribute.as_deref() {
        Some(a) => first(a).unwrap_or_default(),
        None => name_id.clone(),
    };
    // An e-mail address as username (NameID format emailAddress): its local part.
    let username = match username.split_once('@') {
        Some((local, _)) => local.to_string(),
        None => username,
    };
    Ok(ExternalLogin {
        subject: name_id,
        username,
        // The IdP signed it: its own directory's attribute.
        email_verified: email.is_some(),
        email,
        display_name: first(s.name_attribute.as_deref().unwrap_or("displayName")),
        groups: attribute(assertion, s.groups_attribute.as_deref().unwrap_or("groups")),
    })
}

/// The assertion consumer service: reads the request the RelayState names, checks it belongs
/// to the provider the ACS URL names, verifies the response, and only then takes the request
/// (so a junk POST with a stolen RelayState cancels nothing), remembers the assertion ID and
/// parks the login for the browser's hop, in one transaction. Returns the hop's one-time key.
pub async fn consume(
    store: &Store,
    config: &Config,
    provider: &ProviderRow,
    saml_response: &str,
    relay_state: &str,
) -> Result<String, SamlError> {
    // No binding cookie comes with the IdP's POST; the browser is checked at the finish hop.
    let taken = requests::peek(store, relay_state)
        .await?
        .filter(|p| p.verified.is_none())
        .ok_or(SamlError::State)?;
    if taken.provider_id != provider.id || taken.tenant_id != provider.tenant_id {
        return Err(SamlError::State);
    }
    let now = store.now();
    let verified = {
        let config = config.clone();
        let provider = provider.clone();
        let response = saml_response.to_string();
        let request_id = taken.nonce.clone();
        tokio::task::spawn_blocking(move || verify(&config, &provider, &response, &request_id, now))
            .await
            .map_err(|e| SamlError::Provider(e.to_string()))??
    };
    let hop = secret::random();
    let login =
        serde_json::to_string(&verified.login).map_err(|e| SamlError::Provider(e.to_string()))?;
    let mut tx = store.begin_write().await?;
    if !requests::take_in(&mut tx, relay_state).await? {
        return Err(SamlError::State);
    }
    sqlx::query("DELETE FROM saml_assertions WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    let fresh = sqlx::query(
        "INSERT INTO saml_assertions (id_hash, provider_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT (id_hash) DO NOTHING",
    )
    .bind(secret::digest(&format!("{}\n{}", provider.id, verified.assertion_id)))
    .bind(&provider.id)
    .bind(verified.valid_until_ms.max(now + 60_000))
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    if fresh == 0 {
        return Err(SamlError::Response(format!(
            "assertion {} was already used",
            verified.assertion_id
        )));
    }
    let request = NewRequest {
        key: &hop,
        tenant_id: &provider.tenant_id,
        provider_id: &provider.id,
        browser_hash: &taken.browser_hash,
        nonce: "",
        verifier: "",
        next: &taken.next,
        verified: Some(&login),
        expires_at: now + FINISH_TTL_MS,
    };
    requests::insert(&mut tx, request, now).await?;
    tx.commit().await?;
    Ok(hop)
}

fn fingerprint(cert_b64: &str) -> String {
    use sha2::{Digest, Sha256};
    let der = STANDARD.decode(cert_b64).unwrap_or_default();
    let hex = hex::encode_upper(Sha256::digest(der));
    hex.as_bytes()
        .chunks(2)
        .take(8)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
        + ":…"
}

/// "Test connection": the metadata (read again when it came by URL and compared with what is
/// stored), the signing certificates, the SSO URL's reachability, and what to register at the IdP.
pub async fn test_connection(config: &Config, provider: &ProviderRow) -> Vec<ConnectionCheck> {
    let mut out = Vec::new();
    let check = |step: &str, ok: bool, detail: String| ConnectionCheck {
        step: step.into(),
        ok,
        detail,
    };
    let Some(s) = provider.saml.as_ref() else {
        out.push(check(
            "settings",
            false,
            "the provider has no SAML settings".into(),
        ));
        return out;
    };
    let allow_private = config.allow_private_idp_addresses;
    match s.idp_metadata_url.as_deref() {
        Some(url) => match fetch_metadata(url, allow_private).await {
            Err(e) => out.push(check("metadata", false, format!("{e} (at {url})"))),
            Ok(f) => {
                let same = f.entity_id == s.idp_entity_id
                    && f.sso_url == s.idp_sso_url
                    && f.certificates == s.idp_certificates;
                out.push(check(
                    "metadata",
                    same,
                    if same {
                        format!("entity ID {} (read from {url})", f.entity_id)
                    } else {
                        format!("the IdP's metadata at {url} changed since it was saved: save the provider again to take the new keys")
                    },
                ));
            }
        },
        None => out.push(check(
            "metadata",
            true,
            format!("entity ID {} (uploaded or entered)", s.idp_entity_id),
        )),
    }
    out.push(check(
        "signing certificates",
        !s.idp_certificates.is_empty(),
        format!(
            "{} certificate(s), SHA-256 {}",
            s.idp_certificates.len(),
            s.idp_certificates
                .iter()
                .map(|c| fingerprint(c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ));
    // Reachable or not; what it answered is not shown (it could be any URL).
    match outbound::get(&s.idp_sso_url, allow_private).await {
        Ok(_) => out.push(check(
            "single sign-on URL",
            true,
            format!("{} is reachable", s.idp_sso_url),
        )),
        Err(e) => out.push(check(
            "single sign-on URL",
            false,
            format!("{e} ({})", s.idp_sso_url),
        )),
    }
    out.push(check(
        "service provider",
        true,
        format!(
            "register entity ID {} with ACS {} (HTTP-POST)",
            sp_entity_id(config, &provider.tenant_slug, &provider.name),
            acs_url(config, &provider.tenant_slug, &provider.name)
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_taken_as_pem_or_base64_der() {
        // A DER SEQUENCE header with a long-form length, padded to a plausible size.
        let mut der = vec![0x30, 0x82, 0x01, 0x00];
        der.extend(std::iter::repeat_n(7u8, 256));
        let b64 = STANDARD.encode(&der);
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n{}\n-----END CERTIFICATE-----\n",
            &b64[..64],
            &b64[64..]
        );
        assert_eq!(normalize_certificate(&pem).as_deref(), Some(b64.as_str()));
        assert_eq!(normalize_certificate(&b64).as_deref(), Some(b64.as_str()));
        assert_eq!(normalize_certificate("not a certificate"), None);
        assert_eq!(normalize_certificate(&STANDARD.encode(b"short")), None);
    }

    #[test]
    fn only_one_assertion_and_no_dtd_pass_the_shape_check() {
        let one = r#"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"><saml:Assertion ID="a"/></samlp:Response>"#;
        assert!(shape_ok(one).is_ok());
        let two = one.replace(r#"<saml:Assertion ID="a"/>"#, r#"<saml:Assertion ID="evil"/><samlp:Extensions><saml:Assertion ID="a"/></samlp:Extensions>"#);
        assert!(shape_ok(&two).unwrap_err().contains("2 assertions"));
        let none = r#"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol"/>"#;
        assert!(shape_ok(none).unwrap_err().contains("no assertion"));
        let dtd = format!("<!DOCTYPE r [<!ENTITY x \"y\">]>{one}");
        assert!(shape_ok(&dtd).unwrap_err().contains("DTD"));
        assert!(shape_ok("<a><b></a>").is_err());
    }

    #[test]
    fn idp_metadata_gives_entity_sso_url_and_keys() {
        let cert = STANDARD.encode([0x30u8, 0x82, 0x01, 0x00].repeat(40));
        let xml = format!(
            r#"<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example/metadata">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>{cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://idp.example/post"/>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>"#
        );
        let f = parse_idp_metadata(&xml).unwrap();
        assert_eq!(f.entity_id, "https://idp.example/metadata");
        assert_eq!(f.sso_url, "https://idp.example/sso");
        assert_eq!(f.certificates, vec![cert]);
        let no_redirect = xml.replace("bindings:HTTP-Redirect", "bindings:SOAP");
        assert!(parse_idp_metadata(&no_redirect)
            .unwrap_err()
            .contains("HTTP-Redirect"));
        assert!(parse_idp_metadata("<html/>").is_err());
    }
}
