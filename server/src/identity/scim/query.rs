//! Listing and searching (RFC 7644 §3.4.2-3.4.3): the `filter` language (comparisons, `pr`,
//! `and`, `or`, `not`, grouping and `attr[filter]`), paging with `startIndex` and `count`,
//! and the `attributes`/`excludedAttributes` parameters, read from a query string or from a
//! `/.search` body. Filters are evaluated on the resources as they are served.

use axum::extract::Query;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};

use super::attributes::Selection;
use super::errors::{scim_json, ScimError, ScimType};
use super::schemas::{Attr, ResourceSchema};
use super::{LIST_SCHEMA, SEARCH_SCHEMA};

pub use super::schemas::MAX_RESULTS;

/// What a list or search asks for.
#[derive(Debug, Default)]
pub struct ListParams {
    pub filter: Option<Filter>,
    /// 1-based.
    pub start_index: usize,
    pub count: usize,
    pub selection: Selection,
}

fn number(name: &str, v: &str) -> Result<i64, ScimError> {
    v.trim()
        .parse()
        .map_err(|_| ScimError::bad(ScimType::InvalidValue, format!("{name} must be an integer")))
}

fn comma_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl ListParams {
    fn new(
        filter: Option<&str>,
        start: Option<i64>,
        count: Option<i64>,
        attributes: Vec<String>,
        excluded: Vec<String>,
    ) -> Result<Self, ScimError> {
        Ok(ListParams {
            filter: filter
                .filter(|f| !f.trim().is_empty())
                .map(parse_filter)
                .transpose()?,
            // RFC 7644 §3.4.2.4: below 1 is 1, a negative count is 0.
            start_index: start.unwrap_or(1).max(1) as usize,
            count: count.unwrap_or(100).clamp(0, MAX_RESULTS as i64) as usize,
            selection: Selection::new(attributes, excluded)?,
        })
    }

    /// From a query string (`?filter=...&startIndex=...`); parameter names in any case.
    pub fn from_query(uri: &Uri) -> Result<Self, ScimError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|_| ScimError::bad(ScimType::InvalidSyntax, "malformed query string"))?;
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        ListParams::new(
            get("filter"),
            get("startIndex")
                .map(|v| number("startIndex", v))
                .transpose()?,
            get("count").map(|v| number("count", v)).transpose()?,
            get("attributes").map(comma_list).unwrap_or_default(),
            get("excludedAttributes")
                .map(comma_list)
                .unwrap_or_default(),
        )
    }

    /// From a `SearchRequest` body (`POST .../.search`).
    pub fn from_search(body: &Value) -> Result<Self, ScimError> {
        if !body["schemas"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x == SEARCH_SCHEMA))
        {
            return Err(ScimError::bad(
                ScimType::InvalidSyntax,
                format!("a search body has the schema {SEARCH_SCHEMA}"),
            ));
        }
        let int = |name: &str| match &body[name] {
            Value::Null => Ok(None),
            v => v.as_i64().map(Some).ok_or_else(|| {
                ScimError::bad(ScimType::InvalidValue, format!("{name} must be an integer"))
            }),
        };
        let names = |name: &str| match &body[name] {
            Value::Null => Ok(Vec::new()),
            Value::String(s) => Ok(comma_list(s)),
            Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ScimError::bad(ScimType::InvalidValue, format!("{name} lists strings"))
                }),
            _ => Err(ScimError::bad(
                ScimType::InvalidValue,
                format!("{name} lists strings"),
            )),
        };
        let filter = match &body["filter"] {
            Value::Null => None,
            Value::String(s) => Some(s.as_str()),
            _ => {
                return Err(ScimError::bad(
                    ScimType::InvalidFilter,
                    "filter must be a string",
                ))
            }
        };
        ListParams::new(
            filter,
            int("startIndex")?,
            int("count")?,
            names("attributes")?,
            names("excludedAttributes")?,
        )
    }

    /// Refuses a filter naming an attribute none of `schemas` defines.
    pub fn check_filter(&self, schemas: &[&ResourceSchema]) -> Result<(), ScimError> {
        match &self.filter {
            Some(f) => f.check(schemas, None),
            None => Ok(()),
        }
    }

    /// The page of `items` this request asks for, as a `ListResponse`.
    pub fn respond(&self, items: Vec<Value>) -> Response {
        let total = items.len();
        let page: Vec<Value> = items
            .into_iter()
            .skip(self.start_index - 1)
            .take(self.count)
            .collect();
        scim_json(
            StatusCode::OK,
            json!({
                "schemas": [LIST_SCHEMA],
                "totalResults": total,
                "startIndex": self.start_index,
                "itemsPerPage": page.len(),
                "Resources": page,
            }),
        )
    }
}

// ---- filters ------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Co,
    Sw,
    Ew,
    Gt,
    Ge,
    Lt,
    Le,
}

/// A parsed filter (RFC 7644 §3.4.2.2).
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    Compare(String, CmpOp, Value),
    Present(String),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
    Not(Box<Filter>),
    /// `emails[type eq "work"]`: some value of a multi-valued attribute matches.
    Values(String, Box<Filter>),
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    Str(String),
    Word(String),
}

fn invalid(detail: impl Into<String>) -> ScimError {
    ScimError::bad(ScimType::InvalidFilter, detail)
}

fn tokens(s: &str) -> Result<Vec<Token>, ScimError> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | '[' | ']' => {
                chars.next();
                out.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    '[' => Token::OpenBracket,
                    _ => Token::CloseBracket,
                });
            }
            '"' => {
                chars.next();
                let mut v = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e) => v.push(e),
                            None => return Err(invalid("unterminated string")),
                        },
                        Some(c) => v.push(c),
                        None => return Err(invalid("unterminated string")),
                    }
                }
                out.push(Token::Str(v));
            }
            _ => {
                let mut w = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '"') {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
                out.push(Token::Word(w));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }
    fn keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(k))
    }
    fn expect(&mut self, t: Token, what: &str) -> Result<(), ScimError> {
        if self.next() == Some(t) {
            Ok(())
        } else {
            Err(invalid(format!("expected {what}")))
        }
    }

    fn or(&mut self) -> Result<Filter, ScimError> {
        let mut left = self.and()?;
        while self.keyword("or") {
            self.at += 1;
            left = Filter::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Filter, ScimError> {
        let mut left = self.factor()?;
        while self.keyword("and") {
            self.at += 1;
            left = Filter::And(Box::new(left), Box::new(self.factor()?));
        }
        Ok(left)
    }

    fn factor(&mut self) -> Result<Filter, ScimError> {
        if self.keyword("not") {
            self.at += 1;
            self.expect(Token::Open, "( after not")?;
            let f = self.or()?;
            self.expect(Token::Close, ")")?;
            return Ok(Filter::Not(Box::new(f)));
        }
        match self.next() {
            Some(Token::Open) => {
                let f = self.or()?;
                self.expect(Token::Close, ")")?;
                Ok(f)
            }
            Some(Token::Word(attr)) => {
                if self.peek() == Some(&Token::OpenBracket) {
                    self.at += 1;
                    let f = self.or()?;
                    self.expect(Token::CloseBracket, "]")?;
                    return Ok(Filter::Values(attr, Box::new(f)));
                }
                let op = match self.next() {
                    Some(Token::Word(op)) => op.to_ascii_lowercase(),
                    _ => return Err(invalid(format!("expected an operator after {attr}"))),
                };
                let op = match op.as_str() {
                    "pr" => return Ok(Filter::Present(attr)),
                    "eq" => CmpOp::Eq,
                    "ne" => CmpOp::Ne,
                    "co" => CmpOp::Co,
                    "sw" => CmpOp::Sw,
                    "ew" => CmpOp::Ew,
                    "gt" => CmpOp::Gt,
                    "ge" => CmpOp::Ge,
                    "lt" => CmpOp::Lt,
                    "le" => CmpOp::Le,
                    other => return Err(invalid(format!("unknown operator {other}"))),
                };
                let value = match self.next() {
                    Some(Token::Str(s)) => Value::String(s),
                    Some(Token::Word(w)) => match w.to_ascii_lowercase().as_str() {
                        "true" => Value::Bool(true),
                        "false" => Value::Bool(false),
                        "null" => Value::Null,
                        _ => serde_json::from_str::<serde_json::Number>(&w)
                            .map(Value::Number)
                            .map_err(|_| invalid(format!("{w} is not a value; quote strings")))?,
                    },
                    _ => return Err(invalid(format!("expected a value after {attr}"))),
                };
                Ok(Filter::Compare(attr, op, value))
            }
            _ => Err(invalid("expected an attribute")),
        }
    }
}

/// Parses a filter; anything malformed is a 400 `invalidFilter`.
pub fn parse_filter(s: &str) -> Result<Filter, ScimError> {
    let mut p = Parser {
        tokens: tokens(s)?,
        at: 0,
    };
    let f = p.or()?;
    if p.at != p.tokens.len() {
        return Err(invalid("unexpected text after the filter"));
    }
    Ok(f)
}

/// The value of `key` in a JSON object, the key matched in any case.
pub fn get_ci<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

fn compare(actual: &Value, op: CmpOp, expected: &Value, case_exact: bool) -> bool {
    use std::cmp::Ordering;
    let ordering = match (actual, expected) {
        (Value::String(a), Value::String(b)) => {
            let (a, b) = if case_exact {
                (a.clone(), b.clone())
            } else {
                (a.to_lowercase(), b.to_lowercase())
            };
            match op {
                CmpOp::Co => return a.contains(&b),
                CmpOp::Sw => return a.starts_with(&b),
                CmpOp::Ew => return a.ends_with(&b),
                _ => a.cmp(&b),
            }
        }
        (Value::Bool(a), Value::Bool(b)) => match op {
            CmpOp::Eq | CmpOp::Ne => a.cmp(b),
            _ => return false,
        },
        (Value::Number(a), Value::Number(b)) => {
            match a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b))
            {
                Some(o) => o,
                None => return false,
            }
        }
        _ => return false,
    };
    match op {
        CmpOp::Eq => ordering == Ordering::Equal,
        CmpOp::Ne => ordering != Ordering::Equal,
        CmpOp::Gt => ordering == Ordering::Greater,
        CmpOp::Ge => ordering != Ordering::Less,
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Co | CmpOp::Sw | CmpOp::Ew => false,
    }
}

/// The values a path names in `obj`, and whether they compare case-exactly. `within` is the
/// multi-valued attribute whose value `obj` is (inside `attr[...]`). `None`: the path names
/// nothing this schema defines.
fn values_at<'a>(
    obj: &'a Value,
    path: &str,
    schema: &ResourceSchema,
    within: Option<&'static Attr>,
) -> Option<(Vec<&'a Value>, bool)> {
    if let Some(parent) = within {
        let sub = parent.sub_attr(path)?;
        return Some((get_ci(obj, sub.name).into_iter().collect(), sub.case_exact));
    }
    let (attr, sub) = schema.lookup(path)?;
    let mut out = Vec::new();
    let key = |v: &'a Value, sub: Option<&Attr>| match sub {
        Some(s) => get_ci(v, s.name),
        // `emails co "x"` compares the values of a multi-valued complex attribute.
        None if v.is_object() => get_ci(v, "value"),
        None => Some(v),
    };
    match get_ci(obj, attr.name) {
        Some(Value::Array(items)) => out.extend(items.iter().filter_map(|i| key(i, sub))),
        Some(v) if sub.is_some() => out.extend(get_ci(v, sub.map_or("", |s| s.name))),
        Some(v) => out.push(v),
        None => {}
    }
    let case_exact = sub.map_or(attr.case_exact, |s| s.case_exact);
    Some((out, case_exact))
}

impl Filter {
    /// Whether `obj` (a resource of `schema`, or with `within` a value of that multi-valued
    /// attribute) matches. A comparison on a sub-attribute Switchyard does not keep, such as
    /// the `type` of `emails[type eq "work"]`, holds: there is nothing to tell values apart by.
    pub fn matches(
        &self,
        obj: &Value,
        schema: &ResourceSchema,
        within: Option<&'static Attr>,
    ) -> bool {
        match self {
            Filter::And(a, b) => a.matches(obj, schema, within) && b.matches(obj, schema, within),
            Filter::Or(a, b) => a.matches(obj, schema, within) || b.matches(obj, schema, within),
            Filter::Not(f) => !f.matches(obj, schema, within),
            Filter::Present(path) => match values_at(obj, path, schema, within) {
                Some((vs, _)) => vs.iter().any(|v| match v {
                    Value::Null => false,
                    Value::String(s) => !s.is_empty(),
                    Value::Array(a) => !a.is_empty(),
                    _ => true,
                }),
                None => within.is_some(),
            },
            Filter::Compare(path, op, expected) => match values_at(obj, path, schema, within) {
                Some((vs, case_exact)) => {
                    if expected.is_null() {
                        let none = vs.iter().all(|v| v.is_null());
                        return if *op == CmpOp::Ne { !none } else { none };
                    }
                    if *op == CmpOp::Ne {
                        !vs.iter()
                            .any(|v| compare(v, CmpOp::Eq, expected, case_exact))
                    } else {
                        vs.iter().any(|v| compare(v, *op, expected, case_exact))
                    }
                }
                None => within.is_some(),
            },
            Filter::Values(attr, inner) => {
                let Some(a) = schema.attr(attr) else {
                    return false;
                };
                match get_ci(obj, a.name) {
                    Some(Value::Array(items)) => {
                        items.iter().any(|i| inner.matches(i, schema, Some(a)))
                    }
                    Some(v) => inner.matches(v, schema, Some(a)),
                    None => false,
                }
            }
        }
    }

    /// Every attribute the filter names is defined by one of `schemas`.
    fn check(&self, schemas: &[&ResourceSchema], within: Option<&str>) -> Result<(), ScimError> {
        let known = |path: &str| {
            schemas.iter().any(|s| match within {
                Some(w) => s.attr(w).and_then(|a| a.sub_attr(path)).is_some(),
                None => s.lookup(path).is_some(),
            })
        };
        match self {
            Filter::And(a, b) | Filter::Or(a, b) => {
                a.check(schemas, within)?;
                b.check(schemas, within)
            }
            Filter::Not(f) => f.check(schemas, within),
            Filter::Present(p) | Filter::Compare(p, _, _) => {
                if known(p) {
                    Ok(())
                } else {
                    Err(invalid(format!("{p} is not an attribute of this resource")))
                }
            }
            Filter::Values(attr, inner) => {
                let multi = schemas
                    .iter()
                    .filter_map(|s| s.attr(attr))
                    .any(|a| a.multi || !a.sub.is_empty());
                if !multi {
                    return Err(invalid(format!("{attr} has no values to filter")));
                }
                inner.check(schemas, Some(attr))
            }
        }
    }
}

#[cfg(test)]
mod tests;
