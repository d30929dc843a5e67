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
