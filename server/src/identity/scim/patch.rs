//! PATCH (RFC 7644 §3.5.2): the operations of a `PatchOp` body applied, in order, to the
//! resource as it is served; the handler then stores the result as a PUT would and answers
//! with what was stored. Paths are `attr`, `attr.sub`, `attr[filter]` and
//! `attr[filter].sub`, with or without the schema URN. Attributes Switchyard does not keep
//! (an IdP's `title`, the enterprise extension) are ignored, as a PUT ignores them;
//! read-only ones are refused with `mutability`, and so is removing a required one.

use serde_json::{Map, Value};

use super::errors::{ScimError, ScimType};
use super::query::{get_ci, parse_filter, Filter};
use super::schemas::{Attr, AttrType, Mutability, ResourceSchema};
use super::PATCH_SCHEMA;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Add,
    Replace,
    Remove,
}

/// Where an operation applies.
#[derive(Debug)]
pub struct Target {
    attr: &'static Attr,
    filter: Option<Filter>,
    sub: Option<&'static Attr>,
}

fn bad_path(detail: impl Into<String>) -> ScimError {
    ScimError::bad(ScimType::InvalidPath, detail)
}

/// Parses a path. `Ok(None)`: it names an attribute Switchyard does not keep.
pub fn parse_path(schema: &ResourceSchema, raw: &str) -> Result<Option<Target>, ScimError> {
    let path = schema.strip_urn(raw.trim());
    let (attr_name, filter, sub_name) = match path.find('[') {
        Some(open) => {
            let close = path
                .rfind(']')
                .filter(|c| *c > open)
                .ok_or_else(|| bad_path(format!("{raw}: unbalanced [")))?;
            let rest = &path[close + 1..];
            let sub = match rest {
                "" => None,
                r => Some(
                    r.strip_prefix('.')
                        .ok_or_else(|| bad_path(format!("{raw}: expected .sub after ]")))?,
                ),
            };
            let f = parse_filter(&path[open + 1..close])
                .map_err(|e| bad_path(format!("{raw}: {}", e.detail)))?;
            (&path[..open], Some(f), sub)
        }
        None => match path.split_once('.') {
            Some((a, s)) => (a, None, Some(s)),
            None => (path, None, None),
        },
    };
    if attr_name.is_empty() {
        return Err(bad_path(format!("{raw}: no attribute")));
    }
    let Some(attr) = schema.attr(attr_name) else {
        return Ok(None);
    };
    if filter.is_some() && !attr.multi {
        return Err(bad_path(format!("{}: not multi-valued", attr.name)));
    }
    let sub = match sub_name {
        None => None,
        Some(_) if attr.sub.is_empty() => {
            return Err(bad_path(format!("{} has no sub-attributes", attr.name)))
        }
        Some(s) => match attr.sub_attr(s) {
            Some(s) => Some(s),
            None => return Ok(None),
        },
    };
    if attr.mutability == Mutability::ReadOnly
        || sub.is_some_and(|s| s.mutability == Mutability::ReadOnly)
    {
        return Err(ScimError::bad(
            ScimType::Mutability,
            format!("{} is read-only", raw.trim()),
        ));
    }
    Ok(Some(Target { attr, filter, sub }))
}

/// One operation of a PatchOp body.
#[derive(Debug)]
pub struct Operation {
    kind: OpKind,
    path: Option<String>,
    value: Option<Value>,
}

/// The operations of a PatchOp body, checked for shape.
pub fn operations(body: &Value) -> Result<Vec<Operation>, ScimError> {
    if !body["schemas"]
        .as_array()
        .is_some_and(|s| s.iter().any(|x| x == PATCH_SCHEMA))
    {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            format!("a PATCH body has the schema {PATCH_SCHEMA}"),
        ));
    }
    let ops = get_ci(body, "Operations")
        .and_then(Value::as_array)
        .filter(|o| !o.is_empty())
        .ok_or_else(|| ScimError::bad(ScimType::InvalidSyntax, "Operations lists the changes"))?;
    ops.iter()
        .map(|o| {
            let kind = match get_ci(o, "op")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("add") => OpKind::Add,
                Some("replace") => OpKind::Replace,
                Some("remove") => OpKind::Remove,
                _ => {
                    return Err(ScimError::bad(
                        ScimType::InvalidSyntax,
                        "op is add, replace or remove",
                    ))
                }
            };
            let path = match get_ci(o, "path") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => Some(p.clone()),
                Some(_) => return Err(bad_path("path must be a string")),
            };
            let value = get_ci(o, "value").cloned();
            if kind == OpKind::Remove && path.is_none() {
                return Err(ScimError::bad(ScimType::NoTarget, "remove needs a path"));
            }
            if kind != OpKind::Remove && value.is_none() {
                return Err(ScimError::bad(
                    ScimType::InvalidValue,
                    "add and replace need a value",
                ));
            }
            Ok(Operation { kind, path, value })
        })
        .collect()
}

/// Applies `ops` to `doc`, a resource of `schema` as it is served.
pub fn apply(schema: &ResourceSchema, doc: &mut Value, ops: &[Operation]) -> Result<(), ScimError> {
    let Value::Object(doc) = doc else {
        return Ok(());
    };
    for op in ops {
        match &op.path {
            Some(p) => {
                if let Some(t) = parse_path(schema, p)? {
                    apply_at(doc, op.kind, &t, op.value.clone(), schema)?;
                }
            }
            // No path: the value is an object of attributes (or `name.givenName` paths).
            None => {
                let Some(Value::Object(fields)) = &op.value else {
                    return Err(ScimError::bad(
                        ScimType::InvalidValue,
                        "without a path the value is an object of attributes",
                    ));
                };
                for (k, v) in fields {
                    match parse_path(schema, k) {
                        Ok(Some(t)) => apply_at(doc, op.kind, &t, Some(v.clone()), schema)?,
                        // Clients send `id`, `meta` and `schemas` back with the rest.
                        Ok(None) => {}
                        Err(e) if e.scim_type == Some(ScimType::Mutability) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    Ok(())
}

/// A client's value for `attr` in the shape it is served: known keys in their own case,
/// unknown sub-attributes dropped, `"true"`/`"false"` as booleans, one value of a
/// multi-valued attribute as a list of one.
fn normalize(attr: &Attr, v: Value) -> Value {
    match v {
        Value::Array(items) if attr.multi => {
            Value::Array(items.into_iter().map(|i| normalize_one(attr, i)).collect())
        }
        other if attr.multi && !other.is_null() => Value::Array(vec![normalize_one(attr, other)]),
        other => normalize_one(attr, other),
    }
}

fn normalize_one(attr: &Attr, v: Value) -> Value {
    match (attr.ty, v) {
        (AttrType::Complex, Value::Object(m)) => Value::Object(
            m.into_iter()
                .filter_map(|(k, v)| {
                    attr.sub_attr(&k)
                        .map(|s| (s.name.to_string(), normalize_one(s, v)))
                })
                .collect(),
        ),
        // `"members": ["id"]` is a list of values.
        (AttrType::Complex, v @ Value::String(_)) if attr.sub_attr("value").is_some() => {
            let mut m = Map::new();
            m.insert("value".into(), v);
            Value::Object(m)
        }
        (AttrType::Boolean, Value::String(s)) if s.eq_ignore_ascii_case("true") => {
            Value::Bool(true)
        }
        (AttrType::Boolean, Value::String(s)) if s.eq_ignore_ascii_case("false") => {
            Value::Bool(false)
        }
        (_, v) => v,
    }
}

/// The key under which `doc` holds `attr` (a client may have sent it in another case).
fn key_of(doc: &Map<String, Value>, attr: &Attr) -> String {
    doc.keys()
        .find(|k| k.eq_ignore_ascii_case(attr.name))
        .cloned()
        .unwrap_or_else(|| attr.name.to_string())
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (get_ci(a, "value"), get_ci(b, "value")) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn apply_at(
    doc: &mut Map<String, Value>,
    kind: OpKind,
    t: &Target,
    value: Option<Value>,
    schema: &ResourceSchema,
) -> Result<(), ScimError> {
    let key = key_of(doc, t.attr);
    if kind == OpKind::Remove && t.sub.is_none() && t.filter.is_none() && t.attr.required {
        return Err(ScimError::bad(
            ScimType::Mutability,
            format!("{} is required; replace it instead", t.attr.name),
        ));
    }
    // A null value removes what it would have set.
    let (kind, value) = match value {
        Some(Value::Null) => (OpKind::Remove, None),
        other => (kind, other),
    };
    match (&t.filter, t.sub) {
        (None, None) => {
            let value = value.map(|v| normalize(t.attr, v));
            match (kind, value) {
                (OpKind::Remove, Some(Value::Array(gone))) if t.attr.multi => {
                    // Entra's `{"op": "remove", "path": "members", "value": [{"value": id}]}`.
                    if let Some(Value::Array(items)) = doc.get_mut(&key) {
                        items.retain(|i| !gone.iter().any(|g| same_value(i, g)));
                    }
                }
                (OpKind::Remove, _) => {
                    if t.attr.required {
                        return Err(ScimError::bad(
                            ScimType::Mutability,
                            format!("{} is required; replace it instead", t.attr.name),
                        ));
                    }
                    doc.remove(&key);
                }
                (OpKind::Add, Some(Value::Array(new))) if t.attr.multi => {
                    let items = doc.entry(key).or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(items) = items {
                        for n in new {
                            if !items.iter().any(|i| same_value(i, &n)) {
                                items.push(n);
                            }
                        }
                    }
                }
                (_, Some(Value::Object(subs)))
                    if !t.attr.multi && t.attr.ty == AttrType::Complex =>
                {
                    // A complex attribute's sub-attributes are merged (§3.5.2.1, §3.5.2.3).
                    let target = doc.entry(key).or_insert_with(|| Value::Object(Map::new()));
                    match target {
                        Value::Object(m) => m.extend(subs),
                        other => *other = Value::Object(subs),
                    }
                }
                (_, Some(v)) => {
                    doc.insert(key, v);
                }
                (_, None) => {}
            }
        }
        (None, Some(sub)) => {
            let v = value.map(|v| normalize_one(sub, v));
            match doc.get_mut(&key) {
                Some(Value::Array(items)) if !items.is_empty() => {
                    for i in items.iter_mut() {
                        set_sub(i, sub, v.clone());
                    }
                }
                Some(Value::Object(_)) if !t.attr.multi => {
                    if let Some(target) = doc.get_mut(&key) {
                        set_sub(target, sub, v);
                    }
                }
                _ => {
                    if let Some(v) = v {
                        let mut m = Map::new();
                        m.insert(sub.name.to_string(), v);
                        let new = if t.attr.multi {
                            Value::Array(vec![Value::Object(m)])
                        } else {
                            Value::Object(m)
                        };
                        doc.insert(key.clone(), new);
                    }
                }
            }
            if matches!(doc.get(&key), Some(Value::Object(m)) if m.is_empty()) {
                doc.remove(&key);
            }
        }
        (Some(filter), sub) => {
            let mut items = match doc.remove(&key) {
                Some(Value::Array(items)) => items,
                Some(other) => vec![other],
                None => Vec::new(),
            };
            let hits: Vec<usize> = (0..items.len())
                .filter(|i| filter.matches(&items[*i], schema, Some(t.attr)))
                .collect();
            match (kind, sub) {
                (OpKind::Remove, None) => {
                    let mut i = 0;
                    items.retain(|_| {
                        i += 1;
                        !hits.contains(&(i - 1))
                    });
                }
                (OpKind::Remove, Some(sub)) => {
                    for &i in &hits {
                        set_sub(&mut items[i], sub, None);
                    }
                }
                (OpKind::Add, None) => {
                    return Err(bad_path("add takes the attribute without a filter"));
                }
                (OpKind::Replace, None) => {
                    if hits.is_empty() {
                        return Err(ScimError::bad(
                            ScimType::NoTarget,
                            "no value matches the filter",
                        ));
                    }
                    let v = value.map(|v| normalize_one(t.attr, v));
                    for &i in &hits {
                        if let (Value::Object(m), Some(Value::Object(new))) = (&mut items[i], &v) {
                            m.extend(new.clone());
                        }
                    }
                }
                (_, Some(sub)) => {
                    let v = value.map(|v| normalize_one(sub, v));
                    if hits.is_empty() {
                        // `emails[type eq "work"].value` on a user without one adds it.
                        let mut m = Map::new();
                        if let Some(v) = v {
                            m.insert(sub.name.to_string(), v);
                        }
                        items.push(Value::Object(m));
                    } else {
                        for &i in &hits {
                            set_sub(&mut items[i], sub, v.clone());
                        }
                    }
                }
            }
            if !items.is_empty() {
                doc.insert(key, Value::Array(items));
            }
        }
    }
    Ok(())
}

fn set_sub(target: &mut Value, sub: &Attr, v: Option<Value>) {
    let Value::Object(m) = target else { return };
    let key = m
        .keys()
        .find(|k| k.eq_ignore_ascii_case(sub.name))
        .cloned()
        .unwrap_or_else(|| sub.name.to_string());
    match v {
        Some(v) => {
            m.insert(key, v);
        }
        None => {
            m.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::schemas::{GROUP, USER};
    use super::*;
    use serde_json::json;

    fn patch(schema: &ResourceSchema, mut doc: Value, ops: Value) -> Result<Value, ScimError> {
        let body = json!({"schemas": [PATCH_SCHEMA], "Operations": ops});
        apply(schema, &mut doc, &operations(&body)?)?;
        Ok(doc)
    }

    fn user() -> Value {
        json!({"id": "u1", "userName": "grace", "active": true, "emails": [{"value": "g@acme.test"}]})
    }

    #[test]
    fn okta_and_entra_shapes_apply() {
        let u = patch(
            &USER,
            user(),
            json!([{"op": "replace", "value": {"active": false}}]),
        )
        .unwrap();
        assert_eq!(u["active"], false);
        let u = patch(&USER, user(), json!([
            {"op": "Replace", "path": "active", "value": "False"},
            {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "new@acme.test"},
            {"op": "Add", "path": "name.givenName", "value": "Grace"},
            {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", "value": "R&D"},
            {"op": "Replace", "path": "title", "value": "Admiral"}
        ])).unwrap();
        assert_eq!(u["active"], false);
        assert_eq!(u["emails"], json!([{"value": "new@acme.test"}]));
        assert_eq!(u["name"], json!({"givenName": "Grace"}));
        assert!(u.get("title").is_none());
        let g =
            json!({"id": "g", "displayName": "ML", "members": [{"value": "a"}, {"value": "b"}]});
        let g2 = patch(
            &GROUP,
            g.clone(),
            json!([{"op": "remove", "path": "members[value eq \"a\"]"}]),
        )
        .unwrap();
        assert_eq!(g2["members"], json!([{"value": "b"}]));
        let g2 = patch(
            &GROUP,
            g.clone(),
            json!([{"op": "Remove", "path": "members", "value": [{"value": "b"}]}]),
        )
        .unwrap();
        assert_eq!(g2["members"], json!([{"value": "a"}]));
        let g2 = patch(
            &GROUP,
            g,
            json!([{"op": "add", "path": "members", "value": [{"value": "a"}, {"value": "c"}]}]),
        )
        .unwrap();
        assert_eq!(
            g2["members"],
            json!([{"value": "a"}, {"value": "b"}, {"value": "c"}])
        );
    }

    #[test]
    fn add_replace_and_remove_follow_rfc_7644() {
        let u = patch(
            &USER,
            user(),
            json!([{"op": "add", "path": "externalId", "value": "x9"},
            {"op": "replace", "path": "displayName", "value": "Grace H"},
            {"op": "add", "value": {"name.formatted": "Grace Hopper", "id": "ignored"}}]),
        )
        .unwrap();
        assert_eq!(
            (u["externalId"].as_str(), u["displayName"].as_str()),
            (Some("x9"), Some("Grace H"))
        );
        assert_eq!(u["name"]["formatted"], "Grace Hopper");
        assert_eq!(u["id"], "u1");
        let u = patch(
            &USER,
            u,
            json!([{"op": "remove", "path": "externalId"}, {"op": "remove", "path": "emails"}]),
        )
        .unwrap();
        assert!(u.get("externalId").is_none() && u.get("emails").is_none());
        let code = |ops: Value| patch(&USER, user(), ops).unwrap_err().scim_type;
        assert_eq!(
            code(json!([{"op": "remove", "path": "active"}])),
            Some(ScimType::Mutability)
        );
        assert_eq!(
            code(json!([{"op": "replace", "path": "id", "value": "x"}])),
            Some(ScimType::Mutability)
        );
        assert_eq!(code(json!([{"op": "remove"}])), Some(ScimType::NoTarget));
        assert_eq!(
            code(json!([{"op": "move", "path": "active"}])),
            Some(ScimType::InvalidSyntax)
        );
        assert_eq!(
            code(
                json!([{"op": "replace", "path": "emails[value eq \"none\"]", "value": {"value": "a@b.c"}}])
            ),
            Some(ScimType::NoTarget)
        );
        assert_eq!(
            code(json!([{"op": "replace", "path": "userName[value eq \"x\"]", "value": "y"}])),
            Some(ScimType::InvalidPath)
        );
        let e = apply(
            &USER,
            &mut user(),
            &operations(&json!({"Operations": []})).unwrap_or_default(),
        );
        assert!(e.is_ok());
        assert!(
            operations(&json!({"Operations": [{"op": "add", "value": {}}]})).is_err(),
            "the PatchOp schema is required"
        );
    }
}
