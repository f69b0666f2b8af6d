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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn members(n: usize) -> Vec<Member> {
        let m = |i| Member {
            id: format!("inst-{i}"),
            healthy: true,
        };
        (0..n).map(m).collect()
    }

    fn keys(n: usize) -> Vec<u64> {
        (0..n)
            .map(|i| key_hash(format!("session-{i}").as_bytes()))
            .collect()
    }

    /// Maps every key to the id of its member, with zero loads (pure consistent hashing).
    fn mapping(ms: &[Member], ks: &[u64]) -> Vec<String> {
        let (ring, load) = (Ring::new(ms, DEFAULT_VNODES), vec![0; ms.len()]);
        let pick = |&k| ms[ring.pick(k, &load, 1.25, &[]).unwrap()].id.clone();
        ks.iter().map(pick).collect()
    }

    #[test]
    fn scale_out_and_in_move_only_the_keys_they_must() {
        let ks = keys(100_000);
        let before = mapping(&members(10), &ks);
        let after = mapping(&members(11), &ks);
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        let to_new = after.iter().filter(|a| *a == "inst-10").count();
        let kept = (ks.len() - moved) as f64 / (ks.len() - to_new) as f64;
        let frac = moved as f64 / ks.len() as f64;
        eprintln!("scale-out 10->11: moved {frac:.4} (1/11 = 0.0909), kept {kept:.4} of the rest");
        assert!(kept >= 0.99, "kept {kept}");
        assert_eq!(moved, to_new, "keys only move onto the new member");
        assert!((0.05..=0.14).contains(&frac), "moved {frac}");

        let mut nine = members(10);
        let gone = nine.remove(3).id;
        let after = mapping(&nine, &ks);
        let moved: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
        let owned = before.iter().filter(|b| **b == gone).count();
        let frac = moved.len() as f64 / ks.len() as f64;
        eprintln!("scale-in 10->9: moved {frac:.4} (1/10), all of them the removed member's");
        assert!(
            moved.iter().all(|(b, _)| **b == gone),
            "only the removed member's keys move"
        );
        assert_eq!(moved.len(), owned);
        assert!((0.05..=0.15).contains(&frac), "moved {frac}");
    }

    /// Places `keys` one after another, never releasing; returns (loads, first-choice hits).
    fn place(ring: &Ring, keys: &[u64], c: f64) -> (Vec<u64>, usize) {
        let (mut load, mut first_choice) = (vec![0u64; ring.healthy_count()], 0);
        for &k in keys {
            let m = ring.pick(k, &load, c, &[]).unwrap();
            first_choice += usize::from(ring.pick(k, &load, f64::INFINITY, &[]) == Some(m));
            load[m] += 1;
        }
        (load, first_choice)
    }

    #[test]
    fn bounded_load_under_skew_and_affinity_under_uniform_keys() {
        let ring = Ring::new(&members(10), DEFAULT_VNODES);
        let (uniform, hot) = (keys(10_000), keys(10));
        let skewed: Vec<u64> = (0..10_000)
            .map(|i| [hot[i / 2 % 10], uniform[i]][i % 2])
            .collect();
        let bound = (1.25f64 * 10_000.0 / 10.0).ceil() as u64;
        let (load, first) = place(&ring, &skewed, 1.25);
        let (unbounded, _) = place(&ring, &skewed, f64::INFINITY);
        let (max, max_unbounded) = (load.iter().max().unwrap(), unbounded.iter().max().unwrap());
        eprintln!("skewed: max load {max} (bound {bound}; {max_unbounded} unbounded), first choice {first}/10000");
        assert!(load.iter().all(|&l| l <= bound), "{load:?}");
        assert_eq!(load.iter().sum::<u64>(), 10_000);

        let (load, first) = place(&ring, &uniform, 1.25);
        let frac = first as f64 / uniform.len() as f64;
        eprintln!("uniform: first choice {frac:.4}, loads {load:?} (bound {bound})");
        assert!(load.iter().all(|&l| l <= bound));
        assert!(frac >= 0.9, "first choice {frac}");
    }

    #[test]
    fn unhealthy_never_picked_and_exclusions_honoured() {
        let mut ms = members(5);
        ms[1].healthy = false;
        ms[3].healthy = false;
        let (ring, load) = (Ring::new(&ms, DEFAULT_VNODES), [0; 5]);
        assert_eq!(ring.healthy_count(), 3);
        for k in keys(2_000) {
            let m = ring.pick(k, &load, 1.25, &[]).unwrap();
            let r = ring.pick(k, &load, 1.25, &[m]).unwrap();
            assert!(ms[m].healthy && ms[r].healthy && r != m);
            assert_eq!(ring.pick(k, &load, 1.25, &[0, 2, 4]), None);
        }
        ms.iter_mut().for_each(|m| m.healthy = false);
        let ring = Ring::new(&ms, DEFAULT_VNODES);
        assert!(ring.is_empty());
        assert_eq!(ring.pick(7, &load, 1.25, &[]), None);
        assert_eq!(Ring::new(&[], 0).pick(7, &[], f64::NAN, &[]), None);
    }

    #[test]
    fn same_pick_whatever_the_member_order() {
        let a = members(8);
        let mut b = a.clone();
        b.reverse();
        b.swap(0, 3);
        let (ra, rb) = (Ring::new(&a, DEFAULT_VNODES), Ring::new(&b, DEFAULT_VNODES));
        let pos = |id: &str| b.iter().position(|m| m.id == id).unwrap();
        let load_a: Vec<u64> = (0..8).map(|i| i * 37 % 11).collect();
        let mut load_b = vec![0; 8];
        a.iter()
            .zip(&load_a)
            .for_each(|(m, &l)| load_b[pos(&m.id)] = l);
        for k in keys(5_000) {
            let pa = ra.pick(k, &load_a, 1.1, &[2]).unwrap();
            let pb = rb.pick(k, &load_b, 1.1, &[pos("inst-2")]).unwrap();
            assert_eq!(a[pa].id, b[pb].id);
        }
        // Pinned: replicas and releases must agree (FNV-1a "a" = 0xaf63dc4c8601ec8c, then fmix64).
        assert_eq!(key_hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(key_hash(b"inst-0#0"), 0x365c_bad0_440f_60a5);
        assert_eq!(mix(0xaf63_dc4c_8601_ec8c), key_hash(b"a"));
    }

    #[test]
    fn session_key_sources() {
        use KeySource::*;
        let hdrs: Vec<(String, String)> = [
            ("Content-Type", "json"),
            ("X-Session-ID", " abc "),
            ("cookie", "a=1; sid=s42"),
        ]
        .into_iter()
        .chain([("Cookie", "theme=dark")])
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let key = |src: &[KeySource], body: &str| session_key(src, &hdrs, body.as_bytes());
        let some = |s: &str| Some(s.as_bytes().to_vec());
        let (sid, missing) = (Header("x-session-id".into()), Header("x-missing".into()));
        assert_eq!(key(&[Header("X-SESSION-id".into())], ""), some("abc"));
        assert_eq!(key(&[Cookie("sid".into())], ""), some("s42"));
        assert_eq!(key(&[Cookie("theme".into())], ""), some("dark"));
        assert_eq!(key(&[Cookie("SID".into()), missing.clone()], ""), None);
        let body = r#"{"metadata":{"user":"nested"},"model":"m","n":[1,-2.5e3,{"a":[]}],"x":null,
            "esc":"a\"b\\\"}","user":"al\"ice\u00e9\ud83d\ude00"}"#;
        assert_eq!(key(&[JsonUser], body), some("al\"iceé😀"));
        assert_eq!(key(&[JsonUser], r#"{"metadata":{"user":"nested"}}"#), None);
        let escapes = r#"{"us\u0065r":"a\/b\tc\u0041\ud800!"}"#;
        assert_eq!(key(&[JsonUser], escapes), some("a/b\tcA\u{FFFD}!"));
        let chat = r#"{"messages":[{"role":"system","content":"Be \"brief\". "},{"role":"user",
            "content":[{"type":"text","text":"Hi"},{"type":"image_url","image_url":{"url":"x"}}]}]}"#;
        assert_eq!(key(&[PromptPrefix(100)], chat), some("Be \"brief\". Hi"));
        assert_eq!(key(&[PromptPrefix(4)], chat), some("Be \""));
        assert_eq!(
            key(&[PromptPrefix(3)], r#"{"prompt":"hello"}"#),
            some("hel")
        );
        for junk in [
            "",
            "not json",
            "[1,2]",
            "{\"user\":",
            "{\"user\":\"cut",
            "{\"user\" 1}",
        ] {
            assert_eq!(key(&[JsonUser, PromptPrefix(8)], junk), None, "{junk}");
        }
        let both = r#"{"user":"u1","prompt":"p"}"#;
        assert_eq!(key(&[missing, JsonUser, sid.clone()], both), some("u1"));
        assert_eq!(key(&[PromptPrefix(9), JsonUser], both), some("p"));
        assert_eq!(key(&[sid, JsonUser], both), some("abc"));
        let mut big = br#"{"user":"early","pad":""#.to_vec();
        big.resize(200_000, b'x');
        assert_eq!(session_key(&[JsonUser], &[], &big), some("early"));
        let deep = format!("{{\"a\":{}", "[".repeat(100_000));
        assert_eq!(key(&[JsonUser], &deep), None);
    }

    proptest! {
        #[test]
        fn pick_respects_health_exclusions_and_bound(
            health in prop::collection::vec(any::<bool>(), 1..20),
            loads in prop::collection::vec(0u64..40, 20),
            excl in prop::collection::vec(0usize..20, 0..4),
            key in any::<u64>(),
            c in 1.0f64..2.5,
        ) {
            let ms: Vec<Member> = health.iter().enumerate()
                .map(|(i, &healthy)| Member { id: format!("m{i}"), healthy }).collect();
            let ring = Ring::new(&ms, 16);
            let load = &loads[..ms.len()];
            let healthy: Vec<usize> = (0..ms.len()).filter(|&i| ms[i].healthy).collect();
            let total: u64 = healthy.iter().map(|&i| load[i]).sum();
            let bound = (c * (total as f64 + 1.0) / healthy.len() as f64).ceil() as u64;
            let eligible = |i: usize| ms[i].healthy && !excl.contains(&i) && load[i] < bound;
            match ring.pick(key, load, c, &excl) {
                Some(m) => prop_assert!(eligible(m)),
                None => prop_assert!((0..ms.len()).all(|i| !eligible(i))),
            }
            prop_assert_eq!(ring.pick(key, load, c, &[]).is_some(), !healthy.is_empty());
        }

        #[test]
        fn session_key_never_panics(body in prop::collection::vec(any::<u8>(), 0..200)) {
            let sources = [KeySource::JsonUser, KeySource::PromptPrefix(16)];
            let _ = session_key(&sources, &[], &body);
            let mut json = br#"{"user":"#.to_vec();
            json.extend_from_slice(&body);
            let _ = session_key(&sources, &[], &json);
        }
    }
}
