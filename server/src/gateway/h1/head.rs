//! Request and response heads of the HTTP/1.1 path: parsed in place by `httparse`, kept as
//! ranges over the bytes read, and written out again with the hop-by-hop headers left out.
//! Only requests whose framing is plain take this path; everything else goes to hyper.

use std::io::Write;
use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::Bytes;

use super::super::proxy::HOP_BY_HOP;
use super::super::usage::Meter;

/// Most headers a head may have here (hyper, which takes the rest, allows 100).
const MAX_HEADERS: usize = 64;
/// Largest request body read whole on this path (a longer one streams through hyper).
pub(super) const MAX_BODY: usize = 64 * 1024;

/// A request head this path takes: HTTP/1.1, origin-form, one `Host`, a body of a known
/// length up to [`MAX_BODY`], no upgrade, no `Expect`, no transfer coding.
pub(super) struct RequestHead {
    bytes: Bytes,
    meta: Meta,
}

/// What the bytes read so far hold.
pub(super) enum Parsed {
    /// A head this path takes, `len` bytes long.
    Head { len: usize, meta: Meta },
    /// More bytes are needed.
    Partial,
    /// Something else (another version, an upgrade, a chunked body, a malformed head): for
    /// hyper.
    Other,
}

/// A parsed head's ranges, before its bytes are split off the read buffer.
pub(super) struct Meta {
    method: Range<usize>,
    target: Range<usize>,
    headers: Vec<(Range<usize>, Range<usize>)>,
    host: Range<usize>,
    authorization: Option<Range<usize>>,
    session: Option<Range<usize>>,
    content_type: Option<Range<usize>>,
    pub(super) content_length: usize,
    /// The client asked to close the connection after this exchange.
    close: bool,
}

fn range(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|b| *b == b',').map(|t| t.trim_ascii())
}

/// Parses the request head at the start of `buf`.
pub(super) fn parse_request(buf: &[u8]) -> Parsed {
    // Left uninitialised: the parser writes the headers it finds (zeroing all 64 slots, 2 KiB,
    // was work on every request).
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    let (Some(method), Some(target), Some(1)) = (req.method, req.path, req.version) else {
        return Parsed::Other;
    };
    if method == "CONNECT" || !target.starts_with('/') {
        return Parsed::Other;
    }
    let mut meta = Meta {
        method: range(buf, method.as_bytes()),
        target: range(buf, target.as_bytes()),
        headers: Vec::with_capacity(req.headers.len()),
        host: 0..0,
        authorization: None,
        session: None,
        content_type: None,
        content_length: 0,
        close: false,
    };
    let (mut hosts, mut lengths) = (0, 0);
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = range(buf, h.value);
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            meta.host = value.clone();
        } else if name.eq_ignore_ascii_case(b"content-length") {
            lengths += 1;
            let v = h.value;
            if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
                return Parsed::Other;
            }
            meta.content_length = std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(usize::MAX);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"upgrade")
            || name.eq_ignore_ascii_case(b"expect")
        {
            return Parsed::Other;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for t in tokens(h.value) {
                if t.eq_ignore_ascii_case(b"close") {
                    meta.close = true;
                } else if t.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::Other;
                }
            }
        } else if name.eq_ignore_ascii_case(b"authorization") {
            meta.authorization = Some(value.clone());
        } else if name.eq_ignore_ascii_case(super::super::proxy::SESSION_HEADER.as_bytes()) {
            meta.session = Some(value.clone());
        } else if name.eq_ignore_ascii_case(b"content-type") {
            meta.content_type = Some(value.clone());
        }
        meta.headers.push((range(buf, name), value));
    }
    if hosts != 1 || lengths > 1 || meta.content_length > MAX_BODY {
        return Parsed::Other;
    }
    Parsed::Head { len, meta }
}

impl RequestHead {
    /// The head over its own bytes (split off the read buffer).
    pub(super) fn new(bytes: Bytes, meta: Meta) -> RequestHead {
        RequestHead { bytes, meta }
    }

    /// The client asked to close the connection after this exchange.
    pub(super) fn close(&self) -> bool {
        self.meta.close
    }

    fn get(&self, r: &Range<usize>) -> &[u8] {
        &self.bytes[r.clone()]
    }

    fn text(&self, r: &Option<Range<usize>>) -> Option<&str> {
        r.as_ref()
            .and_then(|r| std::str::from_utf8(self.get(r)).ok())
    }

    pub(super) fn method(&self) -> &[u8] {
        self.get(&self.meta.method)
    }

    /// The target's path (without the query), as routes match it.
    pub(super) fn path(&self) -> &str {
        let t = std::str::from_utf8(self.get(&self.meta.target)).unwrap_or("/");
        t.split_once('?').map_or(t, |(p, _)| p)
    }

    pub(super) fn host(&self) -> &str {
        std::str::from_utf8(self.get(&self.meta.host)).unwrap_or("")
    }

    pub(super) fn authorization(&self) -> Option<&str> {
        self.text(&self.meta.authorization)
    }

    pub(super) fn session(&self) -> Option<&str> {
        self.text(&self.meta.session)
    }

    pub(super) fn content_type(&self) -> Option<&str> {
        self.text(&self.meta.content_type)
    }

    /// Whether sending it again cannot do what the first did twice (RFC 9110 section 9.2.2).
    pub(super) fn idempotent(&self) -> bool {
        matches!(
            self.method(),
            b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE"
        )
    }

    /// The head as the instance gets it, up to (not including) its `Host` line and the
    /// blank line: the client's headers but the gateway token, the host, those of the
    /// connection and `X-Forwarded-Host`, then who asked.
    /// `room`: bytes to leave room for after it.
    pub(super) fn upstream(&self, client_ip: &str, host: &str, room: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + 96 + room);
        out.extend_from_slice(self.method());
        out.push(b' ');
        out.extend_from_slice(self.get(&self.meta.target));
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in &self.meta.headers {
            let n = self.get(name);
            let dropped = n.eq_ignore_ascii_case(b"authorization")
                || n.eq_ignore_ascii_case(b"host")
                || n.eq_ignore_ascii_case(b"x-forwarded-host")
                || HOP_BY_HOP
                    .iter()
                    .any(|h| n.eq_ignore_ascii_case(h.as_bytes()));
            if !dropped {
                line(&mut out, n, self.get(value));
            }
        }
        line(&mut out, b"x-forwarded-for", client_ip.as_bytes());
        if !host.is_empty() {
            line(&mut out, b"x-forwarded-host", host.as_bytes());
        }
        out
    }
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// How an instance's response body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body (a `HEAD`, a 204 or 304).
    Empty,
    Length(u64),
    Chunked,
    /// At the connection's end (neither a length nor chunked).
    Close,
}

/// An instance's response head, already rewritten for the client.
pub(super) struct ResponseHead {
    pub(super) status: u16,
    /// Its length in the bytes read.
    pub(super) len: usize,
    pub(super) framing: Framing,
    /// The instance keeps the connection open after the body.
    pub(super) keep_alive: bool,
    /// Counts the tokens an OpenAI-style body reports (JSON or server-sent events).
    pub(super) meter: Option<Meter>,
    /// The head for the client, without the blank line.
    pub(super) client: Vec<u8>,
}

/// A response head that could not be read.
pub(super) struct BadResponse;

/// Parses the response head at the start of `buf` (`Ok(None)`: more bytes are needed).
/// `head_request`: the request was a `HEAD` (no body follows whatever the head says).
pub(super) fn parse_response(
    buf: &[u8],
    head_request: bool,
) -> Result<Option<ResponseHead>, BadResponse> {
    // Uninitialised, as the request's (4 KiB not zeroed per answer).
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS * 2];
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(BadResponse),
    };
    let (Some(status), Some(version)) = (resp.code, resp.version) else {
        return Err(BadResponse);
    };
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut keep_alive = version == 1;
    let mut meter = None;
    // Room for the body read with the head too: the relay sends both in one write.
    let mut client = Vec::with_capacity(buf.len() + 64);
    client.extend_from_slice(b"HTTP/1.1 ");
    let _ = write!(client, "{status}");
    client.push(b' ');
    client.extend_from_slice(resp.reason.unwrap_or("").as_bytes());
    client.extend_from_slice(b"\r\n");
    let bodiless = head_request || status == 204 || status == 304 || (100..200).contains(&status);
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(BadResponse)?;
            if length.is_some_and(|l| l != v) {
                return Err(BadResponse);
            }
            length = Some(v);
            if bodiless {
                line(&mut client, name, h.value);
            }
            continue;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = tokens(h.value)
                .last()
                .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            if !chunked {
                return Err(BadResponse);
            }
            continue;
        }
        if name.eq_ignore_ascii_case(b"connection") {
            for t in tokens(h.value) {
                if t.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && version == 0 {
                    keep_alive = true;
                }
            }
            continue;
        }
        if HOP_BY_HOP
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            continue;
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            meter = std::str::from_utf8(h.value)
                .ok()
                .and_then(Meter::for_content_type);
        }
        line(&mut client, name, h.value);
    }
    let framing = if bodiless {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        keep_alive = false;
        Framing::Close
    };
    match framing {
        Framing::Length(n) => {
            let _ = write!(client, "content-length: {n}\r\n");
        }
        Framing::Chunked => client.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Empty | Framing::Close => {}
    }
    Ok(Some(ResponseHead {
        status,
        len,
        framing,
        keep_alive,
        meter,
        client,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> RequestHead {
        match parse_request(raw.as_bytes()) {
            Parsed::Head { len, meta } => {
                RequestHead::new(Bytes::copy_from_slice(&raw.as_bytes()[..len]), meta)
            }
            Parsed::Partial => panic!("partial"),
            Parsed::Other => panic!("not taken"),
        }
    }

    fn taken(raw: &str) -> bool {
        matches!(parse_request(raw.as_bytes()), Parsed::Head { .. })
    }

    #[test]
    fn only_plainly_framed_http11_requests_are_taken() {
        assert!(taken("GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(taken(
            "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
        ));
        assert!(matches!(
            parse_request(b"GET /x HTTP/1.1\r\nHost: a\r\n"),
            Parsed::Partial
        ));
        for other in [
            "GET /x HTTP/1.0\r\nHost: a\r\n\r\n",
            "GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /x HTTP/1.1\r\n\r\n",
            "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 70000\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
            "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            "GET /x HTTP/1.1\r\nbad header\r\n\r\n",
        ] {
            assert!(!taken(other), "{other:?} is hyper's");
        }
    }

    #[test]
    fn the_instance_gets_no_token_nor_connection_headers_and_learns_who_asked() {
        let h = head(
            "POST /v1/chat?x=1 HTTP/1.1\r\nHost: API.example:8443\r\nAuthorization: Bearer sy_secret\r\n\
             Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Forwarded-For: 10.0.0.9\r\n\
             X-Forwarded-Host: spoofed\r\nX-Session-Id: s1\r\nContent-Type: application/json\r\n\
             Content-Length: 2\r\n\r\n",
        );
        assert_eq!(h.path(), "/v1/chat");
        assert_eq!(h.host(), "API.example:8443");
        assert_eq!(h.authorization(), Some("Bearer sy_secret"));
        assert_eq!(h.session(), Some("s1"));
        assert!(!h.idempotent());
        let up = String::from_utf8(h.upstream("127.0.0.1", "api.example", 0)).unwrap();
        assert!(up.starts_with("POST /v1/chat?x=1 HTTP/1.1\r\n"), "{up}");
        for gone in ["sy_secret", "Keep-Alive", "Connection", "spoofed", "Host:"] {
            assert!(!up.contains(gone), "{gone} reached the instance: {up}");
        }
        for kept in [
            "X-Forwarded-For: 10.0.0.9\r\n",
            "x-forwarded-for: 127.0.0.1\r\n",
            "x-forwarded-host: api.example\r\n",
            "Content-Length: 2\r\n",
            "X-Session-Id: s1\r\n",
        ] {
            assert!(up.contains(kept), "{kept:?} missing: {up}");
        }
    }

    #[test]
    fn response_framing_is_read_and_rewritten_for_the_client() {
        let parse = |raw: &str, head: bool| match parse_response(raw.as_bytes(), head) {
            Ok(Some(r)) => r,
            Ok(None) => panic!("partial"),
            Err(_) => panic!("bad"),
        };
        let r = parse(
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n\r\n",
            false,
        );
        assert_eq!(
            (r.status, r.framing, r.keep_alive),
            (200, Framing::Length(12), true)
        );
        assert!(r.meter.is_some(), "a JSON body is metered");
        let client = String::from_utf8(r.client).unwrap();
        assert!(client.contains("content-length: 12\r\n") && !client.contains("Connection"));
        let r = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        );
        assert_eq!(r.framing, Framing::Chunked);
        let r = parse("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false);
        assert_eq!((r.framing, r.keep_alive), (Framing::Close, false));
        let r = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false);
        assert!(!r.keep_alive, "HTTP/1.0 closes unless it says keep-alive");
        let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true);
        assert_eq!(
            r.framing,
            Framing::Empty,
            "the answer to a HEAD has no body"
        );
        assert!(String::from_utf8(r.client)
            .unwrap()
            .contains("Content-Length: 9"));
        assert_eq!(
            parse("HTTP/1.1 204 No Content\r\n\r\n", false).framing,
            Framing::Empty
        );
        assert!(parse_response(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        )
        .is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false).is_err()
        );
        assert!(matches!(
            parse_response(b"HTTP/1.1 200 OK\r\n", false),
            Ok(None)
        ));
    }
}
