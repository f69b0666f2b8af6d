//! The builder portal: submit a job to one of my queues, follow my jobs (and why one waits),
//! abort one, see my groups' GPU quota and use; and one job's page with its history.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::policy::{gpus, live_tick};
use crate::api::{load_job, load_portal, AbortJobForm, ResubmitJobForm, SubmitJobForm};
use crate::form::{done, echo, echo_or, echo_selected, echo_text};
use crate::model::{Job, JobState, PortalOverview, StopReason, Waiting};
use crate::time::format_ms;
use crate::ui::*;

fn state_class(state: JobState, stopping: bool) -> &'static str {
    match state {
        _ if stopping => "bg-orange-100 text-orange-800",
        JobState::Running => "bg-green-100 text-green-800",
        JobState::Queued => "bg-amber-100 text-amber-800",
        JobState::Admitted | JobState::Starting => "bg-sky-100 text-sky-800",
        JobState::Preempting | JobState::Preempted => "bg-orange-100 text-orange-800",
        JobState::Succeeded => "bg-slate-100 text-slate-700",
        JobState::Failed | JobState::Aborted | JobState::Lost => "bg-red-100 text-red-800",
    }
}

/// What a job's badge says: its state, or that it is being stopped and why.
fn state_label(state: JobState, stop: Option<StopReason>) -> String {
    match stop {
        Some(StopReason::Abort) if state.is_live() => "aborting".into(),
        Some(StopReason::MaxRuntime) if state.is_live() => "stopping (runtime limit)".into(),
        _ => state.to_string(),
    }
}

#[component]
fn StateBadge(state: JobState, stop: Option<StopReason>) -> impl IntoView {
    let stopping = stop.is_some() && state.is_live() && state != JobState::Preempting;
    view! {
        <span class=format!("rounded px-2 py-0.5 text-xs font-medium {}", state_class(state, stopping)) data-state=state.as_str()>{state_label(state, stop)}</span>
    }
}

#[component]
pub fn PortalPage() -> impl IntoView {
    let submit = ServerAction::<SubmitJobForm>::new();
    let tick = live_tick(2);
    let data = Resource::new(
        move || (submit.version().get(), tick.get()),
        |_| load_portal(),
    );
    view! {
        <Title text="Portal"/>
        <PageHeader title="Builder portal" subtitle="Your GPUs and jobs, without a ticket."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(d) => view! { <Portal d=d submit/> }.into_any(),
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Portal(d: PortalOverview, submit: ServerAction<SubmitJobForm>) -> impl IntoView {
    let submit_v = move || submit.value().get();
    let submitted = done(submit);
    let mut classes: Vec<String> = Vec::new();
    for q in &d.queues {
        for c in &q.classes {
            if !classes.contains(&c.name) {
                classes.push(c.name.clone());
            }
        }
    }
    view! {
        <div class="grid gap-6 xl:grid-cols-3">
            <div class="min-w-0 space-y-6 xl:col-span-2">
                <Card title="My jobs">
                    {if d.jobs.is_empty() {
                        view! { <p class="text-sm text-slate-600">"No jobs yet. Submit one with the form."</p> }.into_any()
                    } else {
                        view! {
                            <div class="overflow-x-auto">
                            <table class=TABLE data-testid="jobs-table">
                                <thead><tr>
                                    <th class=TH>"Job"</th><th class=TH>"Queue"</th><th class=TH>"GPUs"</th>
                                    <th class=TH>"State"</th><th class=TH>"Why it waits / where it runs"</th>
                                    <th class=TH>"Resumed"</th><th class=TH>"Submitted"</th><th class=TH></th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {d.jobs.into_iter().map(|j| view! { <JobRow j=j/> }).collect_view()}
                                </tbody>
                            </table>
                            </div>
                        }.into_any()
                    }}
                </Card>
                <Card title="My groups' GPU quota">
                    {if d.groups.is_empty() {
                        view! { <p class="text-sm text-slate-600">"None of your groups has a GPU policy yet. Ask your administrator."</p> }.into_any()
                    } else {
                        view! {
                            <table class=TABLE data-testid="quota-table">
                                <thead><tr>
                                    <th class=TH>"Group"</th><th class=TH>"Reserved"</th><th class=TH>"Limit"</th>
                                    <th class=TH>"In use"</th><th class=TH>"Borrowed"</th><th class=TH>"Running"</th><th class=TH>"Waiting"</th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {d.groups.into_iter().map(|g| view! {
                                        <tr>
                                            <td class=format!("{TD} font-medium")>{g.group_name}</td>
                                            <td class=TD>{gpus(g.reservation_milli)}</td>
                                            <td class=TD>{gpus(g.limit_milli)}</td>
                                            <td class=TD>{gpus(g.used_milli)}</td>
                                            <td class=TD>{gpus(g.over_quota_milli)}</td>
                                            <td class=TD>{g.running}</td>
                                            <td class=TD>{g.waiting}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }}
                </Card>
            </div>
            <Card title="Submit a job">
                {if d.queues.is_empty() {
                    view! { <p class="text-sm text-slate-600">"You may not submit to any queue yet: you are in no group with a queue."</p> }.into_any()
                } else {
                    view! {
                        <ActionForm action=submit>
                            <CsrfField/>
                            <input type="hidden" name="idempotency_key" value=d.submit_key.clone()/>
                            <div class="space-y-4">
                                <div>
                                    <label class=LABEL for="job-queue">"Queue"</label>
                                    <select id="job-queue" name="queue_id" class=INPUT>
                                        {d.queues.iter().map(|q| view! {
                                            <option value=q.id.clone() selected={echo_selected::<SubmitJobForm>("queue_id", &q.id)}>{format!("{} ({}, profile {})", q.name, q.group_name, q.profile_name)}</option>
                                        }).collect_view()}
                                    </select>
                                    {field_error(submit_v, "queue_id")}
                                </div>
                                <div>
                                    <label class=LABEL for="job-name">"Name"</label>
                                    <input id="job-name" name="name" class=INPUT value={echo::<SubmitJobForm>("name")}/>
                                    {field_error(submit_v, "name")}
                                </div>
                                <div>
                                    <label class=LABEL for="job-command">"Command"</label>
                                    <textarea id="job-command" name="command" rows="2" class=format!("{INPUT} font-mono") inner_html={echo_text::<SubmitJobForm>("command")}></textarea>
                                    {field_error(submit_v, "command")}
                                </div>
                                <div class="grid grid-cols-2 gap-3">
                                    <div>
                                        <label class=LABEL for="job-gpus">"Milli-GPUs (profile default if empty)"</label>
                                        <input id="job-gpus" name="gpu_milli" class=INPUT inputmode="numeric" value={echo::<SubmitJobForm>("gpu_milli")}/>
                                        {field_error(submit_v, "gpu_milli")}
                                    </div>
                                    <div>
                                        <label class=LABEL for="job-class">"Priority class"</label>
                                        <select id="job-class" name="priority_class" class=INPUT>
                                            <option value="">"default (normal)"</option>
                                            {classes.iter().map(|c| view! { <option value=c.clone() selected={echo_selected::<SubmitJobForm>("priority_class", c)}>{c.clone()}</option> }).collect_view()}
                                        </select>
                                        {field_error(submit_v, "priority_class")}
                                    </div>
                                    <div>
                                        <label class=LABEL for="job-duration">"Runs for (s, simulated pools)"</label>
                                        <input id="job-duration" name="duration_s" class=INPUT value={echo_or::<SubmitJobForm>("duration_s", "60")} inputmode="numeric"/>
                                        {field_error(submit_v, "duration_s")}
                                    </div>
                                    <div>
                                        <label class=LABEL for="job-max">"Max runtime (s)"</label>
                                        <input id="job-max" name="max_runtime_s" class=INPUT inputmode="numeric" value={echo::<SubmitJobForm>("max_runtime_s")}/>
                                        {field_error(submit_v, "max_runtime_s")}
                                    </div>
                                </div>
                                <fieldset class="rounded-md border border-slate-200 p-3">
                                    <legend class="px-1 text-xs font-semibold text-slate-600">"On preemption or abort"</legend>
                                    <div class="grid grid-cols-2 gap-3">
                                        <div>
                                            <label class=LABEL for="job-abort-kind">"Callback"</label>
                                            <select id="job-abort-kind" name="abort_kind" class=INPUT>
                                                <option value="bash">"bash"</option>
                                                <option value="python" selected={echo_selected::<SubmitJobForm>("abort_kind", "python")}>"python"</option>
                                            </select>
                                            {field_error(submit_v, "abort.kind")}
                                        </div>
                                        <div>
                                            <label class=LABEL for="job-abort-timeout">"Timeout (s)"</label>
                                            <input id="job-abort-timeout" name="abort_timeout_s" class=INPUT value={echo_or::<SubmitJobForm>("abort_timeout_s", "30")} inputmode="numeric"/>
                                            {field_error(submit_v, "abort_timeout_s")}
                                        </div>
                                    </div>
                                    <label class=format!("{LABEL} mt-3") for="job-abort-command">"Command (e.g. save a checkpoint)"</label>
                                    <input id="job-abort-command" name="abort_command" class=format!("{INPUT} font-mono") value={echo::<SubmitJobForm>("abort_command")}/>
                                    {field_error(submit_v, "abort.command")}
                                    <label class=format!("{LABEL} mt-3") for="job-ckpt">"Checkpoint folder"</label>
                                    <input id="job-ckpt" name="checkpoint_dir" class=format!("{INPUT} font-mono") placeholder="ckpt" value={echo::<SubmitJobForm>("checkpoint_dir")}/>
                                    {field_error(submit_v, "checkpoint_dir")}
                                </fieldset>
                            </div>
                            <button type="submit" class=format!("{BUTTON} mt-4")>"Submit job"</button>
                            <div class="mt-3">{form_error(submit_v)}</div>
                            {move || submitted().then(|| match submit_v().and_then(|r| r.ok()) {
                                Some(j) => view! {
                                    <p class="mt-2 text-sm text-green-700" role="status">"Submitted "<a class="underline" href=format!("/portal/jobs/{}", j.id)>{j.name}</a>"."</p>
                                }.into_any(),
                                // Without JavaScript the page comes from a redirect: no job to name.
                                None => view! { <p class="mt-2 text-sm text-green-700" role="status">"Job submitted."</p> }.into_any(),
                            })}
                        </ActionForm>
                    }.into_any()
                }}
            </Card>
        </div>
    }
}

#[component]
fn JobRow(j: Job) -> impl IntoView {
    let live = j.state.is_live() && j.stop_reason != Some(StopReason::Abort);
    let place = if j.state == JobState::Queued {
        j.wait_reason
            .clone()
            .unwrap_or_else(|| "Waiting for the next scheduling cycle.".into())
    } else if let Some(node) = &j.node_name {
        format!(
            "{node}{}",
            if j.over_quota {
                " · over quota (borrowed)"
            } else {
                ""
            }
        )
    } else {
        j.detail.clone().unwrap_or_default()
    };
    let (job_id, job_name) = (j.id.clone(), j.name.clone());
    view! {
        <tr data-job=j.name.clone()>
            <td class=format!("{TD} font-medium")><a class="text-indigo-700 hover:underline" href=format!("/portal/jobs/{}", j.id)>{j.name.clone()}</a></td>
            <td class=TD>{j.queue_name.clone()}</td>
            <td class=TD>{gpus(j.gpu_milli)}</td>
            <td class=TD><StateBadge state=j.state stop=j.stop_reason/></td>
            <td class=format!("{TD} max-w-md text-xs text-slate-600") data-testid="wait-reason">{place}</td>
            <td class=TD>{j.resume_count}</td>
            <td class=format!("{TD} whitespace-nowrap text-slate-500")>{format_ms(j.submitted_at)}</td>
            <td class=format!("{TD} text-right")>
                // Abort asks first, on the job's page (`?confirm=abort`).
                {live.then(|| view! {
                    <a class=BUTTON_SMALL_DANGER href=format!("/portal/jobs/{job_id}?confirm=abort") aria-label=format!("Abort {job_name}")>"Abort"</a>
                })}
            </td>
        </tr>
    }
}

/// One job: what it is, where it runs, and every state it went through.
#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let abort = ServerAction::<AbortJobForm>::new();
    let resubmit = ServerAction::<ResubmitJobForm>::new();
    // Abort asks first: its button leads to `?confirm=abort`, which shows the real one.
    let query = use_query_map();
    let confirming = move || query.read().get("confirm").as_deref() == Some("abort");
    let tick = live_tick(2);
    let detail = Resource::new(
        move || (id(), abort.version().get(), tick.get()),
        |(id, _, _)| load_job(id),
    );
    let abort_v = move || abort.value().get();
    let resubmit_v = move || resubmit.value().get();
    view! {
        <Title text="Job"/>
        <a href="/portal" class="text-sm text-indigo-700 hover:underline">"← Portal"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(d) => {
                        let j = d.job;
                        let live = j.state.is_live() && j.stop_reason != Some(StopReason::Abort);
                        let ran = ran_for(&j);
                        let (job_id, abort_id, job_name) = (j.id.clone(), j.id.clone(), j.name.clone());
                        view! {
                            <div class="mb-6 mt-2 flex items-center gap-3">
                                <h1 class="text-2xl font-semibold tracking-tight" data-testid="job-name">{j.name.clone()}</h1>
                                <StateBadge state=j.state stop=j.stop_reason/>
                            </div>
                            {(j.state == JobState::Queued).then(|| j.wait_reason.clone().map(|w| view! {
                                <div class="mb-4 rounded-md border border-amber-200 bg-amber-50 px-4 py-3 text-sm text-amber-900" data-testid="job-wait">{w}</div>
                            }))}
                            {d.waiting.map(|w| view! { <WaitCard w/> })}
                            <div class="grid grid-cols-1 gap-6 lg:grid-cols-3">
                                <Card title="Job">
                                    <dl class="grid grid-cols-3 gap-2 text-sm">
                                        <dt class="text-slate-500">"Queue"</dt><dd class="col-span-2">{j.queue_name.clone()}</dd>
                                        <dt class="text-slate-500">"By"</dt><dd class="col-span-2">{j.username.clone()}</dd>
                                        <dt class="text-slate-500">"GPUs"</dt><dd class="col-span-2">{gpus(j.gpu_milli)}</dd>
                                        <dt class="text-slate-500">"Priority"</dt><dd class="col-span-2">{j.priority_class.clone()}{(!j.preemptible).then_some(" (not preemptible)")}</dd>
                                        <dt class="text-slate-500">"Node"</dt><dd class="col-span-2">{j.node_name.clone().unwrap_or_else(|| "—".into())}</dd>
                                        <dt class="text-slate-500">"Resumed"</dt><dd class="col-span-2">{j.resume_count}" times"</dd>
                                        <dt class="text-slate-500">"Command"</dt><dd class="col-span-2 font-mono text-xs break-all">{j.command.clone()}</dd>
                                        <dt class="text-slate-500">"Abort callback"</dt><dd class="col-span-2 font-mono text-xs break-all">{j.abort_command.clone().map(|c| format!("{}: {c}", j.abort_kind.map(|k| k.as_str()).unwrap_or_default())).unwrap_or_else(|| "none".into())}</dd>
                                        <dt class="text-slate-500">"Exit code"</dt><dd class="col-span-2">{j.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "—".into())}</dd>
                                        <dt class="text-slate-500">"Submitted"</dt><dd class="col-span-2 tabular-nums">{format_ms(j.submitted_at)}</dd>
                                        <dt class="text-slate-500">"Started"</dt><dd class="col-span-2 tabular-nums">{j.started_at.map(format_ms).unwrap_or_else(|| "—".into())}</dd>
                                        <dt class="text-slate-500">"Finished"</dt><dd class="col-span-2 tabular-nums">{j.finished_at.map(format_ms).unwrap_or_else(|| "—".into())}</dd>
                                        <dt class="text-slate-500">"Ran for"</dt><dd class="col-span-2 tabular-nums" data-testid="job-duration">{ran}</dd>
                                    </dl>
                                    <div class="mt-4 flex flex-wrap items-center gap-3">
                                        {(live && !confirming()).then(|| view! {
                                            <a href="?confirm=abort" class=format!("{BUTTON} bg-red-600 hover:bg-red-700") data-testid="abort-start">"Abort job…"</a>
                                        })}
                                        <ActionForm action=resubmit>
                                            <CsrfField/>
                                            <input type="hidden" name="job_id" value=job_id/>
                                            <button type="submit" class=BUTTON_SECONDARY data-testid="resubmit">"Resubmit a copy"</button>
                                        </ActionForm>
                                    </div>
                                    {(live && confirming()).then(|| view! {
                                        <div class="mt-4 rounded-md border border-red-200 bg-red-50 p-3 text-sm text-red-900" data-testid="abort-confirm">
                                            <p>"Abort "<strong>{job_name}</strong>"? A running job gets its abort callback, then its process is stopped. This cannot be undone."</p>
                                            <div class="mt-3 flex items-center gap-3">
                                                <ActionForm action=abort>
                                                    <CsrfField/>
                                                    <input type="hidden" name="job_id" value=abort_id/>
                                                    <button type="submit" class=format!("{BUTTON} bg-red-600 hover:bg-red-700")>"Yes, abort it"</button>
                                                </ActionForm>
                                                <a href="?" class="text-sm text-slate-700 hover:underline">"Cancel"</a>
                                            </div>
                                        </div>
                                    })}
                                    <div class="mt-3">{form_error(abort_v)}{form_error(resubmit_v)}</div>
                                </Card>
                                <div class="min-w-0 lg:col-span-2">
                                    <Card title="History">
                                        <table class=TABLE data-testid="events-table">
                                            <thead><tr><th class=TH>"When"</th><th class=TH>"From"</th><th class=TH>"To"</th><th class=TH>"What happened"</th></tr></thead>
                                            <tbody class="divide-y divide-slate-100">
                                                {d.events.into_iter().map(|e| view! {
                                                    <tr>
                                                        <td class=format!("{TD} whitespace-nowrap text-slate-500")>{format_ms(e.at)}</td>
                                                        <td class=TD>{e.from_state.map(|s| s.as_str()).unwrap_or_default()}</td>
                                                        <td class=TD>{e.to_state.as_str()}</td>
                                                        <td class=format!("{TD} text-slate-600")>{e.detail}</td>
                                                    </tr>
                                                }).collect_view()}
                                            </tbody>
                                        </table>
                                    </Card>
                                </div>
                            </div>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// How long a job ran: its duration in words, or where it stands.
fn ran_for(j: &Job) -> String {
    match (j.started_at, j.finished_at) {
        (Some(s), Some(f)) => duration(f.saturating_sub(s)),
        (Some(_), None) => "still running".into(),
        (None, _) => "not started".into(),
    }
}

/// `1 h 02 min`, `3 min 05 s`, `12 s`.
fn duration(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        s if s >= 3600 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{} min {:02} s", s / 60, s % 60),
        s => format!("{s} s"),
    }
}

/// Where a queued job stands: its place in its queue, its group's GPUs against reservation,
/// limit and fair share, who borrows on its pools, and the jobs stopping for it.
#[component]
fn WaitCard(w: Waiting) -> impl IntoView {
    let row = |label: &'static str, value: String| {
        view! { <dt class="text-slate-500">{label}</dt><dd class="col-span-2 tabular-nums">{value}</dd> }
    };
    view! {
        <div class="mb-6" data-testid="job-waiting">
            <Card title="Why it waits">
                <dl class="grid grid-cols-3 gap-2 text-sm">
                    {row("Place in queue", format!("{} of {}", w.position, w.queue_waiting))}
                    {row("Waits for", format!("{} GPUs", gpus(w.gpu_milli)))}
                    {row("Group", w.group_name.clone())}
                    {row("Group uses", format!("{} GPUs ({} borrowed)", gpus(w.group_used_milli), gpus(w.group_over_quota_milli)))}
                    {row("Reserved / limit", format!("{} / {} GPUs", gpus(w.group_reservation_milli), gpus(w.group_limit_milli)))}
                    {row("Fair share to borrow", format!("{} GPUs", gpus(w.group_fair_share_milli)))}
                    {(!w.victims.is_empty()).then(|| row("Stopping for it", w.victims.join(", ")))}
                </dl>
                {(!w.borrowers.is_empty()).then(|| view! {
                    <table class=format!("{TABLE} mt-4") data-testid="borrowers-table">
                        <thead><tr><th class=TH>"Borrowing on its pools"</th><th class=TH>"GPUs"</th></tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {w.borrowers.iter().map(|b| view! {
                                <tr><td class=TD>{b.group_name.clone()}</td><td class=format!("{TD} tabular-nums")>{gpus(b.gpu_milli)}</td></tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                })}
            </Card>
        </div>
    }
}
