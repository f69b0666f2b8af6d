//! An endpoint's traffic over time, on its page: requests per minute by status class, time to
//! first byte p50/p95/p99 and the error rate, each a chart with a table of the same numbers
//! beside it; bytes, tokens and in flight; and each instance's requests, failures, in flight,
//! health and sessions over the window. From the gateway's samples every 10 s, over the last
//! 15 minutes (a point per sample) or hour (a point per minute), picked with plain links
//! (`?window=15m`). The tables are server-rendered and refreshed every 10 s; the charts are
//! drawn after hydration, and again with each refresh.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::chart::{LineChart, Lines, Stacked, StackedBars};
use super::policy::live_tick;
use super::units::{bytes_text, latency_text};
use crate::api::load_endpoint_traffic;
use crate::model::{EndpointTraffic, TrafficPoint, TrafficWindow};
use crate::time::format_ms;
use crate::ui::*;

const OK: &str = "#16a34a";
const CLIENT_ERROR: &str = "#f59e0b";
const SERVER_ERROR: &str = "#dc2626";
const OTHER: &str = "#94a3b8";
const P50: &str = "#4f46e5";
const P95: &str = "#f59e0b";
const P99: &str = "#dc2626";
/// The histogram's last bound, ms: a percentile there is at least that.
const LAST_BOUND_MS: f64 = 30_000.0;

#[component]
pub fn TrafficSection(endpoint_id: String) -> impl IntoView {
    let query = use_query_map();
    let window = Memo::new(move |_| {
        TrafficWindow::parse(query.read().get("window").as_deref()).unwrap_or_default()
    });
    let tick = live_tick(10);
    let id = endpoint_id.clone();
    let traffic = Resource::new(
        move || (id.clone(), window.get(), tick.get()),
        |(id, w, _)| load_endpoint_traffic(id, w.as_str().to_string()),
    );
    view! {
        <section id="traffic" class="mt-8 min-w-0 space-y-4" aria-labelledby="traffic-title" data-testid="traffic">
            <div class="flex flex-wrap items-center justify-between gap-3">
                <h2 id="traffic-title" class="text-lg font-semibold">"Traffic over time"</h2>
                <nav aria-label="Window" class="flex flex-wrap gap-2 text-sm">
                    {TrafficWindow::ALL
                        .into_iter()
                        .map(|w| {
                            let current = move || (window.get() == w).then_some("page");
                            view! {
                                <a href=format!("/endpoints/{endpoint_id}?window={}#traffic", w.as_str())
                                    aria-current=current
                                    class="rounded-md border border-slate-300 bg-white px-3 py-1.5 text-slate-700 hover:bg-slate-50 aria-[current=page]:border-indigo-600 aria-[current=page]:bg-indigo-600 aria-[current=page]:text-white">
                                    {w.label()}
                                </a>
                            }
                        })
                        .collect_view()}
                </nav>
            </div>
            <p class="text-sm text-slate-600">
                "Sampled every 10 s and kept for an hour. Times are UTC; intervals without requests are left out of the tables."
            </p>
            <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match traffic.await {
                        Ok(t) => view! { <TrafficView t=t/> }.into_any(),
                        Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// A point's time as the axis and the table show it: to the second for samples, to the
/// minute for minutes.
fn time_label(window: TrafficWindow, at: i64) -> String {
    let t = format_ms(at); // `2026-12-02 17:04:05 UTC`
    let range = match window.step_ms() {
        None => 11..19,
        Some(_) => 11..16,
    };
    t.get(range).map_or_else(|| t.clone(), str::to_string)
}

/// The window as a sentence says it.
fn span(w: TrafficWindow) -> &'static str {
    match w {
        TrafficWindow::Minutes15 => "last 15 minutes",
        TrafficWindow::Hour => "last hour",
    }
}

/// A rate, to a tenth: `6`, `1.5`.
fn rate(v: f64) -> String {
    let v = (v * 10.0).round() / 10.0;
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn percent(share: f64) -> String {
    rate((share * 1000.0).round() / 10.0) + " %"
}

fn ttfb(ms: Option<f64>) -> String {
    latency_text(ms.map(|v| (v, v >= LAST_BOUND_MS)))
}

/// Requests of classes 1xx and 3xx (informational, redirects: few on an inference endpoint).
fn other(p: &TrafficPoint) -> u64 {
    p.by_class[0] + p.by_class[2]
}

/// One instance over the window.
struct InstanceRow {
    address: String,
    healthy: bool,
    requests: u64,
    failures: u64,
    in_flight: u64,
    sessions: u64,
}

/// Each instance's requests and failures over the window, its health and in flight as at its
/// last point, its busiest sample's sessions; by address.
fn instance_rows(points: &[TrafficPoint]) -> Vec<InstanceRow> {
    let mut rows: Vec<(String, InstanceRow)> = Vec::new();
    for i in points.iter().flat_map(|p| &p.instances) {
        let at = match rows.iter().position(|(id, _)| *id == i.target_id) {
            Some(at) => at,
            None => {
                rows.push((
                    i.target_id.clone(),
                    InstanceRow {
                        address: i.address.clone(),
                        healthy: i.healthy,
                        requests: 0,
                        failures: 0,
                        in_flight: 0,
                        sessions: 0,
                    },
                ));
                rows.len() - 1
            }
        };
        let r = &mut rows[at].1;
        r.requests += i.requests;
        r.failures += i.failures;
        r.in_flight = i.in_flight;
        r.healthy = i.healthy;
        r.sessions = r.sessions.max(i.sessions);
    }
    let mut rows: Vec<InstanceRow> = rows.into_iter().map(|(_, r)| r).collect();
    rows.sort_by(|a, b| a.address.cmp(&b.address));
    rows
}

#[component]
fn TrafficView(t: EndpointTraffic) -> impl IntoView {
    if t.is_quiet() {
        return view! {
            <p class="rounded-lg border border-slate-200 bg-white px-4 py-6 text-sm text-slate-600 shadow-sm" data-testid="traffic-empty">
                {format!("No requests in the {} yet: the gateway samples the endpoint's traffic every 10 s, and the charts and tables fill in as requests come.", span(t.window))}
            </p>
        }
        .into_any();
    }
    let w = t.window;
    let pts = &t.points;
    let labels: Vec<String> = pts.iter().map(|p| time_label(w, p.at)).collect();
    // The tables: intervals with requests (or some in flight), the newest first.
    let busy: Vec<&TrafficPoint> = pts
        .iter()
        .rev()
        .filter(|p| p.requests > 0 || p.in_flight > 0)
        .collect();
    let when = |p: &TrafficPoint| time_label(w, p.at);
    let per_minute = |class: Option<usize>, colour: &str, name: &str| {
        let values = pts
            .iter()
            .map(|p| {
                let n = class.map_or_else(|| other(p), |c| p.by_class[c]);
                (p.per_minute(n) * 10.0).round() / 10.0
            })
            .collect();
        (name.to_string(), colour.to_string(), values)
    };
    let requests = Stacked {
        categories: labels.clone(),
        unit: "req/min".into(),
        series: vec![
            per_minute(Some(1), OK, "2xx"),
            per_minute(Some(3), CLIENT_ERROR, "4xx"),
            per_minute(Some(4), SERVER_ERROR, "5xx"),
            per_minute(None, OTHER, "1xx/3xx"),
        ],
    };
    let line = |name: &str, colour: &str, value: fn(&TrafficPoint) -> Option<f64>| {
        let values = pts.iter().map(|p| value(p).unwrap_or(f64::NAN)).collect();
        (name.to_string(), colour.to_string(), values)
    };
    let latency = Lines {
        categories: labels.clone(),
        unit: "ms".into(),
        series: vec![
            line("p50", P50, |p| p.ttfb_p50_ms),
            line("p95", P95, |p| p.ttfb_p95_ms),
            line("p99", P99, |p| p.ttfb_p99_ms),
        ],
    };
    let errors = Lines {
        categories: labels,
        unit: "%".into(),
        series: vec![line("5xx share", SERVER_ERROR, |p| {
            (p.requests > 0).then(|| (p.error_rate * 1000.0).round() / 10.0)
        })],
    };
    let requests_rows = busy
        .iter()
        .map(|p| {
            vec![
                when(p),
                p.requests.to_string(),
                rate(p.per_minute(p.by_class[1])),
                rate(p.per_minute(p.by_class[3])),
                rate(p.per_minute(p.by_class[4])),
                rate(p.per_minute(other(p))),
            ]
        })
        .collect();
    let latency_rows = busy
        .iter()
        .filter(|p| p.requests > 0)
        .map(|p| {
            vec![
                when(p),
                ttfb(p.ttfb_p50_ms),
                ttfb(p.ttfb_p95_ms),
                ttfb(p.ttfb_p99_ms),
            ]
        })
        .collect();
    let error_rows = busy
        .iter()
        .filter(|p| p.requests > 0)
        .map(|p| {
            vec![
                when(p),
                p.requests.to_string(),
                p.by_class[4].to_string(),
                percent(p.error_rate),
            ]
        })
        .collect();
    let bytes_rows = busy
        .iter()
        .map(|p| {
            vec![
                when(p),
                bytes_text(p.bytes_in),
                bytes_text(p.bytes_out),
                p.prompt_tokens.to_string(),
                p.completion_tokens.to_string(),
                p.in_flight.to_string(),
            ]
        })
        .collect();
    let instances = instance_rows(pts);
    view! {
        {panel(
            "Requests per minute by status class",
            "traffic-requests",
            Some(view! { <StackedBars id="traffic-requests-chart" label="Requests per minute by status class".to_string() data=requests still=true/> }.into_any()),
            &[("Time", true), ("Requests", true), ("2xx /min", true), ("4xx /min", false), ("5xx /min", true), ("1xx/3xx /min", false)],
            requests_rows,
        )}
        {panel(
            "Time to first byte",
            "traffic-latency",
            Some(view! { <LineChart id="traffic-latency-chart" label="Time to first byte, p50, p95 and p99, in milliseconds".to_string() data=latency/> }.into_any()),
            &[("Time", true), ("p50", true), ("p95", true), ("p99", true)],
            latency_rows,
        )}
        {panel(
            "Error rate (answered 5xx)",
            "traffic-errors",
            Some(view! { <LineChart id="traffic-errors-chart" label="Share of requests answered 5xx, in percent".to_string() data=errors/> }.into_any()),
            &[("Time", true), ("Requests", true), ("5xx", true), ("Error rate", true)],
            error_rows,
        )}
        {panel(
            "Bytes, tokens and in flight",
            "traffic-bytes",
            None,
            &[("Time", true), ("Bytes in", true), ("Bytes out", true), ("Prompt tokens", false), ("Completion tokens", false), ("In flight", true)],
            bytes_rows,
        )}
        <InstancesPanel rows=instances/>
    }
    .into_any()
}

/// Columns left out on a phone, where the others fill the card.
const WIDE: &str = "hidden sm:table-cell";

/// A card with its chart on one side and its table on the other (stacked below `lg`); without
/// a chart, the table across. `head`: each column's name, and whether a phone shows it.
fn panel(
    title: &'static str,
    testid: &'static str,
    chart: Option<AnyView>,
    head: &[(&'static str, bool)],
    body: Vec<Vec<String>>,
) -> impl IntoView {
    let phone: Vec<bool> = head.iter().map(|(_, shown)| *shown).collect();
    let column = move |i: usize| {
        let wide = if phone.get(i).copied().unwrap_or(true) {
            ""
        } else {
            WIDE
        };
        let align = if i == 0 { "" } else { "text-right" };
        format!("{wide} {align}")
    };
    let head: Vec<&'static str> = head.iter().map(|(name, _)| *name).collect();
    let grid = if chart.is_some() {
        "grid gap-4 p-4 sm:p-5 lg:grid-cols-[minmax(0,2fr)_minmax(0,3fr)]"
    } else {
        "p-4 sm:p-5"
    };
    view! {
        <section class="min-w-0 rounded-lg border border-slate-200 bg-white shadow-sm" data-testid=testid>
            <h3 class="border-b border-slate-100 px-4 py-3 text-sm font-semibold text-slate-700 sm:px-5">{title}</h3>
            <div class=grid>
                {chart.map(|c| view! { <div class="min-w-0 overflow-x-auto">{c}</div> })}
                // Long and wide tables scroll inside the card, never the page.
                <div class="max-h-80 min-w-0 overflow-auto">
                    <table class=TABLE data-testid=format!("{testid}-table")>
                        <thead class="sticky top-0 bg-white"><tr>
                            {head.into_iter().enumerate().map(|(i, h)| {
                                view! { <th class=format!("{TH} whitespace-nowrap {}", column(i))>{h}</th> }
                            }).collect_view()}
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {body.into_iter().map(|row| view! {
                                <tr>
                                    {row.into_iter().enumerate().map(|(i, c)| {
                                        let tone = if i == 0 { "text-slate-600" } else { "tabular-nums" };
                                        view! { <td class=format!("{TD} whitespace-nowrap {tone} {}", column(i))>{c}</td> }
                                    }).collect_view()}
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            </div>
        </section>
    }
}

fn health_badge(healthy: bool) -> impl IntoView {
    let (text, class) = if healthy {
        ("healthy", "bg-green-100 text-green-800")
    } else {
        ("unhealthy", "bg-red-100 text-red-800")
    };
    view! { <span class=format!("rounded px-2 py-0.5 text-xs font-medium {class}")>{text}</span> }
}

/// Each instance over the window: a table from `sm` up, a short list per instance on a phone
/// (six columns do not fit its width).
#[component]
fn InstancesPanel(rows: Vec<InstanceRow>) -> impl IntoView {
    let body = if rows.is_empty() {
        view! { <p class="text-sm text-slate-600">"No instance was registered in this window."</p> }
            .into_any()
    } else {
        let num = format!("{TD} text-right tabular-nums");
        view! {
            <ul class="divide-y divide-slate-100 sm:hidden" data-testid="traffic-instances-list">
                {rows.iter().map(|r| view! {
                    <li class="py-3 first:pt-0">
                        <div class="flex items-center justify-between gap-2">
                            <span class="truncate font-mono text-xs">{r.address.clone()}</span>
                            {health_badge(r.healthy)}
                        </div>
                        <dl class="mt-2 grid grid-cols-2 gap-x-4 gap-y-1 text-sm">
                            <dt class="text-slate-500">"Requests"</dt><dd class="text-right tabular-nums">{r.requests}</dd>
                            <dt class="text-slate-500">"Failures"</dt><dd class="text-right tabular-nums">{r.failures}</dd>
                            <dt class="text-slate-500">"In flight"</dt><dd class="text-right tabular-nums">{r.in_flight}</dd>
                            <dt class="text-slate-500">"Sessions (busiest 10 s)"</dt><dd class="text-right tabular-nums">{r.sessions}</dd>
                        </dl>
                    </li>
                }).collect_view()}
            </ul>
            <table class=format!("{TABLE} hidden sm:table") data-testid="traffic-instances-table">
                <thead><tr>
                    <th class=format!("{TH} whitespace-nowrap")>"Instance"</th>
                    <th class=format!("{TH} whitespace-nowrap")>"Health"</th>
                    <th class=format!("{TH} whitespace-nowrap text-right")>"Requests"</th>
                    <th class=format!("{TH} whitespace-nowrap text-right")>"Failures"</th>
                    <th class=format!("{TH} whitespace-nowrap text-right")>"In flight"</th>
                    <th class=format!("{TH} whitespace-nowrap text-right")>"Sessions (busiest 10 s)"</th>
                </tr></thead>
                <tbody class="divide-y divide-slate-100">
                    {rows.into_iter().map(|r| view! {
                        <tr data-instance=r.address.clone()>
                            <td class=format!("{TD} whitespace-nowrap font-mono text-xs")>{r.address.clone()}</td>
                            <td class=TD>{health_badge(r.healthy)}</td>
                            <td class=num.clone()>{r.requests}</td>
                            <td class=num.clone()>{r.failures}</td>
                            <td class=num.clone()>{r.in_flight}</td>
                            <td class=num.clone()>{r.sessions}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <section class="min-w-0 rounded-lg border border-slate-200 bg-white shadow-sm" data-testid="traffic-instances">
            <h3 class="border-b border-slate-100 px-4 py-3 text-sm font-semibold text-slate-700 sm:px-5">"Instances over the window"</h3>
            <div class="min-w-0 overflow-x-auto p-4 sm:p-5">{body}</div>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InstancePoint;

    fn point(at: i64, instances: Vec<InstancePoint>) -> TrafficPoint {
        TrafficPoint {
            at,
            span_ms: 10_000,
            instances,
            ..Default::default()
        }
    }

    fn inst(id: &str, requests: u64, healthy: bool, sessions: u64) -> InstancePoint {
        InstancePoint {
            target_id: id.into(),
            address: format!("{id}:8000"),
            requests,
            failures: 1,
            in_flight: requests,
            healthy,
            sessions,
        }
    }

    #[test]
    fn instances_add_up_over_the_window() {
        let rows = instance_rows(&[
            point(1, vec![inst("b", 4, true, 3), inst("a", 1, true, 1)]),
            point(2, vec![inst("b", 2, false, 2)]),
        ]);
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.address.as_str(),
                    r.requests,
                    r.failures,
                    r.in_flight,
                    r.healthy,
                    r.sessions,
                )
            })
            .collect();
        assert_eq!(
            got,
            [("a:8000", 1, 1, 1, true, 1), ("b:8000", 6, 2, 2, false, 3)]
        );
    }

    #[test]
    fn numbers_read_as_people_say_them() {
        assert_eq!(rate(6.0), "6");
        assert_eq!(rate(1.24), "1.2");
        assert_eq!(rate(1.25), "1.3");
        assert_eq!(percent(1.0 / 3.0), "33.3 %");
        assert_eq!(percent(0.0), "0 %");
        assert_eq!(ttfb(Some(30_000.0)), "> 30.00 s");
        assert_eq!(ttfb(Some(6.25)), "6.2 ms");
        assert_eq!(ttfb(None), "—");
        let at = 1_767_225_845_000; // 2026-01-01 00:04:05 UTC
        assert_eq!(time_label(TrafficWindow::Minutes15, at), "00:04:05");
        assert_eq!(time_label(TrafficWindow::Hour, at), "00:04");
    }
}
