//! The second step of a delete: "Really delete …? This cannot be undone." with the button that
//! does it, shown by `?confirm=<kind>:<id>` (a link, so it works without JavaScript). A refusal
//! (409: still in use) is said at the form.

/// Danger: a filled red button for the one that deletes.
pub(super) const BUTTON_DANGER: &str = "inline-flex items-center rounded-md bg-red-600 px-4 py-2 text-sm font-medium text-white shadow-sm hover:bg-red-700 focus:outline-none focus:ring-2 focus:ring-red-500 focus:ring-offset-2";

/// `confirm_delete!(actions, action, id, label)`: the confirmation of deleting `label` (e.g.
/// "pool gpu-a") with `action`, a server function taking `csrf` and `id`.
macro_rules! confirm_delete {
    ($actions:expr, $action:expr, $id:expr, $label:expr) => {{
        use $crate::ui::{form_error, CsrfField};
        let (actions, action, id, label): (_, _, String, String) = ($actions, $action, $id, $label);
        let about = id.clone();
        let value = move || {
            action
                .value()
                .get()
                .filter(|_| actions.about_call(action, &about))
        };
        view! {
            <div class="mt-4 rounded-md border border-red-200 bg-red-50 p-4" data-testid="confirm-delete">
                <p class="text-sm font-medium text-red-900">{format!("Really delete {label}? This cannot be undone.")}</p>
                <ActionForm action=action>
                    <CsrfField/>
                    <input type="hidden" name="id" value=id/>
                    <div class="mt-3 flex flex-wrap items-center gap-3">
                        <button type="submit" class=$crate::pages::policy::delete::BUTTON_DANGER>{format!("Delete {label}")}</button>
                        <a class="text-sm text-slate-700 hover:underline" href="/policy">"Cancel"</a>
                    </div>
                    <div class="mt-3">{form_error(value)}</div>
                </ActionForm>
            </div>
        }
        .into_any()
    }};
}
pub(super) use confirm_delete;
