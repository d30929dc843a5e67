//! The sections of the page: the comparison of several runs, and per run what was asked and
//! done, time to ready, load, churn and disruption, alerts. Each chart is followed by a table
//! of the same data; a section without data says why. What a run's history can make grow
//! without end is bounded (the event and alert tables at [`MAX_TABLE_ROWS`], a timeline row
//! at [`MAX_MARKS_PER_ROW`] marks), the rest counted in words, so a page stays under 2 MiB.

use super::data::{self, Fetched, Percentiles, RunRecord};
use super::timeline::{self, Event, What};
use crate::audit::query::{ExecutionDetail, ExecutionRecord, VmRow};
use crate::disruption::Outcome;
use crate::disruption::evidence::RestartEvidence;
use crate::disruption::report::{seconds_text, time_text};
use crate::html::chart::{
    self, Bar, Bars, Item, Kind, Lane, Lines, Look, Mark, Row, Series, Swimlanes, Timeline,
    seconds_label,
};
use crate::html::{Html, el};

/// The parts of each run's section: (anchor suffix, heading).
pub const PARTS: [(&str, &str); 5] = [
    ("summary", "What was asked and done"),
    ("ready", "Time to ready"),
    ("load", "Load"),
    ("churn", "Churn and disruption"),
    ("alerts", "Alerts"),
];

/// The longest recorded message shown in a cell, in characters.
const MESSAGE_CHARS: usize = 600;

/// How many of the slowest VMs are named.
const SLOWEST: usize = 10;

pub fn run_anchor(index: usize) -> String {
    format!("run-{index}")
}

/// A column of a table: its heading and whether it holds numbers (right-aligned).
struct Col(&'static str, bool);

fn table(caption: &str, cols: &[Col], rows: Vec<Vec<Html>>) -> Html {
    let head = el("tr").children(cols.iter().map(|Col(name, num)| {
        let th = el("th").attr("scope", "col").text(*name);
        if *num { th.attr("class", "num") } else { th }
    }));
    let body = rows.into_iter().map(|row| {
        el("tr").children(row.into_iter().zip(cols).map(|(cell, Col(_, num))| {
            let td = el("td").child(cell);
            if *num { td.attr("class", "num") } else { td }
        }))
    });
    el("table")
        .child(el("caption").text(caption))
        .child(el("thead").child(head))
        .child(el("tbody").children(body))
        .into()
}

fn t(text: impl AsRef<str>) -> Html {
    Html::text(text.as_ref())
}

fn msg(text: &str) -> Html {
    Html::text_capped(text, MESSAGE_CHARS)
}

fn secs(value: Option<i64>) -> Html {
    t(value.map_or_else(|| "-".into(), |s| seconds_label(s as f64)))
}

fn opt(value: Option<&str>) -> Html {
    t(value.unwrap_or("-"))
}

/// A note where a section has no data, saying why.
fn missing(why: impl AsRef<str>) -> Html {
    el("p")
        .attr("class", "missing")
        .attr("role", "note")
        .text(why)
        .into()
}

fn heading(tag: &'static str, id: String, text: &str) -> Html {
    el(tag).attr("id", id).text(text).into()
}

fn short(run_id: &str) -> &str {
    run_id.get(..8).unwrap_or(run_id)
}

/// Several runs side by side: one row each, and their ready curves on one chart.
pub fn comparison(runs: &[RunRecord]) -> Html {
    let rows = runs
        .iter()
        .map(|run| {
            let d = &run.detail;
            let e = &d.execution;
            let ready = data::percentiles(
                &d.vms
                    .iter()
                    .filter_map(|v| v.seconds_to_ready)
                    .collect::<Vec<_>>(),
            );
            let count = |status: &str| d.vms.iter().filter(|v| v.status == status).count();
            let mut row = vec![
                el("code").text(&e.run_id).into(),
                t(&e.started_at),
                status_cell(&e.status),
                t(e.total_vm_count.map_or("-".into(), |n| n.to_string())),
                t(d.vms.len().to_string()),
                t(d.vms
                    .iter()
                    .filter(|v| v.ready_at.is_some())
                    .count()
                    .to_string()),
                t(count("failed").to_string()),
            ];
            row.extend(percentile_cells(ready));
            row.push(secs(e.duration_seconds));
            row
        })
        .collect();
    let cols = [
        Col("Run", false),
        Col("Started", false),
        Col("Status", false),
        Col("VMs planned", true),
        Col("Created", true),
        Col("Ready", true),
        Col("Failed", true),
        Col("Ready p50", true),
        Col("p90", true),
        Col("p99", true),
        Col("max", true),
        Col("Whole run", true),
    ];
    let series: Vec<Series> = runs
        .iter()
        .map(|run| Series {
            name: format!("run {}", short(&run.detail.execution.run_id)),
            points: data::cumulative(&data::created_and_ready(&run.detail).1),
        })
        .collect();
    let chart = chart::lines(
        "compare-ready",
        &Lines {
            title: "VMs ready over time, per run".into(),
            desc: "For each run, how many of its VMs were ready at each moment after the run \
                   started. The table above gives each run's percentiles."
                .into(),
            x_label: "time since the run started".into(),
            y_label: "VMs ready".into(),
            series,
        },
    );
    el("section")
        .attr("id", "compare")
        .attr("aria-labelledby", "compare-h")
        .child(heading("h2", "compare-h".into(), "Runs compared"))
        .child(table(
            "Each run: its VMs and time to ready (seconds from a VM's creation to ready)",
            &cols,
            rows,
        ))
        .child(chart)
        .into()
}

fn status_cell(status: &str) -> Html {
    let class = match status {
        "success" => "good",
        "failed" | "cancelled" | "aborted" => "bad",
        _ => "",
    };
    let span = el("span").text(status);
    if class.is_empty() {
        span.into()
    } else {
        span.attr("class", class).into()
    }
}

fn percentile_cells(stats: Option<Percentiles>) -> Vec<Html> {
    match stats {
        Some(p) => [p.p50, p.p90, p.p99, p.max]
            .iter()
            .map(|s| secs(Some(*s)))
            .collect(),
        None => (0..4).map(|_| t("-")).collect(),
    }
}

/// One run's section.
pub fn run(index: usize, run: &RunRecord) -> Html {
    let id = run_anchor(index);
    let d = &run.detail;
    el("section")
        .attr("id", &id)
        .attr("aria-labelledby", format!("{id}-h"))
        .child(
            el("h2")
                .attr("id", format!("{id}-h"))
                .text("Run ")
                .child(el("code").text(&d.execution.run_id)),
        )
        .child(summary(&id, d))
        .child(time_to_ready(&id, d))
        .child(load(&id, run))
        .child(churn(&id, run))
        .child(alerts(&id, run))
        .into()
}

fn part_heading(id: &str, part: usize) -> Html {
    let (suffix, name) = PARTS[part];
    heading("h3", format!("{id}-{suffix}"), name)
}

/// What was asked, what was created, how long each stage took and what failed.
fn summary(id: &str, d: &ExecutionDetail) -> Html {
    let e = &d.execution;
    let mut out = part_heading(id, 0);
    out.push(asked(e));
    if d.workloads.is_empty() {
        out.push(missing("No workloads recorded for this execution."));
    } else {
        let rows = d
            .workloads
            .iter()
            .map(|w| {
                let created = d.vms.iter().filter(|v| v.component == w.workload_type);
                let ready = created.clone().filter(|v| v.ready_at.is_some()).count();
                vec![
                    t(&w.workload_type),
                    t(w.vm_count.to_string()),
                    t(created.count().to_string()),
                    t(ready.to_string()),
                    t(w.cpu_cores.to_string()),
                    t(&w.memory),
                    t(w.data_disk_size
                        .as_deref()
                        .filter(|_| w.has_data_disk)
                        .unwrap_or("-")),
                    status_cell(&w.status),
                ]
            })
            .collect();
        out.push(table(
            "Workloads: VMs asked for, created and ready",
            &[
                Col("Workload", false),
                Col("Asked", true),
                Col("Created", true),
                Col("Ready", true),
                Col("CPU", true),
                Col("Memory", false),
                Col("Data disk", false),
                Col("Status", false),
            ],
            rows,
        ));
    }
    let stage_rows = data::stages(d)
        .into_iter()
        .map(|s| vec![t(s.name), secs(s.seconds), t(s.explains)])
        .collect();
    out.push(table(
        "How long each stage took",
        &[
            Col("Stage", false),
            Col("Took", true),
            Col("Measured", false),
        ],
        stage_rows,
    ));
    out.push(failures(d));
    out.push(cleanups(d));
    out
}

/// The run's parameters as a definition list.
fn asked(e: &ExecutionRecord) -> Html {
    let mut pairs: Vec<(&str, Html)> = vec![
        ("Command", t(&e.command)),
        ("Status", status_cell(&e.status)),
        ("Namespace", t(&e.namespace)),
        ("Cluster context", opt(e.cluster_context.as_deref())),
        ("Started", t(&e.started_at)),
        ("Completed", opt(e.completed_at.as_deref())),
        ("Workloads", t(e.workloads.join(", "))),
        (
            "VMs planned",
            t(e.total_vm_count.map_or("-".into(), |n| n.to_string())),
        ),
        ("Image", opt(e.container_disk_image.as_deref())),
        (
            "Default CPU and memory",
            t(format!(
                "{} cores, {}",
                e.default_cpu_cores.map_or("-".into(), |n| n.to_string()),
                e.default_memory.as_deref().unwrap_or("-")
            )),
        ),
        (
            "Readiness wait",
            t(match (e.wait_for_ready, e.ready_timeout_seconds) {
                (false, _) => "not waited for".to_string(),
                (true, Some(s)) => format!("up to {}", seconds_label(s as f64)),
                (true, None) => "waited for".to_string(),
            }),
        ),
    ];
    if let Some(error) = &e.error_summary {
        pairs.push(("Error", msg(error)));
    }
    el("dl")
        .children(
            pairs
                .into_iter()
                .map(|(k, v)| Html::from_iter([el("dt").text(k), el("dd").child(v)])),
        )
        .into()
}

fn failures(d: &ExecutionDetail) -> Html {
    let found = data::failures(d);
    let mut out: Html = el("h4").text("Failures").into();
    if found.is_empty() {
        out.push(el("p").text("Nothing failed: no VM failed to be created or to become ready."));
        return out;
    }
    let rows = found
        .into_iter()
        .map(|f| vec![t(f.at), t(f.what), msg(&f.reason)])
        .collect();
    out.push(table(
        "What failed and why, as recorded",
        &[Col("When", false), Col("What", false), Col("Reason", false)],
        rows,
    ));
    out
}

fn cleanups(d: &ExecutionDetail) -> Html {
    let cleanups: Vec<&ExecutionRecord> = d
        .linked_cleanups
        .iter()
        .filter(|c| c.command.starts_with("cleanup"))
        .collect();
    if cleanups.is_empty() {
        return el("p")
            .attr("class", "note")
            .text("No cleanup of this run is recorded.")
            .into();
    }
    let rows = cleanups
        .into_iter()
        .map(|c| {
            vec![
                el("code").text(&c.run_id).into(),
                t(&c.started_at),
                status_cell(&c.status),
                t(c.deleted.map_or("-".into(), |x| x.counts.vms.to_string())),
            ]
        })
        .collect();
    table(
        "Cleanups that deleted this run's objects",
        &[
            Col("Cleanup", false),
            Col("Started", false),
            Col("Status", false),
            Col("VMs deleted", true),
        ],
        rows,
    )
}

/// Ready over time, the histogram, the per-phase percentiles and the slowest VMs.
fn time_to_ready(id: &str, d: &ExecutionDetail) -> Html {
    let mut out = part_heading(id, 1);
    if d.vms.is_empty() {
        out.push(missing(
            "No VMs are recorded for this execution (a dry run, or nothing was created).",
        ));
        return out;
    }
    out.push(progress(id, d));
    out.push(ready_histogram(id, d));
    out.push(phase_table(d));
    out.push(slowest(d));
    out.push(all_vms(d));
    out
}

/// How many VMs were created and ready at each moment, and the table of its milestones.
fn progress(id: &str, d: &ExecutionDetail) -> Html {
    let (created, ready) = data::created_and_ready(d);
    let total = d.vms.len();
    let chart = chart::lines(
        &format!("{id}-progress"),
        &Lines {
            title: "VMs created and ready over time".into(),
            desc: format!(
                "Of {total} VMs, how many the API server had accepted and how many were ready \
                 at each moment after the run started; the table below gives the times at \
                 which each share was reached."
            ),
            x_label: "time since the run started".into(),
            y_label: "VMs".into(),
            series: vec![
                Series {
                    name: "created".into(),
                    points: data::cumulative(&created),
                },
                Series {
                    name: "ready".into(),
                    points: data::cumulative(&ready),
                },
            ],
        },
    );
    let milestone = |offsets: &[i64], share: usize| {
        let mut sorted = offsets.to_vec();
        sorted.sort_unstable();
        let needed = (share * total).div_ceil(100).max(1);
        secs(sorted.get(needed - 1).copied())
    };
    let rows = [10, 25, 50, 75, 90, 100]
        .iter()
        .map(|&share| {
            vec![
                t(format!(
                    "{share}% ({})",
                    (share * total).div_ceil(100).max(1)
                )),
                milestone(&created, share),
                milestone(&ready, share),
            ]
        })
        .collect();
    let mut out = chart;
    out.push(table(
        "When each share of the VMs was created and ready (time since the run started; - when never reached)",
        &[
            Col("Share of VMs", false),
            Col("Created by", true),
            Col("Ready by", true),
        ],
        rows,
    ));
    out
}

fn ready_histogram(id: &str, d: &ExecutionDetail) -> Html {
    let times: Vec<i64> = d.vms.iter().filter_map(|v| v.seconds_to_ready).collect();
    let never = d.vms.len() - times.len();
    let mut out: Html = el("h4").text("Time from creation to ready").into();
    if times.is_empty() {
        out.push(missing(
            "No VM has a recorded ready time (none became ready, or the run did not wait).",
        ));
        return out;
    }
    let bins = data::histogram(&times);
    let label = |b: &data::Bin| {
        format!(
            "{}–{}",
            seconds_label(b.lo as f64),
            seconds_label(b.hi as f64)
        )
    };
    out.push(chart::bars(
        &format!("{id}-hist"),
        &Bars {
            title: "Time from creation to ready".into(),
            desc: format!(
                "How many VMs became ready within each interval after their creation ({} VMs \
                 ready, {never} never ready); the table below lists the same counts.",
                times.len()
            ),
            x_label: "time from creation to ready".into(),
            y_label: "VMs".into(),
            bars: bins
                .iter()
                .map(|b| Bar {
                    label: label(b),
                    value: b.count as f64,
                })
                .collect(),
        },
    ));
    let mut rows: Vec<Vec<Html>> = bins
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| vec![t(label(b)), t(b.count.to_string())])
        .collect();
    if never > 0 {
        rows.push(vec![t("never ready"), t(never.to_string())]);
    }
    out.push(table(
        "VMs per interval of time to ready (empty intervals left out)",
        &[Col("Interval", false), Col("VMs", true)],
        rows,
    ));
    out
}

fn phase_table(d: &ExecutionDetail) -> Html {
    let rows = data::phases(d)
        .into_iter()
        .map(|p| {
            let mut row = vec![
                t(p.name),
                t(p.measured),
                t(p.stats.map_or("0".into(), |s| s.count.to_string())),
            ];
            row.extend(percentile_cells(p.stats));
            row
        })
        .collect();
    table(
        "Latency per phase (nearest-rank percentiles over the VMs that reached it)",
        &[
            Col("Phase", false),
            Col("Measured", false),
            Col("VMs", true),
            Col("p50", true),
            Col("p90", true),
            Col("p99", true),
            Col("max", true),
        ],
        rows,
    )
}

fn vm_row(v: &VmRow) -> Vec<Html> {
    vec![
        t(&v.vm_name),
        t(&v.component),
        status_cell(&v.status),
        opt(v.phase.as_deref()),
        secs(v.seconds_to_scheduled),
        secs(v.seconds_to_running),
        secs(v.seconds_to_ready),
    ]
}

const VM_COLS: [Col; 7] = [
    Col("VM", false),
    Col("Workload", false),
    Col("Status", false),
    Col("Last phase", false),
    Col("To scheduled", true),
    Col("To running", true),
    Col("To ready", true),
];

fn slowest(d: &ExecutionDetail) -> Html {
    let rows = data::slowest(d, SLOWEST).into_iter().map(vm_row).collect();
    let mut out: Html = el("h4").text("Slowest VMs").into();
    out.push(table(
        "The VMs that took longest to become ready (never ready first; times from creation)",
        &VM_COLS,
        rows,
    ));
    out
}

fn all_vms(d: &ExecutionDetail) -> Html {
    let rows = d.vms.iter().map(vm_row).collect();
    el("details")
        .child(el("summary").text(format!("All {} VMs", d.vms.len())))
        .child(table(
            "Every VM of the run, in creation order",
            &VM_COLS,
            rows,
        ))
        .into()
}

/// Per workload and signal: the band across the VMs against each VM's own threshold,
/// verify's verdicts (counted, marked on the chart, per VM in the table) and profiled VMs'
/// expected shapes.
fn load(id: &str, run: &RunRecord) -> Html {
    let mut out = part_heading(id, 2);
    let load = match &run.load {
        Fetched::Missing(why) => {
            out.push(missing(format!("No load data: {why}")));
            return out;
        }
        Fetched::Data(load) => load,
    };
    out.push(el("p").attr("class", "note").text(format!(
        "Each signal across the run's VMs: the highest, median and lowest value at each \
         moment, each VM against the threshold `virtwork verify` holds it to, from {}.",
        load.params_from
    )));
    match &load.verdicts {
        Ok(how) => out.push(el("p").attr("class", "note").text(format!(
            "Verdicts: {how}; the same verdicts `virtwork verify --run-id {}` gives.",
            run.detail.execution.run_id
        ))),
        Err(why) => out.push(missing(format!("No verdicts: {why}"))),
    }
    let all = load
        .series
        .iter()
        .flat_map(|s| s.vms.values().map(|v| v.verdict.as_ref()))
        .chain(load.undrawn.iter().map(|(_, _, j)| Some(j)));
    let counts = data::verdict_counts(all);
    if load.verdicts.is_ok() {
        out.push(verdict_summary(&counts));
    }
    if load.series.is_empty() {
        out.push(missing(
            "The run's VMs expect no signal this page can draw (no built-in signal, no catalog \
             entry's signals found in the local catalog).",
        ));
    } else if load
        .series
        .iter()
        .all(|s| s.vms.values().all(|v| v.samples.is_empty()))
    {
        out.push(missing(
            "Prometheus holds no samples of this run's signals in its window (the VMs may be \
             gone, or their metrics not scraped).",
        ));
    }
    for (n, series) in load.series.iter().enumerate() {
        out.push(signal_chart(&format!("{id}-load-{n}"), series));
    }
    if !load.undrawn.is_empty() {
        let rows = load
            .undrawn
            .iter()
            .map(|(vm, signal, j)| vec![t(vm), t(signal), verdict_cell(Some(j)), note_cell(j)])
            .collect();
        out.push(el("h4").text("Verdicts on no drawn signal"));
        out.push(table(
            "Verdicts verify gave without a signal to draw (nothing it could query)",
            &[
                Col("VM", false),
                Col("Signal", false),
                Col("Verdict", false),
                Col("Why", false),
            ],
            rows,
        ));
    }
    out
}

/// How many verdicts of each kind the run's VMs got.
fn verdict_summary(counts: &[(Option<crate::verify::evaluate::Verdict>, usize)]) -> Html {
    let words: Vec<String> = counts
        .iter()
        .map(|(v, n)| {
            format!(
                "{n} {}",
                v.map_or("not judged".to_string(), data::verdict_word)
            )
        })
        .collect();
    let mut out: Html = el("p")
        .text(format!(
            "Verdicts of the run's VM signals: {}.",
            words.join(", ")
        ))
        .into();
    let rows = counts
        .iter()
        .map(|(v, n)| {
            let j = v.map(|verdict| data::Judged {
                verdict,
                observed: None,
                note: None,
            });
            vec![verdict_cell(j.as_ref()), t(n.to_string())]
        })
        .collect();
    out.push(table(
        "Verdicts per kind (one per VM and signal)",
        &[Col("Verdict", false), Col("VM signals", true)],
        rows,
    ));
    out
}

/// A verdict in words, marked bad when verify fails it.
fn verdict_cell(j: Option<&data::Judged>) -> Html {
    match j {
        None => t("not judged"),
        Some(j) => {
            let class = match (j.verdict.is_missing(), j.verdict) {
                (true, _) => "bad",
                (false, crate::verify::evaluate::Verdict::Pass) => "good",
                (false, _) => "",
            };
            let span = el("span");
            let span = match class.is_empty() {
                true => span,
                false => span.attr("class", class),
            };
            span.text(data::verdict_word(j.verdict)).into()
        }
    }
}

fn note_cell(j: &data::Judged) -> Html {
    t(j.note
        .as_deref()
        .map_or("-".into(), |n| crate::terminal::safe(n, NOTE_CHARS)))
}

/// Longest verify note shown per VM.
const NOTE_CHARS: usize = 200;
/// Most single VMs (failing, or profiled) drawn as their own line on a signal's chart.
const VM_LINES: usize = 2;
/// Most threshold lines drawn: beyond, the lowest and highest (the table has each VM's).
const THRESHOLD_LINES: usize = 3;

fn signal_chart(id: &str, series: &data::SignalSeries) -> Html {
    let title = format!("{}: {}", series.workload, series.signal);
    let heading = match series.catalog {
        true => format!("{title} (catalog signal)"),
        false => title.clone(),
    };
    let mut out: Html = el("h4").text(&heading).into();
    if let Some(note) = &series.note {
        out.push(el("p").attr("class", "note").text(note));
    }
    let order = data::vm_order(series);
    let thresholds = data::thresholds(series);
    let sampled = order.iter().filter(|r| r.1.is_some()).count();
    out.push(vm_counts(series, &order, &thresholds, sampled));
    if sampled == 0 {
        out.push(missing(format!(
            "No samples of {} for any of its {} VMs in the run's window.",
            series.signal,
            series.vms.len()
        )));
    } else {
        let (lines, marks, profiled) = chart_lines(series, &order, &thresholds);
        out.push(chart::lines_marked(
            id,
            &Lines {
                title: format!("{title} across {} VMs", series.vms.len()),
                desc: format!(
                    "{}: the highest, median and lowest value across the VMs at each moment; {}; \
                     crosses mark VMs verify failed and rings VMs it passed, each with the \
                     verdict's word{}. The tables below give each VM's mean, threshold and \
                     verdict{}.",
                    series.description,
                    thresholds_text(series, &thresholds),
                    match profiled.is_empty() {
                        true => String::new(),
                        false => format!(
                            "; the expected shape of the load profile of {}",
                            profiled.join(", ")
                        ),
                    },
                    match profiled.is_empty() {
                        true => "",
                        false => ", and the expected shape phase by phase",
                    }
                ),
                x_label: "time since the run started".into(),
                y_label: unit_name(series.unit).into(),
                series: lines,
            },
            &marks,
        ));
    }
    out.push(vm_tables(series, &order));
    for (name, vm) in &series.vms {
        if let Some(expected) = &vm.expected {
            out.push(expected_table(series, name, expected));
        }
    }
    out
}

fn thresholds_text(series: &data::SignalSeries, thresholds: &[(f64, usize)]) -> String {
    match thresholds {
        [] => "no VM is held to a threshold in this window".into(),
        [(th, _)] => format!("every VM's threshold is {}", series.unit.format(*th)),
        many => format!(
            "the VMs' thresholds differ ({})",
            many.iter()
                .map(|(th, n)| format!("{} for {n} VMs", series.unit.format(*th)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The band's three lines, a line per distinct threshold (the lowest and highest beyond
/// [`THRESHOLD_LINES`]), the first failed VMs' own lines and a profiled VM's measured and
/// expected lines; verdict marks at each drawn VM's last sample. Returns the profiled VMs
/// drawn.
fn chart_lines(
    series: &data::SignalSeries,
    order: &[(&str, Option<f64>, &data::VmSignal)],
    thresholds: &[(f64, usize)],
) -> (Vec<Series>, Vec<chart::PointMark>, Vec<String>) {
    let (mut lines, end) = band_and_thresholds(series, thresholds);
    let mut marks = Vec::new();
    let failed = order
        .iter()
        .filter(|(_, _, vm)| vm.verdict.as_ref().is_some_and(|j| j.verdict.is_missing()))
        .filter(|(_, _, vm)| !vm.samples.is_empty() && vm.expected.is_none())
        .take(VM_LINES);
    for (name, _, vm) in failed {
        if let Some((line, mark)) = vm_line(series, name, vm, "") {
            lines.push(line);
            marks.push(mark);
        }
    }
    let mut profiled = Vec::new();
    let with_shape = order
        .iter()
        .filter_map(|(name, _, vm)| Some((name, vm, vm.expected.as_ref()?)));
    for (name, vm, expected) in with_shape.take(VM_LINES) {
        if let Some((line, mark)) = vm_line(series, name, vm, " measured") {
            lines.push(line);
            marks.push(mark);
        }
        lines.push(Series {
            name: format!("{name} expected"),
            points: data::expected_line(expected, end),
        });
        profiled.push(name.to_string());
    }
    (lines, marks, profiled)
}

/// The band's three lines and the threshold lines, and where the band ends.
fn band_and_thresholds(
    series: &data::SignalSeries,
    thresholds: &[(f64, usize)],
) -> (Vec<Series>, f64) {
    let band = data::band(series);
    let end = band.median.last().map_or(0.0, |p| p.0);
    let start = band.median.first().map_or(0.0, |p| p.0);
    let mut lines = vec![
        Series {
            name: "highest VM".into(),
            points: band.high,
        },
        Series {
            name: "median VM".into(),
            points: band.median,
        },
        Series {
            name: "lowest VM".into(),
            points: band.low,
        },
    ];
    let drawn: Vec<&(f64, usize)> = match thresholds.len() > THRESHOLD_LINES {
        true => vec![&thresholds[0], &thresholds[thresholds.len() - 1]],
        false => thresholds.iter().collect(),
    };
    for (th, n) in drawn {
        lines.push(Series {
            name: match thresholds.len() {
                1 => format!("threshold {}", series.unit.format(*th)),
                _ => format!("threshold {} ({n} VMs)", series.unit.format(*th)),
            },
            points: vec![(start, *th), (end, *th)],
        });
    }
    (lines, end.max(start))
}

/// One VM's own line (named with `suffix`) and its verdict's mark at its last sample.
fn vm_line(
    series: &data::SignalSeries,
    name: &str,
    vm: &data::VmSignal,
    suffix: &str,
) -> Option<(Series, chart::PointMark)> {
    let last = *vm.samples.last()?;
    let word = vm
        .verdict
        .as_ref()
        .map_or("NOT JUDGED".to_string(), |j| data::verdict_word(j.verdict));
    let line = Series {
        name: format!("{name}{suffix}"),
        points: vm.samples.clone(),
    };
    let mark = chart::PointMark {
        at: last,
        word: word.clone(),
        label: format!(
            "{name}: {word}{}",
            vm.threshold
                .map(|th| format!(" (threshold {})", series.unit.format(th)))
                .unwrap_or_default()
        ),
        failed: vm.verdict.as_ref().is_some_and(|j| j.verdict.is_missing()),
    };
    Some((line, mark))
}

/// The VMs' counts, thresholds and verdicts in words.
fn vm_counts(
    series: &data::SignalSeries,
    order: &[(&str, Option<f64>, &data::VmSignal)],
    thresholds: &[(f64, usize)],
    sampled: usize,
) -> Html {
    let reaching = order
        .iter()
        .filter(|(_, m, vm)| matches!((m, vm.threshold), (Some(m), Some(th)) if *m >= th))
        .count();
    let judged = order
        .iter()
        .filter(|r| r.2.threshold.is_some() && r.1.is_some())
        .count();
    let means: Vec<f64> = {
        let mut m: Vec<f64> = order.iter().filter_map(|r| r.1).collect();
        m.sort_by(f64::total_cmp);
        m
    };
    let median_mean = means.get(means.len().saturating_sub(1) / 2).copied();
    let counts = data::verdict_counts(series.vms.values().map(|v| v.verdict.as_ref()));
    let verdicts: Vec<String> = counts
        .iter()
        .map(|(v, n)| {
            format!(
                "{n} {}",
                v.map_or("not judged".to_string(), data::verdict_word)
            )
        })
        .collect();
    el("p")
        .text(format!(
            "{sampled} of {} VMs with samples; median of their means {}; {reaching} of {judged} \
             reach their own threshold on average; {}; verdicts: {}.",
            series.vms.len(),
            median_mean.map_or("-".into(), |m| series.unit.format(m)),
            thresholds_text(series, thresholds),
            verdicts.join(", ")
        ))
        .into()
}

/// The first VMs (failed, then lowest mean) in a table, every VM folded.
fn vm_tables(series: &data::SignalSeries, order: &[(&str, Option<f64>, &data::VmSignal)]) -> Html {
    let mut out = Html::new();
    let cols = [
        Col("VM", false),
        Col("Mean", true),
        Col("Threshold", true),
        Col("Mean vs threshold", false),
        Col("Verdict", false),
        Col("verify's note", false),
    ];
    let row = |(vm, mean, s): &(&str, Option<f64>, &data::VmSignal)| {
        let against = match (mean, s.threshold) {
            (Some(m), Some(th)) if *m < th => el("span").attr("class", "bad").text("below").into(),
            (Some(_), Some(_)) => t("reaches"),
            _ => t("-"),
        };
        vec![
            t(vm),
            t(mean.map_or("-".into(), |m| series.unit.format(m))),
            t(s.threshold
                .map_or("none".into(), |th| series.unit.format(th))),
            against,
            verdict_cell(s.verdict.as_ref()),
            s.verdict.as_ref().map_or(t("-"), note_cell),
        ]
    };
    out.push(table(
        "The VMs verify failed, then those with the lowest mean over the window",
        &cols,
        order.iter().take(SLOWEST).map(row).collect(),
    ));
    if order.len() > SLOWEST {
        out.push(
            el("details")
                .child(el("summary").text(format!(
                    "All {} VMs of {}: {}",
                    order.len(),
                    series.workload,
                    series.signal
                )))
                .child(table(
                    "Every VM's mean, threshold and verdict",
                    &cols,
                    order.iter().map(row).collect(),
                )),
        );
    }
    out
}

/// A profiled VM's expected shape, phase by phase: the chart's expected line in words.
fn expected_table(series: &data::SignalSeries, vm: &str, expected: &data::Expected) -> Html {
    let rows: Vec<Vec<Html>> = expected
        .points
        .iter()
        .take(EXPECTED_ROWS)
        .map(|(at, level, value)| {
            vec![
                t(seconds_label(*at)),
                t(level.to_string()),
                t(series.unit.format(*value)),
            ]
        })
        .collect();
    let more = expected.points.len().saturating_sub(EXPECTED_ROWS);
    el("details")
        .child(el("summary").text(format!("Expected shape of {vm}: {}", expected.shape)))
        .child(el("p").attr("class", "note").text(format!(
            "The profile's clock from {}; each row holds until the next{}.",
            expected.clock_from,
            match more {
                0 => String::new(),
                n => format!(" ({n} later phase changes not listed)"),
            }
        )))
        .child(table(
            &format!("Expected {} of {vm}, phase by phase", series.signal),
            &[
                Col("From (since the run started)", true),
                Col("Level", true),
                Col("Expected at full effect", true),
            ],
            rows,
        ))
        .into()
}

/// Most phase changes listed per expected shape.
const EXPECTED_ROWS: usize = 60;

fn unit_name(unit: crate::signals::contract::Unit) -> &'static str {
    use crate::signals::contract::Unit;
    match unit {
        Unit::VcpuFraction => "busy fraction of each vCPU",
        Unit::Ratio => "fraction",
        Unit::BytesPerSecond => "bytes per second",
        Unit::OpsPerSecond => "operations per second",
        Unit::PacketsPerSecond => "packets per second",
        Unit::Series => "series",
        Unit::Custom => "value",
    }
}

/// When each alert fired for the run's VMs, and when it stopped.
fn alerts(id: &str, run: &RunRecord) -> Html {
    let mut out = part_heading(id, 4);
    let spans = match &run.alerts {
        Fetched::Missing(why) => {
            out.push(missing(format!("No alert history: {why}")));
            return out;
        }
        Fetched::Data(spans) => spans,
    };
    if spans.is_empty() {
        out.push(el("p").text(
            "No alert fired for the run's VMs in its window (Prometheus' ALERTS series, state \
             firing).",
        ));
        return out;
    }
    out.push(alert_chart(id, spans));
    out.push(alert_table(spans));
    out
}

/// One timeline row per alert (at most [`MAX_ALERT_LANES`], [`MAX_MARKS_PER_ROW`] spans each,
/// spread over the list), and a note on what was not drawn.
fn alert_chart(id: &str, spans: &[data::AlertSpan]) -> Html {
    let mut out = Html::new();
    let mut lanes: Vec<Lane> = Vec::new();
    for s in spans {
        let mark = Mark {
            at: s.from,
            until: Some(s.until),
            failed: false,
            label: format!(
                "{} for {}: {} to {}",
                s.alert,
                s.vm,
                seconds_label(s.from),
                seconds_label(s.until)
            ),
        };
        match lanes.iter_mut().find(|l| l.name == s.alert) {
            Some(lane) => lane.marks.push(mark),
            None => lanes.push(Lane {
                name: s.alert.clone(),
                marks: vec![mark],
            }),
        }
    }
    let lanes_left_out = lanes.len().saturating_sub(MAX_ALERT_LANES);
    lanes.truncate(MAX_ALERT_LANES);
    let mut marks_left_out = 0;
    for lane in &mut lanes {
        let all = lane.marks.len();
        if all > MAX_MARKS_PER_ROW {
            let step = all as f64 / MAX_MARKS_PER_ROW as f64;
            let picked: Vec<Mark> = (0..MAX_MARKS_PER_ROW)
                .map(|k| lane.marks[(k as f64 * step) as usize].clone())
                .collect();
            lane.marks = picked;
            marks_left_out += all - MAX_MARKS_PER_ROW;
        }
    }
    out.push(chart::timeline(
        &format!("{id}-alerts"),
        &Timeline {
            title: "Alerts firing for the run's VMs".into(),
            desc: format!(
                "{} firing spans of {} alerts, one row per alert, from the first to the last \
                 firing sample; the table below lists them.",
                spans.len(),
                lanes.len()
            ),
            x_label: "time since the run started".into(),
            x_max: spans.iter().map(|s| s.until).fold(0.0, f64::max),
            lanes,
            legend: false,
        },
    ));
    if lanes_left_out + marks_left_out > 0 {
        out.push(el("p").attr("class", "note").text(format!(
            "Not drawn: {lanes_left_out} more alerts (at most {MAX_ALERT_LANES} rows) and \
             {marks_left_out} spans of crowded rows (at most {MAX_MARKS_PER_ROW} a row, spread \
             over it); the table below lists them."
        )));
    }
    out
}

/// Every firing span up to [`MAX_TABLE_ROWS`], the rest counted by alert.
fn alert_table(spans: &[data::AlertSpan]) -> Html {
    let mut out = Html::new();
    let rows = spans
        .iter()
        .take(MAX_TABLE_ROWS)
        .map(|s| {
            vec![
                t(&s.alert),
                t(&s.vm),
                secs(Some(s.from as i64)),
                secs(Some(s.until as i64)),
                t(if s.firing_at_end { "yes" } else { "no" }),
            ]
        })
        .collect();
    out.push(table(
        "Every firing span (times since the run started)",
        &[
            Col("Alert", false),
            Col("VM", false),
            Col("Fired from", true),
            Col("Until", true),
            Col("Still firing at the end", false),
        ],
        rows,
    ));
    let left_out = spans.iter().skip(MAX_TABLE_ROWS);
    if let Some(note) = not_listed(
        left_out.map(|s| s.alert.as_str()),
        "firing spans (counted by alert)",
    ) {
        out.push(note);
    }
    out
}

/// The churn executions linked to the run and the disruption analysis of its window on one
/// timeline, with what was measured and what was not (and why).
fn churn(id: &str, run: &RunRecord) -> Html {
    let mut out = part_heading(id, 3);
    if run.churns.is_empty() {
        out.push(missing(
            "No churn execution recorded against this run in this audit database.",
        ));
    } else {
        out.push(churn_executions(run));
    }
    out.push(disruption_summary(run));
    out.push(disruption_timeline(id, run));
    out
}

/// The analysis' fleet figures and what it measured, or which parts were not measured and why.
fn disruption_summary(run: &RunRecord) -> Html {
    let d = match &run.disruption {
        Fetched::Missing(why) => {
            return missing(format!(
                "Migrations, restarts and interruptions not measured: {why}. The timeline shows \
                 only the churn actions the audit database recorded."
            ));
        }
        Fetched::Data(d) => d,
    };
    let c = &d.context;
    let f = crate::disruption::fleet(&d.vms);
    let mut out: Html = el("p")
        .text(format!(
            "The disruption analysis (`virtwork disruption --run-id {} --from {} --to {}` in \
             namespace {}) of the {} VMs of the run in the cluster: {} undisturbed, {} migrated, \
             {} restarted, {} beyond the budget, {} unknown. {} migrations ({} failed){}. \
             Budget: interruptions of at most {}, restarts allowed: {}.",
            run.detail.execution.run_id,
            time_text(c.span.from),
            time_text(c.span.to),
            run.detail.execution.namespace,
            f.vms,
            f.undisturbed,
            f.migrated,
            f.restarted,
            f.beyond_budget,
            f.unknown,
            f.migrations,
            f.migrations_failed,
            f.migration_seconds
                .map_or(String::new(), |[p50, p90, p99, max]| format!(
                    ", durations p50 {}, p90 {}, p99 {}, max {}",
                    seconds_text(p50),
                    seconds_text(p90),
                    seconds_text(p99),
                    seconds_text(max)
                )),
            c.budget.max_interruption.map_or("-".into(), |m| format!(
                "{} ({})",
                seconds_text(m),
                c.budget.max_interruption_from
            )),
            c.budget.allow_restarts,
        ))
        .into();
    out.push(match &c.prometheus {
        Ok(p) => el("p")
            .attr("class", "note")
            .text(format!(
                "Migrations and restarts from the API server and Prometheus; interruptions \
                 measured with {p} at a step of {}.",
                c.step.map_or("-".into(), seconds_text)
            ))
            .into(),
        Err(why) => missing(format!("Interruptions not measured: {why}.")),
    });
    out
}

/// How each kind of event is drawn, in [`What::kind`]'s words (indices used by [`kind_of`]).
fn timeline_kinds() -> Vec<Kind> {
    let kind = |name: &str, look: Look, colour: &'static str| Kind {
        name: name.into(),
        look,
        colour,
    };
    vec![
        kind(
            "churn action (when it ended)",
            Look::Triangle,
            chart::PALETTE[2],
        ),
        kind("churn action failed", Look::Cross, chart::FAILURE),
        kind("migration (start to end)", Look::Bar, chart::PALETTE[0]),
        kind("restart", Look::Diamond, chart::PALETTE[3]),
        kind("workload interrupted", Look::OutlinedBar, chart::PALETTE[1]),
    ]
}

fn kind_of(what: &What) -> usize {
    match what {
        What::Churn { failed: false, .. } => 0,
        What::Churn { failed: true, .. } => 1,
        What::Migration { .. } => 2,
        What::Restart { .. } => 3,
        What::Interruption { .. } => 4,
    }
}

/// What an event was, in words (the tooltip's and the table's).
fn event_detail(what: &What) -> String {
    match what {
        What::Churn {
            action,
            failed,
            error,
        } => match (failed, error) {
            (false, _) => format!("{action}: succeeded"),
            (true, Some(e)) => format!("{action}: failed: {e}"),
            (true, None) => format!("{action}: failed"),
        },
        What::Migration {
            name,
            source,
            target,
            result,
            from,
        } => format!(
            "{} → {}, {}, read from {from}{}",
            source.as_deref().unwrap_or("?"),
            target.as_deref().unwrap_or("?"),
            result.as_str(),
            name.as_deref().map_or(String::new(), |n| format!(" ({n})"))
        ),
        What::Restart { evidence, cause } => format!(
            "{}; cause: {}",
            match evidence {
                RestartEvidence::NewVmi => "a new VMI",
                RestartEvidence::VcpuCounterReset => "the vCPU counter started afresh",
                RestartEvidence::NewVmiAndCounterReset =>
                    "a new VMI and the vCPU counter started afresh",
            },
            cause.as_deref().unwrap_or("not stated by the cluster")
        ),
        What::Interruption { ongoing: true } => {
            "expected signals absent or below the threshold, still at the end of the window".into()
        }
        What::Interruption { ongoing: false } => {
            "expected signals absent or below the threshold".into()
        }
    }
}

fn when(at: Option<f64>) -> String {
    at.map_or("time unknown".into(), seconds_label)
}

fn lasted(e: &Event) -> Option<f64> {
    Some((e.until? - e.at?).max(0.0))
}

/// Most marks drawn on one VM's row of the timeline: more cannot be told apart on its
/// 700 px, and each costs bytes (16,000 churn actions on 40 rows made the chart 1.5 MiB).
const MAX_MARKS_PER_ROW: usize = 100;

/// Keeps at most [`MAX_MARKS_PER_ROW`] of a row's marks: every migration, restart,
/// interruption and failed churn action first, then succeeded churn actions evenly spread
/// over the row's time (so the chart still shows when churn was dense). Returns how many were
/// left out (kind 0 = a succeeded churn action, [`timeline_kinds`]).
fn thin_row(row: &mut Row) -> usize {
    if row.items.len() <= MAX_MARKS_PER_ROW {
        return 0;
    }
    let (churned, mut kept): (Vec<Item>, Vec<Item>) =
        row.items.drain(..).partition(|item| item.kind == 0);
    kept.truncate(MAX_MARKS_PER_ROW);
    let room = MAX_MARKS_PER_ROW - kept.len();
    let before = churned.len() + kept.len();
    if room > 0 {
        let step = churned.len() as f64 / room as f64;
        kept.extend(
            (0..room)
                .map(|k| (k as f64 * step) as usize)
                .filter_map(|i| churned.get(i).cloned()),
        );
    }
    kept.sort_by(|a, b| a.at.total_cmp(&b.at));
    let left_out = before - kept.len();
    row.items = kept;
    left_out
}

/// The timeline's rows: one per drawn VM, its events as marks.
fn timeline_rows(tl: &timeline::Timeline) -> Vec<Row> {
    tl.rows
        .iter()
        .map(|row| Row {
            name: row
                .vm
                .split_once('/')
                .map_or(row.vm.as_str(), |s| s.1)
                .to_string(),
            items: tl
                .events
                .iter()
                .filter(|e| e.vm == row.vm)
                .filter_map(|e| {
                    Some(Item {
                        kind: kind_of(&e.what),
                        at: e.at?,
                        until: e.until,
                        label: format!(
                            "{} of {} at {}{}: {}",
                            e.what.kind(),
                            e.vm,
                            seconds_label(e.at?),
                            lasted(e)
                                .map_or(String::new(), |s| format!(" for {}", seconds_text(s))),
                            event_detail(&e.what)
                        ),
                    })
                })
                .collect(),
        })
        .collect()
}

/// One timeline per run: a row per disturbed VM (the most disturbed first, at most
/// [`timeline::MAX_ROWS`], each of at most [`MAX_MARKS_PER_ROW`] marks), then the events (at
/// most [`MAX_TABLE_ROWS`]) and every disturbed VM in tables.
fn disruption_timeline(id: &str, run: &RunRecord) -> Html {
    let tl = timeline::timeline(run);
    if tl.events.is_empty() {
        return el("p")
            .text("Nothing on the timeline: no churn action recorded and no migration, restart or interruption found.")
            .into();
    }
    let mut rows = timeline_rows(&tl);
    let thinned: usize = rows.iter_mut().map(thin_row).sum();
    let vms = tl.rows.len() + tl.not_drawn;
    let footnote = (tl.not_drawn + tl.undisturbed > 0).then(|| {
        format!(
            "Not drawn: {} more VMs with events (in the tables below); {} VMs with none.",
            tl.not_drawn, tl.undisturbed
        )
    });
    let thinned_note = (thinned > 0).then(|| {
        el("p").attr("class", "note").text(format!(
            "{thinned} marks on crowded rows are not drawn (at most {MAX_MARKS_PER_ROW} a row: \
             migrations, restarts, interruptions and failed churn actions first, then \
             succeeded churn actions spread over the row's time); the table below counts \
             every event."
        ))
    });
    let mut out = chart::swimlanes(
        &format!("{id}-timeline"),
        &Swimlanes {
            title: "Churn actions, migrations, restarts and interruptions over time".into(),
            desc: format!(
                "{} events of {vms} VMs since the run started, one row per VM ({} drawn, the \
                 most disturbed first; {} more not drawn; {} VMs without events): churn \
                 actions as triangles when each ended, failed ones as crosses, migrations as \
                 filled bars from start to end, restarts as diamonds, workload interruptions \
                 as outlined bars. The tables below list every event (at most \
                 {MAX_TABLE_ROWS}, the rest counted) and every disturbed VM.",
                tl.events.len(),
                tl.rows.len(),
                tl.not_drawn,
                tl.undisturbed
            ),
            x_label: "time since the run started".into(),
            x_max: tl.x_max,
            kinds: timeline_kinds(),
            rows,
            footnote,
        },
    );
    if let Some(note) = thinned_note {
        out.push(note);
    }
    out.push(event_table(&tl, &run.detail.execution.namespace));
    out.push(disturbed_vms(run));
    out
}

/// `<namespace>/<name>` as the name alone when the namespace is the run's (said once above).
fn in_run<'a>(vm: &'a str, namespace: &str) -> &'a str {
    vm.strip_prefix(namespace)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(vm)
}

/// Most events listed in a run's event table, and most firing spans in its alert table:
/// the bound that keeps a page under 2 MiB whatever the audit database holds (16,000 churn
/// actions made a 2.5 MiB page); the rest are counted by kind.
pub const MAX_TABLE_ROWS: usize = 2_000;

/// The events the table lists (in time order) and those it leaves out: at most
/// [`MAX_TABLE_ROWS`], interruptions, restarts, migrations and failed churn actions before
/// succeeded churn actions (the many and the least telling), each kind earliest first.
fn listed_events(events: &[Event]) -> (Vec<&Event>, Vec<&Event>) {
    let rank = |what: &What| match what {
        What::Interruption { .. } => 0,
        What::Restart { .. } => 1,
        What::Migration { .. } => 2,
        What::Churn { failed: true, .. } => 3,
        What::Churn { failed: false, .. } => 4,
    };
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (rank(&events[i].what), i));
    let mut kept = order.split_off(order.len().min(MAX_TABLE_ROWS));
    std::mem::swap(&mut kept, &mut order);
    kept.sort_unstable();
    order.sort_unstable();
    (
        kept.into_iter().map(|i| &events[i]).collect(),
        order.into_iter().map(|i| &events[i]).collect(),
    )
}

/// Most alerts drawn as rows of the alert timeline.
const MAX_ALERT_LANES: usize = 20;

/// Most kinds named in a "not listed" line (alert names are Prometheus' and unbounded).
const NOT_LISTED_KINDS: usize = 20;

/// "N more not listed: a kind, b other kind." (None when nothing was left out).
fn not_listed<'a>(kinds: impl Iterator<Item = &'a str>, what: &str) -> Option<Html> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for kind in kinds {
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let mut named: Vec<String> = counts
        .iter()
        .take(NOT_LISTED_KINDS)
        .map(|(k, n)| format!("{}: {n}", crate::terminal::safe(k, 80)))
        .collect();
    if counts.len() > NOT_LISTED_KINDS {
        let named_total: usize = counts.iter().take(NOT_LISTED_KINDS).map(|(_, n)| n).sum();
        named.push(format!("other kinds: {}", total - named_total));
    }
    (total > 0).then(|| {
        el("p")
            .attr("class", "note")
            .text(format!(
                "{total} more {what} not listed (the table stops at {MAX_TABLE_ROWS} rows); by kind: {}.",
                named.join(", ")
            ))
            .into()
    })
}

fn event_table(tl: &timeline::Timeline, namespace: &str) -> Html {
    let (listed, left_out) = listed_events(&tl.events);
    let summary = match left_out.len() {
        0 => format!("All {} events", tl.events.len()),
        _ => format!(
            "{} of {} events (interruptions, restarts, migrations and failed churn actions \
             first)",
            listed.len(),
            tl.events.len()
        ),
    };
    let rows = listed
        .iter()
        .map(|e| {
            let failed = matches!(e.what, What::Churn { failed: true, .. });
            vec![
                t(when(e.at)),
                t(lasted(e).map_or("-".into(), seconds_text)),
                t(in_run(&e.vm, namespace)),
                if failed {
                    el("span").attr("class", "bad").text(e.what.kind()).into()
                } else {
                    t(e.what.kind())
                },
                msg(&event_detail(&e.what)),
            ]
        })
        .collect();
    let mut details = el("details")
        .child(el("summary").text(summary))
        .child(table(
            &format!(
                "Every churn action, migration, restart and interruption (times since the run \
             started; VMs in namespace {namespace})"
            ),
            &[
                Col("At", true),
                Col("Lasted", true),
                Col("VM", false),
                Col("What", false),
                Col("Detail", false),
            ],
            rows,
        ));
    if let Some(note) = not_listed(left_out.iter().map(|e| e.what.kind()), "events") {
        details = details.child(note);
    }
    details.into()
}

/// The analysed VMs that were not undisturbed, with their verdict and why.
fn disturbed_vms(run: &RunRecord) -> Html {
    let Fetched::Data(d) = &run.disruption else {
        return Html::new();
    };
    let rows: Vec<Vec<Html>> = d
        .vms
        .iter()
        .filter(|a| a.outcome != Outcome::Undisturbed)
        .map(|a| {
            let f = &a.findings;
            let outcome = a.outcome.as_str();
            let name = format!("{}/{}", f.namespace, f.name);
            vec![
                t(in_run(&name, &run.detail.execution.namespace)),
                t(&f.workload),
                if a.outcome == Outcome::BeyondBudget {
                    el("span").attr("class", "bad").text(outcome).into()
                } else {
                    t(outcome)
                },
                t(f.migrations.len().to_string()),
                t(f.restarts.len().to_string()),
                t(f.interruption
                    .as_ref()
                    .map_or("-".into(), |i| seconds_text(i.longest_seconds))),
                msg(&a.reasons.join("; ")),
            ]
        })
        .collect();
    if rows.is_empty() {
        return el("p")
            .text("Every VM of the run came through the window undisturbed.")
            .into();
    }
    el("details")
        .child(el("summary").text(format!("{} VMs disturbed", rows.len())))
        .child(table(
            "Each VM the analysis did not find undisturbed, with its verdict",
            &[
                Col("VM", false),
                Col("Workload", false),
                Col("Verdict", false),
                Col("Migrations", true),
                Col("Restarts", true),
                Col("Longest interruption", true),
                Col("Beyond the budget because", false),
            ],
            rows,
        ))
        .into()
}

fn churn_executions(run: &RunRecord) -> Html {
    let rows = run
        .churns
        .iter()
        .map(|c| {
            let e = &c.execution;
            let count = |kind: &str| c.events.iter().filter(|ev| ev.event_type == kind).count();
            vec![
                el("code").text(&e.run_id).into(),
                t(&e.started_at),
                secs(e.duration_seconds),
                status_cell(&e.status),
                t(count("churn_action").to_string()),
                t(count("churn_action_failed").to_string()),
            ]
        })
        .collect();
    table(
        "Churn executions that acted on this run's VMs",
        &[
            Col("Churn", false),
            Col("Started", false),
            Col("Took", true),
            Col("Status", false),
            Col("Actions succeeded", true),
            Col("Actions failed", true),
        ],
        rows,
    )
}
