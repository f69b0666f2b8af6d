//! Outbound connections to identity providers, guarded against SSRF: OIDC discovery, JWKS and
//! token endpoint, SAML metadata and SSO URL, LDAP connect all go through here.
//!
//! - A host is resolved first and every address it resolves to is classified
//!   ([`classify`]); one refused address refuses the name. Loopback and private addresses
//!   (RFC 1918, CGNAT 100.64/10, fc00::/7) are refused unless the operator allows private IdP
//!   addresses; link-local (cloud metadata), unspecified, broadcast, multicast and reserved
//!   ones always are. IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 addresses are judged
//!   by the IPv4 address they carry.
//! - HTTP requests use a client whose DNS resolver applies the same check, so the address
//!   connected to is the address checked (DNS rebinding gains nothing); IP literals, which
//!   skip the resolver, are checked before each request. Redirects are not followed and no
//!   proxy is used (a proxy would resolve the name itself).
//! - Plain `http` is taken only with private addresses allowed, and only to private hosts.
//! - Errors are two generic messages: whether an address was refused, or the IdP could not be
//!   reached. No status, body, or "connection refused" of an arbitrary URL reaches the user.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::reqwest;
use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};
use url::{Host, Url};

use app::model::SaveIdentityProvider;

use crate::http::error::{AppError, Validator};

const DNS_TIMEOUT: Duration = Duration::from_secs(5);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an outbound connection to an IdP did not happen. The messages are what users see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    #[error("the identity provider's address is not allowed")]
    NotAllowed,
    #[error("could not reach the identity provider")]
    Unreachable,
}

/// What an address is, for the outbound check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    Public,
    /// Loopback, RFC 1918, CGNAT, unique-local: only with private IdP addresses allowed.
    Private,
    /// Never: link-local, unspecified, broadcast, multicast, documentation, reserved.
    Forbidden,
}

pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let o = ip.octets();
    let cgnat = o[0] == 100 && (o[1] & 0xc0) == 64;
    if ip.is_loopback() || ip.is_private() || cgnat {
        return AddrClass::Private;
    }
    let this_network = o[0] == 0;
    let reserved = o[0] >= 240; // 240/4, and 255.255.255.255
    let ietf = o[0] == 192 && o[1] == 0 && o[2] == 0;
    let benchmarking = o[0] == 198 && (o[1] & 0xfe) == 18;
    if this_network
        || reserved
        || ietf
        || benchmarking
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
    {
        return AddrClass::Forbidden;
    }
    AddrClass::Public
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if ip.is_loopback() {
        return AddrClass::Private;
    }
    let s = ip.segments();
    match s {
        // ::, and the deprecated IPv4-compatible ::a.b.c.d
        [0, 0, 0, 0, 0, 0, _, _] => AddrClass::Forbidden,
        // NAT64, well-known prefix 64:ff9b::/96: the IPv4 address it reaches.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => classify_v4(embedded_v4(hi, lo)),
        // Local-use NAT64 (RFC 8215): a private translator.
        [0x64, 0xff9b, 1, ..] => AddrClass::Private,
        // 6to4: the IPv4 address it tunnels to.
        [0x2002, hi, lo, ..] => classify_v4(embedded_v4(hi, lo)),
        // Teredo, documentation, discard-only.
        [0x2001, 0, ..] | [0x2001, 0x0db8, ..] | [0x0100, 0, 0, 0, ..] => AddrClass::Forbidden,
        [a, ..] if a & 0xfe00 == 0xfc00 => AddrClass::Private, // fc00::/7 unique-local
        [a, ..] if a & 0xffc0 == 0xfec0 => AddrClass::Private, // fec0::/10 old site-local
        [a, ..] if a & 0xffc0 == 0xfe80 => AddrClass::Forbidden, // fe80::/10 link-local
        [a, ..] if a & 0xff00 == 0xff00 => AddrClass::Forbidden, // multicast
        _ => AddrClass::Public,
    }
}

/// Whether an IdP may be reached at `ip`; `plain_http`: over unencrypted HTTP.
pub fn permitted(ip: IpAddr, allow_private: bool, plain_http: bool) -> bool {
    match classify(ip) {
        AddrClass::Public => !plain_http,
        AddrClass::Private => allow_private,
        AddrClass::Forbidden => false,
    }
}

/// Resolves `host` and checks every address; the addresses to connect to.
pub async fn resolve(
    host: &Host<&str>,
    port: u16,
    allow_private: bool,
    plain_http: bool,
) -> Result<Vec<SocketAddr>, OutboundError> {
    let addrs: Vec<SocketAddr> = match host {
        Host::Ipv4(ip) => vec![SocketAddr::new(IpAddr::V4(*ip), port)],
        Host::Ipv6(ip) => vec![SocketAddr::new(IpAddr::V6(*ip), port)],
        Host::Domain(name) => {
            // `[::1]` as a name (non-special URL schemes keep the brackets).
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if name.is_empty() {
                return Err(OutboundError::NotAllowed);
            }
            tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((name, port)))
                .await
                .map_err(|_| OutboundError::Unreachable)?
                .map_err(|_| OutboundError::Unreachable)?
                .collect()
        }
    };
    if addrs.is_empty() {
        return Err(OutboundError::Unreachable);
    }
    if addrs
        .iter()
        .all(|a| permitted(a.ip(), allow_private, plain_http))
    {
        Ok(addrs)
    } else {
        Err(OutboundError::NotAllowed)
    }
}

/// Checks an IdP URL before a request: `https`, or `http` to private hosts when those are
/// allowed; the host must resolve to permitted addresses only.
pub async fn check_url(url: &Url, allow_private: bool) -> Result<(), OutboundError> {
    let plain_http = match url.scheme() {
        "https" => false,
        "http" if allow_private => true,
        _ => return Err(OutboundError::NotAllowed),
    };
    let host = url.host().ok_or(OutboundError::NotAllowed)?;
    let port = url
        .port_or_known_default()
        .ok_or(OutboundError::NotAllowed)?;
    resolve(&host, port, allow_private, plain_http)
        .await
        .map(|_| ())
}

/// Checks an IdP URL when settings are saved: as [`check_url`], except that an `https` host
/// that does not resolve (yet) is taken; it is checked again at every connection.
pub async fn check_url_on_save(raw: &str, allow_private: bool) -> Result<(), OutboundError> {
    let url = Url::parse(raw.trim()).map_err(|_| OutboundError::NotAllowed)?;
    match check_url(&url, allow_private).await {
        Err(OutboundError::Unreachable) if url.scheme() == "https" => Ok(()),
        other => other,
    }
}

/// On save: the addresses of a provider's OIDC issuer, SAML single sign-on URL and LDAP
/// server (the SAML metadata URL was checked when it was fetched). Names that do not resolve
/// are taken here; every connection checks again.
pub async fn check_provider(
    input: &SaveIdentityProvider,
    allow_private: bool,
) -> Result<(), AppError> {
    let mut v = Validator::default();
    let refused = OutboundError::NotAllowed.to_string();
    if let Some(o) = input.oidc.as_ref().filter(|_| input.kind == "oidc") {
        let r = check_url_on_save(&o.issuer, allow_private).await;
        v.check(r.is_ok(), "oidc.issuer", &refused);
    }
    if let Some(s) = input.saml.as_ref().filter(|_| input.kind == "saml") {
        let r = check_url_on_save(&s.idp_sso_url, allow_private).await;
        v.check(r.is_ok(), "saml.idp_sso_url", &refused);
    }
    if let Some(l) = input.ldap.as_ref().filter(|_| input.kind == "ldap") {
        let ok = match Url::parse(l.url.trim()) {
            Ok(url) => match url.host() {
                Some(host) => {
                    let port =
                        url.port()
                            .unwrap_or(if url.scheme() == "ldaps" { 636 } else { 389 });
                    resolve(&host, port, allow_private, false).await
                        != Err(OutboundError::NotAllowed)
                }
                None => false,
            },
            Err(_) => false,
        };
        v.check(ok, "ldap.url", &refused);
    }
    v.finish()
}

/// The `OutboundError` somewhere in an error's chain; `Unreachable` when there is none.
pub fn classify_error(e: &(dyn std::error::Error + 'static)) -> OutboundError {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(o) = c.downcast_ref::<OutboundError>() {
            return *o;
        }
        cur = c.source();
    }
    OutboundError::Unreachable
}

/// reqwest's resolver, refusing names that resolve to addresses not permitted.
struct GuardedResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let name = name.as_str().to_string();
        Box::pin(async move {
            // Plain http to a private host was checked before the request; here a public
            // address is fine either way (rebinding could only make the request less private).
            let addrs = resolve(&Host::Domain(name.as_str()), 0, allow_private, false)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// An HTTP client for IdPs: the guarded resolver, no redirects, no proxy, a timeout. Use it
/// through [`IdpHttp`] or [`get`], which check IP-literal URLs too.
fn client(allow_private: bool) -> Result<reqwest::Client, OutboundError> {
    reqwest::ClientBuilder::new()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|_| OutboundError::Unreachable)
}

/// A guarded GET of an IdP URL.
pub async fn get(raw: &str, allow_private: bool) -> Result<reqwest::Response, OutboundError> {
    let url = Url::parse(raw.trim()).map_err(|_| OutboundError::NotAllowed)?;
    check_url(&url, allow_private).await?;
    client(allow_private)?
        .get(url)
        .send()
        .await
        .map_err(|e| classify_error(&e))
}

/// Reads a response body of at most `max` bytes.
pub async fn read_limited(mut resp: reqwest::Response, max: usize) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        if body.len() + chunk.len() > max {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

/// The HTTP client the openidconnect crate uses: every request (discovery, JWKS, token,
/// userinfo) is checked, whatever URL the discovery document names.
pub struct IdpHttp {
    client: reqwest::Client,
    allow_private: bool,
}

impl IdpHttp {
    pub fn new(allow_private: bool) -> Result<IdpHttp, OutboundError> {
        Ok(IdpHttp {
            client: client(allow_private)?,
            allow_private,
        })
    }
}

impl<'c> AsyncHttpClient<'c> for IdpHttp {
    type Error = OutboundError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, OutboundError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let url =
                Url::parse(&request.uri().to_string()).map_err(|_| OutboundError::NotAllowed)?;
            check_url(&url, self.allow_private).await?;
            self.client
                .call(request)
                .await
                .map_err(|e| classify_error(&e))
        })
    }
}

/// A TCP connection to `url`'s host (LDAP), to an address that passed the check.
pub async fn connect_tcp(
    url: &Url,
    default_port: u16,
    allow_private: bool,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, OutboundError> {
    let host = url.host().ok_or(OutboundError::NotAllowed)?;
    let port = url.port().unwrap_or(default_port);
    let addrs = resolve(&host, port, allow_private, false).await?;
    tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addrs[..]))
        .await
        .map_err(|_| OutboundError::Unreachable)?
        .map_err(|_| OutboundError::Unreachable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn addresses_are_classified() {
        for ip in [
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:192.168.0.1",
            "::ffff:100.64.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
        ] {
            assert_eq!(class(ip), AddrClass::Private, "{ip}");
        }
        for ip in [
            "169.254.169.254",
            "169.254.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "192.0.0.170",
            "::",
            "::a00:1",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "2001:db8::1",
            "2001:0:4136:e378::1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "::ffff:255.255.255.255",
            "::ffff:224.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert_eq!(class(ip), AddrClass::Forbidden, "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(class(ip), AddrClass::Public, "{ip}");
        }
    }

    #[test]
    fn the_setting_and_the_scheme_decide() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let public: IpAddr = "8.8.8.8".parse().unwrap();
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(!permitted(lo, false, false));
        assert!(permitted(lo, true, false));
        assert!(permitted(lo, true, true), "http to loopback when allowed");
        assert!(permitted(public, false, false));
        assert!(!permitted(public, true, true), "http only to private hosts");
        assert!(!permitted(metadata, true, false), "link-local never");
    }

    #[tokio::test]
    async fn urls_are_checked_after_resolution() {
        let check = |u: &str, allow: bool| {
            let u = Url::parse(u).unwrap();
            async move { check_url(&u, allow).await }
        };
        let refused = Err(OutboundError::NotAllowed);
        assert_eq!(check("http://127.0.0.1:1/", false).await, refused);
        assert_eq!(check("https://127.0.0.1:1/", false).await, refused);
        assert_eq!(check("https://[::ffff:7f00:1]:1/", false).await, refused);
        assert_eq!(check("https://localhost:1/", false).await, refused);
        assert_eq!(check("https://169.254.169.254/", true).await, refused);
        assert_eq!(check("ftp://127.0.0.1/", true).await, refused);
        assert_eq!(
            check("http://8.8.8.8/", true).await,
            refused,
            "http to public"
        );
        assert_eq!(check("http://localhost:1/", true).await, Ok(()));
        assert_eq!(check("https://8.8.8.8/", false).await, Ok(()));
        let ldap = Url::parse("ldap://127.1:1").unwrap();
        assert_eq!(
            connect_tcp(&ldap, 389, false, Duration::from_secs(1))
                .await
                .err(),
            Some(OutboundError::NotAllowed),
            "inet_aton forms resolve to what they are"
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_hosts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // Past the URL check (as after a DNS change): the client's own resolver refuses.
        let e = client(false)
            .unwrap()
            .get(format!("http://localhost:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(classify_error(&e), OutboundError::NotAllowed, "{e:?}");
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "nothing connected");
    }
}
