use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::list_audit;
use crate::model::AuditFilter;
use crate::time::{format_ms, parse_time};
use crate::ui::*;

/// The audit log with filters. The filter form is a plain GET form, so links to a filtered view
/// can be shared and it works before hydration.
#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let get = move |k: &str| query.read().get(k).unwrap_or_default();
    let filter = move || {
        let q = query.read();
        let text = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
        AuditFilter {
            from: text("from").and_then(|v| parse_time(&v, false)),
            to: text("to").and_then(|v| parse_time(&v, true)),
            actor: text("actor"),
            action: text("action"),
            target: text("target"),
            limit: Some(50),
            cursor: text("cursor"),
        }
    };
    let entries = Resource::new(filter, list_audit);
    let older_href = move |cursor: String| {
        next_page_href(
            "/audit",
            &query.read(),
            &["action", "actor", "target", "from", "to"],
            &cursor,
        )
    };

    view! {
        <Title text="Audit log"/>
        <PageHeader title="Audit log" subtitle="Every change, who made it, from where. Entries are hash-chained: a changed or deleted entry is detected."/>
        <form method="get" action="/audit" class="mb-6 grid grid-cols-2 gap-3 rounded-lg border border-slate-200 bg-white p-4 shadow-sm md:grid-cols-6">
            <div><label class=LABEL for="f-action">"Action"</label>
                <input id="f-action" name="action" class=INPUT placeholder="group.create" prop:value=move || get("action")/></div>
            <div><label class=LABEL for="f-actor">"Actor"</label>
                <input id="f-actor" name="actor" class=INPUT placeholder="username" prop:value=move || get("actor")/></div>
            <div><label class=LABEL for="f-target">"Target"</label>
                <input id="f-target" name="target" class=INPUT placeholder="id or kind" prop:value=move || get("target")/></div>
            <div><label class=LABEL for="f-from">"From"</label>
                <input id="f-from" name="from" type="date" class=INPUT prop:value=move || get("from")/></div>
            <div><label class=LABEL for="f-to">"To"</label>
                <input id="f-to" name="to" type="date" class=INPUT prop:value=move || get("to")/></div>
            <div class="flex items-end gap-2">
                <button type="submit" class=BUTTON>"Filter"</button>
                <a href="/audit" class="px-2 py-2 text-sm text-slate-600 hover:underline">"Clear"</a>
            </div>
        </form>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match entries.await {
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    Ok(page) if page.items.is_empty() => view! {
                        <p class="text-sm text-slate-600">"No entries match."</p>
                    }.into_any(),
                    Ok(page) => view! {
                        <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white shadow-sm">
                            <table class=TABLE data-testid="audit-table">
                                <thead class="bg-slate-50"><tr>
                                    <th class=TH>"#"</th><th class=TH>"Time"</th><th class=TH>"Actor"</th>
                                    <th class=TH>"Action"</th><th class=TH>"Target"</th><th class=TH>"Change"</th>
                                    <th class=TH>"Source"</th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {page.items.into_iter().map(|e| view! {
                                        <tr>
                                            <td class=format!("{TD} tabular-nums text-slate-500") title=format!("entry {} of the {} chain", e.seq, e.chain)>{e.id}</td>
                                            <td class=format!("{TD} whitespace-nowrap text-slate-600")>{format_ms(e.at)}</td>
                                            <td class=format!("{TD} whitespace-nowrap")>{e.actor_name}</td>
                                            <td class=format!("{TD} font-mono text-xs")>{e.action}</td>
                                            <td class=format!("{TD} text-xs")><span class="text-slate-500">{e.target_kind}</span>" "{e.target_id}</td>
                                            <td class=format!("{TD} max-w-md truncate font-mono text-xs text-slate-600")>{e.summary.to_string()}</td>
                                            <td class=format!("{TD} text-xs text-slate-500")>{e.source_ip}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </div>
                        {page.next_cursor.map(|c| view! {
                            <a class="mt-4 inline-block text-sm text-indigo-700 hover:underline" href=older_href(c)>"Older entries →"</a>
                        })}
                    }.into_any(),
                }
            })}
        </Transition>
    }
}
