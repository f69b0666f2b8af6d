//! The Policy Manager: capacity across pools, group quotas and their use, queues, recent
//! preemptions, and (for admins) the pools, profiles, policies and queues with the forms that
//! create, change and delete them (`objects`, `edit`, `delete`, `create`).

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::chart::{ChartScript, Stacked, StackedBars};
use crate::api::{
    load_policy_config, load_policy_overview, CreatePoolForm, CreateProfileForm, CreateQueueForm,
    DeletePolicyForm, DeletePoolForm, DeleteProfileForm, DeleteQueueForm, EditPolicyForm,
    SetPolicyForm, UpdatePoolForm, UpdateProfileForm, UpdateQueueForm,
};
use crate::model::PolicyOverview;
use crate::time::format_ms;
use crate::ui::*;
use crate::SessionResource;

mod create;
mod edit;
mod objects;

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

/// The page's write actions, shared by its forms (a context): a change through any of them
/// reloads the configuration and the overview.
#[derive(Clone, Copy)]
struct Actions {
    add_pool: ServerAction<CreatePoolForm>,
    add_profile: ServerAction<CreateProfileForm>,
    set_policy: ServerAction<SetPolicyForm>,
    add_queue: ServerAction<CreateQueueForm>,
    edit_pool: ServerAction<UpdatePoolForm>,
    delete_pool: ServerAction<DeletePoolForm>,
    edit_profile: ServerAction<UpdateProfileForm>,
    delete_profile: ServerAction<DeleteProfileForm>,
    edit_queue: ServerAction<UpdateQueueForm>,
    delete_queue: ServerAction<DeleteQueueForm>,
    edit_policy: ServerAction<EditPolicyForm>,
    delete_policy: ServerAction<DeletePolicyForm>,
    /// The server function and object id of the last edit or delete sent from this page
    /// (`None`: none yet, as without JavaScript): a form shows a result only if it is its own.
    last: RwSignal<Option<(&'static str, String)>>,
}

impl Actions {
    fn new() -> Actions {
        Actions {
            add_pool: ServerAction::new(),
            add_profile: ServerAction::new(),
            set_policy: ServerAction::new(),
            add_queue: ServerAction::new(),
            edit_pool: ServerAction::new(),
            delete_pool: ServerAction::new(),
            edit_profile: ServerAction::new(),
            delete_profile: ServerAction::new(),
            edit_queue: ServerAction::new(),
            delete_queue: ServerAction::new(),
            edit_policy: ServerAction::new(),
            delete_policy: ServerAction::new(),
            last: RwSignal::new(None),
        }
    }

    /// Follows what the edits and deletes are sent for (in the browser; the server renders
    /// one request's page, with at most one result in it).
    fn follow(self) {
        follow(self.edit_pool, self.last, |s| s.id.clone());
        follow(self.delete_pool, self.last, |s| s.id.clone());
        follow(self.edit_profile, self.last, |s| s.id.clone());
        follow(self.delete_profile, self.last, |s| s.id.clone());
        follow(self.edit_queue, self.last, |s| s.id.clone());
        follow(self.delete_queue, self.last, |s| s.id.clone());
        follow(self.edit_policy, self.last, |s| s.group_id.clone());
        follow(self.delete_policy, self.last, |s| s.id.clone());
    }

    /// [`Actions::about`] for `action`'s server function.
    fn about_call<S>(&self, _action: ServerAction<S>, id: &str) -> bool
    where
        S: ServerFn + 'static,
        S::Output: 'static,
    {
        self.about::<S>(id)
    }

    /// Whether a result of `S` belongs to the form about `id` (see `last`).
    fn about<S: ServerFn>(&self, id: &str) -> bool {
        self.last.with(|l| {
            l.as_ref()
                .is_none_or(|(path, about)| *path == S::PATH && about == id)
        })
    }

    /// Changes with every finished call of any of them.
    fn version(&self) -> usize {
        [
            self.add_pool.version().get(),
            self.add_profile.version().get(),
            self.set_policy.version().get(),
            self.add_queue.version().get(),
            self.edit_pool.version().get(),
            self.delete_pool.version().get(),
            self.edit_profile.version().get(),
            self.delete_profile.version().get(),
            self.edit_queue.version().get(),
            self.delete_queue.version().get(),
            self.edit_policy.version().get(),
            self.delete_policy.version().get(),
        ]
        .iter()
        .sum()
    }
}

fn follow<S>(
    action: ServerAction<S>,
    last: RwSignal<Option<(&'static str, String)>>,
    key: fn(&S) -> String,
) where
    S: ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    Effect::new(move |_| {
        if let Some(id) = action.input().with(|i| i.as_ref().map(key)) {
            last.set(Some((S::PATH, id)));
        }
    });
}

#[component]
pub fn PolicyPage() -> impl IntoView {
    let actions = Actions::new();
    actions.follow();
    provide_context(actions);
    let session = expect_context::<SessionResource>().0;
    let tick = live_tick(3);
    let overview = Resource::new(
        move || (actions.version(), tick.get()),
        |_| load_policy_overview(),
    );
    let config = Resource::new(move || actions.version(), |_| load_policy_config());
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
                let platform_admin = session
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|s| s.me.is_platform_admin);
                match config.await {
                    Ok(c) => view! {
                        <objects::Objects c=c.clone() platform_admin/>
                        <create::CreateForms c=c/>
                    }.into_any(),
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
                <ChartScript/>
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
                                <td class=format!("{TD} whitespace-nowrap")>{if p.shared { "shared" } else { "dedicated" }}" · "{p.executor.as_str()}</td>
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
                                <td class=TD>
                                    <a class="text-indigo-700 hover:underline" href=format!("/jobs?queue_id={}&state=queued&sort=queue", q.queue_id) title="The waiting jobs in the order they will be taken">{q.waiting}</a>
                                </td>
                                <td class=TD>{q.avg_wait_ms.map(duration).unwrap_or_else(|| "—".into())}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </Card>
            // Across both columns: its eight columns do not fit half of a 1440 px page.
            <div class="min-w-0 xl:col-span-2">
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
            </div>
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
                                        <td class=TD>{job_link(&x.victim_job_id, &x.victim_group, "preempted job")}</td>
                                        <td class=TD>{job_link(&x.for_job_id, &x.for_group, "job it made room for")}</td>
                                        <td class=TD>{gpus(x.gpu_milli)}</td>
                                        <td class=format!("{TD} min-w-64 text-slate-600")>{x.reason.clone()}</td>
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

/// A preemption's group, linked to its job's page when the job is the viewer's (another
/// organization's job has no id here).
fn job_link(job_id: &str, group: &str, what: &str) -> AnyView {
    if job_id.is_empty() {
        view! { <span>{group.to_string()}</span> }.into_any()
    } else {
        view! {
            <a class="text-indigo-700 hover:underline" href=format!("/portal/jobs/{job_id}") title=format!("The {what}")>{group.to_string()}</a>
        }
        .into_any()
    }
}
