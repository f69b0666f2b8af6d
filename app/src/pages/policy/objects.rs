//! The tenant's pools, profiles, group policies and queues, each row with Edit and Delete.
//! Both are links: `?edit=<kind>:<id>` shows the object's form, filled with its values, under
//! its table, and `?confirm=<kind>:<id>` asks there whether to delete it. So they work the same
//! without JavaScript, and a page reload keeps what was open.

use std::sync::Arc;

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::{duration, edit, gpus, Actions};
use crate::api::{DeletePolicyForm, DeletePoolForm, DeleteProfileForm, DeleteQueueForm};
use crate::form::done;
use crate::model::{PolicyConfig, Pool};
use crate::pages::confirm::confirm_delete;
use crate::ui::*;

/// What the query opens: an edit form or a delete confirmation, of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Open {
    Edit(String),
    Confirm(String),
}

/// The object of `kind` the query opens, if any.
fn opened(query: &leptos_router::params::ParamsMap, kind: &str) -> Option<Open> {
    let of = |key: &str| {
        query.get(key).and_then(|v| {
            v.split_once(':')
                .filter(|(k, _)| *k == kind)
                .map(|(_, id)| id.to_string())
        })
    };
    of("edit")
        .map(Open::Edit)
        .or_else(|| of("confirm").map(Open::Confirm))
}

/// Whether the caller may change `pool`: shared pools and pools whose jobs run on this host
/// are the platform admins'.
fn may_change(pool: &Pool, platform_admin: bool) -> bool {
    platform_admin
        || (pool.owner_tenant_id.is_some() && pool.executor != crate::model::ExecutorKind::Local)
}

/// The actions' cells: pinned to the right edge of the card while a wide table scrolls under
/// them (on a phone), so Edit and Delete are always in view; the white block after them
/// covers the card's padding, where the scrolled columns would show through, and the columns
/// under them fade out before them.
const ACTIONS: &str = "sticky right-0 whitespace-nowrap bg-white text-right after:absolute after:inset-y-0 after:left-full after:w-5 after:bg-white before:pointer-events-none before:absolute before:inset-y-0 before:right-full before:w-4 before:bg-linear-to-l before:from-white";

/// The row's Edit and Delete links (`kind`'s panel is where they lead).
fn row_actions(kind: &'static str, id: &str, name: &str) -> impl IntoView {
    let link = "rounded px-2 py-1 text-xs font-medium text-indigo-700 hover:bg-indigo-50";
    view! {
        <td class=format!("{TD} {ACTIONS}")>
            <a class=link href=format!("?edit={kind}:{id}#{kind}-panel") aria-label=format!("Edit {kind} {name}")>"Edit"</a>
            <a class=BUTTON_SMALL_DANGER href=format!("?confirm={kind}:{id}#{kind}-panel") aria-label=format!("Delete {kind} {name}")>"Delete"</a>
        </td>
    }
}

/// What the panel says when the object it was opened for is not (or no longer) there.
fn gone(kind: &'static str, deleted: bool) -> AnyView {
    let text = if deleted {
        format!("The {kind} was deleted.")
    } else {
        format!("No such {kind}: it may have been deleted.")
    };
    view! {
        <div class="mt-4 flex flex-wrap items-center gap-3 text-sm" role="status">
            <span class=if deleted { "text-emerald-700" } else { "text-slate-600" }>{text}</span>
            <a class="text-indigo-700 hover:underline" href="/policy">"Close"</a>
        </div>
    }
    .into_any()
}

#[component]
pub(super) fn Objects(c: PolicyConfig, platform_admin: bool) -> impl IntoView {
    let a = expect_context::<Actions>();
    let query = use_query_map();
    let c = Arc::new(c);
    let deleted = (
        done(a.delete_pool),
        done(a.delete_profile),
        done(a.delete_policy),
        done(a.delete_queue),
    );
    let pool_name = {
        let c = c.clone();
        move |id: &str| {
            c.pools
                .iter()
                .find(|p| p.id == id)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| id.to_string())
        }
    };
    let pool_rows = c.pools.iter().map(|p| view! {
        <tr data-pool=p.name.clone()>
            <td class=format!("{TD} font-medium")>{p.name.clone()}{p.owner_tenant_id.is_none().then_some(" (shared)")}</td>
            <td class=TD>{p.executor.as_str()}</td>
            <td class=TD>{p.nodes.len()}</td>
            <td class=format!("{TD} whitespace-nowrap")>{p.nodes.iter().map(|n| n.gpus as i64).sum::<i64>()}" × "{p.nodes.first().map(|n| n.gpu_model.clone()).unwrap_or_default()}</td>
            <td class=TD>{format!("${:.2}", p.gpu_hour_cost_cents as f64 / 100.0)}</td>
            {if may_change(p, platform_admin) {
                row_actions("pool", &p.id, &p.name).into_any()
            } else {
                view! { <td class=format!("{TD} {ACTIONS} text-xs text-slate-500")>"platform admins"</td> }.into_any()
            }}
        </tr>
    }).collect_view();
    let profile_rows = c.profiles.iter().map(|p| view! {
        <tr data-profile=p.name.clone()>
            <td class=format!("{TD} font-medium")>{p.name.clone()}</td>
            <td class=TD>{if p.gpu_milli > 0 { gpus(p.gpu_milli) } else { format!("{} to {} (the job asks)", gpus(p.min_gpu_milli), gpus(p.max_gpu_milli)) }}</td>
            {row_actions("profile", &p.id, &p.name)}
        </tr>
    }).collect_view();
    let policy_rows = c.policies.iter().map(|p| view! {
        <tr data-policy=p.group_name.clone()>
            <td class=format!("{TD} whitespace-nowrap font-medium")>{p.group_name.clone()}</td>
            <td class=TD>{gpus(p.reservation_milli)}</td>
            <td class=TD>{gpus(p.limit_milli)}</td>
            <td class=format!("{TD} whitespace-nowrap")>{if p.over_quota_allowed { p.over_quota_weight.to_string() } else { "no borrowing".into() }}</td>
            <td class=format!("{TD} text-slate-600")>{if p.pools.is_empty() { "—".to_string() } else {
                p.pools.iter().map(|q| format!("{}: {} to {}", q.pool_name, gpus(q.reservation_milli), gpus(q.limit_milli))).collect::<Vec<_>>().join(", ")
            }}</td>
            {row_actions("policy", &p.id, &p.group_name)}
        </tr>
    }).collect_view();
    let queue_rows = c.queues.iter().map(|q| view! {
        <tr data-queue=q.name.clone()>
            <td class=format!("{TD} font-medium")>{q.name.clone()}</td>
            <td class=format!("{TD} whitespace-nowrap")>{q.group_name.clone()}</td>
            <td class=TD>{q.profile_name.clone()}</td>
            <td class=TD>{q.pools.iter().map(|p| pool_name(p)).collect::<Vec<_>>().join(" → ")}</td>
            <td class=TD>{if q.over_quota { "yes" } else { "no" }}</td>
            <td class=TD>{q.min_runtime_ms.map(duration).unwrap_or_else(|| "default".into())}</td>
            {row_actions("queue", &q.id, &q.name)}
        </tr>
    }).collect_view();

    let pool_panel = {
        let c = c.clone();
        move || {
            let open = query.with(|q| opened(q, "pool"))?;
            let pool = match &open {
                Open::Edit(id) | Open::Confirm(id) => c.pools.iter().find(|p| &p.id == id).cloned(),
            };
            Some(match (open, pool) {
                (Open::Edit(_), Some(pool)) => view! { <edit::EditPool pool/> }.into_any(),
                (Open::Confirm(_), Some(pool)) => {
                    confirm_delete!(a, a.delete_pool, pool.id, format!("pool {}", pool.name))
                }
                (Open::Confirm(id), None) => {
                    gone("pool", deleted.0() && a.about::<DeletePoolForm>(&id))
                }
                (Open::Edit(_), None) => gone("pool", false),
            })
        }
    };
    let profile_panel = {
        let c = c.clone();
        move || {
            let open = query.with(|q| opened(q, "profile"))?;
            let profile = match &open {
                Open::Edit(id) | Open::Confirm(id) => {
                    c.profiles.iter().find(|p| &p.id == id).cloned()
                }
            };
            Some(match (open, profile) {
                (Open::Edit(_), Some(profile)) => view! { <edit::EditProfile profile/> }.into_any(),
                (Open::Confirm(_), Some(p)) => {
                    confirm_delete!(a, a.delete_profile, p.id, format!("profile {}", p.name))
                }
                (Open::Confirm(id), None) => {
                    gone("profile", deleted.1() && a.about::<DeleteProfileForm>(&id))
                }
                (Open::Edit(_), None) => gone("profile", false),
            })
        }
    };
    let policy_panel = {
        let c = c.clone();
        move || {
            let open = query.with(|q| opened(q, "policy"))?;
            let policy = match &open {
                Open::Edit(id) | Open::Confirm(id) => {
                    c.policies.iter().find(|p| &p.id == id).cloned()
                }
            };
            Some(match (open, policy) {
                (Open::Edit(_), Some(policy)) => {
                    view! { <edit::EditPolicy policy pools=c.pools.clone()/> }.into_any()
                }
                (Open::Confirm(_), Some(p)) => confirm_delete!(
                    a,
                    a.delete_policy,
                    p.id,
                    format!("the policy of group {}", p.group_name)
                ),
                (Open::Confirm(id), None) => {
                    gone("policy", deleted.2() && a.about::<DeletePolicyForm>(&id))
                }
                (Open::Edit(_), None) => gone("policy", false),
            })
        }
    };
    let queue_panel = {
        let c = c.clone();
        move || {
            let open = query.with(|q| opened(q, "queue"))?;
            let queue = match &open {
                Open::Edit(id) | Open::Confirm(id) => {
                    c.queues.iter().find(|q| &q.id == id).cloned()
                }
            };
            Some(match (open, queue) {
                (Open::Edit(_), Some(queue)) => {
                    view! { <edit::EditQueue queue c=c.clone()/> }.into_any()
                }
                (Open::Confirm(_), Some(q)) => {
                    confirm_delete!(a, a.delete_queue, q.id, format!("queue {}", q.name))
                }
                (Open::Confirm(id), None) => {
                    gone("queue", deleted.3() && a.about::<DeleteQueueForm>(&id))
                }
                (Open::Edit(_), None) => gone("queue", false),
            })
        }
    };
    view! {
        // Pools and queues across both columns: their tables are wide, their forms long.
        <div class="grid items-start gap-6 xl:grid-cols-2">
            <div class="min-w-0 xl:col-span-2">
            <Card title="Pools">
                <table class=TABLE data-testid="pools-table">
                    <thead><tr>
                        <th class=TH>"Pool"</th><th class=TH>"Runs on"</th><th class=TH>"Nodes"</th><th class=TH>"GPUs"</th>
                        <th class=TH>"Cost / GPU-hour"</th><th class=format!("{TH} {ACTIONS}") aria-label="Actions"></th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">{pool_rows}</tbody>
                </table>
                <div id="pool-panel">{pool_panel}</div>
            </Card>
            </div>
            <Card title="Profiles">
                <table class=TABLE data-testid="profiles-table">
                    <thead><tr>
                        <th class=TH>"Profile"</th><th class=TH>"GPUs per job"</th><th class=format!("{TH} {ACTIONS}") aria-label="Actions"></th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">{profile_rows}</tbody>
                </table>
                <div id="profile-panel">{profile_panel}</div>
            </Card>
            <Card title="Group policies">
                <table class=TABLE data-testid="policies-table">
                    <thead><tr>
                        <th class=TH>"Group"</th><th class=TH>"Reserved"</th><th class=TH>"Limit"</th><th class=TH>"Weight"</th>
                        <th class=TH>"Per pool (reserved to limit)"</th><th class=format!("{TH} {ACTIONS}") aria-label="Actions"></th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">{policy_rows}</tbody>
                </table>
                <div id="policy-panel">{policy_panel}</div>
            </Card>
            <div class="min-w-0 xl:col-span-2">
            <Card title="Queue settings">
                <table class=TABLE data-testid="queue-settings-table">
                    <thead><tr>
                        <th class=TH>"Queue"</th><th class=TH>"Group"</th><th class=TH>"Profile"</th><th class=TH>"Pools (then spillover)"</th>
                        <th class=TH>"Over quota"</th><th class=TH>"Min runtime"</th><th class=format!("{TH} {ACTIONS}") aria-label="Actions"></th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">{queue_rows}</tbody>
                </table>
                <div id="queue-panel">{queue_panel}</div>
            </Card>
            </div>
        </div>
    }
}
