//! What `virtwork status` prints: a table of the runs' VMs, or one JSON document
//! (schema in docs/output-json.md). Pure rendering; `now` is passed in for the ages.

use serde::Serialize;

use crate::k8s::status::{RunStatus, VmStatus};

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

/// The human table, sorted by run then VM; a clear sentence when there is nothing.
pub fn status_text(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    runs: &[RunStatus],
    now: jiff::Timestamp,
) -> String {
    let place = namespace.map_or("any namespace".to_string(), |n| format!("namespace {n}"));
    if runs.is_empty() {
        return match run_id_filter {
            Some(id) => format!("No VMs of run {id} found in {place}.\n"),
            None => format!("No virtwork runs found in {place}.\n"),
        };
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
    ];
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let mut rows: Vec<[String; 10]> = Vec::new();
    for run in runs {
        for vm in &run.vms {
            rows.push([
                run.run_id.clone().unwrap_or_else(|| "(none)".to_string()),
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
            ]);
        }
    }
    let mut out = crate::table::columns(&header, &rows, "");
    let vm_total: usize = runs.iter().map(|r| r.vms.len()).sum();
    out.push_str(&format!(
        "{} run(s), {vm_total} VM(s) in {place}.\n",
        runs.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let text = status_text(Some("virtwork"), None, &runs, now());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("RUN ID  NAMESPACE  VM "), "{text}");
        assert!(lines[0].contains(" VMI PHASE  READY  NODE "), "{text}");
        assert!(lines[1].contains("virtwork-cpu-0") && lines[1].contains("worker-1"));
        assert!(lines[1].contains(" Running    yes    worker-1"), "{text}");
        assert!(lines[1].ends_with("3h"), "{text}");
        assert!(lines[2].contains("virtwork-cpu-1") && lines[2].contains(" - "));
        assert_eq!(lines[3], "1 run(s), 2 VM(s) in namespace virtwork.");
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
    }
}
