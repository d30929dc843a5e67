//! What `virtwork cleanup` prints: the preview shown before the prompt, and the final summary
//! on stdout as human text or one JSON document (schema in docs/output-json.md).
//!
//! Pure rendering of [`CleanupSummary`]; the command decides what goes in it.

use std::fmt::Write as _;

use serde::Serialize;

use crate::k8s::cleanup::{DeleteFailure, Discovery};
use crate::model::{KindCounts, ManagedKind, NamespaceOutcome};

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

/// The facts of one `virtwork cleanup`, rendered by [`summary_text`] and [`summary_json`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupSummary {
    pub status: CleanupStatus,
    /// The cleanup's own audit run id.
    pub run_id: String,
    /// `None` with `--all-namespaces`.
    pub namespace: Option<String>,
    pub run_id_filter: Option<String>,
    pub dry_run: bool,
    pub found: Found,
    pub deleted: CountsWithTotal,
    /// NotFound when deleting: someone (usually garbage collection) was faster.
    pub already_gone: CountsWithTotal,
    /// Objects not attempted because of an interrupt.
    pub not_attempted: usize,
    /// What became (or, before deleting, will become) of the namespace `--delete-namespace`
    /// named; `None` when not asked, absent or not attempted.
    pub namespace_outcome: Option<NamespaceOutcome>,
    /// Present only with `--wait` after deletes.
    pub wait: Option<WaitReport>,
    /// One line per failed delete (`deleting secret ns/name: ...`), objects sorted, then the
    /// namespace.
    pub warnings: Vec<String>,
    /// The objects whose delete failed, sorted (the namespace's failure is in
    /// `namespace_outcome`).
    pub failures: Vec<DeleteFailure>,
}

impl CleanupSummary {
    /// A summary with nothing deleted yet.
    pub fn new(run_id: String, namespace: Option<String>, run_id_filter: Option<String>) -> Self {
        CleanupSummary {
            status: CleanupStatus::Completed,
            run_id,
            namespace,
            run_id_filter,
            dry_run: false,
            found: Found::default(),
            deleted: CountsWithTotal::default(),
            already_gone: CountsWithTotal::default(),
            not_attempted: 0,
            namespace_outcome: None,
            wait: None,
            warnings: Vec::new(),
            failures: Vec::new(),
        }
    }

    fn namespace_display(&self) -> &str {
        self.namespace.as_deref().unwrap_or("all namespaces")
    }

    fn namespace_deleted(&self) -> bool {
        self.namespace_outcome
            .as_ref()
            .is_some_and(NamespaceOutcome::is_deleted)
    }

    /// Why the namespace was (or will be) kept.
    pub fn namespace_kept(&self) -> Option<&str> {
        self.namespace_outcome
            .as_ref()
            .and_then(NamespaceOutcome::kept_reason)
    }
}

/// Version of the cleanup document's schema (docs/output-json.md). 2: `dry_run` became
/// `"client"` or `null`, as in `run`'s documents.
const FORMAT_VERSION: u32 = 2;

/// The `--output json` document, field for field as documented.
#[derive(Serialize)]
struct Document<'a> {
    format_version: u32,
    /// Always `cleanup`.
    command: &'static str,
    status: CleanupStatus,
    run_id: &'a str,
    namespace: Option<&'a str>,
    run_id_filter: Option<&'a str>,
    /// `"client"` for `--dry-run` (nothing is sent), else `null`: one type with `run`.
    dry_run: Option<&'static str>,
    found: &'a Found,
    deleted: &'a CountsWithTotal,
    already_gone: &'a CountsWithTotal,
    not_attempted: usize,
    namespace_deleted: bool,
    /// Why the namespace `--delete-namespace` named was kept, else `null`.
    namespace_kept: Option<&'a str>,
    wait: Option<&'a WaitReport>,
    warnings: &'a [String],
    failures: Vec<FailureEntry<'a>>,
}

/// One entry of the document's `failures`: a failed object delete, or the namespace's (its
/// `kind` is `Namespace` and its `name` empty, the namespace being in `namespace`).
#[derive(Serialize)]
struct FailureEntry<'a> {
    kind: FailedKind,
    namespace: &'a str,
    name: &'a str,
    error: &'a str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum FailedKind {
    Object(ManagedKind),
    Namespace(&'static str),
}

impl<'a> Document<'a> {
    fn of(summary: &'a CleanupSummary) -> Self {
        let objects = summary.failures.iter().map(|f| FailureEntry {
            kind: FailedKind::Object(f.kind),
            namespace: &f.namespace,
            name: &f.name,
            error: &f.error,
        });
        let namespace = summary
            .namespace_outcome
            .as_ref()
            .and_then(NamespaceOutcome::failure)
            .map(|error| FailureEntry {
                kind: FailedKind::Namespace("Namespace"),
                namespace: summary.namespace.as_deref().unwrap_or_default(),
                name: "",
                error,
            });
        Document {
            format_version: FORMAT_VERSION,
            command: "cleanup",
            status: summary.status,
            run_id: &summary.run_id,
            namespace: summary.namespace.as_deref(),
            run_id_filter: summary.run_id_filter.as_deref(),
            dry_run: summary.dry_run.then_some("client"),
            found: &summary.found,
            deleted: &summary.deleted,
            already_gone: &summary.already_gone,
            not_attempted: summary.not_attempted,
            namespace_deleted: summary.namespace_deleted(),
            namespace_kept: summary.namespace_kept(),
            wait: summary.wait.as_ref(),
            warnings: &summary.warnings,
            failures: objects.chain(namespace).collect(),
        }
    }
}

const KIND_LABELS: [(ManagedKind, &str); 7] = [
    (ManagedKind::VirtualMachine, "VirtualMachines"),
    (ManagedKind::VirtualMachineInstance, "VMIs without a VM"),
    (ManagedKind::Service, "Services"),
    (ManagedKind::Secret, "Secrets"),
    (ManagedKind::DataVolume, "DataVolumes"),
    (ManagedKind::PersistentVolumeClaim, "PVCs"),
    (ManagedKind::VirtualMachineInstanceMigration, "Migrations"),
];

/// Text from the cluster (object names, API and webhook messages) as the terminal may show it.
fn shown(text: &str) -> String {
    crate::terminal::safe(text, crate::terminal::MESSAGE_CHARS)
}

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
        let _ = writeln!(out, "  The namespace {ns} will be kept: {}.", shown(reason));
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
                summary.namespace_kept(),
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
    if summary.namespace_deleted() {
        let _ = writeln!(out, "Namespace {ns} deleted.");
    }
    if let Some(reason) = summary.namespace_kept() {
        let _ = writeln!(out, "Namespace {ns} kept: {}.", shown(reason));
    }
    match &summary.wait {
        Some(wait) if wait.all_gone => out.push_str("Waited: every deleted object is gone.\n"),
        Some(wait) => {
            let _ = writeln!(out, "Still present ({}):", wait.remaining.len());
            for item in &wait.remaining {
                let _ = writeln!(out, "  {}", shown(item));
            }
        }
        None => {}
    }
    if !summary.warnings.is_empty() {
        let _ = writeln!(out, "Warnings ({}):", summary.warnings.len());
        for warning in &summary.warnings {
            let _ = writeln!(out, "  {}", shown(warning));
        }
    }
    out
}

/// The JSON document printed on stdout with `--output json` (one line).
pub fn summary_json(summary: &CleanupSummary) -> String {
    serde_json::to_string(&Document::of(summary))
        .expect("the cleanup summary is always serialisable")
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
        assert_eq!(value["format_version"], 2);
        assert_eq!(value["dry_run"], serde_json::Value::Null);
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
    fn the_namespace_outcome_keeps_its_documented_json_fields() {
        let mut s = summary();
        s.namespace_outcome = Some(NamespaceOutcome::Deleted);
        let value: serde_json::Value = serde_json::from_str(&summary_json(&s)).unwrap();
        assert_eq!(value["namespace_deleted"], true);
        assert_eq!(value["namespace_kept"], serde_json::Value::Null);
        assert_eq!(value["failures"], serde_json::json!([]));

        s.namespace_outcome = Some(NamespaceOutcome::Kept {
            reason: "it holds objects virtwork did not create".into(),
        });
        let value: serde_json::Value = serde_json::from_str(&summary_json(&s)).unwrap();
        assert_eq!(value["namespace_deleted"], false);
        assert_eq!(
            value["namespace_kept"],
            "it holds objects virtwork did not create"
        );
        assert!(summary_text(&s).contains("Namespace virtwork kept: it holds objects"));

        s.namespace_outcome = Some(NamespaceOutcome::Failed {
            error: "forbidden".into(),
        });
        s.failures = vec![DeleteFailure {
            kind: ManagedKind::Secret,
            namespace: "virtwork".into(),
            name: "x".into(),
            error: "forbidden".into(),
        }];
        let value: serde_json::Value = serde_json::from_str(&summary_json(&s)).unwrap();
        assert_eq!(value["namespace_deleted"], false);
        assert_eq!(value["namespace_kept"], serde_json::Value::Null);
        assert_eq!(
            value["failures"],
            serde_json::json!([
                {"kind": "Secret", "namespace": "virtwork", "name": "x", "error": "forbidden"},
                {"kind": "Namespace", "namespace": "virtwork", "name": "", "error": "forbidden"},
            ])
        );
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
