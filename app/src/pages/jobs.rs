use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::policy::gpus;
use crate::api::{list_jobs, load_portal};
use crate::model::{Job, JobQuery, JobState};
use crate::time::format_ms;
use crate::ui::*;

/// The states a list can be narrowed to, in the order a job passes them.
const STATES: [&str; 10] = [
    "queued",
    "admitted",
    "starting",
    "running",
    "preempting",
    "preempted",
    "succeeded",
    "failed",
    "aborted",
    "lost",
];

/// Jobs with search, filters and pages: an admin's over the whole tenant, a member's over
/// their own. The filter form is a plain GET form, so a filtered view can be shared and it
/// works before hydration.
#[component]
pub fn JobsPage() -> impl IntoView {
    let query = use_query_map();
    let get = move |k: &str| query.read().get(k).unwrap_or_default();
    let filter = move || {
        let q = query.read();
        let text = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
        JobQuery {
            state: text("state"),
            queue_id: text("queue_id"),
            group_id: text("group_id"),
            user: text("user"),
            q: text("q"),
            within: text("within"),
            sort: text("sort"),
            limit: Some(text("limit").and_then(|l| l.parse().ok()).unwrap_or(50)),
            cursor: text("cursor"),
        }
    };
    let jobs = Resource::new(filter, list_jobs);
    // The queues and groups the caller may narrow to (the portal's: an admin's are all).
    let choices = Resource::new(|| (), |_| load_portal());
    // Queue order of one queue's waiting jobs: each row gets its place in line; `from` is how
    // many earlier pages showed.
    let in_line = move || {
        let q = query.read();
        q.get_str("sort") == Some("queue")
            && q.get_str("state") == Some("queued")
            && q.get("queue_id").is_some_and(|v| !v.is_empty())
    };
    let from = move || {
        query
            .read()
            .get("from")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    };
    let next_href = move |cursor: String, shown: usize| {
        let keys = [
            "state", "queue_id", "group_id", "user", "q", "within", "sort", "limit",
        ];
        let href = next_page_href("/jobs", &query.read(), &keys, &cursor);
        if in_line() {
            format!("{href}&from={}", from() + shown)
        } else {
            href
        }
    };
    view! {
        <Title text="Jobs"/>
        <PageHeader title="Jobs" subtitle="Newest first unless ordered otherwise. Admins see every job of the organization; members see their own."/>
        <form method="get" action="/jobs" class="mb-6 grid grid-cols-2 gap-3 rounded-lg border border-slate-200 bg-white p-4 shadow-sm md:grid-cols-4 xl:grid-cols-8">
            <div><label class=LABEL for="f-q">"Name contains"</label>
                <input id="f-q" name="q" class=INPUT prop:value=move || get("q")/></div>
            <div><label class=LABEL for="f-state">"State"</label>
                <select id="f-state" name="state" class=INPUT>
                    <option value="" selected=move || get("state").is_empty()>"any"</option>
                    {STATES.iter().map(|s| view! {
                        <option value=*s selected=move || get("state") == *s>{*s}</option>
                    }).collect_view()}
                </select></div>
            <div><label class=LABEL for="f-user">"User"</label>
                <input id="f-user" name="user" class=INPUT placeholder="username" prop:value=move || get("user")/></div>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let (queues, groups) = match choices.await {
                        Ok(p) => (
                            p.queues.into_iter().map(|q| (q.id, q.name)).collect::<Vec<_>>(),
                            p.groups.into_iter().map(|g| (g.group_id, g.group_name)).collect::<Vec<_>>(),
                        ),
                        Err(_) => (Vec::new(), Vec::new()),
                    };
                    view! {
                        <Choice id="f-queue" name="queue_id" label="Queue" any="any" options=queues current=get("queue_id")/>
                        <Choice id="f-group" name="group_id" label="Group" any="any" options=groups current=get("group_id")/>
                    }
                })}
            </Transition>
            <Choice id="f-within" name="within" label="Submitted" any="any time"
                options=vec![("hour".into(), "last hour".into()), ("day".into(), "last day".into()), ("week".into(), "last week".into())]
                current=get("within")/>
            <Choice id="f-sort" name="sort" label="Order" any="newest first"
                options=vec![("oldest".into(), "oldest first".into()), ("queue".into(), "queue order".into())]
                current=get("sort")/>
            <div class="col-span-2 flex items-end gap-2 md:col-span-4 xl:col-span-8">
                <button type="submit" class=BUTTON>"Filter"</button>
                <a href="/jobs" class="px-2 py-2 text-sm text-slate-600 hover:underline">"Clear"</a>
            </div>
        </form>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match jobs.await {
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    Ok(page) if page.items.is_empty() => view! {
                        <p class="text-sm text-slate-600" data-testid="no-jobs">"No jobs match."</p>
                    }.into_any(),
                    Ok(page) => {
                        let line = in_line();
                        let first = from();
                        let shown = page.items.len();
                        let more = match get("sort").as_str() {
                            "queue" => "Next in line →",
                            "oldest" => "Newer jobs →",
                            _ => "Older jobs →",
                        };
                        view! {
                        {line.then(|| view! {
                            <p class="mb-3 text-sm text-slate-600" data-testid="queue-order">"Waiting jobs of this queue in the order the scheduler takes them: priority class first, then the time they were submitted. A job starts when its group's quota and the pools' free GPUs allow; the first in line is the next considered. The estimated start is when the running jobs' time limits free enough GPUs for it and those ahead (jobs being preempted, and borrowed ones while it reclaims, by their abort timeout; — where a running job has no limit); other queues may take them first."</p>
                        })}
                        <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white shadow-sm">
                            <table class=TABLE data-testid="all-jobs-table">
                                <thead class="bg-slate-50"><tr>
                                    {line.then(|| view! { <th class=TH>"#"</th><th class=TH>"Estimated start"</th> })}
                                    <th class=TH>"Name"</th><th class=TH>"State"</th><th class=TH>"User"</th>
                                    <th class=TH>"Queue"</th><th class=TH>"GPUs"</th><th class=TH>"Submitted"</th>
                                    <th class=TH>"Ran for"</th><th class=TH>"Why it waits"</th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {page.items.into_iter().enumerate().map(|(i, j)| {
                                        let place = line.then_some(first + i + 1);
                                        view! { <JobRow j place/> }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </div>
                        {page.next_cursor.map(|c| view! {
                            <a class="mt-4 inline-block text-sm text-indigo-700 hover:underline" href=next_href(c, shown) data-testid="older-jobs">{more}</a>
                        })}
                    }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// A filter's select: "any" (empty) first, then `options` (value, label), `current` chosen.
#[component]
fn Choice(
    id: &'static str,
    name: &'static str,
    label: &'static str,
    any: &'static str,
    options: Vec<(String, String)>,
    current: String,
) -> impl IntoView {
    let none = current.is_empty();
    view! {
        <div><label class=LABEL for=id>{label}</label>
            <select id=id name=name class=INPUT>
                <option value="" selected=none>{any}</option>
                {options.into_iter().map(|(value, text)| {
                    let selected = value == current;
                    view! { <option value=value selected=selected>{text}</option> }
                }).collect_view()}
            </select></div>
    }
}

#[component]
fn JobRow(j: Job, place: Option<usize>) -> impl IntoView {
    // How long it ran, or since when it runs.
    let ran = j.started_at.map(|s| match j.finished_at {
        Some(f) => duration(f.saturating_sub(s)),
        None => format!("since {}", format_ms(s).get(11..16).unwrap_or_default()),
    });
    let state = if j.state == JobState::Queued && j.resume_count > 0 {
        "preempted (waits to resume)".to_string()
    } else {
        j.state.to_string()
    };
    view! {
        <tr data-job=j.name.clone()>
            {place.map(|n| view! { <td class=format!("{TD} tabular-nums text-slate-500") data-testid="place">{n}</td> })}
            {place.map(|_| view! {
                <td class=format!("{TD} whitespace-nowrap text-slate-600") data-testid="estimated-start">
                    {j.estimated_start_at.map(format_ms).unwrap_or_else(|| "—".into())}
                </td>
            })}
            <td class=TD><a class="text-indigo-700 hover:underline" href=format!("/portal/jobs/{}", j.id)>{j.name.clone()}</a></td>
            <td class=format!("{TD} whitespace-nowrap") data-state=j.state.as_str()>{state}</td>
            <td class=TD>{j.username.clone()}</td>
            <td class=TD>{j.queue_name.clone()}</td>
            <td class=format!("{TD} tabular-nums")>{gpus(j.gpu_milli)}</td>
            <td class=format!("{TD} whitespace-nowrap text-slate-600")>{format_ms(j.submitted_at)}</td>
            <td class=format!("{TD} tabular-nums")>{ran.unwrap_or_else(|| "—".into())}</td>
            <td class=format!("{TD} whitespace-nowrap text-slate-600") title=j.wait_reason.clone().unwrap_or_default()>{j.wait_code.as_deref().map(short_wait).unwrap_or_default()}</td>
        </tr>
    }
}

/// A wait code in a few words (the job's page has the whole reason).
fn short_wait(code: &str) -> &'static str {
    match code {
        "over_limit" => "at its group's limit",
        "quota_exhausted" => "reservation in use",
        "no_capacity" => "no room",
        "fragmented" => "GPUs not together",
        "gpu_memory" => "GPU memory",
        "cpu" => "CPU",
        "host_memory" => "memory",
        "held_elsewhere" => "room held for others",
        "protected" => "borrowers protected",
        "reclaiming" => "reclaiming",
        "capacity_held" => "node held for it",
        "behind_held_job" => "behind a held job",
        "no_idle_capacity" => "no idle GPUs",
        "unschedulable" => "never fits",
        _ => "waiting",
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
