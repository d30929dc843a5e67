//! What `virtwork churn` prints: the schedule of a dry run and the final summary, as human
//! text or one JSON document (schema in docs/output-json.md). Pure rendering of
//! [`ChurnSummary`]; the command decides what goes in it.
//!
//! Must not: write anywhere (the command prints what these functions return).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::json;

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

/// The JSON document (one line); a dry run lists the schedule.
pub fn churn_json(summary: &ChurnSummary<'_>) -> String {
    let tally = summary.tally;
    let counts: serde_json::Map<String, serde_json::Value> = ChurnAction::ALL
        .iter()
        .map(|a| (a.key().to_string(), json!(tally.of(*a))))
        .collect();
    let mut doc = json!({
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
        "skipped": tally.skipped,
        "not_started": tally.not_started,
        "counts": counts,
        "restored": tally.restored,
        "not_restored": tally.not_restored.iter()
            .map(|(vm, error)| json!({"vm": vm, "error": error}))
            .collect::<Vec<_>>(),
        "failures": tally.failures,
    });
    if summary.status == ChurnStatus::DryRun {
        doc["schedule"] = summary
            .schedule
            .preview(summary.vms)
            .map(|(slot, vm)| {
                json!({
                    "at_seconds": slot.at.as_secs_f64(),
                    "action": slot.action,
                    "vm": vm.map(|i| summary.vms[i].display_name()),
                })
            })
            .collect();
    }
    format!("{doc}\n")
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

/// The dry run's schedule: one line per slot.
pub fn schedule_text(summary: &ChurnSummary<'_>) -> String {
    let mut out = headline(summary);
    out.push_str("Schedule (each VM's action assumed over before its next turn):\n");
    for (slot, vm) in summary.schedule.preview(summary.vms) {
        let target = vm.map_or("(no idle VM can take it)".to_string(), |i| {
            summary.vms[i].display_name()
        });
        let _ = writeln!(
            out,
            "  +{:<9} {:<10} {target}",
            format!("{:.1}s", slot.at.as_secs_f64()),
            slot.action.as_str()
        );
    }
    out
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
    if tally.skipped > 0 {
        let _ = writeln!(
            out,
            "  Skipped (no idle VM could take it): {}",
            tally.skipped
        );
    }
    if tally.not_started > 0 {
        let _ = writeln!(out, "  Not started (interrupted): {}", tally.not_started);
    }
    if !tally.restored.is_empty() {
        let _ = writeln!(out, "Started again: {}", tally.restored.join(", "));
    }
    for (vm, error) in &tally.not_restored {
        let _ = writeln!(out, "NOT started again: {vm}: {error}");
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
        tally.started(ChurnAction::Migrate);
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
        let doc: serde_json::Value = serde_json::from_str(&churn_json(&summary)).unwrap();
        assert_eq!(doc["schedule"].as_array().unwrap().len(), 4);
        assert_eq!(doc["schedule"][1]["at_seconds"], 0.5);
        let text = schedule_text(&summary);
        assert_eq!(text.lines().filter(|l| l.starts_with("  +")).count(), 4);
    }
}
