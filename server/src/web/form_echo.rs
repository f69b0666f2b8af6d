//! Forms posted without JavaScript keep what was typed when they are rejected, and say so when
//! they are saved.
//!
//! Without JavaScript an `ActionForm` is a plain `<form>` posted to its server function, which
//! answers with a redirect back to the page (leptos_axum): with `?__path=<fn>&__err=<error>`
//! when it was rejected, so the page shows the errors at their fields, but with empty inputs.
//! This middleware, on the routes of the pages and server functions, keeps the fields of such a
//! rejected post for a few minutes in memory ([`FormStore`]: bounded, bound to the caller's
//! session) and adds `__form=<id>` to the redirect; when that page is then requested by the
//! same session, it puts the fields into the request as an [`app::form::FormEcho`], from which
//! the page fills its inputs (`app::form::echo`). A saved form's redirect gets `__ok=<fn>`
//! instead, for the page to say so. Secret fields (passwords, tokens, keys, the CSRF token:
//! [`app::form::is_secret_field`]) are never kept; file uploads (multipart) are not looked at.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use url::Url;

use app::form::{is_secret_field, FormEcho};
use app::model::{Auth, Principal};

use crate::http::error::{ApiError, AppError};
use crate::identity::secret::{constant_time_eq, random};
use crate::state::AppState;

/// How long a rejected form's fields are kept: long enough to read the errors and reload.
pub const TTL_MS: i64 = 5 * 60 * 1000;
/// At most this many forms are kept, for all sessions together (the oldest go first)…
pub const MAX_FORMS: usize = 1000;
/// …and at most this many bytes of names and values.
pub const MAX_TOTAL_BYTES: usize = 8 * 1024 * 1024;
/// One session keeps at most this many forms, so one user cannot push out everyone else's.
pub const MAX_PER_SESSION: usize = 20;
/// One form keeps at most this many bytes; a field that does not fit is left empty.
pub const MAX_FORM_BYTES: usize = 64 * 1024;
/// One form keeps at most this many fields.
pub const MAX_FIELDS: usize = 100;

/// Where the server functions live (`#[server(prefix = "/_sf")]`).
const SERVER_FN_PREFIX: &str = "/_sf/";

struct Kept {
    session: String,
    echo: FormEcho,
    expires_at: i64,
    bytes: usize,
}

/// Rejected forms' fields by a random id, each readable only by the session that posted it,
/// for [`TTL_MS`]; bounded in count and bytes, overall and per session. Time is a parameter.
#[derive(Default)]
pub struct FormStore {
    forms: HashMap<String, Kept>,
    /// Ids, oldest first (all live equally long, so also in order of expiry).
    order: VecDeque<String>,
    bytes: usize,
}

impl FormStore {
    /// Keeps the fields of a form posted to `path` by `session` and returns their id; `None`
    /// when nothing is left to keep once the secrets are taken out.
    pub fn keep(
        &mut self,
        session: &str,
        path: &str,
        fields: impl IntoIterator<Item = (String, String)>,
        now: i64,
    ) -> Option<String> {
        let fields = kept_fields(fields);
        if fields.is_empty() {
            return None;
        }
        let bytes = path.len() + fields.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>();
        self.purge(now);
        let own: Vec<String> = self
            .order
            .iter()
            .filter(|id| self.forms.get(*id).is_some_and(|k| k.session == session))
            .cloned()
            .collect();
        if own.len() >= MAX_PER_SESSION {
            for id in &own[..=own.len() - MAX_PER_SESSION] {
                self.remove(id);
            }
        }
        while self.forms.len() >= MAX_FORMS || self.bytes + bytes > MAX_TOTAL_BYTES {
            match self.order.front().cloned() {
                Some(id) => self.remove(&id),
                None => break,
            }
        }
        let id = random();
        self.forms.insert(
            id.clone(),
            Kept {
                session: session.to_string(),
                echo: FormEcho {
                    path: path.to_string(),
                    fields,
                },
                expires_at: now + TTL_MS,
                bytes,
            },
        );
        self.order.push_back(id.clone());
        self.bytes += bytes;
        Some(id)
    }

    /// The fields kept under `id`, if `session` posted them and they have not expired.
    pub fn get(&self, id: &str, session: &str, now: i64) -> Option<FormEcho> {
        self.forms
            .get(id)
            .filter(|k| now < k.expires_at)
            .filter(|k| constant_time_eq(k.session.as_bytes(), session.as_bytes()))
            .map(|k| k.echo.clone())
    }

    /// How many forms are kept, and their bytes.
    pub fn size(&self) -> (usize, usize) {
        (self.forms.len(), self.bytes)
    }

    fn purge(&mut self, now: i64) {
        while let Some(id) = self.order.front().cloned() {
            match self.forms.get(&id) {
                Some(k) if now < k.expires_at => break,
                _ => self.remove(&id),
            }
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some(k) = self.forms.remove(id) {
            self.bytes -= k.bytes;
        }
        if self.order.front().is_some_and(|x| x == id) {
            self.order.pop_front();
        } else {
            self.order.retain(|x| x != id);
        }
    }
}

/// The fields worth typing back: no secrets, at most [`MAX_FIELDS`], and none that would take
/// the form beyond [`MAX_FORM_BYTES`] (such a field comes back empty).
fn kept_fields(fields: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut bytes = 0;
    fields
        .into_iter()
        .filter(|(name, _)| !is_secret_field(name))
        .filter(|(name, value)| {
            let size = name.len() + value.len();
            let fits = bytes + size <= MAX_FORM_BYTES;
            if fits {
                bytes += size;
            }
            fits
        })
        .take(MAX_FIELDS)
        .collect()
}

/// The middleware's state: the kept forms and the app (its clock and settings).
#[derive(Clone)]
pub struct FormEchoState {
    forms: Arc<Mutex<FormStore>>,
    app: AppState,
}

impl FormEchoState {
    pub fn new(app: AppState) -> Self {
        Self {
            forms: Arc::new(Mutex::new(FormStore::default())),
            app,
        }
    }

    fn forms(&self) -> std::sync::MutexGuard<'_, FormStore> {
        // The store stays consistent between statements; a panic elsewhere does not spoil it.
        self.forms.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// On the pages' and server functions' routes: keeps a rejected no-JavaScript form post's
/// fields and marks its redirect, and gives a page requested with `__form` those fields.
pub async fn echo_forms(State(echo): State<FormEchoState>, req: Request, next: Next) -> Response {
    let session = session_of(&req);
    if req.method() == Method::GET {
        let mut req = req;
        if let (Some(session), Some(id)) = (session, query_value(req.uri(), "__form")) {
            let now = echo.app.store.now();
            let kept = echo.forms().get(&id, &session, now);
            if let Some(fields) = kept {
                req.extensions_mut().insert(fields);
            }
        }
        return next.run(req).await;
    }
    if req.method() != Method::POST
        || !req.uri().path().starts_with(SERVER_FN_PREFIX)
        || !plain_form_post(&req)
    {
        return next.run(req).await;
    }
    let path = req.uri().path().to_string();
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, echo.app.config.max_body_bytes).await {
        Ok(body) => body,
        Err(_) => return ApiError(AppError::PayloadTooLarge).into_response(),
    };
    let mut resp = next
        .run(Request::from_parts(parts, Body::from(body.clone())))
        .await;
    if !resp.status().is_redirection() {
        return resp;
    }
    let Some(location) = resp
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        return resp;
    };
    let mark = if has_param(location, "__err") {
        // Rejected: the page gets the fields back, if this session has any worth keeping.
        let now = echo.app.store.now();
        session
            .and_then(|s| echo.forms().keep(&s, &path, form_fields(&body), now))
            .map(|id| ("__form", id))
    } else {
        Some(("__ok", path))
    };
    let rewritten = rewrite_location(location, mark.as_ref().map(|(k, v)| (*k, v.as_str())));
    if let Some(value) = rewritten.and_then(|l| HeaderValue::from_str(&l).ok()) {
        resp.headers_mut().insert(header::LOCATION, value);
    }
    resp
}

/// The browser session behind the request (its id's hash), if it is one.
fn session_of(req: &Request) -> Option<String> {
    match req.extensions().get::<Principal>().map(|p| &p.auth) {
        Some(Auth::Session { session_id, .. }) => Some(session_id.clone()),
        _ => None,
    }
}

/// A browser's own form submission: it wants a page back and sends URL-encoded fields (the
/// server function client asks for JSON, and file uploads are multipart).
fn plain_form_post(req: &Request) -> bool {
    let header = |name| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    header(header::ACCEPT).contains("text/html")
        && header(header::CONTENT_TYPE).starts_with("application/x-www-form-urlencoded")
}

fn form_fields(body: &Bytes) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

fn query_value(uri: &Uri, key: &str) -> Option<String> {
    url::form_urlencoded::parse(uri.query()?.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

fn has_param(location: &str, key: &str) -> bool {
    parse_location(location).is_some_and(|(url, _)| url.query_pairs().any(|(k, _)| k == key))
}

/// A Location as a URL, and whether it was relative (then it is written back as one).
fn parse_location(location: &str) -> Option<(Url, bool)> {
    match Url::parse(location) {
        Ok(url) => Some((url, false)),
        Err(_) => Url::parse("http://relative.invalid/")
            .ok()?
            .join(location)
            .ok()
            .map(|url| (url, true)),
    }
}

/// The redirect's Location with this post's mark: the marks of earlier posts (`__form`,
/// `__ok`) are dropped, and of repeated `__path`/`__err` pairs (leptos appends one per
/// rejection to the page's address, which already has the last one) only the newest is kept,
/// so the page shows the errors of this post.
fn rewrite_location(location: &str, mark: Option<(&str, &str)>) -> Option<String> {
    let (mut url, relative) = parse_location(location)?;
    let mut kept: Vec<(String, String)> = Vec::new();
    let (mut path, mut err) = (None, None);
    for (k, v) in url.query_pairs().into_owned() {
        match k.as_str() {
            "__form" | "__ok" => {}
            "__path" => path = Some(v),
            "__err" => err = Some(v),
            _ => kept.push((k, v)),
        }
    }
    kept.extend(path.map(|v| ("__path".to_string(), v)));
    kept.extend(err.map(|v| ("__err".to_string(), v)));
    kept.extend(mark.map(|(k, v)| (k.to_string(), v.to_string())));
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Some(if relative {
        url[url::Position::BeforePath..].to_string()
    } else {
        url.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secret_fields_are_never_kept() {
        let mut store = FormStore::default();
        let posted = fields(&[
            ("csrf", "c"),
            ("name", "gpu-team"),
            ("password", "hunter2hunter2"),
            ("bind_password", "p"),
            ("client_secret", "s"),
            ("idempotency_key", "k"),
            ("api_token", "t"),
            ("gpu_milli", "99999999999999999999"),
        ]);
        let id = store.keep("s1", "/_sf/users/create", posted, NOW).unwrap();
        let echo = store.get(&id, "s1", NOW).unwrap();
        assert_eq!(echo.path, "/_sf/users/create");
        assert_eq!(
            echo.fields,
            fields(&[("name", "gpu-team"), ("gpu_milli", "99999999999999999999")])
        );
        // A form of nothing but secrets is not kept at all.
        assert!(store
            .keep(
                "s1",
                "/_sf/x",
                fields(&[("csrf", "c"), ("password", "p")]),
                NOW
            )
            .is_none());
    }

    #[test]
    fn only_the_posting_session_reads_its_form() {
        let mut store = FormStore::default();
        let id = store
            .keep("s1", "/_sf/groups/create", fields(&[("name", "x")]), NOW)
            .unwrap();
        assert!(store.get(&id, "s1", NOW).is_some());
        assert!(store.get(&id, "s2", NOW).is_none());
        assert!(store.get(&id, "", NOW).is_none());
        assert!(store.get("not-an-id", "s1", NOW).is_none());
    }

    #[test]
    fn a_kept_form_expires() {
        let mut store = FormStore::default();
        let id = store
            .keep("s1", "/_sf/groups/create", fields(&[("name", "x")]), NOW)
            .unwrap();
        assert!(store.get(&id, "s1", NOW + TTL_MS - 1).is_some());
        assert!(store.get(&id, "s1", NOW + TTL_MS).is_none());
        // Expired forms are dropped when the next one is kept.
        store
            .keep("s1", "/_sf/x", fields(&[("a", "b")]), NOW + TTL_MS)
            .unwrap();
        assert_eq!(store.size().0, 1);
    }

    #[test]
    fn the_store_stays_within_its_bounds() {
        let mut store = FormStore::default();
        // Count: the oldest forms make way.
        let first = store
            .keep("s0", "/_sf/x", fields(&[("n", "v")]), NOW)
            .unwrap();
        for i in 0..MAX_FORMS + 10 {
            store.keep(&format!("s{}", i + 1), "/_sf/x", fields(&[("n", "v")]), NOW);
        }
        assert_eq!(store.size().0, MAX_FORMS);
        assert!(store.get(&first, "s0", NOW).is_none());

        // Bytes: big forms from many sessions never go beyond the total.
        let mut store = FormStore::default();
        let big = "x".repeat(MAX_FORM_BYTES - 10);
        for i in 0..(MAX_TOTAL_BYTES / MAX_FORM_BYTES) * 2 {
            store.keep(&format!("s{i}"), "/_sf/x", fields(&[("v", &big)]), NOW);
            assert!(store.size().1 <= MAX_TOTAL_BYTES);
        }

        // One session: its own oldest forms go, not other sessions'.
        let mut store = FormStore::default();
        let other = store
            .keep("other", "/_sf/x", fields(&[("n", "v")]), NOW)
            .unwrap();
        let mut ids = Vec::new();
        for _ in 0..MAX_PER_SESSION + 5 {
            ids.push(
                store
                    .keep("s1", "/_sf/x", fields(&[("n", "v")]), NOW)
                    .unwrap(),
            );
        }
        assert_eq!(store.size().0, MAX_PER_SESSION + 1);
        assert!(store.get(&other, "other", NOW).is_some());
        assert!(store.get(&ids[0], "s1", NOW).is_none());
        assert!(store.get(ids.last().unwrap(), "s1", NOW).is_some());

        // One form: a field too big to type back comes back empty; the others still do.
        let mut store = FormStore::default();
        let huge = "x".repeat(MAX_FORM_BYTES + 1);
        let many: Vec<(String, String)> = (0..MAX_FIELDS + 50)
            .map(|i| (format!("f{i}"), "v".to_string()))
            .collect();
        let id = store
            .keep(
                "s1",
                "/_sf/x",
                fields(&[("metadata_xml", &huge), ("name", "n")])
                    .into_iter()
                    .chain(many),
                NOW,
            )
            .unwrap();
        let echo = store.get(&id, "s1", NOW).unwrap();
        assert_eq!(echo.value("metadata_xml"), None);
        assert_eq!(echo.value("name"), Some("n"));
        assert_eq!(echo.fields.len(), MAX_FIELDS);
    }

    #[test]
    fn the_redirect_carries_only_this_posts_marks() {
        // A second rejection: leptos appended a second error to the page's address.
        let loc = "http://h:3000/policy?tab=a&__path=%2F_sf%2Fx&__err=old&__form=old&__path=%2F_sf%2Fx&__err=new";
        let out = rewrite_location(loc, Some(("__form", "id2"))).unwrap();
        assert_eq!(
            out,
            "http://h:3000/policy?tab=a&__path=%2F_sf%2Fx&__err=new&__form=id2"
        );
        // Saved after a rejection: leptos dropped the error; the old form goes too.
        let loc = "http://h:3000/settings?__form=old&__ok=%2F_sf%2Fy";
        assert_eq!(
            rewrite_location(loc, Some(("__ok", "/_sf/groups/create"))).unwrap(),
            "http://h:3000/settings?__ok=%2F_sf%2Fgroups%2Fcreate"
        );
        // A relative Location stays relative.
        assert_eq!(
            rewrite_location("/portal", Some(("__ok", "/_sf/jobs/submit"))).unwrap(),
            "/portal?__ok=%2F_sf%2Fjobs%2Fsubmit"
        );
        assert_eq!(rewrite_location("/?__form=x", None).unwrap(), "/");
        assert!(has_param("/p?__path=a&__err=b", "__err"));
        assert!(!has_param("http://h/p?__ok=a", "__err"));
    }
}
