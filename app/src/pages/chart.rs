//! Charts drawn by ECharts after hydration (ECharts is served from `public/` as
//! `/echarts.min.js`). The server renders an empty, labelled frame; every chart sits beside a
//! table with the same numbers, so the page says everything before (and without) JavaScript.
//!
//! The browser builds the ECharts option as JSON text ([`option_json`]) and hands it to
//! `echarts.init(el).setOption(JSON.parse(..))` through two wasm-bindgen imports. It does not
//! link charming's typed option model and its renderer: they made up a fifth of the
//! WebAssembly bundle. charming stays the reference for the option's shape: a test builds the
//! same chart with charming and checks that both serialize to the same JSON.

use leptos::prelude::*;

/// One stacked bar per category: (series name, colour, values per category).
#[derive(Clone, Debug, PartialEq)]
pub struct Stacked {
    pub categories: Vec<String>,
    pub unit: String,
    pub series: Vec<(String, String, Vec<f64>)>,
}

/// One line per series over the categories: (series name, colour, values per category; a
/// value that is not finite leaves a gap).
#[derive(Clone, Debug, PartialEq)]
pub struct Lines {
    pub categories: Vec<String>,
    pub unit: String,
    pub series: Vec<(String, String, Vec<f64>)>,
}

/// `still`: drawn without ECharts' opening animation (a chart redrawn as its numbers refresh
/// would otherwise grow from nothing each time).
#[component]
pub fn StackedBars(
    id: &'static str,
    label: String,
    data: Stacked,
    #[prop(optional)] still: bool,
) -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        let option = option_json(&data, still);
        Effect::new(move |_| draw_when_loaded(id, option.clone(), 100));
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (&data, still);
    view! {
        <div id=id role="img" aria-label=label class="h-64 w-full" data-chart=id></div>
    }
}

/// A line chart, drawn without animation (see [`StackedBars`]' `still`).
#[component]
pub fn LineChart(id: &'static str, label: String, data: Lines) -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        let option = line_option_json(&data);
        Effect::new(move |_| draw_when_loaded(id, option.clone(), 100));
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = &data;
    view! {
        <div id=id role="img" aria-label=label class="h-64 w-full" data-chart=id></div>
    }
}

/// How a chart draws its series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    StackedBars,
    Lines,
}

/// The ECharts option of a stacked bar chart: the axis tooltip, the legend at the bottom, one
/// bar series per entry of `series`, all on the stack `total`; `still`: no animation.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub fn option_json(d: &Stacked, still: bool) -> String {
    build(&d.categories, &d.unit, &d.series, Shape::StackedBars, still)
}

/// The ECharts option of a line chart: as [`option_json`]'s, one line series per entry of
/// `series`, without animation. Its points keep their symbols: a point between two gaps (one
/// busy minute) is seen only by its symbol.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub fn line_option_json(d: &Lines) -> String {
    build(&d.categories, &d.unit, &d.series, Shape::Lines, true)
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn build(
    categories: &[String],
    unit: &str,
    series: &[(String, String, Vec<f64>)],
    shape: Shape,
    still: bool,
) -> String {
    let mut s = String::with_capacity(256);
    s.push('{');
    if still {
        s.push_str(r#""animation":false,"#);
    }
    s.push_str(r#""tooltip":{"trigger":"axis"},"legend":{"bottom":0},"#);
    s.push_str(r#""grid":[{"left":48,"right":16,"top":24,"bottom":48}],"#);
    s.push_str(r#""xAxis":{"type":"category","data":["#);
    for (i, c) in categories.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        push_str_json(&mut s, c);
    }
    s.push_str(r#"]},"yAxis":{"type":"value","name":"#);
    push_str_json(&mut s, unit);
    s.push_str(r#"},"series":["#);
    for (i, (name, colour, values)) in series.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        match shape {
            Shape::StackedBars => s.push_str(r#"{"type":"bar","name":"#),
            Shape::Lines => s.push_str(r#"{"type":"line","name":"#),
        }
        push_str_json(&mut s, name);
        match shape {
            Shape::StackedBars => s.push_str(r#","stack":"total","itemStyle":{"color":"#),
            Shape::Lines => {
                s.push_str(r#","lineStyle":{"color":"#);
                push_str_json(&mut s, colour);
                s.push_str(r#"},"itemStyle":{"color":"#);
            }
        }
        push_str_json(&mut s, colour);
        s.push_str(r#"},"data":["#);
        for (j, v) in values.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            if v.is_finite() {
                s.push_str(&v.to_string());
            } else {
                s.push_str("null");
            }
        }
        s.push_str("]}");
    }
    s.push_str("]}");
    s
}

/// A JSON string literal.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn push_str_json(s: &mut String, v: &str) {
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                s.push_str("\\u00");
                s.push(HEX[(c as usize) >> 4] as char);
                s.push(HEX[(c as usize) & 0xf] as char);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

#[cfg(feature = "hydrate")]
mod echarts {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        /// An ECharts instance.
        pub type Chart;

        /// `echarts.init(el)`: the chart takes the element's size.
        #[wasm_bindgen(js_namespace = echarts, js_name = init, catch)]
        pub fn init(el: &leptos::web_sys::Element) -> Result<Chart, JsValue>;

        #[wasm_bindgen(method, js_name = setOption)]
        pub fn set_option(this: &Chart, option: &JsValue);

        /// `chart.resize()`: takes the element's new size.
        #[wasm_bindgen(method)]
        pub fn resize(this: &Chart);

        /// `chart.dispose()`: frees the chart (its element may be gone already).
        #[wasm_bindgen(method)]
        pub fn dispose(this: &Chart);

        /// `JSON.parse(text)`.
        #[wasm_bindgen(js_namespace = JSON, js_name = parse, catch)]
        pub fn parse(text: &str) -> Result<JsValue, JsValue>;
    }
}

/// ECharts for the page's charts, once per page that draws any: the other pages never load
/// its megabyte. Server-rendered, it runs before the page hydrates; inserted by a navigation in
/// the browser, it loads while the chart waits ([`draw_when_loaded`]).
#[component]
pub fn ChartScript() -> impl IntoView {
    view! { <script src="/echarts.min.js" defer></script> }
}

/// Draws the chart once ECharts has loaded, trying again every 100 ms, `tries` times.
#[cfg(feature = "hydrate")]
fn draw_when_loaded(id: &'static str, option: String, tries: u32) {
    if draw(id, &option) || tries == 0 {
        return;
    }
    set_timeout(
        move || draw_when_loaded(id, option, tries - 1),
        std::time::Duration::from_millis(100),
    );
}

#[cfg(feature = "hydrate")]
thread_local! {
    /// The chart drawn under each id, with its resize listener. A chart drawn again under the
    /// same id (its numbers refreshed, the page opened again) replaces the one before, which
    /// is disposed: a page that redraws its charts every few seconds keeps one of each.
    static DRAWN: std::cell::RefCell<
        std::collections::HashMap<&'static str, (echarts::Chart, WindowListenerHandle)>,
    > = Default::default();
}

/// Draws the chart; false while ECharts is not loaded yet or the element not in the document
/// (a view made before it is attached).
#[cfg(feature = "hydrate")]
fn draw(id: &'static str, option: &str) -> bool {
    let Some(el) = document().get_element_by_id(id) else {
        return false;
    };
    if let Some((before, listener)) = DRAWN.with(|d| d.borrow_mut().remove(id)) {
        listener.remove();
        before.dispose();
    }
    // Without ECharts (blocked or not loaded) the table beside the chart still says it all.
    let Ok(chart) = echarts::init(&el) else {
        return false;
    };
    if let Ok(option) = echarts::parse(option) {
        chart.set_option(&option);
    }
    // The chart follows the window (a phone turned, a window resized).
    let resized: echarts::Chart = wasm_bindgen::JsCast::unchecked_into(chart.clone());
    let listener = window_event_listener(leptos::ev::resize, move |_| resized.resize());
    DRAWN.with(|d| d.borrow_mut().insert(id, (chart, listener)));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Stacked {
        Stacked {
            categories: vec!["h100-shared".into(), "a \"quoted\"\\ pool\n".into()],
            unit: "GPUs".into(),
            series: vec![
                ("in quota".into(), "#2563eb".into(), vec![3.0, 0.5]),
                ("idle".into(), "#cbd5e1".into(), vec![1.0, f64::NAN]),
            ],
        }
    }

    /// The hand-built option is what charming's typed model serializes to for the same chart.
    #[test]
    fn option_matches_charming() {
        use charming::component::{Axis, Grid, Legend};
        use charming::element::{AxisType, ItemStyle, Tooltip, Trigger};
        use charming::series::Bar;
        use charming::Chart;

        let d = sample();
        let mut chart = Chart::new()
            .tooltip(Tooltip::new().trigger(Trigger::Axis))
            .legend(Legend::new().bottom(0))
            .grid(Grid::new().left(48).right(16).top(24).bottom(48))
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .data(d.categories.clone()),
            )
            .y_axis(Axis::new().type_(AxisType::Value).name(d.unit.clone()));
        for (name, colour, values) in &d.series {
            chart = chart.series(
                Bar::new()
                    .name(name.clone())
                    .stack("total")
                    .item_style(ItemStyle::new().color(colour.clone()))
                    .data(values.clone()),
            );
        }
        let ours: serde_json::Value =
            serde_json::from_str(&option_json(&d, false)).expect("the option is JSON");
        let theirs = serde_json::to_value(&chart).expect("charming serializes");
        assert_eq!(numbers_as_f64(ours), numbers_as_f64(theirs));
    }

    /// The line chart's option is charming's too, without animation.
    #[test]
    fn line_option_matches_charming() {
        use charming::component::{Axis, Grid, Legend};
        use charming::element::{AxisType, ItemStyle, LineStyle, Tooltip, Trigger};
        use charming::series::Line;
        use charming::Chart;

        let s = sample();
        let d = Lines {
            categories: s.categories,
            unit: "ms".into(),
            series: s.series,
        };
        let mut chart = Chart::new()
            .animation(false)
            .tooltip(Tooltip::new().trigger(Trigger::Axis))
            .legend(Legend::new().bottom(0))
            .grid(Grid::new().left(48).right(16).top(24).bottom(48))
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .data(d.categories.clone()),
            )
            .y_axis(Axis::new().type_(AxisType::Value).name(d.unit.clone()));
        for (name, colour, values) in &d.series {
            chart = chart.series(
                Line::new()
                    .name(name.clone())
                    .line_style(LineStyle::new().color(colour.clone()))
                    .item_style(ItemStyle::new().color(colour.clone()))
                    .data(values.clone()),
            );
        }
        let ours: serde_json::Value =
            serde_json::from_str(&line_option_json(&d)).expect("the option is JSON");
        let theirs = serde_json::to_value(&chart).expect("charming serializes");
        assert_eq!(numbers_as_f64(ours), numbers_as_f64(theirs));
        // A gap stays a gap.
        assert!(line_option_json(&d).contains("[1,null]"));
    }

    /// `3` and `3.0` are the same number to ECharts (and JavaScript), not to serde_json.
    fn numbers_as_f64(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
            Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_f64).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, v)| (k, numbers_as_f64(v))).collect())
            }
            v => v,
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        let mut s = String::new();
        push_str_json(&mut s, "a\u{1}b");
        assert_eq!(s, r#""a\u0001b""#);
        let v: serde_json::Value = serde_json::from_str(&s).expect("JSON");
        assert_eq!(v, "a\u{1}b");
    }
}
