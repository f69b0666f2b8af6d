//! Session-affine load balancing: consistent hashing with bounded loads.
//!
//! Requests that carry the same session key (a header, a cookie, the OpenAI `user` field or a
//! prefix of the prompt, see [`session_key`]) should reach the same upstream instance, so that
//! its KV/prefix cache stays warm, yet no instance may be swamped by a few hot sessions.
//! This is the algorithm of Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with
//! Bounded Loads" (SODA 2018), as used by HAProxy's `hash-balance-factor` and by Vimeo:
//!
//! * Every healthy member gets `vnodes` points on a 64-bit ring at `key_hash("{id}#{i}")`.
//!   Points depend on the member *id* only, never on its position in the slice, so two rings
//!   built from the same members in any order route identically (ties break on id).
//! * A request with key `k` walks clockwise from `mix(k)` and takes the first member whose
//!   in-flight load satisfies `load + 1 <= ceil(c * (total_load + 1) / healthy_count)`, where
//!   `total_load` sums the healthy members' loads and `c >= 1` is the balance factor.
//!
//! Guarantees:
//! * **Bounded load**: a member that is picked holds at most `ceil(c * mean)` in-flight requests
//!   after the placement, whatever the key skew (hot sessions spill over to the next members
//!   clockwise, always the same ones for the same key).
//! * **Never stuck**: with `c >= 1` and no exclusions a healthy member within the bound always
//!   exists (the least loaded one), so `pick` returns `None` only when no healthy member is left,
//!   or when every healthy, non-excluded member is at the bound. Callers that prefer affinity over
//!   the bound on retries may then call again with `c = f64::INFINITY` (pure consistent hashing).
//! * **Minimal disruption**: with loads below the bound, adding a member moves only the keys that
//!   now land on the new member (about `1/n` of them); removing one moves only its own keys.
//!
//! [`key_hash`] is FNV-1a followed by a 64-bit finalizer: fixed, stable across Rust versions and
//! processes, so several gateway replicas agree on the mapping.

/// One upstream instance of an endpoint as the balancer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Stable instance id; it alone places the member on the ring. Ids should be unique.
    pub id: String,
    /// Unhealthy members are left off the ring and never picked.
    pub healthy: bool,
}

/// Default number of virtual nodes per member.
pub const DEFAULT_VNODES: u32 = 160;
/// Default balance factor `c`.
pub const DEFAULT_BALANCE_FACTOR: f64 = 1.25;
/// `vnodes` is clamped to `1..=MAX_VNODES`.
pub const MAX_VNODES: u32 = 4096;
/// Only this many bytes of a request body are scanned by [`session_key`].
pub const MAX_BODY_SCAN: usize = 64 * 1024;

/// A ring over the healthy members, rebuilt when membership changes (cheap, rebuilt rarely).
#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// `(point, member index)`, sorted by point, then member id.
    points: Vec<(u64, usize)>,
    /// Indices of the healthy members.
    healthy: Vec<usize>,
}

impl Ring {
    /// Builds the ring from `members`; indices returned by [`Ring::pick`] index this slice.
    /// `vnodes` is clamped to `1..=MAX_VNODES` ([`DEFAULT_VNODES`] is a good choice).
    pub fn new(members: &[Member], vnodes: u32) -> Ring {
        let vnodes = vnodes.clamp(1, MAX_VNODES);
        let healthy: Vec<usize> = (0..members.len()).filter(|&i| members[i].healthy).collect();
        let mut points = Vec::with_capacity(healthy.len() * vnodes as usize);
        for &m in &healthy {
            for v in 0..vnodes {
                let label = format!("{}#{}", members[m].id, v);
                points.push((key_hash(label.as_bytes()), m));
            }
        }
        points.sort_unstable_by(|a, b| {
            (a.0, &members[a.1].id, a.1).cmp(&(b.0, &members[b.1].id, b.1))
        });
        Ring { points, healthy }
    }

    /// True when no member is healthy: [`Ring::pick`] then always returns `None`.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Number of healthy members on the ring.
    pub fn healthy_count(&self) -> usize {
        self.healthy.len()
    }

    /// The load bound `ceil(c * (total_load + 1) / healthy_count)` a member must stay within
    /// (after counting the request being placed). `c` below 1 or NaN counts as 1; missing
    /// entries of `load` count as 0. `u64::MAX` when the ring is empty or `c` is infinite.
    pub fn load_bound(&self, load: &[u64], c: f64) -> u64 {
        if self.healthy.is_empty() {
            return u64::MAX;
        }
        let total = self
            .healthy
            .iter()
            .map(|&i| load.get(i).copied().unwrap_or(0))
            .fold(0u64, u64::saturating_add);
        let c = if c >= 1.0 { c } else { 1.0 };
        // `as` saturates: an infinite bound becomes u64::MAX.
        (c * (total as f64 + 1.0) / self.healthy.len() as f64).ceil() as u64
    }

    /// The member index (into the `members` slice the ring was built from) for `key`, given the
    /// current in-flight load per member (`load[i]`, same indexing; missing entries count as 0)
    /// and the balance factor `c` (1.25 default): walks clockwise from `mix(key)` and takes the
    /// first healthy member whose `load + 1 <= ceil(c * (total_load + 1) / healthy_count)`.
    /// `exclude`: members already tried for this request (retries) are skipped.
    /// `key` is typically [`key_hash`] of the session key; any u64 spreads well.
    pub fn pick(&self, key: u64, load: &[u64], c: f64, exclude: &[usize]) -> Option<usize> {
        let bound = self.load_bound(load, c);
        let point = mix(key);
        let (before, after) = self
            .points
            .split_at(self.points.partition_point(|p| p.0 < point));
        after.iter().chain(before).map(|&(_, m)| m).find(|m| {
            !exclude.contains(m) && load.get(*m).copied().unwrap_or(0).saturating_add(1) <= bound
        })
    }
}

/// 64-bit finalizer (MurmurHash3 `fmix64`): a bijection with full avalanche.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Stable 64-bit hash of a session key: FNV-1a (64-bit) finalized with `fmix64`. Fixed
/// constants, so the value never changes across Rust versions, platforms or processes.
pub fn key_hash(bytes: &[u8]) -> u64 {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    mix(h)
}

/// Where the session key comes from, in order of preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A request header, matched case-insensitively (e.g. `x-session-id`).
    Header(String),
    /// A cookie (name matched exactly) from the `Cookie` header(s).
    Cookie(String),
    /// The top-level `"user"` string of an OpenAI-style JSON body.
    JsonUser,
    /// The first N bytes of the prompt: the top-level `"prompt"` string, or else the
    /// concatenated `"content"` of `"messages"` (strings, or the `"text"` of content parts).
    PromptPrefix(usize),
}

/// Extracts the session key bytes from request parts, trying `sources` in order and returning
/// the first non-empty key. Header lookup is case-insensitive; cookies are parsed from every
/// `Cookie` header; only the first [`MAX_BODY_SCAN`] bytes of `body` are scanned, and a body
/// that is empty or not a JSON object yields nothing. JSON strings are unescaped.
pub fn session_key(
    sources: &[KeySource],
    headers: &[(String, String)],
    body: &[u8],
) -> Option<Vec<u8>> {
    let mut fields: Option<BodyFields> = None;
    for source in sources {
        let key = match source {
            KeySource::Header(name) => headers
                .iter()
                .find(|(n, v)| n.trim().eq_ignore_ascii_case(name) && !v.trim().is_empty())
                .map(|(_, v)| v.trim().as_bytes().to_vec()),
            KeySource::Cookie(name) => headers
                .iter()
                .filter(|(n, _)| n.trim().eq_ignore_ascii_case("cookie"))
                .flat_map(|(_, v)| v.split(';'))
                .filter_map(|pair| pair.split_once('='))
                .find(|(n, _)| n.trim() == name)
                .map(|(_, v)| v.trim().trim_matches('"').as_bytes().to_vec()),
            KeySource::JsonUser => fields.get_or_insert_with(|| scan_body(body)).user.clone(),
            KeySource::PromptPrefix(n) => {
                let f = fields.get_or_insert_with(|| scan_body(body));
                let text = f.prompt.as_ref().unwrap_or(&f.messages);
                Some(text[..text.len().min(*n)].to_vec())
            }
        };
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            return Some(k);
        }
    }
    None
}

/// The fields [`session_key`] reads from a JSON body.
#[derive(Debug, Default)]
struct BodyFields {
    user: Option<Vec<u8>>,
    prompt: Option<Vec<u8>>,
    messages: Vec<u8>,
}

/// Scans the top-level object of `body` (first [`MAX_BODY_SCAN`] bytes) for `user`, `prompt`
/// and `messages[].content`. A syntax error or the end of the scanned bytes stops the scan;
/// what was complete by then is kept (prompt text is a prefix, so a cut-off one is kept too).
fn scan_body(body: &[u8]) -> BodyFields {
    let mut f = BodyFields::default();
    let b = &body[..body.len().min(MAX_BODY_SCAN)];
    let b = b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b); // UTF-8 BOM
    let _ = Scan { b, i: 0 }.top_level(&mut f);
    f
}

/// A minimal JSON scanner over bytes. Methods return `None` on a syntax error or at the end of
/// input. Nesting is skipped iteratively (and text collection is depth-limited), so deep
/// bodies cannot overflow the stack.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn top_level(&mut self, f: &mut BodyFields) -> Option<()> {
        self.ws();
        self.eat(b'{').then_some(())?;
        let (mut first, mut user) = (true, Vec::new());
        while self.next(b'}', &mut first)? {
            match (self.key()?.as_slice(), self.peek()) {
                (b"user", Some(b'"')) if f.user.is_none() => {
                    self.string(Some(&mut user))?;
                    f.user = Some(std::mem::take(&mut user));
                }
                (b"prompt", Some(b'"')) if f.prompt.is_none() => {
                    self.string(Some(f.prompt.insert(Vec::new())))?
                }
                (b"messages", Some(b'[')) if f.messages.is_empty() => {
                    self.text(&mut f.messages, 4)?
                }
                _ => self.skip_value()?,
            }
        }
        Some(())
    }

    /// Appends the text of the value at the cursor: a string; the elements of an array; the
    /// `content`/`text` members of an object (`messages[].content[].text`). `depth` bounds
    /// the nesting followed; deeper values are skipped.
    fn text(&mut self, out: &mut Vec<u8>, depth: u8) -> Option<()> {
        let close = match self.peek()? {
            b'"' => return self.string(Some(out)),
            b'[' if depth > 0 => b']',
            b'{' if depth > 0 => b'}',
            _ => return self.skip_value(),
        };
        let mut first = self.bump().is_some();
        while self.next(close, &mut first)? {
            if close == b']' || matches!(self.key()?.as_slice(), b"content" | b"text") {
                self.text(out, depth - 1)?;
            } else {
                self.skip_value()?;
            }
        }
        Some(())
    }

    /// Inside an object or array (`close` is `}` or `]`): true when at the next member, false
    /// after the closing byte. `first` is true right after the opening byte.
    fn next(&mut self, close: u8, first: &mut bool) -> Option<bool> {
        self.ws();
        if self.eat(close) {
            return Some(false);
        }
        if !std::mem::take(first) && !self.eat(b',') {
            return None;
        }
        self.ws();
        Some(true)
    }

    /// An object key and its colon; the cursor ends at the value.
    fn key(&mut self) -> Option<Vec<u8>> {
        let mut key = Vec::new();
        self.string(Some(&mut key))?;
        self.ws();
        self.eat(b':').then_some(())?;
        self.ws();
        Some(key)
    }

    /// Skips one value of any kind, iteratively.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.ws();
            let c = self.peek()?;
            if c == b'"' {
                self.string(None)?;
            } else if c.is_ascii_alphanumeric() || c == b'-' {
                let scalar = |c: u8| c.is_ascii_alphanumeric() || b"+-.".contains(&c);
                while self.peek().is_some_and(scalar) {
                    self.i += 1;
                }
            } else {
                match c {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => depth -= 1,
                    b',' | b':' if depth > 0 => {}
                    _ => return None,
                }
                self.i += 1;
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    /// A string at the cursor, unescaped into `out` when given.
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> Option<()> {
        self.eat(b'"').then_some(())?;
        loop {
            let mut buf = [0; 4];
            let bytes: &[u8] = match self.bump()? {
                b'"' => return Some(()),
                b'\\' => match self.bump()? {
                    b'u' => self.unicode_escape()?.encode_utf8(&mut buf).as_bytes(),
                    e => {
                        let i = b"\"\\/bfnrt".iter().position(|&x| x == e)?;
                        b"\"\\/\x08\x0c\n\r\t".get(i..=i)?
                    }
                },
                c if c < 0x20 => return None,
                c => {
                    buf[0] = c;
                    &buf[..1]
                }
            };
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(bytes);
            }
        }
    }

    /// After `\u`: four hex digits, joining a surrogate pair; lone surrogates become U+FFFD.
    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi)
            && self.b.get(self.i..).is_some_and(|r| r.starts_with(b"\\u"))
        {
            let save = self.i;
            self.i += 2;
            match self.hex4() {
                Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                    return char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
                }
                _ => self.i = save,
            }
        }
        Some(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.b.get(self.i..self.i + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None; // checked first: from_str_radix would accept a leading '+'
        }
        let v = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
        self.i += 4;
        Some(v)
    }
}

#[cfg(test)]
mod tests;
