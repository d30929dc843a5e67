//! What `virtwork status` prints: one line per run (VMs by state, workloads, the oldest VM
//! not ready and why), with `-o wide` one row per VM, under `--watch` the lines of the runs
//! that changed, or one JSON document (schema in docs/output-json.md) with each run's summary
//! and its VMs. Pure rendering; `now` is passed in for the ages.

use serde::Serialize;

use crate::k8s::status::{RunStatus, RunSummary, VmStatus};

/// How much of KubeVirt's explanation the one-line view keeps (`-o wide` and the documents
/// have it whole).
const WHY_CHARS: usize = 120;

/// The oldest VM not ready, in a run's summary document.
#[derive(Debug, Clone, Serialize)]
struct OldestDoc<'a> {
    namespace: &'a str,
    name: &'a str,
    state: &'a str,
    reason: Option<&'a str>,
    age_seconds: Option<i64>,
}

/// A run's summary in the document.
#[derive(Debug, Clone, Serialize)]
struct SummaryDoc<'a> {
    #[serde(flatten)]
    summary: RunSummary<'a>,
    oldest_not_ready: Option<OldestDoc<'a>>,
}

/// A VM row of the JSON document: the cluster's view plus its age at `now`.
#[derive(Debug, Clone, Serialize)]
struct VmDoc<'a> {
    #[serde(flatten)]
    vm: &'a VmStatus,
    age_seconds: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
struct RunDoc<'a> {
    run_id: Option<&'a str>,
    vm_count: usize,
    summary: SummaryDoc<'a>,
    vms: Vec<VmDoc<'a>>,
}

#[derive(Debug, Clone, Serialize)]
struct StatusDoc<'a> {
    format_version: u32,
    command: &'static str,
    namespace: Option<&'a str>,
    run_id_filter: Option<&'a str>,
    runs: Vec<RunDoc<'a>>,
}

fn age_seconds(vm: &VmStatus, now: jiff::Timestamp) -> Option<i64> {
    vm.created_at
        .map(|created| (now.as_second() - created.as_second()).max(0))
}

/// kubectl-style age: `45s`, `12m`, `5h`, `3d`.
pub fn format_age(seconds: Option<i64>) -> String {
    match seconds {
        None => "-".to_string(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 120 * 60 => format!("{}m", s / 60),
        Some(s) if s < 48 * 3600 => format!("{}h", s / 3600),
        Some(s) => format!("{}d", s / 86400),
    }
}

/// The JSON document (one line).
pub fn status_json(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    runs: &[RunStatus],
    now: jiff::Timestamp,
) -> String {
    let doc = StatusDoc {
        format_version: 1,
        command: "status",
        namespace,
        run_id_filter,
        runs: runs
            .iter()
            .map(|run| RunDoc {
                run_id: run.run_id.as_deref(),
                vm_count: run.vms.len(),
                summary: summary_doc(run, now),
                vms: run
                    .vms
                    .iter()
                    .map(|vm| VmDoc {
                        vm,
                        age_seconds: age_seconds(vm, now),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_string(&doc).expect("the status document is always serialisable")
}

fn summary_doc(run: &RunStatus, now: jiff::Timestamp) -> SummaryDoc<'_> {
    let summary = RunSummary::of(run);
    let oldest_not_ready = summary.oldest_not_ready.map(|vm| OldestDoc {
        namespace: &vm.namespace,
        name: &vm.name,
        state: vm.shown(),
        reason: vm.reason.as_deref(),
        age_seconds: age_seconds(vm, now),
    });
    SummaryDoc {
        summary,
        oldest_not_ready,
    }
}

/// Where the runs were looked for, as the sentences say it.
pub fn place(namespace: Option<&str>) -> String {
    namespace.map_or("any namespace".to_string(), |n| format!("namespace {n}"))
}

/// The sentence for no runs, or None.
fn nothing(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    runs: &[RunStatus],
) -> Option<String> {
    let place = place(namespace);
    runs.is_empty().then(|| match run_id_filter {
        Some(id) => format!("No VMs of run {id} found in {place}.\n"),
        None => format!("No virtwork runs found in {place}.\n"),
    })
}

/// `298 Running, 2 ErrorUnschedulable`.
fn statuses_cell(summary: &RunSummary<'_>) -> String {
    summary
        .statuses()
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `virtwork-cpu-3 (5m): ErrImagePull: <message>`, or `-` when every VM is ready.
fn oldest_cell(summary: &RunSummary<'_>, now: jiff::Timestamp) -> String {
    summary.oldest_not_ready.map_or("-".to_string(), |vm| {
        format!(
            "{} ({}): {}",
            vm.name,
            format_age(age_seconds(vm, now)),
            crate::terminal::safe(&vm.why(), WHY_CHARS)
        )
    })
}

/// The default view: one line per run (namespace, ready VMs, VMs by state, workloads, the
/// oldest VM not ready and why); a clear sentence when there is nothing.
pub fn status_text(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    runs: &[RunStatus],
    now: jiff::Timestamp,
) -> String {
    if let Some(sentence) = nothing(namespace, run_id_filter, runs) {
        return sentence;
    }
    let header = [
        "RUN ID",
        "NAMESPACE",
        "READY",
        "VMS",
        "WORKLOADS",
        "OLDEST NOT READY",
    ];
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|run| {
            let summary = RunSummary::of(run);
            [
                run_id_cell(run),
                summary.namespaces.join(","),
                format!("{}/{}", summary.ready, summary.vm_count),
                statuses_cell(&summary),
                none_dash(summary.workloads.join(",")),
                oldest_cell(&summary, now),
            ]
        })
        .collect();
    let mut out = crate::table::columns(&header, &rows, "");
    out.push_str(&totals(namespace, runs));
    out
}

fn run_id_cell(run: &RunStatus) -> String {
    run.run_id.clone().unwrap_or_else(|| "(none)".to_string())
}

fn none_dash(text: String) -> String {
    if text.is_empty() {
        "-".to_string()
    } else {
        text
    }
}

/// `2 run(s), 300 VM(s) in namespace virtwork.`
fn totals(namespace: Option<&str>, runs: &[RunStatus]) -> String {
    let vm_total: usize = runs.iter().map(|r| r.vms.len()).sum();
    format!(
        "{} run(s), {vm_total} VM(s) in {}.\n",
        runs.len(),
        place(namespace)
    )
}

/// One run as a line of `status --watch` when its output is not a terminal:
/// `<run id> in <namespace>: 298/300 ready; 298 Running, 2 Provisioning; oldest not ready
/// virtwork-cpu-3 (5m): Provisioning`.
pub fn run_line(run: &RunStatus, now: jiff::Timestamp) -> String {
    let summary = RunSummary::of(run);
    let mut line = format!(
        "{} in {}: {}/{} ready; {}",
        run_id_cell(run),
        summary.namespaces.join(","),
        summary.ready,
        summary.vm_count,
        statuses_cell(&summary)
    );
    if summary.oldest_not_ready.is_some() {
        line.push_str("; oldest not ready ");
        line.push_str(&oldest_cell(&summary, now));
    }
    crate::terminal::safe(&line, crate::terminal::LINE_CHARS)
}

/// What a run's line says apart from ages (with `per_vm`, what each of its rows in `-o wide`
/// says), to tell whether it changed between two reads.
pub fn run_change_key(run: &RunStatus, per_vm: bool) -> String {
    let summary = RunSummary::of(run);
    let mut key = format!(
        "{}|{}|{}|{}",
        summary.ready,
        statuses_cell(&summary),
        summary
            .oldest_not_ready
            .map(|vm| vm.name.as_str())
            .unwrap_or_default(),
        summary
            .oldest_not_ready
            .map(VmStatus::why)
            .unwrap_or_default()
    );
    if per_vm {
        for vm in &run.vms {
            key.push_str(&format!(
                "|{}/{} {:?} {:?} {:?} {:?}",
                vm.namespace, vm.name, vm.printable_status, vm.vmi_phase, vm.ready, vm.node
            ));
        }
    }
    key
}

/// `-o wide`: one row per VM, sorted by run then VM; a clear sentence when there is nothing.
pub fn status_wide_text(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    runs: &[RunStatus],
    now: jiff::Timestamp,
) -> String {
    if let Some(sentence) = nothing(namespace, run_id_filter, runs) {
        return sentence;
    }
    let header = [
        "RUN ID",
        "NAMESPACE",
        "VM",
        "WORKLOAD",
        "ROLE",
        "STATUS",
        "VMI PHASE",
        "READY",
        "NODE",
        "AGE",
        "REASON",
    ];
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let mut rows: Vec<[String; 11]> = Vec::new();
    for run in runs {
        for vm in &run.vms {
            rows.push([
                run_id_cell(run),
                vm.namespace.clone(),
                vm.name.clone(),
                dash(&vm.workload),
                dash(&vm.role),
                dash(&vm.printable_status),
                dash(&vm.vmi_phase),
                match vm.ready {
                    Some(true) => "yes".to_string(),
                    Some(false) => "no".to_string(),
                    None => "-".to_string(),
                },
                dash(&vm.node),
                format_age(age_seconds(vm, now)),
                dash(&vm.reason),
            ]);
        }
    }
    let mut out = crate::table::columns(&header, &rows, "");
    out.push_str(&totals(namespace, runs));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::status::Readiness;

    fn vm(name: &str, phase: Option<&str>) -> VmStatus {
        VmStatus {
            namespace: "virtwork".into(),
            name: name.into(),
            workload: Some("cpu".into()),
            role: None,
            printable_status: Some("Running".into()),
            vmi_phase: phase.map(String::from),
            node: phase.map(|_| "worker-1".to_string()),
            ready: phase.map(|p| p == "Running"),
            created_at: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            readiness: match phase {
                Some("Running") => Readiness::Ready,
                _ => Readiness::Pending,
            },
            reason: None,
        }
    }

    fn stuck(name: &str, created: &str, message: &str) -> VmStatus {
        VmStatus {
            printable_status: Some("ErrImagePull".into()),
            created_at: Some(created.parse().unwrap()),
            readiness: Readiness::Stuck,
            reason: Some(message.into()),
            ..vm(name, Some("Scheduling"))
        }
    }

    fn now() -> jiff::Timestamp {
        "2026-01-01T03:00:00Z".parse().unwrap()
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(format_age(Some(45)), "45s");
        assert_eq!(format_age(Some(600)), "10m");
        assert_eq!(format_age(Some(3 * 3600)), "3h");
        assert_eq!(format_age(Some(5 * 86400)), "5d");
        assert_eq!(format_age(None), "-");
    }

    #[test]
    fn table_has_one_row_per_vm_with_dashes_for_unknowns() {
        let runs = vec![RunStatus {
            run_id: Some("run-a".into()),
            vms: vec![
                vm("virtwork-cpu-0", Some("Running")),
                vm("virtwork-cpu-1", None),
            ],
        }];
        let text = status_wide_text(Some("virtwork"), None, &runs, now());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("RUN ID  NAMESPACE  VM "), "{text}");
        assert!(lines[0].contains(" VMI PHASE  READY  NODE "), "{text}");
        assert!(lines[1].contains("virtwork-cpu-0") && lines[1].contains("worker-1"));
        assert!(lines[1].contains(" Running    yes    worker-1"), "{text}");
        assert!(lines[1].ends_with("  3h   -"), "{text}");
        assert!(lines[0].ends_with("AGE  REASON"), "{text}");
        assert!(lines[2].contains("virtwork-cpu-1") && lines[2].contains(" - "));
        assert_eq!(lines[3], "1 run(s), 2 VM(s) in namespace virtwork.");
    }

    #[test]
    fn a_run_is_one_line_with_its_states_and_the_oldest_vm_not_ready() {
        let mut vms: Vec<VmStatus> = (0..4)
            .map(|i| vm(&format!("virtwork-cpu-{i}"), Some("Running")))
            .collect();
        vms.push(stuck("virtwork-cpu-5", "2026-01-01T02:00:00Z", "late"));
        vms.push(stuck(
            "virtwork-cpu-4",
            "2026-01-01T01:00:00Z",
            "pull \u{1b}[2J failed",
        ));
        vms.push(VmStatus {
            printable_status: Some("Provisioning".into()),
            created_at: Some("2026-01-01T02:30:00Z".parse().unwrap()),
            ..vm("virtwork-cpu-6", None)
        });
        let runs = vec![RunStatus {
            run_id: Some("run-a".into()),
            vms,
        }];
        let text = status_text(Some("virtwork"), None, &runs, now());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("RUN ID  NAMESPACE  READY  VMS "),
            "{text}"
        );
        assert!(lines[0].ends_with("WORKLOADS  OLDEST NOT READY"), "{text}");
        // Most VMs first; the oldest VM not ready by creation time, its reason escaped.
        assert!(
            lines[1].starts_with(
                "run-a   virtwork   4/7    4 Running, 2 ErrImagePull, 1 Provisioning  cpu "
            ),
            "{text}"
        );
        assert!(
            lines[1].ends_with("virtwork-cpu-4 (2h): ErrImagePull: pull \\u{1b}[2J failed"),
            "{text}"
        );
        assert_eq!(lines[2], "1 run(s), 7 VM(s) in namespace virtwork.");
        let line = run_line(&runs[0], now());
        assert_eq!(
            line,
            "run-a in virtwork: 4/7 ready; 4 Running, 2 ErrImagePull, 1 Provisioning; oldest not \
             ready virtwork-cpu-4 (2h): ErrImagePull: pull \\u{1b}[2J failed"
        );
        // Ages are not a change; a VM becoming ready is.
        let key = run_change_key(&runs[0], false);
        let mut later = runs[0].clone();
        later.vms[6] = vm("virtwork-cpu-6", Some("Running"));
        assert_ne!(run_change_key(&later, false), key);
    }

    #[test]
    fn no_runs_is_a_sentence() {
        assert_eq!(
            status_text(Some("virtwork"), None, &[], now()),
            "No virtwork runs found in namespace virtwork.\n"
        );
    }

    #[test]
    fn json_carries_age_and_counts() {
        let runs = vec![RunStatus {
            run_id: Some("run-a".into()),
            vms: vec![vm("virtwork-cpu-0", Some("Running"))],
        }];
        let v: serde_json::Value =
            serde_json::from_str(&status_json(Some("virtwork"), None, &runs, now())).unwrap();
        assert_eq!(v["runs"][0]["vm_count"], 1);
        assert_eq!(v["runs"][0]["vms"][0]["age_seconds"], 10800);
        assert_eq!(v["runs"][0]["vms"][0]["vmi_phase"], "Running");
        assert_eq!(v["runs"][0]["vms"][0]["ready"], true);
        assert_eq!(v["runs"][0]["vms"][0]["created_at"], "2026-01-01T00:00:00Z");
        assert_eq!(v["runs"][0]["vms"][0]["readiness"], "ready");
        let summary = &v["runs"][0]["summary"];
        assert_eq!(summary["ready"], 1);
        assert_eq!(summary["by_status"]["Running"], 1);
        assert_eq!(summary["by_readiness"]["ready"], 1);
        assert_eq!(summary["workloads"][0], "cpu");
        assert_eq!(summary["oldest_not_ready"], serde_json::Value::Null);
    }
}
