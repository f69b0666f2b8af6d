//! What is typed into the pages' forms.
//!
//! Numbers: plain functions (no server, no browser) so that they are tested directly: every
//! input becomes a number through a checked conversion and an explicit range, and a bad one is
//! a field error naming the form's field.
//!
//! Echo: a form posted without JavaScript and rejected comes back with what was typed. The
//! server keeps the posted fields for a few minutes (`server/src/web/form_echo.rs`) and puts a
//! [`FormEcho`] into the request of the page it redirects to; [`echo`] and its siblings give
//! each input its value from it while the page renders on the server. In the browser there is
//! none: the values are plain attributes that hydration leaves as they are. [`done`] says a
//! form was saved, with or without JavaScript.

use std::ops::RangeInclusive;

use leptos::prelude::*;
use server_fn::ServerFn;

use crate::error::AppError;

/// An optional whole number: empty is `None`; anything else must be an integer in `range`.
pub fn int_in(
    field: &str,
    value: &str,
    range: RangeInclusive<i64>,
) -> Result<Option<i64>, AppError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let n = v.parse::<i64>().map_err(|_| {
        // Digits that do not fit in a 64-bit number are a number all the same: say it is
        // out of range, in the form's own bounds, not that it is not a number.
        let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let word = if v.starts_with('-') {
                "too small"
            } else {
                "too large"
            };
            AppError::field(
                field,
                format!(
                    "is {word}: must be between {} and {}",
                    range.start(),
                    range.end()
                ),
            )
        } else {
            AppError::field(field, "must be a whole number")
        }
    })?;
    if !range.contains(&n) {
        return Err(AppError::field(
            field,
            format!("must be between {} and {}", range.start(), range.end()),
        ));
    }
    Ok(Some(n))
}

/// An optional number of seconds in `range`, as milliseconds (the API's unit).
pub fn seconds_as_ms(
    field: &str,
    value: &str,
    range: RangeInclusive<i64>,
) -> Result<Option<i64>, AppError> {
    match int_in(field, value, range)? {
        None => Ok(None),
        Some(s) => s
            .checked_mul(1000)
            .map(Some)
            .ok_or_else(|| AppError::field(field, "is too large")),
    }
}

/// The job form's time fields, in seconds (the API's ranges, in milliseconds, divided by 1000).
pub const DURATION_S: RangeInclusive<i64> = 0..=2_592_000;
pub const MAX_RUNTIME_S: RangeInclusive<i64> = 1..=2_592_000;
pub const ABORT_TIMEOUT_S: RangeInclusive<i64> = 1..=600;

/// Whether a form field holds a secret (by its name): such a field is never kept on the server
/// nor typed back into a page.
pub fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["password", "secret", "token", "csrf", "key"]
        .iter()
        .any(|word| name.contains(word))
}

/// The fields of a form posted without JavaScript that its server function rejected, as the
/// page it comes back to finds them: a request extension on the server, which the document
/// carries to the browser (`<script id="form-echo">`, see [`echo_script`]) so that the page
/// renders the same values there, and a later re-render keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FormEcho {
    /// The server function's path (`ServerFn::PATH`): only that function's form is filled.
    pub path: String,
    /// Name and value of each field, in the order posted (secret fields are never here).
    pub fields: Vec<(String, String)>,
}

impl FormEcho {
    /// The first value posted for `field`.
    pub fn value(&self, field: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, value)| value.as_str())
    }

    /// Whether `field` was posted with `value` (a chosen option, a ticked checkbox).
    pub fn has(&self, field: &str, value: &str) -> bool {
        self.fields.iter().any(|(n, v)| n == field && v == value)
    }
}

/// The echo of the form posted to `path` (a server function's `PATH`), when this page is the
/// answer to its rejection.
fn echoed(path: &str) -> Option<FormEcho> {
    request_echo().filter(|e| e.path == path)
}

/// This request's echo, if the page answers a rejected form.
#[cfg(feature = "ssr")]
fn request_echo() -> Option<FormEcho> {
    use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<FormEcho>().cloned())
}

/// The echo the document came with, while the page is still the one it answered (its URL
/// keeps the `__form` mark; after a navigation inside the app there is none).
#[cfg(not(feature = "ssr"))]
fn request_echo() -> Option<FormEcho> {
    thread_local! {
        static SENT: Option<FormEcho> = document()
            .get_element_by_id(ECHO_ID)
            .and_then(|e| e.text_content())
            .and_then(|json| serde_json::from_str(&json).ok());
    }
    let marked = window()
        .location()
        .search()
        .is_ok_and(|q| q.contains("__form="));
    if marked {
        SENT.with(Clone::clone)
    } else {
        None
    }
}

const ECHO_ID: &str = "form-echo";

/// The echo as JSON that can stand inside a `<script>` element.
#[cfg(any(test, feature = "ssr"))]
fn script_json(echo: &FormEcho) -> Option<String> {
    serde_json::to_string(echo)
        .ok()
        .map(|j| j.replace('<', "\\u003c"))
}

/// The `<script type="application/json">` that carries this request's echo to the browser
/// (nothing when there is none). JSON in a script element: `<` is written `\u003c`, so no
/// typed text can close it.
pub fn echo_script() -> impl IntoView {
    #[cfg(feature = "ssr")]
    let json = request_echo().and_then(|e| script_json(&e));
    #[cfg(not(feature = "ssr"))]
    let json: Option<String> = None;
    json.map(|j| view! { <script type="application/json" id=ECHO_ID inner_html=j></script> })
}

/// What was typed into `field` of `S`'s rejected form: the `value` of its input.
pub fn echo<S: ServerFn>(field: &str) -> Option<String> {
    if is_secret_field(field) {
        return None;
    }
    echoed(S::PATH).and_then(|e| e.value(field).map(str::to_string))
}

/// [`echo`], or the input's usual value.
pub fn echo_or<S: ServerFn>(field: &str, default: &str) -> String {
    echo::<S>(field).unwrap_or_else(|| default.to_string())
}

/// Whether the option `value` of select `field` was the one chosen (`selected`); without an
/// echo, none is (the browser shows the first).
pub fn echo_selected<S: ServerFn>(field: &str, value: &str) -> bool {
    echoed(S::PATH).is_some_and(|e| e.has(field, value))
}

/// Whether checkbox `field` was ticked (`checked`); without an echo, `default`. A checkbox
/// left unticked is not posted at all, so with an echo its absence means unticked.
pub fn echo_checked<S: ServerFn>(field: &str, default: bool) -> bool {
    match echoed(S::PATH) {
        Some(e) => e.value(field).is_some(),
        None => default,
    }
}

/// What was typed into textarea `field`, as its `inner_html` (a textarea has no `value`
/// attribute; its text is escaped here, and hydration leaves it as the server rendered it).
pub fn echo_text<S: ServerFn>(field: &str) -> Option<String> {
    echo::<S>(field).map(|v| escape_text(&v))
}

fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether `action`'s form was saved: its last call succeeded (JavaScript), or the page is
/// the answer to a successful post of `S`'s form without JavaScript (the server adds
/// `__ok=<path>` to its redirect). A call that failed since then is not saved.
pub fn done<S>(action: ServerAction<S>) -> impl Fn() -> bool + Copy + Send + Sync + 'static
where
    S: ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    let query = leptos_router::hooks::use_query_map();
    move || {
        action.value().with(|v| match v {
            Some(result) => result.is_ok(),
            None => query.with(|q| q.get_str("__ok") == Some(S::PATH)),
        })
    }
}

/// The object the last successful call of `action` was sent for (`key` reads it from the
/// call's arguments), while that result stands: a row it deleted is left out at once, before
/// the page's data is read again, and only that row (a confirmation opened afterwards for
/// another keeps its row in view). In the browser only: without JavaScript the page is drawn
/// from data read after the change.
pub fn done_for<S>(
    action: ServerAction<S>,
    key: fn(&S) -> String,
) -> impl Fn() -> Option<String> + Copy + Send + Sync + 'static
where
    S: ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    let sent = StoredValue::new(None::<String>);
    let finished = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if let Some(id) = action.input().with(|i| i.as_ref().map(key)) {
            sent.set_value(Some(id));
        }
    });
    Effect::new(move |seen: Option<usize>| {
        let version = action.version().get();
        if seen.is_some_and(|v| v != version) {
            finished.set(sent.get_value());
        }
        version
    });
    move || {
        action
            .value()
            .with(|v| matches!(v, Some(Ok(_))))
            .then(|| finished.get())
            .flatten()
    }
}

/// `rows` without the one [`done_for`] says was just deleted (`id` names a row's object).
pub fn kept<T: Clone>(rows: &[T], gone: Option<String>, id: fn(&T) -> &str) -> Vec<T> {
    rows.iter()
        .filter(|r| gone.as_deref() != Some(id(r)))
        .cloned()
        .collect()
}

/// A form emptied once `action` saved it, so that the next entry starts blank. Only a save
/// this view saw: the page is drawn again after every save, and what was typed since into a
/// form drawn again stays.
pub fn emptied_on_save<S>(action: ServerAction<S>) -> NodeRef<leptos::html::Form>
where
    S: ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |seen: Option<usize>| {
        let version = action.version().get();
        let saved = action.value().with_untracked(|v| matches!(v, Some(Ok(_))));
        if seen.is_some_and(|v| v != version) && saved {
            if let Some(f) = form.get_untracked() {
                f.reset();
            }
        }
        version
    });
    form
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_become_milliseconds_without_overflow() {
        assert_eq!(seconds_as_ms("duration_s", "", DURATION_S), Ok(None));
        assert_eq!(
            seconds_as_ms("duration_s", " 60 ", DURATION_S),
            Ok(Some(60_000))
        );
        assert_eq!(
            seconds_as_ms("max_runtime_s", "2592000", MAX_RUNTIME_S),
            Ok(Some(2_592_000_000))
        );
        for (field, value, range) in [
            ("duration_s", "9223372036854775807", DURATION_S),
            ("duration_s", "-1", DURATION_S),
            ("duration_s", "2592001", DURATION_S),
            ("max_runtime_s", "0", MAX_RUNTIME_S),
            ("abort_timeout_s", "-9223372036854775807", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "-9223372036854775808", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "601", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "99999999999999999999", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "1.5", ABORT_TIMEOUT_S),
        ] {
            let e = seconds_as_ms(field, value, range).unwrap_err();
            assert!(e.message_for(field).is_some(), "{field}={value}: {e:?}");
        }
        // Even an unbounded range cannot wrap.
        assert!(seconds_as_ms("x", "9223372036854775807", i64::MIN..=i64::MAX).is_err());
        assert!(seconds_as_ms("x", "-9223372036854775807", i64::MIN..=i64::MAX).is_err());
    }

    #[test]
    fn a_huge_number_is_too_large_not_a_non_number() {
        let e = int_in("gpu_milli", "99999999999999999999", 0..=16_000).unwrap_err();
        let m = e.message_for("gpu_milli").unwrap();
        assert!(m.contains("too large") && m.contains("16000"), "{m}");
        let e = int_in("gpu_milli", "-99999999999999999999", 0..=16_000).unwrap_err();
        assert!(e.message_for("gpu_milli").unwrap().contains("too small"));
        let e = int_in("gpu_milli", "12a", 0..=16_000).unwrap_err();
        assert_eq!(
            e.message_for("gpu_milli").as_deref(),
            Some("must be a whole number")
        );
    }

    #[test]
    fn whole_numbers_stay_in_range() {
        assert_eq!(int_in("gpu_milli", "500", 0..=16_000), Ok(Some(500)));
        assert!(int_in("gpu_milli", "16001", 0..=16_000).is_err());
        assert!(int_in("gpu_milli", "abc", 0..=16_000).is_err());
    }

    #[test]
    fn secret_fields_are_known_by_name() {
        for name in [
            "password",
            "bind_password",
            "client_secret",
            "csrf",
            "idempotency_key",
            "api_token",
            "Password",
        ] {
            assert!(is_secret_field(name), "{name}");
        }
        for name in ["name", "username", "gpu_milli", "command", "metadata_xml"] {
            assert!(!is_secret_field(name), "{name}");
        }
    }

    #[test]
    fn an_echo_gives_each_field_what_was_posted() {
        let e = FormEcho {
            path: "/_sf/x".into(),
            fields: vec![
                ("name".into(), "a".into()),
                ("pool".into(), "p1".into()),
                ("pool".into(), "p2".into()),
            ],
        };
        assert_eq!(e.value("name"), Some("a"));
        assert_eq!(e.value("pool"), Some("p1"));
        assert!(e.has("pool", "p2") && !e.has("pool", "p3"));
        assert_eq!(e.value("other"), None);
    }

    #[test]
    fn textarea_text_is_escaped() {
        assert_eq!(
            escape_text("</textarea><b>&amp;"),
            "&lt;/textarea&gt;&lt;b&gt;&amp;amp;"
        );
    }

    #[test]
    fn an_echo_cannot_close_its_script_element() {
        let echo = FormEcho {
            path: "/_sf/jobs/create".into(),
            fields: vec![("name".into(), "</script><script>alert(1)</script>".into())],
        };
        let json = script_json(&echo).unwrap();
        assert!(!json.contains('<'), "{json}");
        let back: FormEcho = serde_json::from_str(&json).unwrap();
        assert_eq!(back, echo);
    }
}
