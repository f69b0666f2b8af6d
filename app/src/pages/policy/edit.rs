//! The edit forms of pools, profiles, queues and group policies, filled with the object's
//! current values (or, after a rejected post without JavaScript, with what was typed).

use std::sync::Arc;

use leptos::prelude::*;
use server_fn::ServerFn;

use super::create::node_error;
use super::{gpus, Actions};
use crate::api::{EditPolicyForm, UpdatePoolForm, UpdateProfileForm, UpdateQueueForm};
use crate::error::AppError;
use crate::form::{done, echo, echo_checked};
use crate::model::{Policy, PolicyConfig, Pool, Profile, Queue};
use crate::ui::*;

/// An input's value: what a rejected post of `S` held, else `current`.
fn value_of<S: ServerFn>(field: &str, current: impl ToString) -> String {
    echo::<S>(field).unwrap_or_else(|| current.to_string())
}

/// Whether option `value` of select `field` is chosen: as posted, else as it is now.
fn chosen<S: ServerFn>(field: &str, value: &str, current: bool) -> bool {
    echo::<S>(field).map_or(current, |v| v == value)
}

/// The end of each edit form: Save, Close, "Saved." once it was, and errors not about a field.
fn form_end<T: Clone + Send + Sync + 'static>(
    label: &'static str,
    saved: impl Fn() -> bool + Send + Sync + 'static,
    value: impl Fn() -> Option<Result<T, AppError>> + Send + Sync + 'static,
) -> impl IntoView {
    view! {
        <div class="mt-4 flex flex-wrap items-center gap-4">
            <button type="submit" class=BUTTON>{label}</button>
            <a class="text-sm text-slate-700 hover:underline" href="/policy">"Close"</a>
            {move || saved().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
        </div>
        <div class="mt-3">{form_error(value)}</div>
    }
}

const PANEL: &str = "mt-4 rounded-md border border-indigo-100 bg-indigo-50/40 p-4";
/// A per-pool quota's row: on a phone the pool's name above its two amounts.
const QUOTA_ROW: &str = "grid grid-cols-2 gap-2 sm:grid-cols-[minmax(0,1fr)_8rem_8rem]";

#[component]
pub(super) fn EditPool(pool: Pool) -> impl IntoView {
    let a = expect_context::<Actions>();
    let action = a.edit_pool;
    let id = pool.id.clone();
    let value = {
        let id = id.clone();
        move || {
            action
                .value()
                .get()
                .filter(|_| a.about::<UpdatePoolForm>(&id))
        }
    };
    let saved = {
        let (id, done) = (id.clone(), done(action));
        move || done() && a.about::<UpdatePoolForm>(&id)
    };
    let first = pool.nodes.first().cloned();
    let alike = pool.nodes.iter().all(|n| {
        first.as_ref().is_some_and(|f| {
            n.gpus == f.gpus && n.gpu_model == f.gpu_model && n.gpu_memory_mb == f.gpu_memory_mb
        })
    });
    let (gpus_now, model_now, memory_now) = first
        .map(|n| (n.gpus, n.gpu_model, n.gpu_memory_mb))
        .unwrap_or_default();
    let executor = pool.executor.as_str();
    type F = UpdatePoolForm;
    view! {
        <div class=PANEL data-testid="edit-pool">
            <h3 class="mb-3 text-sm font-semibold text-slate-800">{format!("Edit pool {}", pool.name)}</h3>
            <ActionForm action=action>
                <CsrfField/>
                <input type="hidden" name="id" value=id/>
                <div class="grid gap-4 sm:grid-cols-2">
                    <div>
                        <label class=LABEL for="edit-pool-name">"Name"</label>
                        <input id="edit-pool-name" name="name" class=INPUT value={value_of::<F>("name", &pool.name)}/>
                        {field_error(value.clone(), "name")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-executor">"Runs jobs on"</label>
                        <select id="edit-pool-executor" name="executor" class=INPUT>
                            <option value="simulated" selected={chosen::<F>("executor", "simulated", executor == "simulated")}>"simulated nodes"</option>
                            <option value="local" selected={chosen::<F>("executor", "local", executor == "local")}>"this host (local processes)"</option>
                        </select>
                        {field_error(value.clone(), "executor")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-nodes">"Nodes"</label>
                        <input id="edit-pool-nodes" name="node_count" class=INPUT inputmode="numeric" value={value_of::<F>("node_count", pool.nodes.len())}/>
                        {node_error(value.clone(), None)}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-gpus">"GPUs per node"</label>
                        <input id="edit-pool-gpus" name="gpus_per_node" class=INPUT inputmode="numeric" value={value_of::<F>("gpus_per_node", gpus_now)}/>
                        {field_error(value.clone(), "gpus_per_node")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-model">"GPU model"</label>
                        <input id="edit-pool-model" name="gpu_model" class=INPUT value={value_of::<F>("gpu_model", &model_now)}/>
                        {node_error(value.clone(), Some("gpu_model"))}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-mem">"GPU memory (MiB)"</label>
                        <input id="edit-pool-mem" name="gpu_memory_mb" class=INPUT inputmode="numeric" value={value_of::<F>("gpu_memory_mb", memory_now)}/>
                        {field_error(value.clone(), "gpu_memory_mb")}
                        {node_error(value.clone(), Some("gpu_memory_mb"))}
                    </div>
                    <div>
                        <label class=LABEL for="edit-pool-cost">"Cost per GPU-hour (cents)"</label>
                        <input id="edit-pool-cost" name="gpu_hour_cost_cents" class=INPUT inputmode="numeric" value={value_of::<F>("gpu_hour_cost_cents", pool.gpu_hour_cost_cents)}/>
                        {field_error(value.clone(), "gpu_hour_cost_cents")}
                    </div>
                </div>
                <p class="mt-3 text-xs text-slate-600">
                    {if alike { "" } else { "Its nodes differ: the node fields show the first node's, and changing them sets every node alike. " }}
                    "Nodes keep their names; nodes running jobs cannot be removed and keep the GPUs they use."
                </p>
                {form_end("Save pool", saved, value)}
            </ActionForm>
        </div>
    }
}

#[component]
pub(super) fn EditProfile(profile: Profile) -> impl IntoView {
    let a = expect_context::<Actions>();
    let action = a.edit_profile;
    let id = profile.id.clone();
    let value = {
        let id = id.clone();
        move || {
            action
                .value()
                .get()
                .filter(|_| a.about::<UpdateProfileForm>(&id))
        }
    };
    let saved = {
        let (id, done) = (id.clone(), done(action));
        move || done() && a.about::<UpdateProfileForm>(&id)
    };
    let fixed = (profile.gpu_milli > 0).then(|| profile.gpu_milli.to_string());
    let (min, max) = if profile.gpu_milli > 0 {
        (String::new(), String::new())
    } else {
        (
            profile.min_gpu_milli.to_string(),
            profile.max_gpu_milli.to_string(),
        )
    };
    type F = UpdateProfileForm;
    view! {
        <div class=PANEL data-testid="edit-profile">
            <h3 class="mb-3 text-sm font-semibold text-slate-800">{format!("Edit profile {}", profile.name)}</h3>
            <ActionForm action=action>
                <CsrfField/>
                <input type="hidden" name="id" value=id/>
                <div class="grid gap-4 sm:grid-cols-3">
                    <div class="sm:col-span-3">
                        <label class=LABEL for="edit-profile-name">"Name"</label>
                        <input id="edit-profile-name" name="name" class=INPUT value={value_of::<F>("name", &profile.name)}/>
                        {field_error(value.clone(), "name")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-profile-fixed">"Fixed milli-GPUs"</label>
                        <input id="edit-profile-fixed" name="gpu_milli" class=INPUT inputmode="numeric" placeholder="empty: the job asks" value={value_of::<F>("gpu_milli", fixed.unwrap_or_default())}/>
                        {field_error(value.clone(), "gpu_milli")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-profile-min">"or from"</label>
                        <input id="edit-profile-min" name="min_gpu_milli" class=INPUT inputmode="numeric" value={value_of::<F>("min_gpu_milli", min)}/>
                        {field_error(value.clone(), "min_gpu_milli")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-profile-max">"to"</label>
                        <input id="edit-profile-max" name="max_gpu_milli" class=INPUT inputmode="numeric" value={value_of::<F>("max_gpu_milli", max)}/>
                        {field_error(value.clone(), "max_gpu_milli")}
                    </div>
                </div>
                <p class="mt-3 text-xs text-slate-600">"Jobs already submitted keep what they asked for; new ones get the new amounts."</p>
                {form_end("Save profile", saved, value)}
            </ActionForm>
        </div>
    }
}

#[component]
pub(super) fn EditQueue(queue: Queue, c: Arc<PolicyConfig>) -> impl IntoView {
    let a = expect_context::<Actions>();
    let action = a.edit_queue;
    let id = queue.id.clone();
    let value = {
        let id = id.clone();
        move || {
            action
                .value()
                .get()
                .filter(|_| a.about::<UpdateQueueForm>(&id))
        }
    };
    let saved = {
        let (id, done) = (id.clone(), done(action));
        move || done() && a.about::<UpdateQueueForm>(&id)
    };
    type F = UpdateQueueForm;
    let profile_options = c
        .profiles
        .iter()
        .map(|p| view! { <option value=p.id.clone() selected={chosen::<F>("profile_id", &p.id, p.id == queue.profile_id)}>{p.name.clone()}</option> })
        .collect_view();
    // One more place than it has (up to 8): a spillover pool can be added.
    let places = (queue.pools.len() + 1).clamp(2, 8);
    let pool_selects = (0..places)
        .map(|i| {
            let field = format!("pools[{i}]");
            let now = queue.pools.get(i).cloned().unwrap_or_default();
            let options = c
                .pools
                .iter()
                .map(|p| view! { <option value=p.id.clone() selected={chosen::<F>(&field, &p.id, p.id == now)}>{p.name.clone()}</option> })
                .collect_view();
            let label = if i == 0 { "Pool".to_string() } else { format!("Spillover {i}") };
            let select_id = format!("edit-queue-pool-{i}");
            view! {
                <div>
                    <label class=LABEL for=select_id.clone()>{label}</label>
                    <select id=select_id name=field.clone() class=INPUT>
                        <option value="" selected={chosen::<F>(&field, "", now.is_empty())}>"none"</option>
                        {options}
                    </select>
                </div>
            }
        })
        .collect_view();
    let rows = (queue.classes.len() + 1).min(8);
    let class_rows = (0..rows)
        .map(|i| {
            let now = queue.classes.get(i);
            let field = |part: &str| format!("classes[{i}][{part}]");
            let name = value_of::<F>(&field("name"), now.map(|c| c.name.clone()).unwrap_or_default());
            let priority = value_of::<F>(
                &field("priority"),
                now.map(|c| c.priority.to_string()).unwrap_or_default(),
            );
            let preemptible = now.is_none_or(|c| c.preemptible);
            // Phone: the name on its own line; wider: name, priority and kind in a row.
            view! {
                <div class="grid grid-cols-[5rem_minmax(0,1fr)] gap-2 sm:grid-cols-[minmax(0,1fr)_6rem_12rem]">
                    <input class=format!("{INPUT} col-span-2 sm:col-span-1") name=field("name") value=name aria-label=format!("Class {} name", i + 1) placeholder="new class"/>
                    <input class=INPUT name=field("priority") value=priority inputmode="numeric" placeholder="priority" aria-label=format!("Class {} priority", i + 1)/>
                    <select class=INPUT name=field("preemptible") aria-label=format!("Class {} preemptible", i + 1)>
                        <option value="yes" selected={chosen::<F>(&field("preemptible"), "yes", preemptible)}>"preemptible"</option>
                        <option value="no" selected={chosen::<F>(&field("preemptible"), "no", !preemptible)}>"not preemptible"</option>
                    </select>
                </div>
            }
        })
        .collect_view();
    let runtime = queue
        .min_runtime_ms
        .map(|ms| (ms / 1000).to_string())
        .unwrap_or_default();
    view! {
        <div class=PANEL data-testid="edit-queue">
            <h3 class="mb-3 text-sm font-semibold text-slate-800">{format!("Edit queue {} (group {})", queue.name, queue.group_name)}</h3>
            <ActionForm action=action>
                <CsrfField/>
                <input type="hidden" name="id" value=id/>
                <div class="grid gap-4 sm:grid-cols-2">
                    <div>
                        <label class=LABEL for="edit-queue-name">"Name"</label>
                        <input id="edit-queue-name" name="name" class=INPUT value={value_of::<F>("name", &queue.name)}/>
                        {field_error(value.clone(), "name")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-queue-profile">"Profile"</label>
                        <select id="edit-queue-profile" name="profile_id" class=INPUT>{profile_options}</select>
                        {field_error(value.clone(), "profile_id")}
                    </div>
                    {pool_selects}
                    <div>
                        <label class=LABEL for="edit-queue-runtime">"Minimum runtime before preemption (s)"</label>
                        <input id="edit-queue-runtime" name="min_runtime_s" class=INPUT inputmode="numeric" placeholder="the server's default" value={value_of::<F>("min_runtime_s", runtime)}/>
                        {field_error(value.clone(), "min_runtime_s")}
                        {field_error(value.clone(), "min_runtime_ms")}
                    </div>
                </div>
                {field_error(value.clone(), "pools")}
                <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" name="over_quota" checked={echo_checked::<F>("over_quota", queue.over_quota)}/>"Jobs may run over quota"</label>
                <fieldset class="mt-4">
                    <legend class=LABEL>"Priority classes (an empty name removes one)"</legend>
                    <div class="mt-1 space-y-2">{class_rows}</div>
                    {field_error(value.clone(), "classes")}
                </fieldset>
                {form_end("Save queue", saved, value)}
            </ActionForm>
        </div>
    }
}

#[component]
pub(super) fn EditPolicy(policy: Policy, pools: Vec<Pool>) -> impl IntoView {
    let a = expect_context::<Actions>();
    let action = a.edit_policy;
    let group = policy.group_id.clone();
    let value = {
        let group = group.clone();
        move || {
            action
                .value()
                .get()
                .filter(|_| a.about::<EditPolicyForm>(&group))
        }
    };
    let saved = {
        let (group, done) = (group.clone(), done(action));
        move || done() && a.about::<EditPolicyForm>(&group)
    };
    type F = EditPolicyForm;
    let quota_rows = pools
        .iter()
        .enumerate()
        .map(|(i, pool)| {
            let now = policy.pools.iter().find(|q| q.pool_id == pool.id);
            let field = |part: &str| format!("quotas[{i}][{part}]");
            let reservation = value_of::<F>(
                &field("reservation_milli"),
                now.map(|q| q.reservation_milli.to_string()).unwrap_or_default(),
            );
            let limit = value_of::<F>(
                &field("limit_milli"),
                now.map(|q| q.limit_milli.to_string()).unwrap_or_default(),
            );
            view! {
                <div class=format!("{QUOTA_ROW} items-center") data-quota=pool.name.clone()>
                    <span class="col-span-2 mt-1 break-all text-sm font-medium sm:col-span-1">
                        {pool.name.clone()}
                        <input type="hidden" name=field("pool_id") value=pool.id.clone()/>
                    </span>
                    <input class=INPUT name=field("reservation_milli") value=reservation inputmode="numeric" placeholder="reserved" aria-label=format!("{} reservation", pool.name)/>
                    <input class=INPUT name=field("limit_milli") value=limit inputmode="numeric" placeholder="limit" aria-label=format!("{} limit", pool.name)/>
                </div>
            }
        })
        .collect_view();
    view! {
        <div class=PANEL data-testid="edit-policy">
            <h3 class="mb-3 text-sm font-semibold text-slate-800">{format!("Edit the policy of group {}", policy.group_name)}</h3>
            <ActionForm action=action>
                <CsrfField/>
                <input type="hidden" name="group_id" value=group/>
                <div class="grid gap-4 sm:grid-cols-3">
                    <div>
                        <label class=LABEL for="edit-policy-reservation">"Reservation (milli-GPUs)"</label>
                        <input id="edit-policy-reservation" name="reservation_milli" class=INPUT inputmode="numeric" value={value_of::<F>("reservation_milli", policy.reservation_milli)}/>
                        {field_error(value.clone(), "reservation_milli")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-policy-limit">"Limit (milli-GPUs)"</label>
                        <input id="edit-policy-limit" name="limit_milli" class=INPUT inputmode="numeric" value={value_of::<F>("limit_milli", policy.limit_milli)}/>
                        {field_error(value.clone(), "limit_milli")}
                    </div>
                    <div>
                        <label class=LABEL for="edit-policy-weight">"Over-quota weight"</label>
                        <input id="edit-policy-weight" name="over_quota_weight" class=INPUT inputmode="numeric" value={value_of::<F>("over_quota_weight", policy.over_quota_weight)}/>
                        {field_error(value.clone(), "over_quota_weight")}
                    </div>
                </div>
                <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" name="over_quota_allowed" checked={echo_checked::<F>("over_quota_allowed", policy.over_quota_allowed)}/>"May borrow idle GPUs beyond the reservation"</label>
                <fieldset class="mt-4">
                    <legend class=LABEL>"Per-pool quotas (milli-GPUs; both empty: none on that pool)"</legend>
                    <div class="mt-1 space-y-2" data-testid="quota-rows">
                        <div class=format!("{QUOTA_ROW} hidden text-xs text-slate-500 sm:grid")>
                            <span>"Pool"</span><span>"Reserved"</span><span>"Limit"</span>
                        </div>
                        {quota_rows}
                    </div>
                    {field_error(value.clone(), "pools")}
                </fieldset>
                <p class="mt-3 text-xs text-slate-600">{format!("Now: reservation {} GPUs, limit {} GPUs.", gpus(policy.reservation_milli), gpus(policy.limit_milli))}</p>
                {form_end("Save policy", saved, value.clone())}
                {field_error(value, "group_id")}
            </ActionForm>
        </div>
    }
}
