//! The forms that create pools, profiles and queues, and set a group's policy.

use leptos::prelude::*;

use super::{gpus, Actions};
use crate::api::{CreatePoolForm, CreateProfileForm, CreateQueueForm, SetPolicyForm};
use crate::error::AppError;
use crate::form::{done, echo, echo_checked, echo_or, echo_selected};
use crate::model::PolicyConfig;
use crate::ui::*;

#[component]
pub(super) fn CreateForms(c: PolicyConfig) -> impl IntoView {
    let Actions {
        add_pool,
        add_profile,
        set_policy,
        add_queue,
        ..
    } = expect_context::<Actions>();
    let pool_v = move || add_pool.value().get();
    let profile_v = move || add_profile.value().get();
    let policy_v = move || set_policy.value().get();
    let queue_v = move || add_queue.value().get();
    let (pool_done, profile_done) = (done(add_pool), done(add_profile));
    let (policy_done, queue_done) = (done(set_policy), done(add_queue));
    let group_name = |id: &str| {
        c.groups
            .iter()
            .find(|g| g.id == id)
            .map(|g| g.name.clone())
            .unwrap_or_default()
    };
    let policies: Vec<(String, String)> = c
        .policies
        .iter()
        .map(|p| (p.id.clone(), group_name(&p.group_id)))
        .collect();
    let group_options = c
        .groups
        .iter()
        .map(|g| view! { <option value=g.id.clone() selected={echo_selected::<SetPolicyForm>("group_id", &g.id)}>{g.name.clone()}</option> })
        .collect_view();
    let policy_options = policies
        .iter()
        .map(|(id, name)| view! { <option value=id.clone() selected={echo_selected::<CreateQueueForm>("policy_id", id)}>{name.clone()}</option> })
        .collect_view();
    let profile_options = c
        .profiles
        .iter()
        .map(|p| view! { <option value=p.id.clone() selected={echo_selected::<CreateQueueForm>("profile_id", &p.id)}>{p.name.clone()}</option> })
        .collect_view();
    let pool_options = c
        .pools
        .iter()
        .map(|p| view! { <option value=p.id.clone() selected={echo_selected::<CreateQueueForm>("pool", &p.id)}>{p.name.clone()}</option> })
        .collect_view();
    let spill_options = c
        .pools
        .iter()
        .map(|p| view! { <option value=p.id.clone() selected={echo_selected::<CreateQueueForm>("spillover", &p.id)}>{p.name.clone()}</option> })
        .collect_view();
    view! {
        <div class="mt-6 grid gap-6 xl:grid-cols-2">
            <Card title="Set a group's policy">
                <ActionForm action=set_policy>
                    <CsrfField/>
                    <div class="grid gap-4 sm:grid-cols-2">
                        <div>
                            <label class=LABEL for="policy-group">"Group"</label>
                            <select id="policy-group" name="group_id" class=INPUT>
                                {group_options}
                            </select>
                            {field_error(policy_v, "group_id")}
                        </div>
                        <div>
                            <label class=LABEL for="policy-weight">"Over-quota weight"</label>
                            <input id="policy-weight" name="over_quota_weight" class=INPUT value={echo_or::<SetPolicyForm>("over_quota_weight", "1")} inputmode="numeric"/>
                            {field_error(policy_v, "over_quota_weight")}
                        </div>
                        <div>
                            <label class=LABEL for="policy-reservation">"Reservation (milli-GPUs; 1000 = 1 GPU)"</label>
                            <input id="policy-reservation" name="reservation_milli" class=INPUT inputmode="numeric" value={echo::<SetPolicyForm>("reservation_milli")}/>
                            {field_error(policy_v, "reservation_milli")}
                        </div>
                        <div>
                            <label class=LABEL for="policy-limit">"Limit (milli-GPUs)"</label>
                            <input id="policy-limit" name="limit_milli" class=INPUT inputmode="numeric" value={echo::<SetPolicyForm>("limit_milli")}/>
                            {field_error(policy_v, "limit_milli")}
                        </div>
                    </div>
                    <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" name="over_quota_allowed" checked={echo_checked::<SetPolicyForm>("over_quota_allowed", true)}/>"May borrow idle GPUs beyond the reservation"</label>
                    <button type="submit" class=format!("{BUTTON} mt-4")>"Save policy"</button>
                    <div class="mt-3">{form_error(policy_v)}</div>
                    {move || policy_done().then(|| view! {
                        <p class="mt-2 text-sm text-green-700" role="status">
                            {policy_v().and_then(|r| r.ok()).map(|p| format!("Saved: reservation {} GPUs, limit {} GPUs.", gpus(p.reservation_milli), gpus(p.limit_milli))).unwrap_or_else(|| "Policy saved.".into())}
                        </p>
                    })}
                </ActionForm>
            </Card>
            <Card title="New queue">
                <ActionForm action=add_queue>
                    <CsrfField/>
                    <div class="grid gap-4 sm:grid-cols-2">
                        <div>
                            <label class=LABEL for="queue-name">"Name"</label>
                            <input id="queue-name" name="name" class=INPUT value={echo::<CreateQueueForm>("name")}/>
                            {field_error(queue_v, "name")}
                        </div>
                        <div>
                            <label class=LABEL for="queue-policy">"Group policy"</label>
                            <select id="queue-policy" name="policy_id" class=INPUT>
                                {policy_options}
                            </select>
                            {field_error(queue_v, "policy_id")}
                        </div>
                        <div>
                            <label class=LABEL for="queue-profile">"Profile"</label>
                            <select id="queue-profile" name="profile_id" class=INPUT>
                                {profile_options}
                            </select>
                            {field_error(queue_v, "profile_id")}
                        </div>
                        <div>
                            <label class=LABEL for="queue-pool">"Pool"</label>
                            <select id="queue-pool" name="pool" class=INPUT>
                                {pool_options}
                            </select>
                            {field_error(queue_v, "pools")}
                        </div>
                        <div>
                            <label class=LABEL for="queue-spill">"Spillover pool (optional)"</label>
                            <select id="queue-spill" name="spillover" class=INPUT>
                                <option value="" selected={echo_selected::<CreateQueueForm>("spillover", "")}>"none"</option>
                                {spill_options}
                            </select>
                        </div>
                    </div>
                    <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" name="over_quota" checked={echo_checked::<CreateQueueForm>("over_quota", true)}/>"Jobs may run over quota"</label>
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Create queue"</button>
                        {move || queue_done().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Queue created."</span> })}
                    </div>
                    <div class="mt-3">{form_error(queue_v)}</div>
                </ActionForm>
            </Card>
            <Card title="New pool">
                <ActionForm action=add_pool>
                    <CsrfField/>
                    <div class="grid gap-4 sm:grid-cols-2">
                        <div>
                            <label class=LABEL for="pool-name">"Name"</label>
                            <input id="pool-name" name="name" class=INPUT value={echo::<CreatePoolForm>("name")}/>
                            {field_error(pool_v, "name")}
                        </div>
                        <div>
                            <label class=LABEL for="pool-executor">"Runs jobs on"</label>
                            <select id="pool-executor" name="executor" class=INPUT>
                                <option value="simulated">"simulated nodes"</option>
                                <option value="local" selected={echo_selected::<CreatePoolForm>("executor", "local")}>"this host (local processes)"</option>
                            </select>
                            {field_error(pool_v, "executor")}
                        </div>
                        <div>
                            <label class=LABEL for="pool-nodes">"Nodes"</label>
                            <input id="pool-nodes" name="node_count" class=INPUT value={echo_or::<CreatePoolForm>("node_count", "1")} inputmode="numeric"/>
                            {node_error(pool_v, None)}
                        </div>
                        <div>
                            <label class=LABEL for="pool-gpus">"GPUs per node"</label>
                            <input id="pool-gpus" name="gpus_per_node" class=INPUT value={echo_or::<CreatePoolForm>("gpus_per_node", "8")} inputmode="numeric"/>
                            {field_error(pool_v, "gpus_per_node")}
                        </div>
                        <div>
                            <label class=LABEL for="pool-model">"GPU model"</label>
                            <input id="pool-model" name="gpu_model" class=INPUT value={echo_or::<CreatePoolForm>("gpu_model", "H100-80GB")}/>
                            {node_error(pool_v, Some("gpu_model"))}
                        </div>
                        <div>
                            <label class=LABEL for="pool-mem">"GPU memory (MiB)"</label>
                            <input id="pool-mem" name="gpu_memory_mb" class=INPUT value={echo_or::<CreatePoolForm>("gpu_memory_mb", "81920")} inputmode="numeric"/>
                            {field_error(pool_v, "gpu_memory_mb")}
                            {node_error(pool_v, Some("gpu_memory_mb"))}
                        </div>
                        <div>
                            <label class=LABEL for="pool-cost">"Cost per GPU-hour (cents)"</label>
                            <input id="pool-cost" name="gpu_hour_cost_cents" class=INPUT value={echo_or::<CreatePoolForm>("gpu_hour_cost_cents", "0")} inputmode="numeric"/>
                            {field_error(pool_v, "gpu_hour_cost_cents")}
                        </div>
                    </div>
                    <label class="mt-3 flex items-center gap-2 text-sm"><input type="checkbox" name="shared" checked={echo_checked::<CreatePoolForm>("shared", false)}/>"Shared with every organization (platform admins)"</label>
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Create pool"</button>
                        {move || pool_done().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Pool created."</span> })}
                    </div>
                    <div class="mt-3">{form_error(pool_v)}</div>
                </ActionForm>
            </Card>
            <Card title="New profile">
                <ActionForm action=add_profile>
                    <CsrfField/>
                    <div class="grid gap-4 sm:grid-cols-3">
                        <div class="sm:col-span-3">
                            <label class=LABEL for="profile-name">"Name"</label>
                            <input id="profile-name" name="name" class=INPUT value={echo::<CreateProfileForm>("name")}/>
                            {field_error(profile_v, "name")}
                        </div>
                        <div>
                            <label class=LABEL for="profile-fixed">"Fixed milli-GPUs"</label>
                            <input id="profile-fixed" name="gpu_milli" class=INPUT placeholder="e.g. 500" inputmode="numeric" value={echo::<CreateProfileForm>("gpu_milli")}/>
                            {field_error(profile_v, "gpu_milli")}
                        </div>
                        <div>
                            <label class=LABEL for="profile-min">"or from"</label>
                            <input id="profile-min" name="min_gpu_milli" class=INPUT placeholder="125" inputmode="numeric" value={echo::<CreateProfileForm>("min_gpu_milli")}/>
                            {field_error(profile_v, "min_gpu_milli")}
                        </div>
                        <div>
                            <label class=LABEL for="profile-max">"to"</label>
                            <input id="profile-max" name="max_gpu_milli" class=INPUT placeholder="8000" inputmode="numeric" value={echo::<CreateProfileForm>("max_gpu_milli")}/>
                            {field_error(profile_v, "max_gpu_milli")}
                        </div>
                    </div>
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Create profile"</button>
                        {move || profile_done().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Profile created."</span> })}
                    </div>
                    <div class="mt-3">{form_error(profile_v)}</div>
                </ActionForm>
            </Card>
        </div>
    }
}

/// The pool form's share of the server's `nodes` messages: the form declares the nodes from
/// its count, GPU model and memory, so a message about a node's `gpu_model` or
/// `gpu_memory_mb` goes under that input (`about`), and the rest under the count (`None`).
pub(super) fn node_error(
    value: impl Fn() -> Option<Result<crate::model::Pool, AppError>> + Send + Sync + 'static,
    about: Option<&'static str>,
) -> impl IntoView {
    const ABOUT: [&str; 2] = ["gpu_model", "gpu_memory_mb"];
    move || {
        let messages: Vec<String> = match value() {
            Some(Err(AppError::Validation(errors))) => errors
                .into_iter()
                .filter(|e| e.field == "nodes")
                .map(|e| e.message)
                .filter(|m| match about {
                    Some(word) => m.starts_with(word),
                    None => !ABOUT.iter().any(|word| m.starts_with(word)),
                })
                .collect(),
            _ => Vec::new(),
        };
        (!messages.is_empty()).then(|| {
            view! {
                <div data-field-error=about.map(|a| format!("nodes.{a}")).unwrap_or_else(|| "nodes".into())>
                    {messages.into_iter().map(|m| view! { <p class="mt-1 text-xs text-red-700">{m}</p> }).collect_view()}
                </div>
            }
        })
    }
}
