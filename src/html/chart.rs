//! Small SVG charts: bars, step lines, a timeline of marks and swimlanes of several kinds of
//! happening per row, each an accessible image.
//!
//! Owns: the drawing (scales, axes with round ticks, legends) and the accessibility every
//! chart carries: `role="img"`, a `<title>` and `<desc>` it is labelled by, colours from
//! [`PALETTE`] (each at least 4.5:1 against white, WCAG AA for text) and a second carrier of
//! meaning beside colour (dash patterns for lines, shapes for marks, named legends). The data
//! table that goes with each chart is the caller's. Must not: know what the numbers mean;
//! take markup (labels are text, escaped by [`super::el`]).

use super::{Html, el, number};

/// Series colours, each at least 4.5:1 against the white page (checked by a test), in an
/// order where neighbours differ in hue and lightness.
pub const PALETTE: [&str; 5] = ["#1f4e9c", "#b34700", "#2e7d32", "#7b1fa2", "#c62828"];

/// The colour of marks that mean failure (also drawn as a cross, never only red).
pub const FAILURE: &str = "#c62828";

/// Dash patterns: the second carrier of a series' identity ([`series_style`]).
const DASHES: [&str; 5] = ["", "8 4", "2 3", "10 3 2 3", "4 4"];

/// The colour and dash pattern of series `index`: the dash shifts by one each time the
/// colours wrap around, so the first `PALETTE.len() * DASHES.len()` (25) series of a chart
/// each get a pair of their own (series 6 would otherwise look exactly like series 1).
pub fn series_style(index: usize) -> (&'static str, &'static str) {
    let colour = index % PALETTE.len();
    let dash = (index + index / PALETTE.len()) % DASHES.len();
    (PALETTE[colour], DASHES[dash])
}

/// Axis and text colour (about 15:1 against white) and the faint grid.
const INK: &str = "#1a1a1a";
const GRID: &str = "#d0d0d0";

const WIDTH: f64 = 760.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 48.0;

/// One bar: its label on the x axis and its height.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
}

/// A bar chart (a histogram when the labels are bins).
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub title: String,
    pub desc: String,
    pub x_label: String,
    pub y_label: String,
    pub bars: Vec<Bar>,
}

/// A named line of (x, y) points, drawn as steps (a count that changes at each point).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Step lines over a shared x axis (seconds), with a legend naming each line.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines {
    pub title: String,
    pub desc: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// One happening on a timeline lane: at `at` seconds, lasting until `until` when known.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub at: f64,
    pub until: Option<f64>,
    pub failed: bool,
    /// Shown as the mark's tooltip (`<title>`).
    pub label: String,
}

/// A named row of marks.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub name: String,
    pub marks: Vec<Mark>,
}

/// Lanes of marks over time (seconds from `0` to `x_max`).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub title: String,
    pub desc: String,
    pub x_label: String,
    pub x_max: f64,
    pub lanes: Vec<Lane>,
    /// Explain the marks below the chart (succeeded, lasting, failed).
    pub legend: bool,
}

/// A labelled chart image: `<svg role="img" aria-labelledby="<id>-t <id>-d">`.
fn frame(id: &str, title: &str, desc: &str, height: f64, body: Html) -> Html {
    let title_id = format!("{id}-t");
    let desc_id = format!("{id}-d");
    el("svg")
        .attr("xmlns", "http://www.w3.org/2000/svg")
        .attr(
            "viewBox",
            format!("0 0 {} {}", number(WIDTH), number(height)),
        )
        .attr("role", "img")
        .attr("aria-labelledby", format!("{title_id} {desc_id}"))
        .attr("class", "chart")
        .attr("font-family", "sans-serif")
        .attr("font-size", "12")
        .child(el("title").attr("id", &title_id).text(title))
        .child(el("desc").attr("id", &desc_id).text(desc))
        .child(body)
        .into()
}

/// Round tick values from 0 to at least `max` (steps of 1, 2 or 5 times a power of ten).
pub fn ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let rough = max / 5.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// A duration in seconds as a tick label: `45s`, `2m`, `2m30s`, `1h5m`.
pub fn seconds_label(seconds: f64) -> String {
    let s = seconds.round().max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 if s.is_multiple_of(60) => format!("{}m", s / 60),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

/// A count as a tick label (no decimals for whole numbers).
fn count_label(value: f64) -> String {
    number(value)
}

struct Plot {
    height: f64,
    x_max: f64,
    y_max: f64,
}

impl Plot {
    fn bottom(&self) -> f64 {
        self.height - BOTTOM
    }
    fn x(&self, value: f64) -> f64 {
        LEFT + (value / self.x_max).clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }
    fn y(&self, value: f64) -> f64 {
        self.bottom() - (value / self.y_max).clamp(0.0, 1.0) * (self.bottom() - TOP)
    }

    /// Horizontal grid lines with their labels, and the y axis title.
    fn y_axis(&self, ticks: &[f64], label: &str) -> Html {
        let mut out = Html::new();
        for &tick in ticks {
            let y = self.y(tick);
            out.push(line(LEFT, y, WIDTH - RIGHT, y, GRID));
            out.push(
                el("text")
                    .num("x", LEFT - 6.0)
                    .num("y", y + 4.0)
                    .attr("text-anchor", "end")
                    .attr("fill", INK)
                    .text(count_label(tick)),
            );
        }
        out.push(
            el("text")
                .attr(
                    "transform",
                    format!(
                        "translate(14 {}) rotate(-90)",
                        number((TOP + self.bottom()) / 2.0)
                    ),
                )
                .attr("text-anchor", "middle")
                .attr("fill", INK)
                .text(label),
        );
        out.push(line(LEFT, TOP, LEFT, self.bottom(), INK));
        out
    }

    /// The x axis line, tick labels from `ticks` (value, label) and its title.
    fn x_axis(&self, ticks: &[(f64, String)], label: &str) -> Html {
        let mut out = Html::new();
        out.push(line(LEFT, self.bottom(), WIDTH - RIGHT, self.bottom(), INK));
        for (at, text) in ticks {
            let x = self.x(*at);
            out.push(line(x, self.bottom(), x, self.bottom() + 4.0, INK));
            out.push(
                el("text")
                    .num("x", x)
                    .num("y", self.bottom() + 17.0)
                    .attr("text-anchor", "middle")
                    .attr("fill", INK)
                    .text(text),
            );
        }
        out.push(
            el("text")
                .num("x", (LEFT + WIDTH - RIGHT) / 2.0)
                .num("y", self.height - 6.0)
                .attr("text-anchor", "middle")
                .attr("fill", INK)
                .text(label),
        );
        out
    }
}

fn line(x1: f64, y1: f64, x2: f64, y2: f64, stroke: &'static str) -> Html {
    el("line")
        .num("x1", x1)
        .num("y1", y1)
        .num("x2", x2)
        .num("y2", y2)
        .attr("stroke", stroke)
        .into()
}

/// A bar chart; `id` makes its title and description ids unique on the page.
pub fn bars(id: &str, chart: &Bars) -> Html {
    let height = 280.0;
    let y_ticks = ticks(chart.bars.iter().map(|b| b.value).fold(0.0, f64::max));
    let plot = Plot {
        height,
        x_max: chart.bars.len().max(1) as f64,
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    let mut body = plot.y_axis(&y_ticks, &chart.y_label);
    let slot = (WIDTH - LEFT - RIGHT) / plot.x_max;
    for (i, bar) in chart.bars.iter().enumerate() {
        let top = plot.y(bar.value);
        body.push(
            el("rect")
                .num("x", plot.x(i as f64) + slot * 0.1)
                .num("y", top)
                .num("width", slot * 0.8)
                .num("height", plot.bottom() - top)
                .attr("fill", PALETTE[0])
                .child(el("title").text(format!("{}: {}", bar.label, number(bar.value)))),
        );
    }
    // Every label when they fit, else every k-th: a character needs about 7 px at 12 px.
    let longest = chart
        .bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(1);
    let every = (((longest as f64 * 7.0 + 10.0) / slot).ceil() as usize).max(1);
    let x_ticks: Vec<(f64, String)> = chart
        .bars
        .iter()
        .enumerate()
        .filter(|(i, _)| i % every == 0)
        .map(|(i, bar)| (i as f64 + 0.5, bar.label.clone()))
        .collect();
    body.push(plot.x_axis(&x_ticks, &chart.x_label));
    frame(id, &chart.title, &chart.desc, height, body)
}

/// Step lines; each series gets a colour, a dash pattern and a legend entry with its name.
pub fn lines(id: &str, chart: &Lines) -> Html {
    lines_marked(id, chart, &[])
}

/// A verdict on a line chart: at (x, y), a short word drawn beside it (PASS, BELOW) and a
/// tooltip; failures as a cross, others as a ring, so the shape and the word carry it, not
/// the colour.
#[derive(Debug, Clone, PartialEq)]
pub struct PointMark {
    pub at: (f64, f64),
    pub word: String,
    pub label: String,
    pub failed: bool,
}

/// [`lines`] with verdict marks drawn over the lines.
pub fn lines_marked(id: &str, chart: &Lines, marks: &[PointMark]) -> Html {
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let x_ticks = ticks(points().map(|p| p.0).fold(0.0, f64::max));
    let y_ticks = ticks(points().map(|p| p.1).fold(0.0, f64::max));
    let legend_rows = chart.series.len().div_ceil(3) as f64;
    let height = 300.0 + legend_rows * 22.0 + 6.0;
    let plot = Plot {
        height: 300.0,
        x_max: *x_ticks.last().unwrap_or(&1.0),
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    let mut body = plot.y_axis(&y_ticks, &chart.y_label);
    let labelled: Vec<(f64, String)> = x_ticks.iter().map(|t| (*t, seconds_label(*t))).collect();
    body.push(plot.x_axis(&labelled, &chart.x_label));
    for (i, series) in chart.series.iter().enumerate() {
        body.push(step_path(&plot, series, i));
        body.push(legend_entry(
            i,
            &series.name,
            plot.height + 14.0 + 22.0 * (i / 3) as f64,
        ));
    }
    for mark in marks {
        body.push(point_mark(&plot, mark));
    }
    frame(id, &chart.title, &chart.desc, height, body)
}

fn point_mark(plot: &Plot, mark: &PointMark) -> Html {
    let (x, y) = (plot.x(mark.at.0), plot.y(mark.at.1));
    let shape: Html = match mark.failed {
        true => el("path")
            .attr(
                "d",
                format!(
                    "M{} {}L{} {}M{} {}L{} {}",
                    number(x - 5.0),
                    number(y - 5.0),
                    number(x + 5.0),
                    number(y + 5.0),
                    number(x - 5.0),
                    number(y + 5.0),
                    number(x + 5.0),
                    number(y - 5.0)
                ),
            )
            .attr("stroke", FAILURE)
            .attr("stroke-width", "2.5")
            .into(),
        false => el("circle")
            .num("cx", x)
            .num("cy", y)
            .num("r", 4.5)
            .attr("fill", "none")
            .attr("stroke", INK)
            .attr("stroke-width", "1.5")
            .into(),
    };
    // The word sits left of the mark when the mark is near the right edge.
    let (tx, anchor) = match x > WIDTH - RIGHT - 80.0 {
        true => (x - 8.0, "end"),
        false => (x + 8.0, "start"),
    };
    el("g")
        .child(el("title").text(&mark.label))
        .child(shape)
        .child(
            el("text")
                .num("x", tx)
                .num("y", y - 6.0)
                .attr("text-anchor", anchor)
                .attr("font-size", "11")
                .attr("fill", INK)
                .text(crate::terminal::safe(&mark.word, 24)),
        )
        .into()
}

fn step_path(plot: &Plot, series: &Series, index: usize) -> Html {
    let mut d = String::new();
    let mut last_y = plot.y(0.0);
    for (n, &(x, y)) in series.points.iter().enumerate() {
        let (px, py) = (number(plot.x(x)), number(plot.y(y)));
        if n == 0 {
            d.push_str(&format!("M{px} {}V{py}", number(last_y)));
        } else {
            d.push_str(&format!("H{px}V{py}"));
        }
        last_y = plot.y(y);
    }
    let (colour, dash) = series_style(index);
    let mut path = el("path")
        .attr("d", d)
        .attr("fill", "none")
        .attr("stroke", colour)
        .attr("stroke-width", "2");
    if !dash.is_empty() {
        path = path.attr("stroke-dasharray", dash);
    }
    path.child(el("title").text(&series.name)).into()
}

fn legend_entry(index: usize, name: &str, y: f64) -> Html {
    let x = LEFT + (index % 3) as f64 * 230.0;
    let (colour, dash) = series_style(index);
    let mut sample = el("line")
        .num("x1", x)
        .num("y1", y)
        .num("x2", x + 32.0)
        .num("y2", y)
        .attr("stroke", colour)
        .attr("stroke-width", "2");
    if !dash.is_empty() {
        sample = sample.attr("stroke-dasharray", dash);
    }
    el("g")
        .child(sample)
        .child(
            el("text")
                .num("x", x + 38.0)
                .num("y", y + 4.0)
                .attr("fill", INK)
                .text(crate::terminal::safe(name, 32)),
        )
        .into()
}

/// A timeline: one lane per row, succeeded marks as filled circles (a bar when they last),
/// failed ones as crosses, both with their label as a tooltip.
pub fn timeline(id: &str, chart: &Timeline) -> Html {
    let lane_height = 32.0;
    let height = TOP + BOTTOM + lane_height * chart.lanes.len().max(1) as f64 + 24.0;
    let x_ticks = ticks(chart.x_max);
    let plot = Plot {
        height: height - 24.0,
        x_max: *x_ticks.last().unwrap_or(&1.0),
        y_max: 1.0,
    };
    let left = LEFT + 56.0;
    let plot_x =
        |t: f64| left + (plot.x(t) - LEFT) * (WIDTH - RIGHT - left) / (WIDTH - RIGHT - LEFT);
    let mut body = Html::new();
    for (row, lane) in chart.lanes.iter().enumerate() {
        let y = TOP + lane_height * (row as f64 + 0.5);
        body.push(line(left, y, WIDTH - RIGHT, y, GRID));
        body.push(
            el("text")
                .num("x", left - 6.0)
                .num("y", y + 4.0)
                .attr("text-anchor", "end")
                .attr("fill", INK)
                .text(crate::terminal::safe(&lane.name, 18)),
        );
        let colour = PALETTE[row % PALETTE.len()];
        for mark in &lane.marks {
            body.push(mark_shape(
                mark,
                plot_x(mark.at),
                mark.until.map(plot_x),
                y,
                colour,
            ));
        }
    }
    let bottom = plot.bottom();
    body.push(line(left, bottom, WIDTH - RIGHT, bottom, INK));
    for &tick in &x_ticks {
        let x = plot_x(tick);
        body.push(line(x, bottom, x, bottom + 4.0, INK));
        body.push(
            el("text")
                .num("x", x)
                .num("y", bottom + 17.0)
                .attr("text-anchor", "middle")
                .attr("fill", INK)
                .text(seconds_label(tick)),
        );
    }
    body.push(
        el("text")
            .num("x", (left + WIDTH - RIGHT) / 2.0)
            .num("y", bottom + 36.0)
            .attr("text-anchor", "middle")
            .attr("fill", INK)
            .text(&chart.x_label),
    );
    if chart.legend {
        body.push(timeline_legend(left, height - 10.0));
    }
    frame(id, &chart.title, &chart.desc, height, body)
}

fn mark_shape(mark: &Mark, x: f64, until: Option<f64>, y: f64, colour: &'static str) -> Html {
    let tooltip = el("title").text(&mark.label);
    if mark.failed {
        let d = format!(
            "M{} {}L{} {}M{} {}L{} {}",
            number(x - 5.0),
            number(y - 5.0),
            number(x + 5.0),
            number(y + 5.0),
            number(x - 5.0),
            number(y + 5.0),
            number(x + 5.0),
            number(y - 5.0)
        );
        return el("path")
            .attr("d", d)
            .attr("stroke", FAILURE)
            .attr("stroke-width", "2.5")
            .child(tooltip)
            .into();
    }
    match until {
        Some(end) if end - x >= 2.0 => el("rect")
            .num("x", x)
            .num("y", y - 5.0)
            .num("width", end - x)
            .num("height", 10.0)
            .num("rx", 3.0)
            .attr("fill", colour)
            .attr("fill-opacity", "0.85")
            .child(tooltip)
            .into(),
        _ => el("circle")
            .num("cx", x)
            .num("cy", y)
            .num("r", 4.5)
            .attr("fill", colour)
            .child(tooltip)
            .into(),
    }
}

fn timeline_legend(x: f64, y: f64) -> Html {
    el("g")
        .child(
            el("circle")
                .num("cx", x)
                .num("cy", y - 4.0)
                .num("r", 4.5)
                .attr("fill", PALETTE[0]),
        )
        .child(
            el("text")
                .num("x", x + 10.0)
                .num("y", y)
                .attr("fill", INK)
                .text("succeeded (a bar while it lasted)"),
        )
        .child(
            el("path")
                .attr(
                    "d",
                    format!(
                        "M{} {}l10 10m-10 0l10 -10",
                        number(x + 245.0),
                        number(y - 9.0)
                    ),
                )
                .attr("stroke", FAILURE)
                .attr("stroke-width", "2.5"),
        )
        .child(
            el("text")
                .num("x", x + 262.0)
                .num("y", y)
                .attr("fill", INK)
                .text("failed"),
        )
        .into()
}

/// How one kind of happening is drawn on [`Swimlanes`]: a bar (filled, or an outline with a
/// white inside) while it lasts, or a glyph at its moment. Shape, not colour, tells the kinds
/// apart; the legend names each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Bar,
    OutlinedBar,
    Diamond,
    Triangle,
    /// The failure cross (drawn in [`FAILURE`] whatever the kind's colour).
    Cross,
}

/// One kind of item: its legend name, shape and colour (from [`PALETTE`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Kind {
    pub name: String,
    pub look: Look,
    pub colour: &'static str,
}

/// One item on a row: of kind `kind` (an index into [`Swimlanes::kinds`]), at `at` seconds,
/// until `until` for a bar (None: still going at the end of the axis).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: usize,
    pub at: f64,
    pub until: Option<f64>,
    /// The item's tooltip (`<title>`).
    pub label: String,
}

/// A named row of items (one VM).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub items: Vec<Item>,
}

/// Rows of items of several kinds over one time axis (seconds from 0 to `x_max`), with a
/// legend and an optional line under the rows (what is not drawn).
#[derive(Debug, Clone, PartialEq)]
pub struct Swimlanes {
    pub title: String,
    pub desc: String,
    pub x_label: String,
    pub x_max: f64,
    pub kinds: Vec<Kind>,
    pub rows: Vec<Row>,
    pub footnote: Option<String>,
}

/// Width of the row names on [`swimlanes`], and the characters shown of a name.
const ROW_NAMES: f64 = 200.0;
const ROW_NAME_CHARS: usize = 30;
const ROW_HEIGHT: f64 = 26.0;
/// The narrowest bar drawn, so a 10 s migration on a two-hour axis stays visible.
const MIN_BAR: f64 = 3.0;

/// A swimlane timeline: one row per name, each bar kind in its own band of the row (so
/// overlapping bars of two kinds stay apart), glyphs on the row's middle line, a legend of
/// every kind below the axis.
pub fn swimlanes(id: &str, chart: &Swimlanes) -> Html {
    let rows = chart.rows.len().max(1) as f64;
    let legend_rows = chart.kinds.len().div_ceil(3) as f64;
    let footnote = if chart.footnote.is_some() { 20.0 } else { 0.0 };
    let bottom = TOP + ROW_HEIGHT * rows;
    let height = bottom + 44.0 + footnote + legend_rows * 20.0 + 6.0;
    let x_ticks = ticks(chart.x_max);
    let bar_kinds: Vec<usize> = (0..chart.kinds.len())
        .filter(|k| matches!(chart.kinds[*k].look, Look::Bar | Look::OutlinedBar))
        .collect();
    let lanes = Lanes {
        left: ROW_NAMES + 8.0,
        x_max: *x_ticks.last().unwrap_or(&1.0),
        band: 16.0 / bar_kinds.len().max(1) as f64,
        bar_kinds,
    };
    let mut body = Html::new();
    for (n, row) in chart.rows.iter().enumerate() {
        body.push(lanes.row(row, &chart.kinds, TOP + ROW_HEIGHT * (n as f64 + 0.5)));
    }
    body.push(lanes.axis(&x_ticks, bottom, &chart.x_label));
    if let Some(note) = &chart.footnote {
        body.push(
            el("text")
                .num("x", LEFT)
                .num("y", bottom + 34.0 + footnote)
                .attr("fill", INK)
                .text(note),
        );
    }
    body.push(kinds_legend(&chart.kinds, bottom + 52.0 + footnote));
    frame(id, &chart.title, &chart.desc, height, body)
}

/// The geometry of a [`swimlanes`] chart.
struct Lanes {
    /// Where the plot begins (row names left of it).
    left: f64,
    x_max: f64,
    /// The kinds drawn as bars, in order: each gets its band of a row.
    bar_kinds: Vec<usize>,
    band: f64,
}

impl Lanes {
    fn x(&self, t: f64) -> f64 {
        self.left + (t / self.x_max).clamp(0.0, 1.0) * (WIDTH - RIGHT - self.left)
    }

    /// One row at height `y`: its grid line, its name, its bars, then its glyphs over them.
    fn row(&self, row: &Row, kinds: &[Kind], y: f64) -> Html {
        let mut out = line(self.left, y, WIDTH - RIGHT, y, GRID);
        out.push(
            el("text")
                .num("x", self.left - 6.0)
                .num("y", y + 4.0)
                .attr("text-anchor", "end")
                .attr("fill", INK)
                .child(el("title").text(&row.name))
                .text(crate::terminal::safe(&row.name, ROW_NAME_CHARS)),
        );
        let mut glyphs = Html::new();
        for item in &row.items {
            let Some(kind) = kinds.get(item.kind) else {
                continue;
            };
            let tooltip = el("title").text(&item.label);
            let at = self.x(item.at);
            if matches!(kind.look, Look::Bar | Look::OutlinedBar) {
                let slot = self.bar_kinds.iter().position(|k| *k == item.kind);
                let top = y - 8.0 + self.band * slot.unwrap_or(0) as f64 + 0.5;
                let end = self.x(item.until.unwrap_or(self.x_max)).max(at + MIN_BAR);
                let rect = bar_rect(kind, at, top, end - at, self.band - 1.0);
                out.push(rect.child(tooltip));
            } else {
                glyphs.push(glyph(kind.look, kind.colour, at, y).child(tooltip));
            }
        }
        out.push(glyphs);
        out
    }

    /// The time axis along `bottom`, its tick labels and its title.
    fn axis(&self, x_ticks: &[f64], bottom: f64, label: &str) -> Html {
        let mut out = line(self.left, bottom, WIDTH - RIGHT, bottom, INK);
        for &tick in x_ticks {
            out.push(line(self.x(tick), bottom, self.x(tick), bottom + 4.0, INK));
            out.push(
                el("text")
                    .num("x", self.x(tick))
                    .num("y", bottom + 17.0)
                    .attr("text-anchor", "middle")
                    .attr("fill", INK)
                    .text(seconds_label(tick)),
            );
        }
        out.push(
            el("text")
                .num("x", (self.left + WIDTH - RIGHT) / 2.0)
                .num("y", bottom + 34.0)
                .attr("text-anchor", "middle")
                .attr("fill", INK)
                .text(label),
        );
        out
    }
}

/// A bar of `kind`: filled, or outlined with a white inside.
fn bar_rect(kind: &Kind, x: f64, y: f64, width: f64, height: f64) -> super::Element {
    let rect = el("rect")
        .num("x", x)
        .num("y", y)
        .num("width", width)
        .num("height", height);
    match kind.look {
        Look::Bar => rect.attr("fill", kind.colour),
        _ => rect
            .attr("fill", "#ffffff")
            .attr("stroke", kind.colour)
            .attr("stroke-width", "1.5"),
    }
}

/// Each kind's sample and name, three to a line, from `top`.
fn kinds_legend(kinds: &[Kind], top: f64) -> Html {
    let mut out = Html::new();
    for (k, kind) in kinds.iter().enumerate() {
        let x = LEFT + (k % 3) as f64 * 230.0;
        let y = top + 20.0 * (k / 3) as f64;
        let sample = match kind.look {
            Look::Bar | Look::OutlinedBar => bar_rect(kind, x, y - 9.0, 24.0, 8.0),
            look => glyph(look, kind.colour, x + 12.0, y - 5.0),
        };
        out.push(
            el("g").child(sample).child(
                el("text")
                    .num("x", x + 30.0)
                    .num("y", y)
                    .attr("fill", INK)
                    .text(crate::terminal::safe(&kind.name, 34)),
            ),
        );
    }
    out
}

/// A glyph centred on (`x`, `y`), its tooltip still to be added.
fn glyph(look: Look, colour: &'static str, x: f64, y: f64) -> super::Element {
    let (d, fill, stroke) = match look {
        Look::Diamond => (
            format!("M{} {}l6 6l-6 6l-6 -6z", number(x), number(y - 6.0)),
            colour,
            None,
        ),
        Look::Triangle => (
            format!("M{} {}l5.5 10h-11z", number(x), number(y - 6.0)),
            colour,
            None,
        ),
        _ => (
            format!(
                "M{} {}l10 10m-10 0l10 -10",
                number(x - 5.0),
                number(y - 5.0)
            ),
            "none",
            Some(FAILURE),
        ),
    };
    let path = el("path").attr("d", d).attr("fill", fill);
    match stroke {
        Some(stroke) => path.attr("stroke", stroke).attr("stroke-width", "2.5"),
        None => path,
    }
}

/// WCAG 2 contrast ratio of two `#rrggbb` colours.
pub fn contrast(a: &str, b: &str) -> f64 {
    let luminance = |hex: &str| {
        let channel = |at: usize| {
            let c = f64::from(u8::from_str_radix(&hex[at..at + 2], 16).unwrap_or(0)) / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    };
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_colour_passes_wcag_aa_against_white() {
        for colour in PALETTE.iter().chain([&FAILURE, &INK]) {
            let ratio = contrast(colour, "#ffffff");
            assert!(ratio >= 4.5, "{colour}: {ratio:.2}:1");
        }
        assert!((contrast("#000000", "#ffffff") - 21.0).abs() < 0.01);
    }

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(ticks(93.0), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(1000.0), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(
            ticks(0.0),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(seconds_label(150.0), "2m30s");
        assert_eq!(seconds_label(3900.0), "1h5m");
    }

    #[test]
    fn a_chart_is_a_labelled_image_with_escaped_labels() {
        let svg = bars(
            "h",
            &Bars {
                title: "Time <to> ready".into(),
                desc: "desc".into(),
                x_label: "seconds".into(),
                y_label: "VMs".into(),
                bars: vec![Bar {
                    label: "<b>0-10s".into(),
                    value: 3.0,
                }],
            },
        );
        let svg = svg.as_str();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("role=\"img\" aria-labelledby=\"h-t h-d\""));
        assert!(svg.contains("<title id=\"h-t\">Time &lt;to&gt; ready</title>"));
        assert!(svg.contains("&lt;b&gt;0-10s"));
        assert!(!svg.contains("<b>"));
    }

    #[test]
    fn series_differ_by_dash_as_well_as_colour() {
        let series = |name: &str| Series {
            name: name.into(),
            points: vec![(0.0, 1.0), (10.0, 2.0)],
        };
        let svg = lines(
            "l",
            &Lines {
                title: "t".into(),
                desc: "d".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                series: vec![series("created"), series("ready")],
            },
        );
        assert!(svg.as_str().contains("stroke-dasharray=\"8 4\""));
        assert!(svg.as_str().contains(">created</text>"));
        assert!(svg.as_str().contains(">ready</text>"));
    }

    #[test]
    fn twelve_series_get_twelve_distinct_looks_in_chart_and_legend() {
        let pairs: std::collections::BTreeSet<_> = (0..25).map(series_style).collect();
        assert_eq!(pairs.len(), 25, "{pairs:?}");
        // What a reader sees: each drawn line's and legend sample's (stroke, dash).
        let chart = Lines {
            title: "t".into(),
            desc: "d".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: (0..12)
                .map(|i| Series {
                    name: format!("s{i}"),
                    points: vec![(0.0, i as f64), (10.0, i as f64 + 1.0)],
                })
                .collect(),
        };
        let svg = lines("l", &chart);
        let look = |tag: &str| -> Vec<(String, String)> {
            svg.as_str()
                .split(tag)
                .skip(1)
                .map(|el| {
                    let el = el.split_once('>').unwrap().0;
                    let attr = |name: &str| {
                        el.split_once(&format!("{name}=\""))
                            .map_or(String::new(), |(_, v)| v.split('"').next().unwrap().into())
                    };
                    (attr("stroke"), attr("stroke-dasharray"))
                })
                .collect()
        };
        let paths: Vec<_> = look("<path d=");
        let distinct: std::collections::BTreeSet<_> = paths.iter().collect();
        assert_eq!((paths.len(), distinct.len()), (12, 12), "{paths:?}");
        let samples: Vec<_> = look("<line x1=")
            .into_iter()
            .filter(|(stroke, _)| PALETTE.contains(&stroke.as_str()))
            .collect();
        assert_eq!(samples, paths, "the legend shows each line's look");
    }

    #[test]
    fn verdict_marks_tell_failures_by_shape_and_word_and_escape_labels() {
        let chart = Lines {
            title: "t".into(),
            desc: "d".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "a".into(),
                points: vec![(0.0, 1.0), (1000.0, 2.0)],
            }],
        };
        let marks = [
            PointMark {
                at: (1000.0, 2.0),
                word: "BELOW".into(),
                label: "vm-<b>: BELOW".into(),
                failed: true,
            },
            PointMark {
                at: (10.0, 1.0),
                word: "PASS".into(),
                label: "ok".into(),
                failed: false,
            },
        ];
        let svg = lines_marked("c", &chart, &marks);
        let svg = svg.as_str();
        assert!(!svg.contains("<b>"));
        // A failure: a cross (a path) with its word, left of it at the right edge.
        assert!(
            svg.contains("<g><title>vm-&lt;b&gt;: BELOW</title><path d=\"M"),
            "{svg}"
        );
        assert!(svg.contains("text-anchor=\"end\" font-size=\"11\" fill=\"#1a1a1a\">BELOW</text>"));
        // A pass: a ring, its word to the right.
        assert!(svg.contains("<g><title>ok</title><circle "));
        assert!(
            svg.contains("text-anchor=\"start\" font-size=\"11\" fill=\"#1a1a1a\">PASS</text>")
        );
        // Without marks, the same chart as before.
        assert_eq!(lines("c", &chart).as_str().matches("<g><title>").count(), 0);
    }

    #[test]
    fn swimlanes_tell_kinds_apart_by_shape_and_escape_names() {
        let kind = |name: &str, look: Look| Kind {
            name: name.into(),
            look,
            colour: PALETTE[0],
        };
        let item = |kind: usize, at: f64, until: Option<f64>| Item {
            kind,
            at,
            until,
            label: "<i>tip</i>".into(),
        };
        let svg = swimlanes(
            "s",
            &Swimlanes {
                title: "t".into(),
                desc: "d".into(),
                x_label: "x".into(),
                x_max: 7200.0,
                kinds: vec![
                    kind("moved", Look::Bar),
                    kind("out", Look::OutlinedBar),
                    kind("restart", Look::Diamond),
                    kind("failed", Look::Cross),
                ],
                rows: vec![Row {
                    name: "vm-<b>".into(),
                    items: vec![
                        item(0, 100.0, Some(101.0)),
                        item(1, 200.0, None),
                        item(2, 300.0, None),
                        item(3, 400.0, None),
                    ],
                }],
                footnote: Some("3 more <VMs>".into()),
            },
        );
        let svg = svg.as_str();
        assert!(svg.contains("role=\"img\" aria-labelledby=\"s-t s-d\""));
        assert!(svg.contains("vm-&lt;b&gt;") && !svg.contains("<b>"));
        assert!(svg.contains("3 more &lt;VMs&gt;"));
        assert_eq!(
            svg.matches("<title>&lt;i&gt;tip&lt;/i&gt;</title>").count(),
            4
        );
        // A one-second bar on a two-hour axis is still drawn 3 px wide; an outlined bar
        // without an end runs to the end of the axis.
        assert!(svg.contains("width=\"3\""), "{svg}");
        assert!(svg.contains("fill=\"#ffffff\" stroke=\"#1f4e9c\""));
        assert!(svg.contains("l6 6l-6 6l-6 -6z"), "the diamond");
        assert!(svg.contains(&format!("stroke=\"{FAILURE}\"")), "the cross");
        for name in ["moved", "out", "restart", "failed"] {
            assert!(
                svg.contains(&format!(">{name}</text>")),
                "{name} in the legend"
            );
        }
    }
}
