//! The second step of a delete: "Really delete …? This cannot be undone." with the button that
//! does it, shown by a `?confirm=…` link (so it works without JavaScript). A refusal (409:
//! still in use) is said at the form.

/// The object a link opened: the id after `prefix` in the query's `key`, e.g. `?confirm=rule:<id>`
/// or `?edit=project:<id>` (links, so that they work without JavaScript and survive a reload).
pub fn opened(
    key: &'static str,
    prefix: &'static str,
) -> impl Fn() -> Option<String> + Copy + Send + Sync {
    use leptos::prelude::With;
    let query = leptos_router::hooks::use_query_map();
    move || {
        query.with(|q| {
            q.get_str(key)
                .and_then(|v| v.strip_prefix(prefix).map(str::to_string))
        })
    }
}

/// Danger: a filled red button for the one that deletes.
pub const BUTTON_DANGER: &str = "inline-flex items-center rounded-md bg-red-600 px-4 py-2 text-sm font-medium text-white shadow-sm hover:bg-red-700 focus:outline-none focus:ring-2 focus:ring-red-500 focus:ring-offset-2";

/// `confirm_delete!(action, id, label, cancel, value)`: the confirmation of deleting `label`
/// (e.g. "pool gpu-a") with `action`, a server function taking `csrf` and `id`; `cancel` is
/// where Cancel leads, `value` the result to show at the form (a closure).
macro_rules! confirm_delete {
    ($action:expr, $id:expr, $label:expr, $cancel:expr, $value:expr) => {{
        use $crate::ui::{form_error, CsrfField};
        let (action, id, label, cancel): (_, String, String, String) =
            ($action, $id, $label, $cancel);
        view! {
            <div class="mt-4 rounded-md border border-red-200 bg-red-50 p-4" data-testid="confirm-delete">
                <p class="text-sm font-medium text-red-900">{format!("Really delete {label}? This cannot be undone.")}</p>
                <ActionForm action=action>
                    <CsrfField/>
                    <input type="hidden" name="id" value=id/>
                    <div class="mt-3 flex flex-wrap items-center gap-3">
                        <button type="submit" class=$crate::pages::confirm::BUTTON_DANGER>{format!("Delete {label}")}</button>
                        <a class="text-sm text-slate-700 hover:underline" href=cancel>"Cancel"</a>
                    </div>
                    <div class="mt-3">{form_error($value)}</div>
                </ActionForm>
            </div>
        }
        .into_any()
    }};
    // The Policy Manager's: a result shows only at the form of the object it was sent for.
    ($actions:expr, $action:expr, $id:expr, $label:expr) => {{
        let (actions, action, id): (_, _, String) = ($actions, $action, $id);
        let about = id.clone();
        let value = move || {
            action
                .value()
                .get()
                .filter(|_| actions.about_call(action, &about))
        };
        $crate::pages::confirm::confirm_delete!(action, id, $label, "/policy".to_string(), value)
    }};
}
pub(crate) use confirm_delete;
