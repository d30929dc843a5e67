//! Run ids as users see them: the 6-hex run tag every VM name carries (or any longer start of
//! the id, with or without its hyphens) names a run for every command that takes one. It is
//! resolved against the `virtwork/run-id` labels on the cluster (over HTTP, the fake API
//! server) and the audit database; a start that begins two runs is refused with exit 2
//! naming both, and nothing is changed; one that begins no run behaves as an unknown id.

use std::path::Path;
use std::process::Output;

use virtwork::audit::{Auditor, CommandKind, ExecutionParams, ExecutionStatus};

use crate::seed::{Cluster, NS, RUN_A, RUN_B, json_doc, text};

/// Shares RUN_A's first 8 hex digits, and so its run tag.
const RUN_A_TWIN: &str = "0b6c4a8e-9999-4aaa-8bbb-cccccccccccc";
/// RUN_A's and RUN_A_TWIN's run tag.
const TAG_A: &str = "0b6c4a";
/// RUN_B's run tag.
const TAG_B: &str = "7d3e2f";
/// A run only the audit database knows.
const RUN_GONE: &str = "5e5e5e01-1111-4222-8333-444444444444";

/// Records an execution of `command` with `run_id` in `db`, as the binary would.
fn record(db: &Path, run_id: &str, command: CommandKind) {
    let auditor = Auditor::open_path(db).unwrap();
    let params = ExecutionParams::creating_nothing(command, NS.into(), None, false);
    let execution = auditor.start_execution(run_id.parse().unwrap(), &params);
    execution.complete_execution(ExecutionStatus::Success, None);
    assert!(auditor.flush(), "audit writes landed");
}

fn last_line(out: &Output) -> String {
    text(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

fn ambiguous_line(input: &str, prefix: &str, runs: &[&str]) -> String {
    format!(
        "Error: {input} {prefix} is ambiguous: it begins {} runs ({}); give more of its digits \
         or the whole id",
        runs.len(),
        runs.join(", ")
    )
}

#[test]
fn status_takes_the_run_tag_of_a_vm_name_or_any_longer_start_of_the_id() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run(NS, RUN_B, "memory", 2);
    for (given, run, vms) in [
        (TAG_B, RUN_B, 2),
        ("0B6C4A8E-3F1D", RUN_A, 1),
        ("0b6c4a8e3f1d4d2a", RUN_A, 1),
        (RUN_B, RUN_B, 2),
    ] {
        let out = c.run(&["-o", "json", "status", "--run-id", given], None, &[]);
        assert_eq!(out.status.code(), Some(0), "{given}: {}", text(&out.stderr));
        let doc = json_doc(&out);
        assert_eq!(doc["run_id_filter"], run, "{given}");
        let runs = doc["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{given}: {doc}");
        assert_eq!(runs[0]["run_id"], run, "{given}");
        assert_eq!(runs[0]["vms"].as_array().unwrap().len(), vms, "{given}");
    }
    // Fewer than 6 digits, or hyphens where an id has none, are bad input naming the form.
    for bad in ["0b6c4", "0b-6c4a8e", "zz6c4a"] {
        let out = c.run(&["status", "--run-id", bad], None, &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let line = last_line(&out);
        assert!(
            line.contains("--run-id") && line.contains("at least its first 6 hex digits"),
            "{bad}: {line}"
        );
    }
}

#[test]
fn a_prefix_beginning_two_runs_on_the_cluster_is_refused_by_every_command_and_changes_nothing() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run(NS, RUN_A_TWIN, "memory", 1);
    let before = c.managed_total(NS, None);
    let expected = ambiguous_line("--run-id", TAG_A, &[RUN_A, RUN_A_TWIN]);
    let command_lines: [&[&str]; 5] = [
        &["status", "--run-id", TAG_A],
        &["cleanup", "--yes", "--run-id", TAG_A],
        &["churn", "--yes", "--run-id", TAG_A],
        &[
            "verify",
            "--run-id",
            TAG_A,
            "--prometheus",
            "http://127.0.0.1:9",
        ],
        &["disruption", "--no-prometheus", "--run-id", TAG_A],
    ];
    for args in command_lines {
        let out = c.run(args, None, &[]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(last_line(&out), expected, "{args:?}");
        assert!(
            text(&out.stdout).is_empty(),
            "{args:?}: {}",
            text(&out.stdout)
        );
    }
    assert_eq!(c.managed_total(NS, None), before, "nothing was deleted");
    assert!(
        c.server.request_log().iter().all(|r| r.method == "GET"),
        "only reads were sent"
    );

    // One more digit tells them apart: cleanup deletes that run alone, without a prompt.
    let out = c.run(
        &["cleanup", "--yes", "--wait", "--run-id", "0b6c4a8e-3"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(c.managed_total(NS, Some(RUN_A)), 0, "run A deleted");
    assert!(c.managed_total(NS, Some(RUN_A_TWIN)) > 0, "its twin kept");
    let audit = c.cleanup_audit();
    let last = audit.last().unwrap();
    assert_eq!(last.cleanup_mode.as_deref(), Some("run-id"));
    assert_eq!(
        last.linked_run_ids.as_deref(),
        Some(&*format!("[\"{RUN_A}\"]"))
    );
}

#[test]
fn a_prefix_is_resolved_against_the_audit_database_too() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    // A cleanup's id is no run: it does not make the run tag ambiguous.
    record(
        &c.db(),
        "0b6c4a8e-7777-4777-8777-777777777777",
        CommandKind::Cleanup,
    );
    let out = c.run(&["-o", "json", "status", "--run-id", TAG_A], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(json_doc(&out)["run_id_filter"], RUN_A);

    // A run recorded in the database begins the same digits as one on the cluster.
    record(&c.db(), RUN_A_TWIN, CommandKind::Run);
    let out = c.run(&["status", "--run-id", TAG_A], None, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        last_line(&out),
        ambiguous_line("--run-id", TAG_A, &[RUN_A, RUN_A_TWIN])
    );

    // A run the database alone knows is named by its whole id.
    record(&c.db(), RUN_GONE, CommandKind::Run);
    let out = c.run(&["status", "--run-id", "5e5e5e"], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("No VMs of run {RUN_GONE} found in namespace {NS}.\n")
    );
}

#[test]
fn a_prefix_that_begins_no_run_behaves_as_an_unknown_id() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let before = c.managed_total(NS, None);
    let unknown = "abcdef01-2345-4678-89ab-cdef01234567";
    for (given, shown) in [("abcdef", "abcdef"), (unknown, unknown)] {
        let status = c.run(&["status", "--run-id", given], None, &[]);
        assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
        assert_eq!(
            text(&status.stdout),
            format!("No VMs of run {shown} found in namespace {NS}.\n")
        );
        let cleanup = c.run(
            &["-o", "json", "cleanup", "--yes", "--run-id", given],
            None,
            &[],
        );
        assert_eq!(cleanup.status.code(), Some(0), "{}", text(&cleanup.stderr));
        let doc = json_doc(&cleanup);
        assert_eq!(doc["status"], "nothing_to_clean_up", "{doc}");
        assert_eq!(doc["run_id_filter"], shown);
        let churn = c.run(&["churn", "--yes", "--run-id", given], None, &[]);
        assert_eq!(churn.status.code(), Some(1));
        assert!(
            last_line(&churn).contains(&format!("no running VMs of run {shown} in namespace")),
            "{}",
            last_line(&churn)
        );
        let show = c.run(&["audit", "show", given], None, &[]);
        assert_eq!(show.status.code(), Some(2));
        assert!(
            last_line(&show).contains(&format!("no execution with run id \"{shown}\"")),
            "{}",
            last_line(&show)
        );
    }
    assert_eq!(c.managed_total(NS, None), before);
}

#[test]
fn audit_show_report_and_execution_take_a_prefix_from_the_database() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_B, "cpu", 1);
    record(&c.db(), RUN_B, CommandKind::Run);
    record(&c.db(), RUN_A, CommandKind::Run);
    record(&c.db(), RUN_A_TWIN, CommandKind::Churn);

    let show = c.run(&["-o", "json", "audit", "show", TAG_B], None, &[]);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert_eq!(json_doc(&show)["execution"]["run_id"], RUN_B);

    // Every execution counts for `audit show`: the churn makes the tag ambiguous.
    let show = c.run(&["audit", "show", TAG_A], None, &[]);
    assert_eq!(show.status.code(), Some(2));
    assert_eq!(
        last_line(&show),
        ambiguous_line("run id", TAG_A, &[RUN_A, RUN_A_TWIN])
    );

    let page = c.dir.path().join("page.html");
    let page_arg = page.to_str().unwrap();
    let report = c.run(
        &[
            "report",
            "--no-prometheus",
            "--html",
            page_arg,
            "--run-id",
            TAG_B,
            "--run-id",
            RUN_B,
        ],
        None,
        &[],
    );
    assert_eq!(report.status.code(), Some(0), "{}", text(&report.stderr));
    assert!(
        text(&report.stdout)
            .trim_end()
            .ends_with(&format!(": run {RUN_B}")),
        "the same run given twice is reported once: {}",
        text(&report.stdout)
    );
    let ambiguous = c.run(
        &[
            "report",
            "--no-prometheus",
            "--html",
            page_arg,
            "--run-id",
            TAG_A,
        ],
        None,
        &[],
    );
    assert_eq!(ambiguous.status.code(), Some(2));
    assert_eq!(
        last_line(&ambiguous),
        ambiguous_line("--run-id", TAG_A, &[RUN_A, RUN_A_TWIN])
    );

    // --execution: the churn's window, named by a longer start of its id.
    let out = c.run(
        &[
            "-o",
            "json",
            "disruption",
            "--no-prometheus",
            "--execution",
            "0b6c4a8e9",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert!(
        doc.to_string()
            .contains(&format!("--execution {RUN_A_TWIN}")),
        "{doc}"
    );
}

#[test]
fn churn_verify_and_disruption_act_on_the_run_a_prefix_names() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run(NS, RUN_B, "memory", 2);
    let settled = c.server.wait_until(crate::seed::SETTLE, |s| {
        ["virtwork-cpu-0", "virtwork-memory-0", "virtwork-memory-1"]
            .iter()
            .all(|vm| {
                s.get("virtualmachineinstances", NS, vm)
                    .is_some_and(|v| v["status"]["phase"] == "Running")
            })
    });
    assert!(settled, "fixture VMIs did not reach Running");

    let churn = c.run(
        &["-o", "json", "churn", "--dry-run", "--run-id", TAG_B],
        None,
        &[],
    );
    assert_eq!(churn.status.code(), Some(0), "{}", text(&churn.stderr));
    let doc = json_doc(&churn);
    assert_eq!(doc["run_id_filter"], RUN_B, "{doc}");
    assert_eq!(doc["vms"]["found"], 2, "{doc}");

    let disruption = c.run(
        &[
            "-o",
            "json",
            "disruption",
            "--no-prometheus",
            "--run-id",
            TAG_A,
        ],
        None,
        &[],
    );
    assert_eq!(
        disruption.status.code(),
        Some(0),
        "{}",
        text(&disruption.stderr)
    );
    let doc = json_doc(&disruption);
    assert_eq!(doc["run_id_filter"], RUN_A, "{doc}");

    // Verify narrows to the run before it looks for Prometheus: a recorded run with no VM
    // left is said by its whole id.
    record(&c.db(), RUN_GONE, CommandKind::Run);
    let verify = c.run(
        &[
            "verify",
            "--run-id",
            "5e5e5e01",
            "--prometheus",
            "http://127.0.0.1:9",
        ],
        None,
        &[],
    );
    assert_eq!(verify.status.code(), Some(1), "{}", text(&verify.stderr));
    assert!(
        last_line(&verify).contains(RUN_GONE),
        "{}",
        last_line(&verify)
    );
}
