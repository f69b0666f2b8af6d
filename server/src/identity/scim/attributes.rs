//! Which attributes a response carries (RFC 7644 §3.4.2.5, RFC 7643 §7 `returned`):
//! `attributes` narrows a resource to the named ones, `excludedAttributes` drops the named
//! ones; `returned: always` attributes stay either way and `returned: request` ones appear
//! only when named. Applied to every resource a response carries.

use serde_json::{Map, Value};

use super::errors::{ScimError, ScimType};
use super::schemas::{ResourceSchema, Returned};

/// The `attributes` or `excludedAttributes` of a request (at most one of them).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    attributes: Vec<String>,
    excluded: Vec<String>,
}

impl Selection {
    pub fn new(attributes: Vec<String>, excluded: Vec<String>) -> Result<Self, ScimError> {
        if !attributes.is_empty() && !excluded.is_empty() {
            return Err(ScimError::bad(
                ScimType::InvalidSyntax,
                "attributes and excludedAttributes are mutually exclusive",
            ));
        }
        Ok(Selection {
            attributes,
            excluded,
        })
    }

    /// The (attribute, sub-attribute) pairs a list of paths names.
    fn split<'a>(
        schema: &ResourceSchema,
        list: &'a [String],
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        let schema_id = schema.id;
        list.iter().map(move |p| {
            let p = match p.get(..schema_id.len()) {
                Some(prefix) if prefix.eq_ignore_ascii_case(schema_id) => {
                    p[schema_id.len()..].trim_start_matches(':')
                }
                _ => p.as_str(),
            };
            match p.split_once('.') {
                Some((t, r)) => (t, Some(r)),
                None => (p, None),
            }
        })
    }

    /// `list` names `attr` or one of its sub-attributes.
    fn touches(schema: &ResourceSchema, list: &[String], attr: &str) -> bool {
        Self::split(schema, list).any(|(t, _)| t.eq_ignore_ascii_case(attr))
    }

    /// `list` names `attr` itself, whole.
    fn whole(schema: &ResourceSchema, list: &[String], attr: &str) -> bool {
        Self::split(schema, list).any(|(t, s)| s.is_none() && t.eq_ignore_ascii_case(attr))
    }

    /// `list` names `attr.sub`.
    fn sub(schema: &ResourceSchema, list: &[String], attr: &str, sub: &str) -> bool {
        Self::split(schema, list).any(|(t, s)| {
            t.eq_ignore_ascii_case(attr) && s.is_some_and(|s| s.eq_ignore_ascii_case(sub))
        })
    }

    /// `doc` (a resource as Switchyard has it) as this request wants it.
    pub fn apply(&self, schema: &ResourceSchema, doc: Value) -> Value {
        let Value::Object(doc) = doc else { return doc };
        let (asked, excluded) = (&self.attributes, &self.excluded);
        let mut out = Map::new();
        for (key, value) in doc {
            let Some(attr) = schema.attr(&key) else {
                // `schemas` and anything without a definition are always returned.
                out.insert(key, value);
                continue;
            };
            let always = attr.returned == Returned::Always;
            let keep = always
                || if asked.is_empty() {
                    !Self::whole(schema, excluded, attr.name)
                } else {
                    Self::touches(schema, asked, attr.name)
                };
            let request_only = attr.returned == Returned::Request;
            if !keep || request_only && !Self::touches(schema, asked, attr.name) {
                continue;
            }
            if attr.sub.is_empty() {
                out.insert(key, value);
                continue;
            }
            // Sub-attributes: all when the attribute is asked whole, else those asked; less
            // those excluded; `returned: request` ones only when asked by name.
            let whole = always || asked.is_empty() || Self::whole(schema, asked, attr.name);
            let keep_sub = |name: &str| match attr.sub_attr(name) {
                None => true,
                Some(sub) if sub.returned == Returned::Request => {
                    Self::sub(schema, asked, attr.name, sub.name)
                }
                Some(sub) => {
                    (whole || Self::sub(schema, asked, attr.name, sub.name))
                        && !Self::sub(schema, excluded, attr.name, sub.name)
                }
            };
            let narrow = |v: Value| match v {
                Value::Object(m) => {
                    Value::Object(m.into_iter().filter(|(k, _)| keep_sub(k)).collect())
                }
                other => other,
            };
            let value = match value {
                Value::Array(items) => Value::Array(items.into_iter().map(narrow).collect()),
                other => narrow(other),
            };
            out.insert(key, value);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::schemas::{GROUP, USER};
    use super::*;
    use serde_json::json;

    fn group() -> Value {
        json!({"schemas": ["s"], "id": "g1", "externalId": "x1", "displayName": "ML",
               "members": [{"value": "u1", "$ref": "/Users/u1", "type": "User", "display": "bob"}],
               "meta": {"resourceType": "Group"}})
    }

    fn sel(attributes: &[&str], excluded: &[&str]) -> Selection {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Selection::new(v(attributes), v(excluded)).unwrap()
    }

    #[test]
    fn attributes_narrow_and_excluded_attributes_drop() {
        let g = sel(&["externalId"], &[]).apply(&GROUP, group());
        assert_eq!(g, json!({"schemas": ["s"], "id": "g1", "externalId": "x1"}));
        let g = sel(&[], &["members", "id"]).apply(&GROUP, group());
        assert!(g.get("members").is_none() && g["id"] == "g1" && g["displayName"] == "ML");
        let g = sel(&["members.value"], &[]).apply(&GROUP, group());
        assert_eq!(g["members"], json!([{"value": "u1"}]));
        let u = sel(
            &["urn:ietf:params:scim:schemas:core:2.0:User:userName"],
            &[],
        )
        .apply(&USER, json!({"id": "u", "userName": "a", "active": true}));
        assert_eq!(u, json!({"id": "u", "userName": "a"}));
    }

    #[test]
    fn request_only_sub_attributes_appear_when_named() {
        let g = Selection::default().apply(&GROUP, group());
        assert!(g["members"][0].get("display").is_none());
        assert_eq!(g["members"][0]["value"], "u1");
        let g = sel(&["members.display", "members.value"], &[]).apply(&GROUP, group());
        assert_eq!(g["members"], json!([{"value": "u1", "display": "bob"}]));
        let g = sel(&[], &["members.type"]).apply(&GROUP, group());
        assert_eq!(g["members"], json!([{"value": "u1", "$ref": "/Users/u1"}]));
        assert!(Selection::new(vec!["a".into()], vec!["b".into()]).is_err());
    }
}
