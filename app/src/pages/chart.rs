//! Charts drawn with charming's wasm renderer after hydration (ECharts is served from
//! `public/`). The server renders an empty, labelled frame; every chart sits beside a table
//! with the same numbers, so the page says everything before (and without) JavaScript.

use leptos::prelude::*;

/// One stacked bar per category: (series name, colour, values per category).
#[derive(Clone, Debug, PartialEq)]
pub struct Stacked {
    pub categories: Vec<String>,
    pub unit: String,
    pub series: Vec<(String, String, Vec<f64>)>,
}

#[component]
pub fn StackedBars(id: &'static str, label: String, data: Stacked) -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        let data = data.clone();
        Effect::new(move |_| draw(id, &data));
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = &data;
    view! {
        <div id=id role="img" aria-label=label class="h-64 w-full" data-chart=id></div>
    }
}

#[cfg(feature = "hydrate")]
fn draw(id: &str, d: &Stacked) {
    use charming::component::{Axis, Grid, Legend};
    use charming::element::{AxisType, ItemStyle, Tooltip, Trigger};
    use charming::series::Bar;
    use charming::{Chart, WasmRenderer};

    let width = web_sys_width(id).unwrap_or(640);
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
    let _ = WasmRenderer::new(width, 256).render(id, &chart);
}

#[cfg(feature = "hydrate")]
fn web_sys_width(id: &str) -> Option<u32> {
    let el = document().get_element_by_id(id)?;
    let w = el.client_width();
    (w > 0).then_some(w as u32)
}
