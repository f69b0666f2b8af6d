//! The Policy Manager: capacity across pools, group quotas and their use, queues, recent
//! preemptions, and (for admins) the forms that change pools, profiles, policies and queues.

use leptos::prelude::*;
use leptos_meta::Title;

use super::chart::{Stacked, StackedBars};
use crate::api::{
    load_policy_config, load_policy_overview, CreatePoolForm, CreateProfileForm, CreateQueueForm,
    SetPolicyForm,
};
use crate::error::AppError;
use crate::form::{done, echo, echo_checked, echo_or, echo_selected};
use crate::model::{PolicyConfig, PolicyOverview};
use crate::time::format_ms;
use crate::ui::*;

pub use crate::model::format_gpus as gpus;

pub fn duration(ms: i64) -> String {
    let s = ms / 1000;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    }
}

/// A signal that ticks every few seconds once the page is hydrated, so the numbers stay live.
pub fn live_tick(seconds: u64) -> ReadSignal<u64> {
    let (tick, set_tick) = signal(0u64);
    #[cfg(feature = "hydrate")]
    {
        let _ = set_interval_with_handle(
            move || set_tick.update(|t| *t += 1),
            std::time::Duration::from_secs(seconds),
        );
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (set_tick, seconds);
    tick
}

#[component]
pub fn PolicyPage() -> impl IntoView {
    let add_pool = ServerAction::<CreatePoolForm>::new();
    let add_profile = ServerAction::<CreateProfileForm>::new();
    let set_policy = ServerAction::<SetPolicyForm>::new();
    let add_queue = ServerAction::<CreateQueueForm>::new();
    let changes = move || {
        (
            add_pool.version().get(),
            add_profile.version().get(),
            set_policy.version().get(),
            add_queue.version().get(),
        )
    };
    let tick = live_tick(3);
    let overview = Resource::new(move || (changes(), tick.get()), |_| load_policy_overview());
    let config = Resource::new(changes, |_| load_policy_config());
    view! {
        <Title text="Policy Manager"/>
        <PageHeader title="Policy Manager" subtitle="Capacity, quotas and queues across your pools. Updates every few seconds."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(o) => view! { <Overview o=o/> }.into_any(),
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                }
            })}
        </Transition>
        <h2 class="mb-3 mt-10 text-lg font-semibold">"Configuration"</h2>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match config.await {
                    Ok(c) => view! { <Config c=c add_pool add_profile set_policy add_queue/> }.into_any(),
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Overview(o: PolicyOverview) -> impl IntoView {
    let g = |m: i64| m as f64 / 1000.0;
    let capacity = Stacked {
        categories: o.pools.iter().map(|p| p.name.clone()).collect(),
        unit: "GPUs".into(),
        series: vec![
            (
                "In quota".into(),
                "#4f46e5".into(),
                o.pools.iter().map(|p| g(p.in_quota_milli)).collect(),
            ),
            (
                "Over quota (borrowed)".into(),
                "#f59e0b".into(),
                o.pools.iter().map(|p| g(p.over_quota_milli)).collect(),
            ),
            (
                "Idle".into(),
                "#cbd5e1".into(),
                o.pools.iter().map(|p| g(p.idle_milli)).collect(),
            ),
        ],
    };
    let quotas = Stacked {
        categories: o.groups.iter().map(|x| x.group_name.clone()).collect(),
        unit: "GPUs".into(),
        series: vec![
            (
                "Used within reservation".into(),
                "#4f46e5".into(),
                o.groups
                    .iter()
                    .map(|x| g(x.used_milli - x.over_quota_milli))
                    .collect(),
            ),
            (
                "Unused reservation".into(),
                "#c7d2fe".into(),
                o.groups
                    .iter()
                    .map(|x| g((x.reservation_milli - (x.used_milli - x.over_quota_milli)).max(0)))
                    .collect(),
            ),
            (
                "Over quota (borrowed)".into(),
                "#f59e0b".into(),
                o.groups.iter().map(|x| g(x.over_quota_milli)).collect(),
            ),
        ],
    };
    view! {
        <div class="grid gap-6 xl:grid-cols-2">
            <Card title="Capacity across pools">
                <StackedBars id="capacity-chart" label="GPUs per pool: in quota, over quota and idle".to_string() data=capacity/>
                <div class="mt-4 overflow-x-auto">
                <table class=TABLE data-testid="capacity-table">
                    <thead><tr>
                        <th class=TH>"Pool"</th><th class=TH>"Kind"</th><th class=TH>"GPUs"</th>
                        <th class=TH>"Reserved (yours)"</th><th class=TH>"In quota"</th>
                        <th class=TH>"Over quota"</th><th class=TH>"Idle"</th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">
                        {o.pools.iter().map(|p| view! {
                            <tr>
                                <td class=format!("{TD} font-medium")>{p.name.clone()}</td>
                                <td class=TD>{if p.shared { "shared" } else { "dedicated" }}" · "{p.executor.as_str()}</td>
                                <td class=TD>{gpus(p.total_milli)}</td>
                                <td class=TD>{gpus(p.reserved_milli)}</td>
                                <td class=TD>{gpus(p.in_quota_milli)}</td>
                                <td class=TD>{gpus(p.over_quota_milli)}</td>
                                <td class=TD>{gpus(p.idle_milli)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                </div>
            </Card>
            <Card title="Group quotas and use">
                <StackedBars id="quota-chart" label="GPUs per group: used within reservation, unused reservation, over quota".to_string() data=quotas/>
                <div class="mt-4 overflow-x-auto">
                <table class=TABLE data-testid="groups-table">
                    <thead><tr>
                        <th class=TH>"Group"</th><th class=TH>"Reserved"</th><th class=TH>"Limit"</th>
                        <th class=TH>"Weight"</th><th class=TH>"In use"</th><th class=TH>"Over quota"</th>
                        <th class=TH>"Running"</th><th class=TH>"Waiting"</th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">
                        {o.groups.iter().map(|x| view! {
                            <tr>
                                <td class=format!("{TD} font-medium")>{x.group_name.clone()}</td>
                                <td class=TD>{gpus(x.reservation_milli)}</td>
                                <td class=TD>{gpus(x.limit_milli)}</td>
                                <td class=TD>{if x.over_quota_allowed { x.over_quota_weight.to_string() } else { "no borrowing".into() }}</td>
                                <td class=TD>{gpus(x.used_milli)}</td>
                                <td class=TD>{gpus(x.over_quota_milli)}</td>
                                <td class=TD>{x.running}</td>
                                <td class=TD>{x.waiting}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                </div>
            </Card>
            <Card title="Queues">
                <table class=TABLE data-testid="queues-table">
                    <thead><tr>
                        <th class=TH>"Queue"</th><th class=TH>"Group"</th><th class=TH>"Pools (then spillover)"</th>
                        <th class=TH>"Running"</th><th class=TH>"Waiting"</th><th class=TH>"Avg wait (1 h)"</th>
                    </tr></thead>
                    <tbody class="divide-y divide-slate-100">
                        {o.queues.iter().map(|q| view! {
                            <tr>
                                <td class=format!("{TD} font-medium")>{q.name.clone()}</td>
                                <td class=TD>{q.group_name.clone()}</td>
                                <td class=TD>{q.pools.join(" → ")}</td>
                                <td class=TD>{q.running}</td>
                                <td class=TD>{q.waiting}</td>
                                <td class=TD>{q.avg_wait_ms.map(duration).unwrap_or_else(|| "—".into())}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </Card>
            <div class="min-w-0 xl:col-span-2">
            <Card title="Recent preemptions">
                {if o.preemptions.is_empty() {
                    view! { <p class="text-sm text-slate-600">"No preemptions yet: nobody has needed borrowed GPUs back."</p> }.into_any()
                } else {
                    view! {
                        <table class=TABLE data-testid="preemptions-table">
                            <thead><tr>
                                <th class=TH>"When"</th><th class=TH>"Pool"</th><th class=TH>"Preempted"</th>
                                <th class=TH>"For"</th><th class=TH>"GPUs"</th><th class=TH>"Why"</th>
                            </tr></thead>
                            <tbody class="divide-y divide-slate-100">
                                {o.preemptions.iter().map(|x| view! {
                                    <tr>
                                        <td class=format!("{TD} whitespace-nowrap text-slate-500")>{format_ms(x.at)}</td>
                                        <td class=TD>{x.pool_name.clone()}</td>
                                        <td class=TD>{x.victim_group.clone()}</td>
                                        <td class=TD>{x.for_group.clone()}</td>
                                        <td class=TD>{gpus(x.gpu_milli)}</td>
                                        <td class=format!("{TD} text-slate-600")>{x.reason.clone()}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }}
            </Card>
            </div>
        </div>
    }
}

#[component]
fn Config(
    c: PolicyConfig,
    add_pool: ServerAction<CreatePoolForm>,
    add_profile: ServerAction<CreateProfileForm>,
    set_policy: ServerAction<SetPolicyForm>,
    add_queue: ServerAction<CreateQueueForm>,
) -> impl IntoView {
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
    let pool_rows = c.pools.iter().map(|p| view! {
                            <tr>
                                <td class=format!("{TD} font-medium")>{p.name.clone()}{p.owner_tenant_id.is_none().then_some(" (shared)")}</td>
                                <td class=TD>{p.nodes.len()}</td>
                                <td class=TD>{p.nodes.iter().map(|n| n.gpus as i64).sum::<i64>()}" × "{p.nodes.first().map(|n| n.gpu_model.clone()).unwrap_or_default()}</td>
                                <td class=TD>{format!("${:.2}", p.gpu_hour_cost_cents as f64 / 100.0)}</td>
                            </tr>
                        }).collect_view();
    let profile_rows = c.profiles.iter().map(|p| view! {
                            <tr>
                                <td class=format!("{TD} font-medium")>{p.name.clone()}</td>
                                <td class=TD>{if p.gpu_milli > 0 { gpus(p.gpu_milli) } else { format!("{} to {} (the job asks)", gpus(p.min_gpu_milli), gpus(p.max_gpu_milli)) }}</td>
                            </tr>
                        }).collect_view();
    view! {
        <div class="grid gap-6 xl:grid-cols-2">
            <Card title="Pools and profiles">
                <table class=TABLE data-testid="pools-table">
                    <thead><tr><th class=TH>"Pool"</th><th class=TH>"Nodes"</th><th class=TH>"GPUs"</th><th class=TH>"Cost / GPU-hour"</th></tr></thead>
                    <tbody class="divide-y divide-slate-100">
                        {pool_rows}
                    </tbody>
                </table>
                <table class=format!("{TABLE} mt-4") data-testid="profiles-table">
                    <thead><tr><th class=TH>"Profile"</th><th class=TH>"GPUs per job"</th></tr></thead>
                    <tbody class="divide-y divide-slate-100">
                        {profile_rows}
                    </tbody>
                </table>
            </Card>
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
fn node_error(
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
