//! The client's address: the directly connected peer, or — behind trusted proxies, with
//! `trust_forwarded_for` — the first address in `X-Forwarded-For` that no trusted proxy added.
//!
//! `X-Forwarded-For` is read from the right: each proxy appends the address it was connected
//! from, so the rightmost entries are the ones our own proxies wrote, and anything to the left
//! of the first untrusted address is whatever the client chose to send. Taking the leftmost
//! entry (as a naive reading does) lets any client pick the address it is throttled and
//! audited under.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};

use crate::config::{Config, IpNet};

/// An entry of `X-Forwarded-For`: `1.2.3.4`, `2001:db8::1`, or with a port (`1.2.3.4:80`,
/// `[2001:db8::1]:80`), as some proxies write it.
fn parse_entry(s: &str) -> Option<IpAddr> {
    let s = s.trim();
    s.parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .map(canonical)
}

/// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`, from dual-stack listeners) as plain IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// The client address. `peer` is the directly connected address; `forwarded` the
/// `X-Forwarded-For` values in the order received. With `trust` off, or when the peer is not
/// a trusted proxy, the peer is the client. A trusted peer's list is walked from the right,
/// skipping trusted proxies; the first other address is the client. An entry that does not
/// parse stops the walk: the last address read before it (at worst the peer) is the client.
///
/// `proxies` empty: only the directly connected peer is a trusted proxy (one proxy in front).
pub fn resolve(
    peer: Option<IpAddr>,
    forwarded: &[&str],
    trust: bool,
    proxies: &[IpNet],
) -> Option<IpAddr> {
    let peer = canonical(peer?);
    let trusted = |ip: IpAddr| {
        if proxies.is_empty() {
            ip == peer
        } else {
            proxies.iter().any(|n| n.contains(ip))
        }
    };
    if !trust || !trusted(peer) {
        return Some(peer);
    }
    let mut client = peer;
    let entries = forwarded.iter().flat_map(|v| v.split(',')).rev();
    for (i, entry) in entries.enumerate() {
        let Some(ip) = parse_entry(entry) else {
            break;
        };
        client = ip;
        // With no list, only the peer itself is trusted: the entry it added is the client.
        if proxies.is_empty() || !trusted(ip) {
            break;
        }
        // Bound the walk: no real chain of proxies is this long.
        if i >= 32 {
            break;
        }
    }
    Some(client)
}

/// The client address of a request, as text for the audit log and the sign-in throttle
/// (`unknown` when the server was not told the peer, as in tests that call the router).
pub fn client_ip(req: &Request, config: &Config) -> String {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    resolve(
        peer,
        &forwarded,
        config.trust_forwarded_for,
        &config.trusted_proxies,
    )
    .map(|ip| ip.to_string())
    .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| IpNet::parse(s).expect("net")).collect()
    }

    #[test]
    fn without_trust_the_peer_is_the_client() {
        let r = resolve(Some(ip("10.0.0.5")), &["6.6.6.6"], false, &[]);
        assert_eq!(r, Some(ip("10.0.0.5")));
        assert_eq!(resolve(None, &["6.6.6.6"], true, &[]), None);
    }

    #[test]
    fn one_proxy_in_front_its_entry_is_the_client() {
        // The proxy appended the client's address; the client sent a spoofed one before it.
        let r = resolve(Some(ip("10.0.0.5")), &["6.6.6.6, 203.0.113.7"], true, &[]);
        assert_eq!(r, Some(ip("203.0.113.7")));
        // No header: the peer.
        assert_eq!(
            resolve(Some(ip("10.0.0.5")), &[], true, &[]),
            Some(ip("10.0.0.5"))
        );
    }

    #[test]
    fn a_chain_of_trusted_proxies_is_skipped_from_the_right() {
        let proxies = nets(&["10.0.0.0/8", "192.168.1.1"]);
        let r = resolve(
            Some(ip("10.0.0.5")),
            &["6.6.6.6, 203.0.113.7", "192.168.1.1, 10.1.2.3"],
            true,
            &proxies,
        );
        assert_eq!(r, Some(ip("203.0.113.7")));
        // Everything trusted: the leftmost trusted entry.
        let r = resolve(Some(ip("10.0.0.5")), &["10.9.9.9"], true, &proxies);
        assert_eq!(r, Some(ip("10.9.9.9")));
    }

    #[test]
    fn an_untrusted_peer_cannot_forward() {
        let proxies = nets(&["10.0.0.0/8"]);
        let r = resolve(Some(ip("198.51.100.9")), &["6.6.6.6"], true, &proxies);
        assert_eq!(r, Some(ip("198.51.100.9")));
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_good_address() {
        let proxies = nets(&["10.0.0.0/8"]);
        let r = resolve(
            Some(ip("10.0.0.5")),
            &["6.6.6.6, not-an-ip, 10.2.2.2"],
            true,
            &proxies,
        );
        assert_eq!(r, Some(ip("10.2.2.2")));
        let r = resolve(Some(ip("10.0.0.5")), &["6.6.6.6, unknown"], true, &[]);
        assert_eq!(r, Some(ip("10.0.0.5")));
    }

    #[test]
    fn the_setting_reaches_the_config() {
        use crate::config::{ServeArgs, StoreArgs};
        let serve = ServeArgs {
            trust_forwarded_for: Some(true),
            trusted_proxies: Some(vec!["10.0.0.0/8".into(), "2001:db8::1".into()]),
            ..Default::default()
        };
        let c = Config::resolve(&StoreArgs::default(), &serve).expect("config");
        assert_eq!(c.trusted_proxies, nets(&["10.0.0.0/8", "2001:db8::1"]));
        let bad = ServeArgs {
            trusted_proxies: Some(vec!["10.0.0.0/33".into()]),
            ..Default::default()
        };
        assert!(Config::resolve(&StoreArgs::default(), &bad).is_err());
    }

    #[test]
    fn ports_brackets_and_mapped_addresses() {
        let r = resolve(
            Some(ip("::ffff:127.0.0.1")),
            &["[2001:db8::1]:4711"],
            true,
            &nets(&["127.0.0.1"]),
        );
        assert_eq!(r, Some(ip("2001:db8::1")));
        let r = resolve(Some(ip("::ffff:10.0.0.1")), &["203.0.113.7:80"], true, &[]);
        assert_eq!(r, Some(ip("203.0.113.7")));
        assert_eq!(
            resolve(Some(ip("::ffff:10.0.0.1")), &[], false, &[]),
            Some(ip("10.0.0.1"))
        );
    }
}
