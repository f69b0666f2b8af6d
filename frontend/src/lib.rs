//! The browser entry point: hydrates the server-rendered pages of `app`.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // Some pages are lazy routes (their code is a chunk of its own, loaded before the page
    // hydrates), so hydration is asynchronous; the document is marked once all of it is done
    // (the browser tests wait for `body[data-hydrated]` before they click).
    wasm_bindgen_futures::spawn_local(async {
        let Some(body) = leptos::prelude::document().body() else {
            return;
        };
        let path = leptos::prelude::window()
            .location()
            .pathname()
            .unwrap_or_default();
        app::load_page_chunk(&path).await;
        let owner = leptos::mount::hydrate_from_async(body.clone(), app::App).await;
        owner.forget();
        let _ = body.set_attribute("data-hydrated", "true");
    });
}
