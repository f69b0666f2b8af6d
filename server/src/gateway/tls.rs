//! The gateways' TLS (rustls, ring): each gateway presents its own certificate, from the
//! operator's folder (`TENANT-GATEWAY.crt` and `TENANT-GATEWAY.key`, PEM, read when its
//! listener starts) or, without one, a self-signed certificate made for it at start (for
//! development: clients must be told to trust it). ALPN offers HTTP/2 and HTTP/1.1.
//! Certificates and keys live on the server's disk, chosen by the operator, never by a
//! tenant: a tenant admin names a gateway, not a file.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// A gateway's TLS: the rustls configuration and the certificate it presents (PEM).
pub struct Tls {
    pub config: Arc<ServerConfig>,
    pub certificate_pem: String,
    pub self_signed: bool,
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(c)
}

/// The same certificate for raw TCP: no ALPN (a client asking for its own protocol, such as
/// `postgresql`, would be refused by one that offers only HTTP's). With `client_ca`, each
/// client must present a certificate issued by one of those authorities (PEM).
pub fn for_tcp(t: &Tls, client_ca: Option<&str>) -> Result<Arc<ServerConfig>, String> {
    let Some(ca) = client_ca else {
        let mut c = (*t.config).clone();
        c.alpn_protocols.clear();
        return Ok(Arc::new(c));
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let c = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(client_verifier(ca)?)
        .with_cert_resolver(t.config.cert_resolver.clone());
    Ok(Arc::new(c))
}

/// Most certificate authorities' PEM a route may carry.
pub const MAX_CLIENT_CA: usize = 64 * 1024;

/// A verifier of client certificates issued by the authorities in `pem`: an error when it
/// holds no certificate, one that is not, or is too large.
pub fn client_verifier(pem: &str) -> Result<Arc<dyn ClientCertVerifier>, String> {
    if pem.len() > MAX_CLIENT_CA {
        return Err("too large".into());
    }
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())
}

/// The file name stem of a gateway's certificate and key.
pub fn file_stem(tenant_slug: &str, gateway: &str) -> String {
    format!("{tenant_slug}-{gateway}")
}

/// The gateway's certificate from `dir`, if the operator put one there.
pub fn from_dir(dir: &Path, tenant_slug: &str, gateway: &str) -> Option<Result<Tls, String>> {
    let stem = file_stem(tenant_slug, gateway);
    let (crt, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    if !crt.exists() && !key.exists() {
        return None;
    }
    Some((|| {
        let pem = std::fs::read_to_string(&crt).map_err(|e| format!("{}: {e}", crt.display()))?;
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", crt.display()))?;
        if chain.is_empty() {
            return Err(format!("{}: no certificate", crt.display()));
        }
        let key =
            PrivateKeyDer::from_pem_file(&key).map_err(|e| format!("{}: {e}", key.display()))?;
        Ok(Tls {
            config: Arc::new(server_config(chain, key)?),
            certificate_pem: pem,
            self_signed: false,
        })
    })())
}

/// A self-signed certificate for `names` (host names or addresses), made now.
pub fn self_signed(names: &[String]) -> Result<Tls, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let params = rcgen::CertificateParams::new(names.to_vec()).map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der_key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
    Ok(Tls {
        config: Arc::new(server_config(vec![cert.der().clone()], der_key)?),
        certificate_pem: cert.pem(),
        self_signed: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_names_its_hosts_and_offers_h2() {
        let t = self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert!(t.certificate_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(t.config.alpn_protocols[0], b"h2");
        assert!(t.self_signed);
    }

    #[test]
    fn client_authorities_must_be_certificates() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        assert!(client_verifier(&ca.pem()).is_ok());
        assert!(client_verifier("").is_err());
        assert!(
            client_verifier("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .is_err()
        );
        assert!(client_verifier(&"x".repeat(MAX_CLIENT_CA + 1)).is_err());
        let t = self_signed(&["localhost".into()]).unwrap();
        let c = for_tcp(&t, Some(&ca.pem())).unwrap();
        assert!(c.alpn_protocols.is_empty());
        assert!(for_tcp(&t, None).unwrap().alpn_protocols.is_empty());
    }

    #[test]
    fn files_are_read_when_present_and_their_errors_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(from_dir(dir.path(), "acme", "prod").is_none());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["prod.acme.test".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.path().join("acme-prod.crt"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("acme-prod.key"), key.serialize_pem()).unwrap();
        let t = from_dir(dir.path(), "acme", "prod").unwrap().unwrap();
        assert!(!t.self_signed);
        std::fs::write(dir.path().join("acme-dev.crt"), "not a certificate").unwrap();
        let err = from_dir(dir.path(), "acme", "dev").unwrap().err().unwrap();
        assert!(err.contains("acme-dev"), "{err}");
    }
}
