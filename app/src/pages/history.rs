//! History: GPU allocation per pool and per group, queue depth and wait percentiles over the
//! last hour, day or week, from the samples the scheduler stores. The window is picked with
//! plain links (`?window=day`); each chart has a table with the same numbers beside it, so the
//! page says everything before hydration and without JavaScript. The charts are drawn after
//! hydration.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::chart::{ChartScript, Stacked, StackedBars};
use super::policy::{duration, gpus};
use crate::api::history::load_history;
use crate::model::*;
use crate::time::format_ms;
use crate::ui::*;

/// The charts' element ids (the chart component takes `&'static str`), handed out in the order
/// the page draws its charts; charts beyond these are left out and their tables stay.
#[rustfmt::skip]
const CHART_IDS: [&str; 40] = [
    "history-chart-0", "history-chart-1", "history-chart-2", "history-chart-3", "history-chart-4",
    "history-chart-5", "history-chart-6", "history-chart-7", "history-chart-8", "history-chart-9",
    "history-chart-10", "history-chart-11", "history-chart-12", "history-chart-13",
    "history-chart-14", "history-chart-15", "history-chart-16", "history-chart-17",
    "history-chart-18", "history-chart-19", "history-chart-20", "history-chart-21",
    "history-chart-22", "history-chart-23", "history-chart-24", "history-chart-25",
    "history-chart-26", "history-chart-27", "history-chart-28", "history-chart-29",
    "history-chart-30", "history-chart-31", "history-chart-32", "history-chart-33",
    "history-chart-34", "history-chart-35", "history-chart-36", "history-chart-37",
    "history-chart-38", "history-chart-39",
];

const IN_QUOTA: &str = "#4f46e5";
const OVER_QUOTA: &str = "#f59e0b";
const IDLE: &str = "#cbd5e1";
const UNUSED: &str = "#c7d2fe";
const TENANT_COLOURS: [&str; 6] = [
    "#4f46e5", "#0ea5e9", "#10b981", "#f59e0b", "#ef4444", "#a855f7",
];

#[component]
pub fn HistoryPage() -> impl IntoView {
    let query = use_query_map();
    let window = move || query.read().get("window").unwrap_or_default();
    let history = Resource::new(window, load_history);
    view! {
        <Title text="History"/>
        <ChartScript/>
        <PageHeader title="History" subtitle="GPU allocation, queue depth and wait times, sampled every minute by the scheduler and averaged per bucket. Times are UTC."/>
        <nav aria-label="Window" class="mb-6 flex flex-wrap gap-2 text-sm">
            {HistoryWindow::ALL
                .into_iter()
                .map(|w| {
                    let current = move || HistoryWindow::parse(Some(&window())).ok() == Some(w);
                    view! {
                        <a href=format!("/history?window={}", w.as_str())
                            aria-current=move || current().then_some("page")
                            class="rounded-md border border-slate-300 bg-white px-3 py-1.5 text-slate-700 hover:bg-slate-50 aria-[current=page]:border-indigo-600 aria-[current=page]:bg-indigo-600 aria-[current=page]:text-white">
                            {w.label()}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match history.await {
                    Ok(h) => view! { <Charts h=h/> }.into_any(),
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// A bucket's start as the chart's axis shows it.
fn axis_label(window: HistoryWindow, at: i64) -> String {
    let t = format_ms(at); // `2026-12-02 17:04:05 UTC`
    match window {
        HistoryWindow::Hour | HistoryWindow::Day => t[11..16].to_string(),
        HistoryWindow::Week => t[5..16].to_string(),
    }
}

/// A bucket's start as a table row shows it.
fn row_label(window: HistoryWindow, at: i64) -> String {
    let t = format_ms(at);
    match window {
        HistoryWindow::Hour => t[11..16].to_string(),
        HistoryWindow::Day | HistoryWindow::Week => t[5..16].to_string(),
    }
}

/// An average count of jobs: `2`, `2.5`.
fn count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn wait(ms: Option<i64>) -> String {
    ms.map_or_else(|| "—".to_string(), duration)
}

/// One series of a chart: its values per bucket (`NaN` where a bucket has no samples).
fn series<T>(
    name: &str,
    colour: &str,
    points: &[Option<T>],
    value: impl Fn(&T) -> f64,
) -> (String, String, Vec<f64>) {
    let values = points
        .iter()
        .map(|p| p.as_ref().map_or(f64::NAN, &value))
        .collect();
    (name.to_string(), colour.to_string(), values)
}

/// GPUs for a chart, as the table shows them ([`gpu`]).
fn milli(m: i64) -> f64 {
    if m % 125 == 0 {
        m as f64 / 1000.0
    } else {
        (m as f64 / 100.0).round() / 10.0
    }
}

/// GPUs for a table: exact for what a sample can hold (eighths of a GPU), an average to a
/// tenth otherwise.
fn gpu(m: i64) -> String {
    if m % 125 == 0 {
        gpus(m)
    } else {
        gpus(((m as f64 / 100.0).round() as i64) * 100)
    }
}

/// What every panel shares: the window, the axis labels and the buckets with samples (the
/// table's rows, newest first).
struct Frame {
    window: HistoryWindow,
    labels: Vec<String>,
    rows: Vec<usize>,
    buckets: Vec<i64>,
    ids: std::cell::Cell<usize>,
    /// Set once the page is in the document: charts are made only then, so that the chart
    /// component finds its element when it draws (after a navigation inside the app, the
    /// page is built before it is attached).
    ready: RwSignal<bool>,
}

impl Frame {
    /// A chart with the next free id, or nothing once the ids are used up.
    fn chart(
        &self,
        label: String,
        unit: &str,
        series: Vec<(String, String, Vec<f64>)>,
    ) -> Option<AnyView> {
        let i = self.ids.get();
        let id: &'static str = CHART_IDS.get(i)?;
        self.ids.set(i + 1);
        let data = Stacked {
            categories: self.labels.clone(),
            unit: unit.to_string(),
            series,
        };
        let ready = self.ready;
        Some(
            view! {
                {move || ready.get().then(|| {
                    let (label, data) = (label.clone(), data.clone());
                    view! { <StackedBars id=id label=label data=data/> }
                })}
            }
            .into_any(),
        )
    }

    fn when(&self, i: usize) -> String {
        row_label(self.window, self.buckets[i])
    }
}

/// A card with its charts on one side and their table on the other (stacked on a phone).
fn panel(
    title: String,
    testid: String,
    charts: Vec<AnyView>,
    head: Vec<String>,
    body: Vec<Vec<String>>,
) -> impl IntoView {
    let empty = body.is_empty();
    view! {
        <section class="min-w-0 rounded-lg border border-slate-200 bg-white shadow-sm" data-testid=testid>
            <h3 class="border-b border-slate-100 px-4 py-3 text-sm font-semibold text-slate-700 sm:px-5">{title}</h3>
            <div class="grid gap-4 p-4 sm:p-5 lg:grid-cols-[minmax(0,2fr)_minmax(0,3fr)]">
                // A chart keeps the width it was drawn at: it scrolls in its column if the
                // window narrows afterwards.
                <div class="min-w-0 space-y-4 overflow-x-auto">{charts}</div>
                // Long and wide tables scroll inside the card, never the page.
                <div class="max-h-80 min-w-0 overflow-auto">
                    <table class=TABLE>
                        <thead class="sticky top-0 bg-white"><tr>
                            {head.into_iter().enumerate().map(|(i, h)| {
                                let class = if i == 0 { format!("{TH} whitespace-nowrap") } else { format!("{TH} whitespace-nowrap text-right") };
                                view! { <th class=class>{h}</th> }
                            }).collect_view()}
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {body.into_iter().map(|row| view! {
                                <tr>
                                    {row.into_iter().enumerate().map(|(i, c)| {
                                        let class = if i == 0 { format!("{TD} whitespace-nowrap text-slate-600") } else { format!("{TD} whitespace-nowrap text-right tabular-nums") };
                                        view! { <td class=class>{c}</td> }
                                    }).collect_view()}
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    {empty.then(|| view! { <p class="mt-2 text-sm text-slate-500">"No samples in this window."</p> })}
                </div>
            </div>
        </section>
    }
}

#[component]
fn Charts(h: History) -> impl IntoView {
    let f = Frame {
        window: h.window,
        labels: h.buckets.iter().map(|&b| axis_label(h.window, b)).collect(),
        rows: (0..h.buckets.len())
            .rev()
            .filter(|&i| h.samples.get(i).is_some_and(|n| *n > 0))
            .collect(),
        buckets: h.buckets.clone(),
        ids: std::cell::Cell::new(0),
        ready: RwSignal::new(false),
    };
    // In the browser, the charts are drawn a frame after this view is made (it is attached
    // to the document by then).
    #[cfg(feature = "hydrate")]
    {
        let ready = f.ready;
        Effect::new(move |_| request_animation_frame(move || ready.set(true)));
    }
    let nothing = h.pools.is_empty() && h.groups.is_empty() && h.queues.is_empty();
    let pools: Vec<AnyView> = h.pools.iter().flat_map(|p| pool_panels(&f, p)).collect();
    let groups: Vec<AnyView> = h.groups.iter().map(|g| group_panel(&f, g)).collect();
    let queues: Vec<AnyView> = h.queues.iter().map(|q| queue_panel(&f, q)).collect();
    view! {
        {h.generated_until.map(|t| view! {
            <p role="note" data-testid="history-generated" class="mb-6 rounded-md border border-amber-200 bg-amber-50 px-4 py-3 text-sm text-amber-900">
                "Demo data: the history up to " {format_ms(t)} " was generated when the demo was seeded, not measured. "
                "Everything after it is the scheduler's own samples."
            </p>
        })}
        {nothing.then(|| view! {
            <p class="text-sm text-slate-600" data-testid="history-empty">"Nothing to show in this window yet: the scheduler stores a sample every minute, and a pool, group or queue appears once it has had GPUs or jobs."</p>
        })}
        <div class="space-y-10">
            {(!pools.is_empty()).then(|| view! {
                <div class="space-y-4">
                    <h2 class="text-lg font-semibold">"GPU allocation per pool"</h2>
                    <p class="text-sm text-slate-600">"A shared pool's numbers are every organization's use together. In GPUs, averaged over each bucket."</p>
                    {pools}
                </div>
            })}
            {(!groups.is_empty()).then(|| view! {
                <div class="space-y-4">
                    <h2 class="text-lg font-semibold">"GPU allocation per group"</h2>
                    {groups}
                </div>
            })}
            {(!queues.is_empty()).then(|| view! {
                <div class="space-y-4">
                    <h2 class="text-lg font-semibold">"Queues: depth and wait"</h2>
                    <p class="text-sm text-slate-600">"Waiting and running jobs are averages. Waits are those of the jobs that started in the bucket: the median is weighted by the jobs each sample saw start; p90 and p99 are the worst sample's, so one slow minute is not averaged away."</p>
                    {queues}
                </div>
            })}
        </div>
    }
}

fn pool_panels(f: &Frame, p: &PoolHistory) -> Vec<AnyView> {
    let pts = &p.points;
    let chart = f.chart(
        format!("GPUs of pool {}: in quota, over quota and idle", p.name),
        "GPUs",
        vec![
            series("In quota", IN_QUOTA, pts, |x| milli(x.in_quota_milli)),
            series("Over quota", OVER_QUOTA, pts, |x| milli(x.over_quota_milli)),
            series("Idle", IDLE, pts, |x| milli(x.idle_milli)),
        ],
    );
    let body = f
        .rows
        .iter()
        .filter_map(|&i| {
            pts[i].map(|x| {
                vec![
                    f.when(i),
                    gpu(x.in_quota_milli),
                    gpu(x.over_quota_milli),
                    gpu(x.idle_milli),
                ]
            })
        })
        .collect();
    let kind = if p.shared { " (shared)" } else { "" };
    let mut out = vec![panel(
        format!("{}{kind}", p.name),
        format!("history-pool-{}", p.name),
        chart.into_iter().collect(),
        ["Time", "In quota", "Over quota", "Idle"]
            .map(String::from)
            .to_vec(),
        body,
    )
    .into_any()];
    if !p.tenants.is_empty() {
        out.push(tenants_panel(f, p).into_any());
    }
    out
}

/// A shared pool by organization (platform admins): each one's use, and what is idle.
fn tenants_panel(f: &Frame, p: &PoolHistory) -> impl IntoView {
    let mut chart_series: Vec<_> = p
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let colour = TENANT_COLOURS[i % TENANT_COLOURS.len()];
            series(&t.tenant_name, colour, &t.points, |x| {
                milli(x.in_quota_milli + x.over_quota_milli)
            })
        })
        .collect();
    chart_series.push(series("Idle", IDLE, &p.points, |x| milli(x.idle_milli)));
    let chart = f.chart(
        format!(
            "GPUs of pool {} used by each organization, and idle",
            p.name
        ),
        "GPUs",
        chart_series,
    );
    let mut head = vec!["Time".to_string()];
    for t in &p.tenants {
        let granted = t
            .points
            .iter()
            .rev()
            .flatten()
            .next()
            .map_or(0, |x| x.granted_milli);
        head.push(format!("{} (granted {})", t.tenant_name, gpus(granted)));
    }
    head.push("Idle".into());
    let body = f
        .rows
        .iter()
        .map(|&i| {
            let mut row = vec![f.when(i)];
            for t in &p.tenants {
                row.push(match t.points[i] {
                    Some(x) if x.over_quota_milli > 0 => format!(
                        "{} ({} over)",
                        gpu(x.in_quota_milli + x.over_quota_milli),
                        gpu(x.over_quota_milli)
                    ),
                    Some(x) => gpu(x.in_quota_milli),
                    None => "0".into(),
                });
            }
            row.push(p.points[i].map_or_else(|| "—".into(), |x| gpu(x.idle_milli)));
            row
        })
        .collect();
    panel(
        format!("{} by organization", p.name),
        format!("history-tenants-{}", p.name),
        chart.into_iter().collect(),
        head,
        body,
    )
}

fn group_panel(f: &Frame, g: &GroupHistory) -> AnyView {
    let pts = &g.points;
    let chart = f.chart(
        format!(
            "GPUs of group {}: within its reservation, over quota, and reservation unused",
            g.name
        ),
        "GPUs",
        vec![
            series("In quota", IN_QUOTA, pts, |x| milli(x.in_quota_milli)),
            series("Over quota", OVER_QUOTA, pts, |x| milli(x.over_quota_milli)),
            series("Unused", UNUSED, pts, |x| milli(x.unused_reservation_milli)),
        ],
    );
    let body = f
        .rows
        .iter()
        .filter_map(|&i| {
            pts[i].map(|x| {
                vec![
                    f.when(i),
                    gpu(x.in_quota_milli),
                    gpu(x.over_quota_milli),
                    gpu(x.unused_reservation_milli),
                    count(x.running),
                    count(x.waiting),
                ]
            })
        })
        .collect();
    panel(
        g.name.clone(),
        format!("history-group-{}", g.name),
        chart.into_iter().collect(),
        [
            "Time",
            "In quota",
            "Over quota",
            "Unused reservation",
            "Running",
            "Waiting",
        ]
        .map(String::from)
        .to_vec(),
        body,
    )
    .into_any()
}

fn queue_panel(f: &Frame, q: &QueueHistory) -> AnyView {
    let pts = &q.points;
    let depth = f.chart(
        format!("Jobs of queue {}: waiting and running", q.name),
        "jobs",
        vec![
            series("Waiting", OVER_QUOTA, pts, |x| x.waiting),
            series("Running", IN_QUOTA, pts, |x| x.running),
        ],
    );
    // Stacked bars (short legend names, so the legend keeps to one line on a phone): each
    // bar's top is the 99th percentile, its segments end at p50 and p90.
    // In minutes when a wait took more than ten.
    let longest = pts
        .iter()
        .flatten()
        .filter_map(|x| x.wait_p99_ms)
        .max()
        .unwrap_or(0);
    let (unit, per) = if longest > 600_000 {
        ("minutes", 60_000.0)
    } else {
        ("seconds", 1000.0)
    };
    let secs = |ms: Option<i64>| ms.map_or(0.0, |v| (v as f64 / per * 10.0).round() / 10.0);
    let waits = f.chart(
        format!(
            "Waits in queue {}: median, 90th and 99th percentile, in {unit}",
            q.name
        ),
        unit,
        vec![
            series("p50", "#0ea5e9", pts, |x| secs(x.wait_p50_ms)),
            series("to p90", "#6366f1", pts, |x| {
                (secs(x.wait_p90_ms) - secs(x.wait_p50_ms)).max(0.0)
            }),
            series("to p99", "#a855f7", pts, |x| {
                (secs(x.wait_p99_ms) - secs(x.wait_p90_ms)).max(0.0)
            }),
        ],
    );
    let body = f
        .rows
        .iter()
        .filter_map(|&i| {
            pts[i].map(|x| {
                vec![
                    f.when(i),
                    count(x.waiting),
                    count(x.running),
                    x.started.to_string(),
                    wait(x.wait_p50_ms),
                    wait(x.wait_p90_ms),
                    wait(x.wait_p99_ms),
                ]
            })
        })
        .collect();
    let title = if q.group_name.is_empty() {
        q.name.clone()
    } else {
        format!("{} · {}", q.name, q.group_name)
    };
    panel(
        title,
        format!("history-queue-{}", q.name),
        depth.into_iter().chain(waits).collect(),
        [
            "Time", "Waiting", "Running", "Started", "Wait p50", "p90", "p99",
        ]
        .map(String::from)
        .to_vec(),
        body,
    )
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fit_their_window() {
        // 2026-12-02 17:04:00 UTC.
        let at = 1_796_231_040_000;
        assert_eq!(axis_label(HistoryWindow::Hour, at), "17:04");
        assert_eq!(axis_label(HistoryWindow::Week, at), "12-02 17:04");
        assert_eq!(row_label(HistoryWindow::Day, at), "12-02 17:04");
        assert_eq!(count(2.0), "2");
        assert_eq!(count(2.5), "2.5");
        assert_eq!(wait(None), "—");
        // A sample's eighths of a GPU are exact; an average is shown to a tenth.
        assert_eq!(gpu(125), "0.125");
        assert_eq!(gpu(5450), "5.5");
        assert_eq!(gpu(983), "1");
        assert_eq!(milli(9567), 9.6);
    }
}
