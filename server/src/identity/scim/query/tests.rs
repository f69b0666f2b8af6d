//! Filters, attribute paths and query parameters, case by case.

use super::super::schemas::{GROUP, USER};
use super::*;

fn user() -> Value {
    json!({"id": "u1", "userName": "grace", "displayName": "Grace Hopper", "active": true,
           "emails": [{"value": "grace@acme.test"}], "meta": {"created": "2026-01-02T00:00:00Z"}})
}

fn uri(q: &str) -> Uri {
    format!("/scim/v2/Users?{q}").parse().unwrap()
}

fn hit(f: &str) -> bool {
    parse_filter(f).unwrap().matches(&user(), &USER, None)
}

#[test]
fn filters_compare_as_rfc_7644_says() {
    assert!(
        hit(r#"userName eq "GRACE""#),
        "userName is case-insensitive"
    );
    assert!(!hit(r#"id eq "U1""#), "id is case-exact");
    assert!(hit(r#"displayName co "hop" and active eq true"#));
    assert!(hit(r#"emails.value ew "@acme.test" or userName eq "x""#));
    assert!(hit(r#"emails[value sw "grace"]"#));
    assert!(hit(
        r#"not (externalId pr) and meta.created gt "2025-12-31T00:00:00Z""#
    ));
    assert!(!hit(r#"userName ne "grace""#));
    assert!(hit(
        r#"urn:ietf:params:scim:schemas:core:2.0:User:userName eq "grace""#
    ));
}

#[test]
fn malformed_or_unknown_filters_are_invalid_filter_errors() {
    for bad in [
        r#"userName eq grace"#,
        r#"userName xx "a""#,
        r#"(userName eq "a""#,
        r#"userName eq "a" junk"#,
        r#"userName eq "a"#,
    ] {
        let e = parse_filter(bad).unwrap_err();
        assert_eq!(e.scim_type, Some(ScimType::InvalidFilter), "{bad}");
    }
    let p = ListParams::from_query(&uri("filter=password%20eq%20%22x%22")).unwrap();
    assert!(p.check_filter(&[&USER]).is_err());
    let p = ListParams::from_query(&uri("filter=displayName%20eq%20%22x%22")).unwrap();
    assert!(p.check_filter(&[&USER, &GROUP]).is_ok());
    assert!(ListParams::from_query(&uri("count=ten")).is_err());
}

#[test]
fn paging_is_clamped() {
    let p = ListParams::from_query(&uri("startIndex=0&count=-5")).unwrap();
    assert_eq!((p.start_index, p.count), (1, 0));
    let p = ListParams::from_query(&uri("STARTINDEX=3&count=9999")).unwrap();
    assert_eq!((p.start_index, p.count), (3, MAX_RESULTS));
}
