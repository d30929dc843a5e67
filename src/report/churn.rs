//! What `virtwork churn` prints: the schedule of a dry run and the final summary, as human
//! text or one JSON document (schema in docs/output-json.md), and the live progress line.
//! Rendering of [`ChurnSummary`]; the command decides what goes in it. A dry run's schedule
//! (up to a million slots) is streamed to the writer it is given, never held whole.
//!
//! Must not: decide what churn does, or choose where the text goes (the command passes the
//! writer).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::json;

use crate::churn::latency::Stats;
use crate::churn::observe::SkipCause;
use crate::churn::{ChurnTally, ChurnVm, Schedule};
use crate::model::{ChurnAction, ChurnActions, ChurnRate, Share};

/// How the churn ended, the `status` field of the JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChurnStatus {
    Completed,
    /// Some action failed or a stopped VM could not be started again (exit 1).
    CompletedWithErrors,
    /// Ctrl-C / SIGTERM: no new action; stopped VMs were started again (exit 130).
    Interrupted,
    DryRun,
}

/// The facts of one churn.
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnSummary<'a> {
    pub status: ChurnStatus,
    /// The churn's own audit run id (also the `virtwork/churn-id` label of its migrations).
    pub churn_id: String,
    pub namespace: Option<&'a str>,
    pub run_id_filter: Option<&'a str>,
    pub seed: u64,
    pub rate: ChurnRate,
    pub duration: std::time::Duration,
    pub share: Share,
    pub actions: &'a ChurnActions,
    /// VMs in scope, and those running when churn started.
    pub vms_found: usize,
    pub vms: &'a [ChurnVm],
    pub schedule: &'a Schedule,
    pub tally: &'a ChurnTally,
}

const FORMAT_VERSION: u32 = 1;

/// The JSON document without a dry run's schedule.
fn document(summary: &ChurnSummary<'_>) -> serde_json::Value {
    let tally = summary.tally;
    let counts: serde_json::Map<String, serde_json::Value> = ChurnAction::ALL
        .iter()
        .map(|a| (a.key().to_string(), json!(tally.of(*a))))
        .collect();
    let skips: serde_json::Map<String, serde_json::Value> = SkipCause::ALL
        .iter()
        .map(|c| {
            (
                c.key().to_string(),
                json!(tally.skips.get(c).copied().unwrap_or(0)),
            )
        })
        .collect();
    json!({
        "format_version": FORMAT_VERSION,
        "command": "churn",
        "status": summary.status,
        "churn_id": summary.churn_id,
        "namespace": summary.namespace,
        "run_id_filter": summary.run_id_filter,
        "seed": summary.seed,
        "rate": summary.rate.to_string(),
        "rate_per_minute": summary.rate.per_minute(),
        "duration_seconds": summary.duration.as_secs(),
        "share_percent": summary.share.percent(),
        "actions": summary.actions.to_string(),
        "vms": {
            "found": summary.vms_found,
            "running": summary.vms.len(),
            "selected": summary.schedule.selected.len(),
        },
        "planned": summary.schedule.len(),
        "started": tally.total_started(),
        "skipped": tally.total_skipped(),
        "skipped_by_cause": skips,
        "not_started": tally.not_started,
        "stopped_early": tally.stopped_early,
        "counts": counts,
        "latency": tally.latencies.json(),
        "cut_short": tally.cut_short.iter()
            .map(|(vm, action, why)| json!({"vm": vm, "action": action, "why": why}))
            .collect::<Vec<_>>(),
        "restored": tally.restored,
        "not_restored": tally.not_restored.iter()
            .map(|(vm, error)| json!({"vm": vm, "error": error}))
            .collect::<Vec<_>>(),
        "restore_skipped": tally.restore_skipped.iter()
            .map(|(vm, why)| json!({"vm": vm, "why": why}))
            .collect::<Vec<_>>(),
        "failures": tally.failures,
    })
}

/// The JSON document (one line) of a churn that acted.
pub fn churn_json(summary: &ChurnSummary<'_>) -> String {
    format!("{}\n", document(summary))
}

/// One dry-run slot as JSON.
fn slot_json(
    summary: &ChurnSummary<'_>,
    slot: crate::churn::Slot,
    vm: Option<usize>,
) -> serde_json::Value {
    json!({
        "at_seconds": slot.at.as_secs_f64(),
        "action": slot.action,
        "vm": vm.map(|i| summary.vms[i].display_name()),
    })
}

/// A dry run's JSON document (one line), its `schedule` array streamed slot by slot.
pub fn write_dry_run_json(
    summary: &ChurnSummary<'_>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let head = document(summary).to_string();
    let open = head.strip_suffix('}').unwrap_or(&head);
    write!(out, "{open},\"schedule\":[")?;
    for (n, (slot, vm)) in summary.schedule.preview(summary.vms).enumerate() {
        if n > 0 {
            out.write_all(b",")?;
        }
        write!(out, "{}", slot_json(summary, slot, vm))?;
    }
    out.write_all(b"]}\n")
}

/// A dry run's YAML document: the summary, then `schedule:` streamed slot by slot (each
/// entry in JSON's flow form, which YAML reads).
pub fn write_dry_run_yaml(
    summary: &ChurnSummary<'_>,
    head: &str,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    out.write_all(head.as_bytes())?;
    if summary.schedule.is_empty() {
        return out.write_all(b"schedule: []\n");
    }
    out.write_all(b"schedule:\n")?;
    for (slot, vm) in summary.schedule.preview(summary.vms) {
        writeln!(out, "- {}", slot_json(summary, slot, vm))?;
    }
    Ok(())
}

/// The dry run's document without its schedule, as JSON text (for `--output yaml`, which
/// the command converts before streaming the schedule after it).
pub fn dry_run_head_json(summary: &ChurnSummary<'_>) -> String {
    format!("{}\n", document(summary))
}

fn headline(summary: &ChurnSummary<'_>) -> String {
    let scope = match (summary.namespace, summary.run_id_filter) {
        (Some(ns), Some(run)) => format!("run {run} in namespace {ns}"),
        (Some(ns), None) => format!("namespace {ns}"),
        (None, Some(run)) => format!("run {run} in all namespaces"),
        (None, None) => "all namespaces".to_string(),
    };
    format!(
        "Churn {} of {scope}: {} actions ({}) over {}s at {} on {} of {} running VMs ({} found), seed {}\n",
        summary.churn_id,
        summary.schedule.len(),
        summary.actions,
        summary.duration.as_secs(),
        summary.rate,
        summary.schedule.selected.len(),
        summary.vms.len(),
        summary.vms_found,
        summary.seed,
    )
}

/// The dry run's schedule, one line per slot, streamed.
pub fn write_schedule_text(
    summary: &ChurnSummary<'_>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    out.write_all(headline(summary).as_bytes())?;
    out.write_all(b"Schedule (each VM's action assumed over before its next turn):\n")?;
    for (slot, vm) in summary.schedule.preview(summary.vms) {
        let target = vm.map_or("(no idle VM can take it)".to_string(), |i| {
            summary.vms[i].display_name()
        });
        writeln!(
            out,
            "  +{:<9} {:<10} {target}",
            format!("{:.1}s", slot.at.as_secs_f64()),
            slot.action.as_str()
        )?;
    }
    Ok(())
}

/// The dry run's schedule as one string (tests and small schedules).
pub fn schedule_text(summary: &ChurnSummary<'_>) -> String {
    let mut out = Vec::new();
    write_schedule_text(summary, &mut out).expect("writing to memory");
    String::from_utf8(out).expect("the schedule is UTF-8")
}

/// `p50 1.2s p90 3.4s p99 5.0s max 6.1s (n=12)`.
fn stats_text(stats: &Stats) -> String {
    format!(
        "p50 {:.1}s p90 {:.1}s p99 {:.1}s max {:.1}s (n={})",
        stats.p50_seconds, stats.p90_seconds, stats.p99_seconds, stats.max_seconds, stats.count
    )
}

/// The live progress line (no newline).
pub fn progress_line(progress: &crate::churn::Progress) -> String {
    let mut parts: Vec<String> = progress
        .by_action
        .iter()
        .map(|(action, (done, under_way, failed))| {
            format!("{action} {done} done, {under_way} under way, {failed} failed")
        })
        .collect();
    if parts.is_empty() {
        parts.push("no action yet".to_string());
    }
    let next = match progress.next {
        Some((action, wait)) => format!("next {action} in {:.1}s", wait.as_secs_f64()),
        None => "no further action".to_string(),
    };
    format!(
        "churn {}s: {}; skipped {}; {next}; {} VM(s) down",
        progress.elapsed.as_secs(),
        parts.join("; "),
        progress.skipped,
        progress.down
    )
}

/// The human summary.
pub fn summary_text(summary: &ChurnSummary<'_>) -> String {
    let tally = summary.tally;
    let mut out = headline(summary);
    if summary.status == ChurnStatus::Interrupted {
        out.push_str("Interrupted: no new action was started.\n");
    }
    for action in ChurnAction::ALL {
        let c = tally.of(action);
        let _ = writeln!(
            out,
            "  {:<10} started {:<5} succeeded {:<5} failed {}",
            action.as_str(),
            c.started,
            c.succeeded,
            c.failed
        );
    }
    for (cause, n) in &tally.skips {
        let _ = writeln!(out, "  Skipped ({}): {n}", cause.describe());
    }
    if tally.not_started > 0 {
        let why = if tally.stopped_early.is_some() {
            "stopped"
        } else {
            "interrupted"
        };
        let _ = writeln!(out, "  Not started ({why}): {}", tally.not_started);
    }
    if let Some(reason) = &tally.stopped_early {
        let _ = writeln!(out, "Stopped early: {reason}");
    }
    let mut latency_lines = Vec::new();
    for action in ChurnAction::ALL {
        if let Some(stats) = tally.latencies.action_stats(action) {
            latency_lines.push(format!("  {:<10} {}", action.as_str(), stats_text(&stats)));
        }
    }
    for (phase, stats) in tally.latencies.phase_stats() {
        latency_lines.push(format!("  migration to {phase:<13} {}", stats_text(&stats)));
    }
    if !latency_lines.is_empty() {
        out.push_str("Latency (request to running again; migration creation to phase):\n");
        for line in latency_lines {
            let _ = writeln!(out, "{line}");
        }
    }
    for (vm, action, why) in &tally.cut_short {
        let _ = writeln!(out, "Ended early: {action} {vm}: {why}");
    }
    if !tally.restored.is_empty() {
        let _ = writeln!(out, "Started again: {}", tally.restored.join(", "));
    }
    for (vm, error) in &tally.not_restored {
        let _ = writeln!(out, "NOT started again: {vm}: {error}");
    }
    for (vm, why) in &tally.restore_skipped {
        let _ = writeln!(out, "Left alone (owed a start): {vm}: {why}");
    }
    for failure in &tally.failures {
        let _ = writeln!(
            out,
            "Failed: {} {}: {}",
            failure.action, failure.vm, failure.error
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::churn::{ActionResult, ChurnSpec};

    #[test]
    fn the_documents_carry_counts_per_action_and_failures() {
        let vms: Vec<ChurnVm> = (0..2)
            .map(|i| ChurnVm {
                namespace: "virtwork".into(),
                name: format!("vm-{i}"),
                uid: format!("u{i}"),
                run_id: "r".into(),
                migratable: true,
            })
            .collect();
        let actions: ChurnActions = "restart,migrate".parse().unwrap();
        let spec = ChurnSpec {
            rate: "2/s".parse().unwrap(),
            duration: std::time::Duration::from_secs(2),
            share: Share::ALL,
            actions: actions.clone(),
            seed: 9,
        };
        let schedule = Schedule::new(&vms, &spec);
        let mut tally = ChurnTally::default();
        tally.ended(
            &vms[0],
            ChurnAction::Migrate,
            &ActionResult::Failed("x".into()),
        );
        let mut summary = ChurnSummary {
            status: ChurnStatus::CompletedWithErrors,
            churn_id: "c".into(),
            namespace: Some("virtwork"),
            run_id_filter: None,
            seed: 9,
            rate: spec.rate,
            duration: spec.duration,
            share: spec.share,
            actions: &actions,
            vms_found: 3,
            vms: &vms,
            schedule: &schedule,
            tally: &tally,
        };
        let doc: serde_json::Value = serde_json::from_str(&churn_json(&summary)).unwrap();
        assert_eq!(doc["command"], "churn");
        assert_eq!(doc["format_version"], 1);
        assert_eq!(doc["status"], "completed_with_errors");
        assert_eq!(doc["counts"]["migrate"]["failed"], 1);
        assert_eq!(doc["counts"]["stop_start"]["started"], 0);
        assert_eq!(doc["failures"][0]["action"], "migrate");
        assert_eq!(doc["vms"]["found"], 3);
        assert_eq!(doc["planned"], 4);
        assert!(doc.get("schedule").is_none());
        let text = summary_text(&summary);
        assert!(text.contains("Failed: migrate virtwork/vm-0: x"), "{text}");
        summary.status = ChurnStatus::DryRun;
        let mut streamed = Vec::new();
        write_dry_run_json(&summary, &mut streamed).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&streamed).unwrap();
        assert_eq!(doc["schedule"].as_array().unwrap().len(), 4);
        assert_eq!(doc["schedule"][1]["at_seconds"], 0.5);
        let text = schedule_text(&summary);
        assert_eq!(text.lines().filter(|l| l.starts_with("  +")).count(), 4);
    }
}
