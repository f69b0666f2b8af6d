//! Small building blocks shared by the pages: the CSRF field, error banners, headings.

use leptos::prelude::*;

use crate::error::AppError;
use crate::SessionResource;

/// The session's CSRF token as a hidden form field; every state-changing form carries one.
#[component]
pub fn CsrfField() -> impl IntoView {
    let session = expect_context::<SessionResource>().0;
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let csrf = session.await.ok().flatten().map(|s| s.csrf).unwrap_or_default();
                view! { <input type="hidden" name="csrf" value=csrf/> }
            })}
        </Transition>
    }
}

/// A red banner for an error that is not about one field.
#[component]
pub fn ErrorBanner(error: AppError) -> impl IntoView {
    // A page whose object is missing, foreign or not the user's to see answers so.
    match &error {
        AppError::NotFound => set_status(404),
        AppError::Forbidden => set_status(403),
        _ => {}
    }
    let text = match &error {
        AppError::Validation(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    };
    view! {
        <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-4 py-3 text-sm text-red-800">
            {text}
        </div>
    }
}

/// The messages under a form field when the last submission rejected it: every one the
/// server gave for `field`, each on its own line.
pub fn field_error<T: Clone + Send + Sync + 'static>(
    value: impl Fn() -> Option<Result<T, AppError>> + Send + Sync + 'static,
    field: &'static str,
) -> impl IntoView {
    move || {
        let messages = field_messages(value(), field);
        (!messages.is_empty()).then(|| {
            view! {
                <div data-field-error=field>
                    {messages.into_iter().map(|m| view! { <p class="mt-1 text-xs text-red-700">{m}</p> }).collect_view()}
                </div>
            }
        })
    }
}

/// Every message a rejected submission gave for `field`, in the server's order.
fn field_messages<T>(value: Option<Result<T, AppError>>, field: &str) -> Vec<String> {
    match value {
        Some(Err(AppError::Validation(errors))) => errors
            .into_iter()
            .filter(|e| e.field == field)
            .map(|e| e.message)
            .collect(),
        _ => Vec::new(),
    }
}

/// An error that is not tied to a field, from the last submission.
pub fn form_error<T: Clone + Send + Sync + 'static>(
    value: impl Fn() -> Option<Result<T, AppError>> + Send + Sync + 'static,
) -> impl IntoView {
    move || {
        value().and_then(|r| r.err()).and_then(|e| match e {
            AppError::Validation(_) => None,
            other => Some(view! { <ErrorBanner error=other/> }),
        })
    }
}

#[component]
pub fn PageHeader(title: &'static str, #[prop(optional)] subtitle: &'static str) -> impl IntoView {
    view! {
        <div class="mb-6">
            <h1 class="text-2xl font-semibold tracking-tight">{title}</h1>
            {(!subtitle.is_empty()).then(|| view! { <p class="mt-1 text-sm text-slate-600">{subtitle}</p> })}
        </div>
    }
}

#[component]
pub fn Card(#[prop(into)] title: String, children: Children) -> impl IntoView {
    view! {
        <section class="min-w-0 rounded-lg border border-slate-200 bg-white shadow-sm">
            <h2 class="border-b border-slate-100 px-4 py-3 text-sm font-semibold text-slate-700 sm:px-5">{title}</h2>
            // Wide tables scroll inside their card instead of widening the page on a phone.
            <div class="overflow-x-auto p-4 sm:p-5">{children()}</div>
        </section>
    }
}

pub const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";
pub const LABEL: &str = "block text-sm font-medium text-slate-700";
pub const BUTTON: &str = "inline-flex items-center rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white shadow-sm hover:bg-indigo-700 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2";
pub const BUTTON_SECONDARY: &str = "inline-flex items-center rounded-md border border-slate-300 bg-white px-4 py-2 text-sm font-medium text-slate-700 shadow-sm hover:bg-slate-50 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2";
pub const BUTTON_SMALL_DANGER: &str =
    "rounded px-2 py-1 text-xs font-medium text-red-700 hover:bg-red-50";
pub const TABLE: &str = "min-w-full divide-y divide-slate-200 text-sm";
pub const TH: &str =
    "px-3 py-2 text-left text-xs font-semibold uppercase tracking-wide text-slate-500";
pub const TD: &str = "px-3 py-2 text-slate-800";

/// A labelled input with the messages the last submission gave for `error` (the API's field
/// name, which may differ from the input's `name`). `initial`: its value when the page renders
/// (what a rejected form held, see [`crate::form::echo`]).
#[component]
pub fn Field<T, F>(
    value: F,
    id: &'static str,
    name: &'static str,
    label: &'static str,
    error: &'static str,
    #[prop(optional)] placeholder: &'static str,
    #[prop(optional)] kind: &'static str,
    #[prop(optional)] required: bool,
    #[prop(optional_no_strip)] initial: Option<String>,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn() -> Option<Result<T, AppError>> + Send + Sync + 'static,
{
    let kind = if kind.is_empty() { "text" } else { kind };
    view! {
        <div>
            <label class=LABEL for=id>{label}</label>
            <input id=id name=name type=kind class=INPUT placeholder=placeholder required=required value=initial/>
            {field_error(value, error)}
        </div>
    }
}

/// Sets the status of the page's response while it renders on the server (no-op in the
/// browser).
pub fn set_status(code: u16) {
    #[cfg(feature = "ssr")]
    {
        if let (Some(resp), Ok(status)) = (
            use_context::<leptos_axum::ResponseOptions>(),
            http::StatusCode::from_u16(code),
        ) {
            resp.set_status(status);
        }
    }
    #[cfg(not(feature = "ssr"))]
    let _ = code;
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The address of a list's next page: `base` with the filters `keys` of the current query
/// and the page's `cursor`.
pub fn next_page_href(
    base: &str,
    query: &leptos_router::params::ParamsMap,
    keys: &[&str],
    cursor: &str,
) -> String {
    let mut parts: Vec<String> = keys
        .iter()
        .filter_map(|k| query.get(k).map(|v| format!("{k}={}", urlencode(&v))))
        .collect();
    parts.push(format!("cursor={}", urlencode(cursor)));
    format!("{base}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FieldError;

    #[test]
    fn every_message_of_a_field_is_shown() {
        let e = |field: &str, message: &str| FieldError {
            field: field.into(),
            message: message.into(),
        };
        let rejected: Option<Result<(), AppError>> = Some(Err(AppError::Validation(vec![
            e("name", "is required"),
            e("nodes", "declare at least one node"),
            e("name", "at most 63 characters"),
        ])));
        assert_eq!(
            field_messages(rejected.clone(), "name"),
            ["is required", "at most 63 characters"]
        );
        assert_eq!(field_messages(rejected, "email"), Vec::<String>::new());
        assert!(field_messages(Some(Err::<(), _>(AppError::Forbidden)), "name").is_empty());
        assert!(field_messages(Some(Ok(())), "name").is_empty());
    }
}
