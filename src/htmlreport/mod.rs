//! The page `virtwork report` writes: one self-contained HTML document per invocation, built
//! from the audit records of one or more runs and what Prometheus answered about them.
//!
//! Owns: the page's structure (headings, a contents list, one section per run and a
//! comparison when there are several), its style sheet, the data table beside every chart,
//! and saying why a section has no data instead of leaving it out. Everything is built with
//! [`crate::html`], so every recorded string (names, messages, errors from the cluster) is
//! escaped; the document fetches nothing (its Content-Security-Policy forbids every load) and
//! needs no script. Must not: read the database or the cluster (the command gathers
//! [`RunRecord`]s); compute statistics ([`data`] does).

pub mod data;
mod sections;
pub mod timeline;

use crate::html::{Html, el};
pub use data::RunRecord;

/// Where the page's data came from, for its header.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The audit database's path as given.
    pub database: String,
    /// When the page was generated (RFC 3339).
    pub generated_at: String,
    /// `virtwork <version>`.
    pub generator: String,
}

/// The style sheet: system fonts, readable widths, tables with visible structure. Text is
/// #1a1a1a on white (about 17:1) and muted text #4d4d4d (about 8.5:1), both above WCAG AA.
const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#1a1a1a;background:#fff;margin:0 auto;max-width:1100px;padding:0 1.5rem 3rem;line-height:1.45}
h1{font-size:1.7rem;margin:1.2rem 0 .3rem}h2{font-size:1.35rem;border-bottom:2px solid #1f4e9c;padding-bottom:.2rem;margin-top:2.4rem}
h3{font-size:1.1rem;margin-top:1.8rem}h4{font-size:1rem;margin:1.2rem 0 .4rem}
.meta,.note,caption{color:#4d4d4d}caption{text-align:left;font-size:.9rem;padding:.3rem 0;white-space:nowrap}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #b0b0b0;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#eef2f8}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
dl{display:grid;grid-template-columns:max-content auto;gap:.15rem 1rem}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.chart{width:100%;height:auto;max-width:760px;display:block;margin:.5rem 0}
.missing{border-left:4px solid #b34700;background:#fbf3ec;padding:.5rem .8rem}
.bad{color:#c62828;font-weight:600}.good{color:#2e7d32;font-weight:600}
code{font-size:.92em;overflow-wrap:anywhere}details{margin:.6rem 0}summary{cursor:pointer;font-weight:600}
nav ul{padding-left:1.2rem}
";

/// The content security policy: nothing may be loaded, only the inline style sheet applies.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// The whole document for `runs` (one or more).
pub fn page(runs: &[RunRecord], provenance: &Provenance) -> Html {
    let title = match runs {
        [one] => format!("virtwork report: run {}", one.detail.execution.run_id),
        many => format!("virtwork report: {} runs compared", many.len()),
    };
    let head = el("head")
        .child(el("meta").attr("charset", "utf-8"))
        .child(
            el("meta")
                .attr("http-equiv", "Content-Security-Policy")
                .attr("content", CSP),
        )
        .child(
            el("meta")
                .attr("name", "viewport")
                .attr("content", "width=device-width, initial-scale=1"),
        )
        .child(el("title").text(&title))
        .child(el("style").child(Html::fragment(STYLE)));
    let mut main = el("main");
    if runs.len() > 1 {
        main = main.child(sections::comparison(runs));
    }
    for (index, run) in runs.iter().enumerate() {
        main = main.child(sections::run(index + 1, run));
    }
    let body =
        el("body")
            .child(el("header").child(el("h1").text(&title)).child(
                el("p").attr("class", "meta").text(format!(
                    "Generated {} by {} from the audit database {}.",
                    provenance.generated_at, provenance.generator, provenance.database
                )),
            ))
            .child(contents(runs))
            .child(main);
    let mut document = Html::fragment("<!DOCTYPE html>\n");
    document.push(el("html").attr("lang", "en").child(head).child(body));
    document
}

/// The contents list: the comparison, then each run and its parts.
fn contents(runs: &[RunRecord]) -> Html {
    let mut list = el("ul");
    if runs.len() > 1 {
        list = list.child(el("li").child(el("a").attr("href", "#compare").text("Runs compared")));
    }
    for (index, run) in runs.iter().enumerate() {
        let id = sections::run_anchor(index + 1);
        let parts = sections::PARTS.iter().map(|(suffix, name)| {
            el("li").child(el("a").attr("href", format!("#{id}-{suffix}")).text(*name))
        });
        list = list.child(
            el("li")
                .child(
                    el("a")
                        .attr("href", format!("#{id}"))
                        .text(format!("Run {}", run.detail.execution.run_id)),
                )
                .child(el("ul").children(parts)),
        );
    }
    el("nav")
        .attr("aria-label", "Contents")
        .child(el("h2").text("Contents"))
        .child(list)
        .into()
}

#[cfg(test)]
mod tests {
    use super::data::tests::{context, detail};
    use super::data::{Disruption, Fetched};
    use super::*;
    use crate::audit::query::EventRow;
    use crate::disruption::evidence::{
        Migration, MigrationResult, Restart, RestartEvidence, Source, VmiFacts,
    };
    use crate::disruption::interruption::{Interruption, Interval};
    use crate::disruption::{Findings, assess};

    const HOSTILE: &str = "<script>alert(1)</script>";
    const T0: f64 = 1_772_359_200.0; // 2026-03-01T10:00:00Z

    fn provenance() -> Provenance {
        Provenance {
            database: "/tmp/v.db".into(),
            generated_at: "2026-03-01T12:00:00Z".into(),
            generator: "virtwork test".into(),
        }
    }

    fn hostile_vm() -> Findings {
        Findings {
            namespace: "ns".into(),
            name: format!("vm-{HOSTILE}"),
            workload: format!("cpu{HOSTILE}"),
            run_id: None,
            vmi: Some(VmiFacts {
                phase: Some("Running".into()),
                ..VmiFacts::default()
            }),
            migrations: vec![Migration {
                name: Some(format!("m-{HOSTILE}")),
                start: Some(T0 + 60.0),
                end: Some(T0 + 72.0),
                source_node: Some("node-<a>".into()),
                target_node: Some("node-\"b\"".into()),
                result: MigrationResult::Succeeded,
                from: Source::MigrationObject,
            }],
            restarts: vec![Restart {
                at: T0 + 300.0,
                evidence: RestartEvidence::NewVmi,
                vmi_uid: None,
                cause: Some(format!("churn restart {HOSTILE}")),
            }],
            interruption: Some(Interruption {
                intervals: vec![Interval {
                    start: T0 + 290.0,
                    end: T0 + 330.0,
                    ongoing: false,
                }],
                longest_seconds: 40.0,
                total_seconds: 40.0,
            }),
            measured_by: vec!["vcpu-busy".into()],
        }
    }

    fn run_with(disruption: Fetched<Disruption>) -> RunRecord {
        let mut churn = detail(
            "2026-03-01T10:04:00Z",
            vec![EventRow {
                occurred_at: "2026-03-01T10:05:10Z".into(),
                event_type: "churn_action_failed".into(),
                message: Some(format!("restart ns/vm-{HOSTILE}: failed")),
                error_detail: Some(format!("webhook said {HOSTILE}")),
                vm_name: None,
                workload: None,
            }],
        );
        churn.execution.command = "churn".into();
        RunRecord {
            detail: detail("2026-03-01T10:00:00Z", Vec::new()),
            churns: vec![churn],
            load: Fetched::Missing("left out with --no-prometheus".into()),
            alerts: Fetched::Missing("left out with --no-prometheus".into()),
            disruption,
        }
    }

    /// The part of the page between the churn heading and the alerts heading.
    fn churn_part(html: &str) -> &str {
        let part = html.split_once("id=\"run-1-churn\"").unwrap().1;
        part.split_once("id=\"run-1-alerts\"").unwrap().0
    }

    #[test]
    fn the_timeline_draws_every_kind_with_escaped_cluster_text_and_its_tables() {
        let mut ctx = context();
        ctx.prometheus = Ok(format!("prometheus {HOSTILE}"));
        let vm = assess(hostile_vm(), &ctx.budget, true);
        let run = run_with(Fetched::Data(Disruption {
            vms: vec![vm],
            context: ctx,
        }));
        let doc = page(&[run], &provenance());
        let html = doc.as_str();
        assert!(!html.contains("<script"), "raw hostile text in the page");
        let part = churn_part(html);
        // One labelled timeline image, every kind in its legend, followed by its tables.
        assert_eq!(part.matches("<svg ").count(), 1);
        let svg = part.split_once("<svg ").unwrap().1;
        assert!(svg.contains("role=\"img\" aria-labelledby=\"run-1-timeline-t run-1-timeline-d\""));
        assert!(svg.contains("<title id=\"run-1-timeline-t\">Churn actions, migrations, restarts and interruptions over time</title>"));
        for legend in [
            ">churn action failed</text>",
            ">migration (start to end)</text>",
            ">restart</text>",
            ">workload interrupted</text>",
        ] {
            assert!(svg.contains(legend), "{legend}");
        }
        let after = svg.split_once("</svg>").unwrap().1;
        assert!(after.starts_with("<details><summary>All 4 events</summary><table>"));
        // Each event in the table, the cluster's and the database's text escaped.
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        assert!(part.contains(&format!(
            "<td class=\"num\">1m</td><td class=\"num\">12s</td><td>vm-{escaped}</td><td>migration</td><td>node-&lt;a&gt; → node-&quot;b&quot;, succeeded, read from migration-object (m-{escaped})</td>"
        )), "{part}");
        assert!(part.contains(&format!("a new VMI; cause: churn restart {escaped}")));
        assert!(part.contains(&format!("restart: failed: webhook said {escaped}")));
        assert!(part.contains("<td class=\"num\">4m50s</td><td class=\"num\">40s</td>"));
        assert!(part.contains(&format!("interruptions measured with prometheus {escaped}")));
        // Its tooltip names the kind, the VM and when, in words.
        assert!(svg.contains(&format!(
            "<title>migration of ns/vm-{escaped} at 1m for 12s: "
        )));
        // The VM is beyond the budget (restarted, 40 s > 30 s): said in words, not colour.
        assert!(part.contains("<span class=\"bad\">beyond-budget</span>"));
        assert!(part.contains("workload interrupted for 40s (longest; budget 30s)"));
    }

    #[test]
    fn without_a_cluster_the_section_says_what_was_not_measured_and_why() {
        let run = run_with(Fetched::Missing(format!("no cluster reachable: {HOSTILE}")));
        let doc = page(&[run], &provenance());
        let part = churn_part(doc.as_str());
        assert!(part.contains(
            "Migrations, restarts and interruptions not measured: no cluster reachable: \
             &lt;script&gt;alert(1)&lt;/script&gt;. The timeline shows only the churn actions"
        ));
        // The churn action is still on the timeline, as the failure cross.
        assert_eq!(part.matches("<svg ").count(), 1);
        assert!(part.contains("<summary>All 1 events</summary>"));
        assert!(!part.contains("VMs disturbed"));

        let mut ctx = context();
        ctx.prometheus =
            Err("--no-prometheus: migrations and restarts are from the API alone".into());
        let mut quiet = hostile_vm();
        quiet.interruption = None;
        let run = run_with(Fetched::Data(Disruption {
            vms: vec![assess(quiet, &ctx.budget, false)],
            context: ctx,
        }));
        let doc = page(&[run], &provenance());
        assert!(churn_part(doc.as_str()).contains(
            "Interruptions not measured: --no-prometheus: migrations and restarts are from the API alone."
        ));
    }

    /// A load section: two cpu VMs at different params (own thresholds), one BELOW, one
    /// profiled with its expected shape, a hostile VM name and verify note.
    fn loaded() -> data::Load {
        use crate::signals::contract::Unit;
        use crate::verify::evaluate::Verdict;
        use data::{Expected, Judged, SignalSeries, VmSignal};
        let judged = |verdict, note: &str| {
            Some(Judged {
                verdict,
                observed: Some(0.1),
                note: Some(note.to_string()),
            })
        };
        let samples = |level: f64| (0..10).map(|k| (30.0 * k as f64, level)).collect();
        let vms = std::collections::BTreeMap::from([
            (
                format!("vm-{HOSTILE}"),
                VmSignal {
                    samples: samples(0.05),
                    threshold: Some(0.15),
                    verdict: judged(Verdict::Below, &format!("note {HOSTILE}")),
                    expected: None,
                },
            ),
            (
                "vm-ok".to_string(),
                VmSignal {
                    samples: samples(0.9),
                    threshold: Some(0.5),
                    verdict: judged(Verdict::TooYoung, "young"),
                    expected: None,
                },
            ),
            (
                "vm-step".to_string(),
                VmSignal {
                    samples: samples(0.6),
                    threshold: Some(0.5),
                    verdict: judged(Verdict::Pass, "fine"),
                    expected: Some(Expected {
                        shape: "step: level 90 for 30s, then 10".into(),
                        clock_from: "the VMI's creation (verify fitted no clock)".into(),
                        points: vec![(0.0, 0, 0.0), (20.0, 90, 0.9), (50.0, 10, 0.1)],
                    }),
                },
            ),
        ]);
        data::Load {
            series: vec![SignalSeries {
                workload: "cpu".into(),
                signal: "vcpu-busy".into(),
                description: "busy".into(),
                unit: Unit::VcpuFraction,
                catalog: false,
                note: None,
                vms,
            }],
            params_from: "each VM's own params".into(),
            verdicts: Ok("judged".into()),
            undrawn: vec![(
                format!("cat-{HOSTILE}"),
                "catalog-signals".into(),
                Judged {
                    verdict: Verdict::Unverifiable,
                    observed: None,
                    note: Some(format!("entry {HOSTILE} differs")),
                },
            )],
        }
    }

    fn load_part(html: &str) -> &str {
        let part = html.split_once("id=\"run-1-load\"").unwrap().1;
        part.split_once("id=\"run-1-churn\"").unwrap().0
    }

    #[test]
    fn the_load_section_draws_own_thresholds_verdicts_and_expected_shapes_escaped() {
        let mut run = run_with(Fetched::Missing("no cluster".into()));
        run.load = Fetched::Data(loaded());
        let doc = page(&[run], &provenance());
        let html = doc.as_str();
        assert!(!html.contains("<script"), "raw hostile text in the page");
        let part = load_part(html);
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        // The run's verdicts counted, in words.
        assert!(
            part.contains("Verdicts of the run&#39;s VM signals: 1 PASS, 1 TOO YOUNG, 1 BELOW, 1 UNVERIFIABLE."),
            "{part}"
        );
        // Both thresholds drawn, each with its VMs, and said in words.
        assert!(
            part.contains(">threshold 0.15 vCPU (1 VMs)</text>"),
            "{part}"
        );
        assert!(part.contains(">threshold 0.50 vCPU (2 VMs)</text>"));
        assert!(
            part.contains(
                "the VMs&#39; thresholds differ (0.15 vCPU for 1 VMs, 0.50 vCPU for 2 VMs)"
            )
        );
        // The failed VM's line and a cross labelled BELOW; the profiled VM's ring and word.
        let svg = part
            .split_once("<svg ")
            .unwrap()
            .1
            .split_once("</svg>")
            .unwrap()
            .0;
        assert!(
            svg.contains(&format!(
                "<title>vm-{escaped}: BELOW (threshold 0.15 vCPU)</title><path d=\"M"
            )),
            "{svg}"
        );
        assert!(svg.contains(">BELOW</text>"));
        assert!(svg.contains("<title>vm-step: PASS (threshold 0.50 vCPU)</title><circle"));
        assert!(
            svg.contains(">vm-step expected</text>") && svg.contains(">vm-step measured</text>")
        );
        // The table: failed first, its own threshold, the verdict in words, the note escaped.
        let first = part.split("<tbody><tr>").nth(2).unwrap();
        assert!(
            first.starts_with(&format!(
                "<td>vm-{escaped}</td><td class=\"num\">0.05 vCPU</td><td class=\"num\">0.15 vCPU</td><td><span class=\"bad\">below</span></td><td><span class=\"bad\">BELOW</span></td><td>note {escaped}</td>"
            )),
            "{first}"
        );
        // The expected shape as rows.
        assert!(part.contains(
            "<summary>Expected shape of vm-step: step: level 90 for 30s, then 10</summary>"
        ));
        assert!(part.contains("<td class=\"num\">20s</td><td class=\"num\">90</td><td class=\"num\">0.90 vCPU</td>"), "{part}");
        // A verdict on nothing drawn still shows, escaped.
        assert!(part.contains(&format!("<td>cat-{escaped}</td><td>catalog-signals</td><td><span class=\"bad\">UNVERIFIABLE</span></td><td>entry {escaped} differs</td>")));
    }

    #[test]
    fn without_verdicts_or_samples_the_load_section_says_why() {
        let mut run = run_with(Fetched::Missing("no cluster".into()));
        let mut load = loaded();
        load.verdicts = Err(format!("verify needs the run's VMs: {HOSTILE}"));
        for vm in load.series[0].vms.values_mut() {
            vm.samples.clear();
            vm.verdict = None;
        }
        load.undrawn.clear();
        run.load = Fetched::Data(load);
        let doc = page(&[run], &provenance());
        let part = load_part(doc.as_str());
        assert!(part.contains("No verdicts: verify needs the run&#39;s VMs: &lt;script&gt;"));
        assert!(
            part.contains("Prometheus holds no samples of this run&#39;s signals in its window")
        );
        assert!(part.contains("No samples of vcpu-busy for any of its 3 VMs"));
        assert_eq!(part.matches("<svg ").count(), 0);
        assert!(part.contains("<td>not judged</td>"));
    }
    #[test]
    fn a_storm_of_alert_spans_is_listed_up_to_the_cap_and_counted_by_alert() {
        let mut run = run_with(Fetched::Missing("no cluster".into()));
        let alerts = ["KubeVirtVMStuck", "Hot", HOSTILE];
        let spans: Vec<data::AlertSpan> = (0..5_000)
            .map(|k| data::AlertSpan {
                alert: alerts[k % 3].to_string(),
                vm: format!("virtwork-cpu-{k}"),
                from: (k % 600) as f64 * 60.0,
                until: (k % 600) as f64 * 60.0 + 45.0,
                firing_at_end: false,
            })
            .collect();
        run.alerts = Fetched::Data(spans);
        let doc = page(&[run], &provenance());
        let html = doc.as_str();
        assert!(html.len() < 2 * 1024 * 1024, "{} bytes", html.len());
        assert!(!html.contains("<script"));
        let part = html.split_once("id=\"run-1-alerts\"").unwrap().1;
        let table = part.split_once("<tbody>").unwrap().1;
        let table = table.split_once("</tbody>").unwrap().0;
        assert_eq!(table.matches("<tr>").count(), sections::MAX_TABLE_ROWS);
        assert!(
            part.contains(
                "3000 more firing spans (counted by alert) not listed (the table stops at \
                 2000 rows); by kind: "
            ),
            "{part}"
        );
        // The chart draws at most 100 spans per alert, and says so.
        let chart = part
            .split_once("<svg ")
            .unwrap()
            .1
            .split_once("</svg>")
            .unwrap()
            .0;
        assert_eq!(chart.matches(" for virtwork-cpu-").count(), 300);
        assert!(
            part.contains(
                "Not drawn: 0 more alerts (at most 20 rows) and 4700 spans of crowded rows"
            )
        );
        // The 3,000 left out, counted per alert (the hostile name escaped).
        for alert in [
            "Hot: 1000",
            "KubeVirtVMStuck: 1000",
            "&lt;script&gt;alert(1)&lt;/script&gt;: 1000",
        ] {
            assert!(part.contains(alert), "{alert}");
        }
    }
}
