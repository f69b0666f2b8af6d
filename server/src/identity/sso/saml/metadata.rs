//! SAML metadata: reading the IdP's (fetched or pasted) and writing ours (the SP's).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use samael::crypto::AllowedSignatureAlgorithm;
use samael::key_info::{KeyInfo, X509Data};
use samael::metadata::{
    Endpoint, EntityDescriptor, IdpSsoDescriptor, IndexedEndpoint, KeyDescriptor, SpSsoDescriptor,
    HTTP_POST_BINDING, HTTP_REDIRECT_BINDING,
};
use samael::service_provider::ServiceProvider;
use samael::traits::ToXml;

use app::model::{SamlSettings, SaveIdentityProvider};

use super::super::outbound;
use super::super::ProviderRow;
use super::*;
use crate::config::Config;
use crate::http::error::{AppError, Validator};

/// Reads the IdP's metadata by URL (through the outbound address check) into its facts. What
/// the URL answered is never echoed: only whether its address was refused, it could not be
/// reached, or it sent no usable metadata.
pub(crate) async fn fetch_metadata(url: &str, allow_private: bool) -> Result<IdpFacts, String> {
    let resp = outbound::get(url, allow_private)
        .await
        .map_err(|e| e.to_string())?;
    let unusable = || "the metadata URL did not answer with SAML IdP metadata".to_string();
    if !resp.status().is_success() {
        return Err(unusable());
    }
    let body = outbound::read_limited(resp, METADATA_MAX_BYTES)
        .await
        .ok_or_else(unusable)?;
    let xml = String::from_utf8(body).map_err(|_| unusable())?;
    if xml.parse::<EntityDescriptor>().is_err() {
        return Err(unusable());
    }
    parse_idp_metadata(&xml)
}

/// What the SP keeps of an IdP's metadata.
#[derive(Debug, PartialEq, Eq)]
pub struct IdpFacts {
    pub entity_id: String,
    pub sso_url: String,
    pub certificates: Vec<String>,
}

/// Reads an IdP's `EntityDescriptor`: entity ID, HTTP-Redirect SSO URL, signing certificates.
pub fn parse_idp_metadata(xml: &str) -> Result<IdpFacts, String> {
    let ed: EntityDescriptor = xml
        .parse()
        .map_err(|e| format!("not SAML metadata (an EntityDescriptor): {e}"))?;
    let entity_id = ed
        .entity_id
        .clone()
        .filter(|e| !e.is_empty())
        .ok_or("the metadata has no entityID")?;
    if ed.idp_sso_descriptors.as_ref().is_none_or(|d| d.is_empty()) {
        return Err("the metadata describes no identity provider (IDPSSODescriptor)".into());
    }
    let sp = ServiceProvider {
        idp_metadata: ed,
        ..Default::default()
    };
    let sso_url = sp
        .sso_binding_location(HTTP_REDIRECT_BINDING)
        .ok_or("the IdP offers no single sign-on service with the HTTP-Redirect binding")?;
    let certificates = sp
        .idp_signing_certs()
        .map_err(|e| e.to_string())?
        .unwrap_or_default()
        .iter()
        .map(|c| STANDARD.encode(c.der_data()))
        .collect::<Vec<_>>();
    if certificates.is_empty() {
        return Err("the metadata has no signing certificate".into());
    }
    Ok(IdpFacts {
        entity_id,
        sso_url,
        certificates,
    })
}

/// A certificate given as PEM or base64 DER, as base64 DER; `None` when it is neither.
pub fn normalize_certificate(raw: &str) -> Option<String> {
    let body: String = raw
        .lines()
        .filter(|l| !l.trim_start().starts_with("-----"))
        .collect::<String>()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = STANDARD.decode(&body).ok()?;
    // An X.509 certificate is a DER SEQUENCE with a long-form length.
    (der.len() > 100 && der[0] == 0x30 && der[1] >= 0x81).then(|| STANDARD.encode(der))
}

/// On save: reads the metadata (pasted or by URL) into the IdP fields, and checks them. Errors
/// name the field.
pub async fn resolve(
    input: &mut SaveIdentityProvider,
    allow_private: bool,
) -> Result<(), AppError> {
    let Some(s) = input.saml.as_mut() else {
        return Ok(());
    };
    let mut v = Validator::default();
    let xml = s.idp_metadata_xml.take().filter(|x| !x.trim().is_empty());
    s.idp_metadata_url = s
        .idp_metadata_url
        .take()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    let facts = if let Some(xml) = xml {
        match parse_idp_metadata(&xml) {
            Ok(f) => Some(f),
            Err(e) => {
                v.check(false, "saml.idp_metadata_xml", &e);
                None
            }
        }
    } else if let Some(url) = s.idp_metadata_url.clone() {
        if !crate::identity::sso::url_ok(&url, allow_private) {
            v.check(
                false,
                "saml.idp_metadata_url",
                crate::identity::sso::URL_RULE,
            );
            None
        } else {
            match fetch_metadata(&url, allow_private).await {
                Ok(f) => Some(f),
                Err(e) => {
                    v.check(false, "saml.idp_metadata_url", &e);
                    None
                }
            }
        }
    } else {
        None
    };
    if let Some(f) = facts {
        s.idp_entity_id = f.entity_id;
        s.idp_sso_url = f.sso_url;
        s.idp_certificates = f.certificates;
    }
    v.finish()?;
    s.idp_entity_id = s.idp_entity_id.trim().to_string();
    s.idp_sso_url = s.idp_sso_url.trim().to_string();
    let mut certs = Vec::new();
    let mut bad_cert = false;
    for c in &s.idp_certificates {
        match normalize_certificate(c) {
            Some(n) => certs.push(n),
            None => bad_cert = true,
        }
    }
    s.idp_certificates = certs;
    v.check(
        !s.idp_entity_id.is_empty() && s.idp_entity_id.len() <= 1000,
        "saml.idp_entity_id",
        "the IdP's entity ID is required (give the metadata, or enter it)",
    );
    v.check(
        crate::identity::sso::url_ok(&s.idp_sso_url, allow_private),
        "saml.idp_sso_url",
        crate::identity::sso::URL_RULE,
    );
    v.check(
        !bad_cert,
        "saml.idp_certificates",
        "each certificate must be PEM or base64 DER",
    );
    v.check(
        !s.idp_certificates.is_empty() && s.idp_certificates.len() <= 10,
        "saml.idp_certificates",
        "1 to 10 signing certificates are required: responses are only taken signed",
    );
    for (field, attr) in [
        ("saml.username_attribute", &s.username_attribute),
        ("saml.email_attribute", &s.email_attribute),
        ("saml.name_attribute", &s.name_attribute),
        ("saml.groups_attribute", &s.groups_attribute),
    ] {
        v.check(
            attr.as_deref()
                .is_none_or(|a| !a.is_empty() && a.len() <= 200),
            field,
            "must be 1 to 200 characters",
        );
    }
    v.finish()
}

/// The samael service provider for one of our providers, its IdP pinned to the stored
/// entity ID, SSO URL and certificates.
pub(crate) fn service_provider(
    config: &Config,
    provider: &ProviderRow,
    s: &SamlSettings,
) -> ServiceProvider {
    let keys = s
        .idp_certificates
        .iter()
        .map(|c| KeyDescriptor {
            key_use: Some("signing".into()),
            key_info: KeyInfo {
                id: None,
                x509_data: Some(X509Data {
                    certificates: vec![c.clone()],
                }),
            },
            encryption_methods: None,
        })
        .collect();
    let idp = IdpSsoDescriptor {
        id: None,
        valid_until: None,
        cache_duration: None,
        protocol_support_enumeration: Some("urn:oasis:names:tc:SAML:2.0:protocol".into()),
        error_url: None,
        signature: None,
        key_descriptors: keys,
        organization: None,
        contact_people: Vec::new(),
        artifact_resolution_service: Vec::new(),
        single_logout_services: Vec::new(),
        manage_name_id_services: Vec::new(),
        name_id_formats: Vec::new(),
        want_authn_requests_signed: None,
        single_sign_on_services: vec![Endpoint {
            binding: HTTP_REDIRECT_BINDING.into(),
            location: s.idp_sso_url.clone(),
            response_location: None,
        }],
        name_id_mapping_services: Vec::new(),
        assertion_id_request_services: Vec::new(),
        attribute_profiles: Vec::new(),
        attributes: Vec::new(),
    };
    let entity = sp_entity_id(config, &provider.tenant_slug, &provider.name);
    ServiceProvider {
        entity_id: Some(entity.clone()),
        metadata_url: Some(entity),
        acs_url: Some(acs_url(config, &provider.tenant_slug, &provider.name)),
        slo_url: None,
        idp_metadata: EntityDescriptor {
            entity_id: Some(s.idp_entity_id.clone()),
            idp_sso_descriptors: Some(vec![idp]),
            ..Default::default()
        },
        authn_name_id_format: Some(NAMEID_UNSPECIFIED.into()),
        allow_idp_initiated: false,
        max_issue_delay: chrono::Duration::seconds(MAX_ISSUE_DELAY_SECS),
        max_clock_skew: chrono::Duration::seconds(CLOCK_SKEW_SECS),
        allowed_signature_algorithms: Some(vec![
            AllowedSignatureAlgorithm::RsaSha256,
            AllowedSignatureAlgorithm::RsaSha384,
            AllowedSignatureAlgorithm::RsaSha512,
            AllowedSignatureAlgorithm::EcdsaSha256,
            AllowedSignatureAlgorithm::EcdsaSha384,
            AllowedSignatureAlgorithm::EcdsaSha512,
        ]),
        ..Default::default()
    }
}

/// This SP's metadata document, to register at the IdP.
pub fn sp_metadata(config: &Config, provider: &ProviderRow) -> Result<String, SamlError> {
    let entity = sp_entity_id(config, &provider.tenant_slug, &provider.name);
    let ed = EntityDescriptor {
        entity_id: Some(entity),
        sp_sso_descriptors: Some(vec![SpSsoDescriptor {
            protocol_support_enumeration: Some("urn:oasis:names:tc:SAML:2.0:protocol".into()),
            authn_requests_signed: Some(false),
            want_assertions_signed: Some(true),
            name_id_formats: Some(vec![NAMEID_UNSPECIFIED.into()]),
            assertion_consumer_services: vec![IndexedEndpoint {
                binding: HTTP_POST_BINDING.into(),
                location: acs_url(config, &provider.tenant_slug, &provider.name),
                index: 0,
                is_default: Some(true),
                ..Default::default()
            }],
            ..Default::default()
        }]),
        ..Default::default()
    };
    ed.to_string()
        .map_err(|e| SamlError::Provider(format!("metadata: {e}")))
}
