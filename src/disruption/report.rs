//! The reports of `virtwork disruption`: the text tables (VMs, migrations, restarts, the
//! VMs beyond budget) with the fleet's summary, and the JSON document (docs/output-json.md).
//! Cluster text (names, nodes, causes) is escaped for terminals here.
//!
//! Must not: judge anything (the core did) or write anywhere.

use serde_json::{Value, json};

use super::evidence::Migration;
use super::{Assessed, Budget, Fleet, Span};
use crate::terminal::safe;

/// What the report says about how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub namespace: Option<String>,
    pub run_id: Option<String>,
    pub span: Span,
    /// How the window was given (`--since 2h`, `--from/--to`, `--execution <id>`).
    pub span_from: String,
    /// Prometheus as found, or why interruptions were not measured.
    pub prometheus: Result<String, String>,
    /// The step of the range queries and the scrape interval they saw, in seconds.
    pub step: Option<f64>,
    pub scrape_interval: Option<f64>,
    pub budget: Budget,
}

/// An instant as RFC 3339 (UTC, whole seconds).
pub fn time_text(t: f64) -> String {
    jiff::Timestamp::from_second(t.round() as i64)
        .map_or_else(|_| format!("{t}"), |t| t.to_string())
}

/// Seconds as `4s`, `12.5s`, `3m05s`.
pub fn seconds_text(s: f64) -> String {
    if s >= 60.0 {
        let whole = s.round() as u64;
        return format!("{}m{:02}s", whole / 60, whole % 60);
    }
    let text = format!("{s:.1}");
    format!("{}s", text.trim_end_matches(".0"))
}

fn opt_time(t: Option<f64>) -> String {
    t.map_or("-".into(), time_text)
}

fn vm_name(a: &Assessed) -> String {
    safe(
        &format!("{}/{}", a.findings.namespace, a.findings.name),
        120,
    )
}

fn migrations_cell(a: &Assessed) -> String {
    let m = &a.findings.migrations;
    let longest = m
        .iter()
        .filter_map(Migration::duration)
        .fold(None, |acc: Option<f64>, d| {
            Some(acc.map_or(d, |a| a.max(d)))
        });
    match (m.len(), longest) {
        (0, _) => "0".into(),
        (n, Some(d)) => format!("{n} (max {})", seconds_text(d)),
        (n, None) => n.to_string(),
    }
}

fn interruption_cells(a: &Assessed) -> [String; 2] {
    match &a.findings.interruption {
        Some(i) => [
            seconds_text(i.longest_seconds),
            seconds_text(i.total_seconds),
        ],
        None => ["-".into(), "-".into()],
    }
}

fn vm_table(vms: &[Assessed]) -> String {
    let header = [
        "VM",
        "WORKLOAD",
        "MIGRATIONS",
        "RESTARTS",
        "LONGEST",
        "TOTAL",
        "RESULT",
    ];
    let rows: Vec<[String; 7]> = vms
        .iter()
        .map(|a| {
            let [longest, total] = interruption_cells(a);
            [
                vm_name(a),
                safe(&a.findings.workload, 40),
                migrations_cell(a),
                a.findings.restarts.len().to_string(),
                longest,
                total,
                a.outcome.as_str().to_string(),
            ]
        })
        .collect();
    crate::table::columns(&header, &rows, "")
}

fn migration_table(vms: &[Assessed]) -> Option<String> {
    let header = [
        "VM", "START", "END", "DURATION", "SOURCE", "TARGET", "RESULT", "FROM",
    ];
    let rows: Vec<[String; 8]> = vms
        .iter()
        .flat_map(|a| a.findings.migrations.iter().map(move |m| (a, m)))
        .map(|(a, m)| {
            [
                vm_name(a),
                opt_time(m.start),
                opt_time(m.end),
                m.duration().map_or("-".into(), seconds_text),
                m.source_node.as_deref().map_or("-".into(), |n| safe(n, 64)),
                m.target_node.as_deref().map_or("-".into(), |n| safe(n, 64)),
                m.result.as_str().into(),
                m.from.as_str().into(),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "\nMigrations:\n{}",
            crate::table::columns(&header, &rows, "  ")
        )
    })
}

fn restart_table(vms: &[Assessed]) -> Option<String> {
    let header = ["VM", "AT", "EVIDENCE", "CAUSE"];
    let rows: Vec<[String; 4]> = vms
        .iter()
        .flat_map(|a| a.findings.restarts.iter().map(move |r| (a, r)))
        .map(|(a, r)| {
            let evidence = serde_json::to_value(r.evidence)
                .ok()
                .and_then(|v| v.as_str().map(String::from));
            [
                vm_name(a),
                time_text(r.at),
                evidence.unwrap_or_default(),
                r.cause
                    .as_deref()
                    .map_or("not stated by the cluster".into(), |c| safe(c, 120)),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "\nRestarts:\n{}",
            crate::table::columns(&header, &rows, "  ")
        )
    })
}

/// The summary line(s) of the fleet.
fn summary(f: &Fleet, ctx: &Context) -> String {
    let mut out = format!(
        "\n{} VM(s) from {} to {} ({}): {} undisturbed, {} migrated, {} restarted, {} beyond budget, {} unknown.\n",
        f.vms,
        time_text(ctx.span.from),
        time_text(ctx.span.to),
        ctx.span_from,
        f.undisturbed,
        f.migrated,
        f.restarted,
        f.beyond_budget,
        f.unknown
    );
    match f.migration_seconds {
        Some([p50, p90, p99, max]) => out.push_str(&format!(
            "Migrations: {} ({} failed); duration p50 {}, p90 {}, p99 {}, max {}.\n",
            f.migrations,
            f.migrations_failed,
            seconds_text(p50),
            seconds_text(p90),
            seconds_text(p99),
            seconds_text(max)
        )),
        None => out.push_str(&format!(
            "Migrations: {} ({} failed).\n",
            f.migrations, f.migrations_failed
        )),
    }
    match (&ctx.prometheus, &f.longest_interruption) {
        (Err(why), _) => out.push_str(&format!(
            "Interruptions not measured: {}.\n",
            safe(why, 300)
        )),
        (Ok(p), Some((s, vm))) => out.push_str(&format!(
            "Longest interruption: {} ({}); Prometheus: {}.\n",
            seconds_text(*s),
            safe(vm, 120),
            safe(p, 200)
        )),
        (Ok(p), None) => out.push_str(&format!(
            "No interruption measured; Prometheus: {}.\n",
            safe(p, 200)
        )),
    }
    let max = ctx
        .budget
        .max_interruption
        .map_or("not measured".into(), |m| {
            format!(
                "at most {} ({})",
                seconds_text(m),
                ctx.budget.max_interruption_from
            )
        });
    out.push_str(&format!(
        "Budget: interruption {max}; restarts allowed: {}.\n",
        ctx.budget.allow_restarts
    ));
    out
}

/// The text report: the VM table, the migrations and restarts, the VMs beyond budget and
/// the summary.
pub fn text_report(vms: &[Assessed], ctx: &Context) -> String {
    let mut out = vm_table(vms);
    out.extend(migration_table(vms));
    out.extend(restart_table(vms));
    let beyond: Vec<&Assessed> = vms.iter().filter(|a| !a.reasons.is_empty()).collect();
    if !beyond.is_empty() {
        out.push_str("\nBeyond budget:\n");
        for a in beyond {
            out.push_str(&format!(
                "  {}: {}\n",
                vm_name(a),
                safe(&a.reasons.join("; "), 600)
            ));
        }
    }
    let unknown: Vec<&Assessed> = vms
        .iter()
        .filter(|a| !a.unknown_because.is_empty())
        .collect();
    if !unknown.is_empty() {
        out.push_str("\nNot judged (unknown):\n");
        for a in unknown {
            out.push_str(&format!(
                "  {}: {}\n",
                vm_name(a),
                safe(&a.unknown_because.join("; "), 600)
            ));
        }
    }
    out.push_str(&summary(&super::fleet(vms), ctx));
    out
}

fn migration_json(m: &Migration) -> Value {
    json!({
        "name": m.name,
        "start": m.start.map(time_text),
        "end": m.end.map(time_text),
        "duration_seconds": m.duration(),
        "source_node": m.source_node,
        "target_node": m.target_node,
        "result": m.result,
        "from": m.from,
    })
}

fn vm_json(a: &Assessed) -> Value {
    let f = &a.findings;
    json!({
        "namespace": f.namespace,
        "name": f.name,
        "workload": f.workload,
        "run_id": f.run_id,
        "vmi_phase": f.vmi.as_ref().and_then(|v| v.phase.clone()),
        "node": f.vmi.as_ref().and_then(|v| v.node.clone()),
        "live_migratable": f.vmi.as_ref().and_then(|v| v.migratable),
        "migrations": f.migrations.iter().map(migration_json).collect::<Vec<_>>(),
        "restarts": f.restarts.iter().map(|r| json!({
            "at": time_text(r.at),
            "evidence": r.evidence,
            "vmi_uid": r.vmi_uid,
            "cause": r.cause,
        })).collect::<Vec<_>>(),
        "interruption": f.interruption.as_ref().map(|i| json!({
            "longest_seconds": i.longest_seconds,
            "total_seconds": i.total_seconds,
            "signals": f.measured_by,
            "intervals": i.intervals.iter().map(|iv| json!({
                "start": time_text(iv.start),
                "end": time_text(iv.end),
                "seconds": iv.seconds(),
                "ongoing": iv.ongoing,
            })).collect::<Vec<_>>(),
        })),
        "outcome": a.outcome,
        "reasons": a.reasons,
        "unknown_because": a.unknown_because,
    })
}

/// The JSON document (`--output json|yaml`, see docs/output-json.md).
pub fn json_report(vms: &[Assessed], ctx: &Context) -> Value {
    let f = super::fleet(vms);
    let [p50, p90, p99, max] = f.migration_seconds.map_or([None; 4], |p| p.map(Some));
    json!({
        "format_version": 1,
        "command": "disruption",
        "namespace": ctx.namespace,
        "run_id_filter": ctx.run_id,
        "window": {
            "from": time_text(ctx.span.from),
            "to": time_text(ctx.span.to),
            "seconds": ctx.span.seconds().round(),
            "given_as": ctx.span_from,
        },
        "prometheus": ctx.prometheus.as_ref().ok(),
        "interruptions_measured": ctx.prometheus.is_ok(),
        "not_measured_because": ctx.prometheus.as_ref().err(),
        "step_seconds": ctx.step,
        "scrape_interval_seconds": ctx.scrape_interval,
        "budget": {
            "max_interruption_seconds": ctx.budget.max_interruption,
            "max_interruption_from": ctx.budget.max_interruption_from,
            "allow_restarts": ctx.budget.allow_restarts,
        },
        "passed": f.beyond_budget == 0 && f.unknown == 0,
        "summary": {
            "vms": f.vms,
            "undisturbed": f.undisturbed,
            "migrated": f.migrated,
            "restarted": f.restarted,
            "beyond_budget": f.beyond_budget,
            "unknown": f.unknown,
            "migrations": f.migrations,
            "migrations_failed": f.migrations_failed,
            "migration_seconds": {"p50": p50, "p90": p90, "p99": p99, "max": max},
            "longest_interruption": f.longest_interruption.as_ref().map(|(s, vm)| json!({"seconds": s, "vm": vm})),
        },
        "vms": vms.iter().map(vm_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_read_as_people_write_them() {
        assert_eq!(seconds_text(4.0), "4s");
        assert_eq!(seconds_text(12.5), "12.5s");
        assert_eq!(seconds_text(185.0), "3m05s");
        assert_eq!(time_text(1_796_205_600.0), "2026-12-02T10:00:00Z");
    }
}
