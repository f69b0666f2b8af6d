//! The balancer's guarantees: affinity across scale-out and scale-in, the load bound under
//! skewed keys, health and exclusions, determinism, and where session keys come from.

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
