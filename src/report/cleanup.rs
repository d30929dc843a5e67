//! What `virtwork cleanup` prints: the preview shown before the prompt, and the final summary
//! on stdout as human text or one JSON document (schema in docs/output-json.md).
//!
//! Pure rendering of [`CleanupSummary`]; the command decides what goes in it.

use std::fmt::Write as _;

use serde::Serialize;

use crate::k8s::cleanup::{DeleteFailure, Discovery, KindCounts, ManagedKind};

/// How the cleanup ended, the `status` field of the JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanupStatus {
    /// Everything found was deleted (and, with `--wait`, is gone).
    Completed,
    /// Some deletes failed; the rest was deleted (exit 1).
    CompletedWithErrors,
    NothingToCleanUp,
    DryRun,
    /// The user declined the prompt.
    Aborted,
    /// Ctrl-C / SIGTERM stopped the deletes (exit 130).
    Interrupted,
    /// `--wait` ran out of time with objects still present (exit 1).
    WaitTimedOut,
    /// `--delete-namespace` was refused (`namespace_kept` says why); everything else in scope
    /// was deleted (exit 1).
    NamespaceKept,
}

/// Counts per kind plus their total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CountsWithTotal {
    #[serde(flatten)]
    pub counts: KindCounts,
    pub total: usize,
}

impl From<KindCounts> for CountsWithTotal {
    fn from(counts: KindCounts) -> Self {
        CountsWithTotal {
            counts,
            total: counts.total(),
        }
    }
}

/// What discovery found (the preview).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Found {
    #[serde(flatten)]
    pub counts: CountsWithTotal,
    /// Run ids on the found objects, sorted.
    pub run_ids: Vec<String>,
    /// The namespace that will be (or would be) deleted with `--delete-namespace`.
    pub namespace_to_delete: Option<String>,
}

impl Found {
    /// The preview of `discovery`.
    pub fn of(discovery: &Discovery) -> Self {
        Found {
            counts: discovery.counts().into(),
            run_ids: discovery.run_ids(),
            namespace_to_delete: discovery
                .deletes_namespace()
                .then(|| discovery.namespace.as_ref().map(|(ns, _)| ns.clone()))
                .flatten(),
        }
    }
}

/// `--wait` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitReport {
    /// Whether every deleted object (and its dependents) disappeared in time.
    pub all_gone: bool,
    /// What was still present when the wait stopped, sorted (`<kind> <ns>/<name>`).
    pub remaining: Vec<String>,
}

/// The result document of one `virtwork cleanup`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CleanupSummary {
    /// Version of this document's schema (docs/output-json.md).
    pub format_version: u32,
    /// Always `cleanup`.
    pub command: &'static str,
    pub status: CleanupStatus,
    /// The cleanup's own audit run id.
    pub run_id: String,
    /// `null` with `--all-namespaces`.
    pub namespace: Option<String>,
    pub run_id_filter: Option<String>,
    pub dry_run: bool,
    pub found: Found,
    pub deleted: CountsWithTotal,
    /// NotFound when deleting: someone (usually garbage collection) was faster.
    pub already_gone: CountsWithTotal,
    /// Objects not attempted because of an interrupt.
    pub not_attempted: usize,
    pub namespace_deleted: bool,
    /// Why the namespace `--delete-namespace` named was kept, else `null`.
    pub namespace_kept: Option<String>,
    /// Present only with `--wait` after deletes.
    pub wait: Option<WaitReport>,
    /// One line per failed delete (`deleting secret ns/name: ...`), sorted.
    pub warnings: Vec<String>,
    pub failures: Vec<DeleteFailure>,
}

impl CleanupSummary {
    /// A summary with nothing deleted yet.
    pub fn new(run_id: String, namespace: Option<String>, run_id_filter: Option<String>) -> Self {
        CleanupSummary {
            format_version: 1,
            command: "cleanup",
            status: CleanupStatus::Completed,
            run_id,
            namespace,
            run_id_filter,
            dry_run: false,
            found: Found::default(),
            deleted: CountsWithTotal::default(),
            already_gone: CountsWithTotal::default(),
            not_attempted: 0,
            namespace_deleted: false,
            namespace_kept: None,
            wait: None,
            warnings: Vec::new(),
            failures: Vec::new(),
        }
    }

    fn namespace_display(&self) -> &str {
        self.namespace.as_deref().unwrap_or("all namespaces")
    }
}

const KIND_LABELS: [(ManagedKind, &str); 6] = [
    (ManagedKind::VirtualMachine, "VirtualMachines"),
    (ManagedKind::VirtualMachineInstance, "VMIs without a VM"),
    (ManagedKind::Service, "Services"),
    (ManagedKind::Secret, "Secrets"),
    (ManagedKind::DataVolume, "DataVolumes"),
    (ManagedKind::PersistentVolumeClaim, "PVCs"),
];

fn counts_table(out: &mut String, counts: &KindCounts) {
    for (kind, label) in KIND_LABELS {
        let _ = writeln!(out, "  {label:<19} {}", counts.get(kind));
    }
    let _ = writeln!(out, "  {:<19} {}", "Total", counts.total());
}

/// The preview shown before the confirmation prompt and in a dry run; `kept` says why a
/// requested `--delete-namespace` will be refused.
pub fn preview_with_kept(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    found: &Found,
    kept: Option<&str>,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "Resources to be deleted in {}",
        namespace.map_or("all namespaces".to_string(), |n| format!("namespace {n}"))
    );
    if let Some(id) = run_id_filter {
        let _ = write!(out, " (run {id})");
    }
    out.push_str(":\n");
    counts_table(&mut out, &found.counts.counts);
    if !found.run_ids.is_empty() {
        let _ = writeln!(out, "  Runs: {}", found.run_ids.join(", "));
    }
    if let Some(ns) = &found.namespace_to_delete {
        let _ = writeln!(
            out,
            "  The namespace {ns} will be deleted, with everything in it."
        );
    }
    if let (Some(ns), Some(reason)) = (namespace, kept) {
        let _ = writeln!(out, "  The namespace {ns} will be kept: {reason}.");
    }
    out
}

/// The human summary printed on stdout at the end.
pub fn summary_text(summary: &CleanupSummary) -> String {
    let ns = summary.namespace_display();
    let filter = summary
        .run_id_filter
        .as_ref()
        .map(|id| format!(" (run {id})"))
        .unwrap_or_default();
    let mut out = String::new();
    match summary.status {
        CleanupStatus::NothingToCleanUp => {
            let _ = writeln!(out, "Nothing to clean up in {ns}{filter}.");
            return out;
        }
        CleanupStatus::DryRun => {
            out.push_str(&preview_with_kept(
                summary.namespace.as_deref(),
                summary.run_id_filter.as_deref(),
                &summary.found,
                summary.namespace_kept.as_deref(),
            ));
            out.push_str("Dry run: nothing was deleted.\n");
            return out;
        }
        CleanupStatus::Aborted => {
            let _ = writeln!(out, "Cleanup of {ns}{filter} aborted: nothing was deleted.");
            return out;
        }
        _ => {}
    }
    let headline = match summary.status {
        CleanupStatus::Interrupted => "Cleanup interrupted",
        CleanupStatus::CompletedWithErrors => "Cleanup finished with errors",
        CleanupStatus::WaitTimedOut => "Cleanup finished, but not everything is gone yet",
        CleanupStatus::NamespaceKept => "Cleanup finished, the namespace was kept",
        _ => "Cleanup complete",
    };
    let _ = writeln!(out, "{headline}: {ns}{filter}");
    let _ = writeln!(out, "Deleted:");
    counts_table(&mut out, &summary.deleted.counts);
    if summary.already_gone.total > 0 {
        let _ = writeln!(out, "  Already gone:       {}", summary.already_gone.total);
    }
    if summary.not_attempted > 0 {
        let _ = writeln!(
            out,
            "  Not attempted:      {} (interrupted)",
            summary.not_attempted
        );
    }
    if !summary.found.run_ids.is_empty() {
        let _ = writeln!(out, "Runs: {}", summary.found.run_ids.join(", "));
    }
    if summary.namespace_deleted {
        let _ = writeln!(out, "Namespace {ns} deleted.");
    }
    if let Some(reason) = &summary.namespace_kept {
        let _ = writeln!(out, "Namespace {ns} kept: {reason}.");
    }
    match &summary.wait {
        Some(wait) if wait.all_gone => out.push_str("Waited: every deleted object is gone.\n"),
        Some(wait) => {
            let _ = writeln!(out, "Still present ({}):", wait.remaining.len());
            for item in &wait.remaining {
                let _ = writeln!(out, "  {item}");
            }
        }
        None => {}
    }
    if !summary.warnings.is_empty() {
        let _ = writeln!(out, "Warnings ({}):", summary.warnings.len());
        for warning in &summary.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    out
}

/// The JSON document printed on stdout with `--output json` (one line).
pub fn summary_json(summary: &CleanupSummary) -> String {
    serde_json::to_string(summary).expect("the cleanup summary is always serialisable")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> CleanupSummary {
        let mut s = CleanupSummary::new(
            "33333333-3333-4333-8333-333333333333".into(),
            Some("virtwork".into()),
            None,
        );
        let counts = KindCounts {
            vms: 2,
            secrets: 2,
            services: 1,
            ..Default::default()
        };
        s.found = Found {
            counts: counts.into(),
            run_ids: vec!["a".into(), "b".into()],
            namespace_to_delete: None,
        };
        s.deleted = counts.into();
        s
    }

    #[test]
    fn json_has_the_documented_fields_with_totals() {
        let value: serde_json::Value = serde_json::from_str(&summary_json(&summary())).unwrap();
        assert_eq!(value["format_version"], 1);
        assert_eq!(value["command"], "cleanup");
        assert_eq!(value["status"], "completed");
        assert_eq!(value["deleted"]["vms"], 2);
        assert_eq!(value["deleted"]["total"], 5);
        assert_eq!(value["found"]["run_ids"], serde_json::json!(["a", "b"]));
        assert_eq!(value["wait"], serde_json::Value::Null);
        assert!(!summary_json(&summary()).contains('\n'));
    }

    #[test]
    fn text_lists_counts_runs_and_warnings() {
        let mut s = summary();
        s.status = CleanupStatus::CompletedWithErrors;
        s.warnings = vec!["deleting secret virtwork/x: forbidden".into()];
        let text = summary_text(&s);
        assert!(
            text.starts_with("Cleanup finished with errors: virtwork\n"),
            "{text}"
        );
        assert!(text.contains("  VirtualMachines     2\n"), "{text}");
        assert!(text.contains("  Total               5\n"), "{text}");
        assert!(text.contains("Runs: a, b\n"), "{text}");
        assert!(text.contains("Warnings (1):\n  deleting secret virtwork/x: forbidden\n"));
    }

    #[test]
    fn preview_names_the_namespace_to_delete() {
        let found = Found {
            namespace_to_delete: Some("virtwork".into()),
            ..Found::default()
        };
        let text = preview_with_kept(Some("virtwork"), Some("abc"), &found, None);
        assert!(text.starts_with("Resources to be deleted in namespace virtwork (run abc):\n"));
        assert!(text.contains("The namespace virtwork will be deleted"));
    }
}
