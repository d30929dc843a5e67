//! `virtwork cleanup` end to end: the real binary against the fake API server.
//!
//! State is seeded straight into the fixture (VMs with dataVolumeTemplates, cloud-init
//! Secrets, Services, as `virtwork run` creates them); the fixture's controllers then create
//! VMIs, DataVolumes and PVCs and garbage-collect them. Every assertion is about cluster
//! state, exit codes and output, never about timing.

use crate::seed;
use crate::support;

use std::process::Output;
use std::time::Duration;

use seed::{Cluster, KINDS, MANAGED_BY, NS, RUN_A, RUN_B, json_doc, text};
use serde_json::{Value, json};
use support::RequestRecord;
use support::{ControllerOptions, Denial, EndlessList, Faults, Options};

/// `cleanup --yes --wait` of the test namespace with a JSON summary, plus `extra` arguments.
fn cleanup_json(c: &Cluster, extra: &[&str]) -> Output {
    let mut args = vec![
        "--namespace",
        NS,
        "--output",
        "json",
        "cleanup",
        "--yes",
        "--wait",
    ];
    args.extend_from_slice(extra);
    c.run(&args, None, &[])
}

#[test]
fn cleanup_deletes_every_managed_object_and_spares_foreign_ones() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "disk", 2);
    c.seed_run(NS, RUN_B, "cpu", 1);
    c.seed_foreign(NS);
    assert!(c.managed_total(NS, None) > 0);

    let out = c.run(
        &[
            "--namespace",
            NS,
            "--log-format",
            "json",
            "cleanup",
            "--yes",
            "--wait",
        ],
        None,
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    // The reference's e2e contract: compact JSON log fields.
    assert!(stderr.contains("\"msg\":\"cleanup complete\""), "{stderr}");
    assert!(stderr.contains("\"vms_deleted\":3"), "{stderr}");
    assert!(stderr.contains("\"secrets_deleted\":3"), "{stderr}");
    assert!(
        stderr.contains("\"msg\":\"resources to be deleted\""),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("\"run_ids\":\"{RUN_A}, {RUN_B}\"")),
        "run ids sorted: {stderr}"
    );

    for kind in KINDS {
        assert_eq!(
            c.managed(kind, NS, None),
            Vec::<String>::new(),
            "{kind} left"
        );
    }
    // Dependents the fixture garbage-collects (unlabelled PVCs of the DataVolumes) are gone.
    let pvcs: Vec<Value> = c.server.objects("persistentvolumeclaims", Some(NS));
    assert_eq!(pvcs.len(), 1, "only the foreign PVC stays: {pvcs:?}");
    assert!(c.foreign_present(NS), "a foreign object was deleted");
    assert!(
        c.server.get("namespaces", "", NS).is_some(),
        "namespace kept by default"
    );

    let summary = text(&out.stdout);
    assert!(
        summary.starts_with("Cleanup complete: virtwork\n"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("Runs: {RUN_A}, {RUN_B}")),
        "{summary}"
    );

    let audit = c.cleanup_audit();
    assert_eq!(audit.len(), 1);
    let row = &audit[0];
    assert_eq!(
        (row.command.as_str(), row.status.as_str()),
        ("cleanup", "success")
    );
    assert_eq!(row.cleanup_mode.as_deref(), Some("all"));
    assert_eq!(
        row.linked_run_ids.as_deref(),
        Some(format!("[\"{RUN_A}\",\"{RUN_B}\"]").as_str())
    );
    assert_eq!(row.vms_deleted, Some(3));

    // Idempotent: a second cleanup finds nothing.
    let again = c.run(&["--namespace", NS, "cleanup", "--yes"], None, &[]);
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again.stderr).contains("nothing to clean up"));
    assert!(text(&again.stdout).contains("Nothing to clean up"));
}

#[test]
fn run_id_scopes_cleanup_to_one_run_without_a_prompt() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 2);
    c.seed_run(NS, RUN_B, "memory", 1);
    let before_b = c.managed_total(NS, Some(RUN_B));

    // No --yes and no terminal: --run-id alone skips the prompt (as in the reference).
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "cleanup",
            "--run-id",
            RUN_A,
            "--wait",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["run_id_filter"], RUN_A);
    assert_eq!(doc["found"]["run_ids"], json!([RUN_A]));
    assert_eq!(doc["deleted"]["vms"], 2);
    assert_eq!(doc["wait"]["all_gone"], true);

    assert_eq!(c.managed_total(NS, Some(RUN_A)), 0);
    assert_eq!(
        c.managed_total(NS, Some(RUN_B)),
        before_b,
        "the other run was touched"
    );
    assert_eq!(c.cleanup_audit()[0].cleanup_mode.as_deref(), Some("run-id"));
}

#[test]
fn a_run_id_that_is_not_a_uuid_is_bad_input() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let out = c.run(
        &["--namespace", NS, "cleanup", "--run-id", "abc", "--yes"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--run-id") && stderr.contains("at least its first 6 hex digits"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(c.server.count("delete", "virtualmachines"), 0);
}

#[test]
fn delete_namespace_deletes_it_even_when_nothing_else_is_left() {
    let c = Cluster::start();
    let out = c.run(
        &[
            "--namespace",
            NS,
            "cleanup",
            "--yes",
            "--delete-namespace",
            "--wait",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("nothing to clean up"));
    assert!(
        c.server.get("namespaces", "", NS).is_none(),
        "--wait returned before the namespace was gone"
    );
    assert!(
        text(&out.stdout).contains("Namespace virtwork deleted."),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_namespace_without_our_label_is_never_deleted() {
    let c = Cluster::start();
    c.namespace("shared", false);
    c.seed_run("shared", RUN_A, "cpu", 1);
    let out = c.run(
        &[
            "--namespace",
            "shared",
            "cleanup",
            "--yes",
            "--delete-namespace",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "Error: kept namespace shared: virtwork did not create it (no virtwork/created-by-run annotation)"
        ),
        "{stderr}"
    );
    assert!(c.server.get("namespaces", "", "shared").is_some());
    assert_eq!(
        c.managed("virtualmachines", "shared", None),
        Vec::<String>::new()
    );
}

#[test]
fn delete_namespace_with_all_namespaces_is_bad_input() {
    let c = Cluster::start();
    let out = c.run(&["cleanup", "-A", "--delete-namespace", "--yes"], None, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--all-namespaces"));
    assert_eq!(
        c.server.count("list", "virtualmachines"),
        0,
        "no cluster call on bad input"
    );
}

#[test]
fn all_namespaces_cleans_every_namespace() {
    let c = Cluster::start();
    c.namespace("team-b", true);
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run("team-b", RUN_B, "cpu", 1);
    let out = c.run(
        &["cleanup", "-A", "--yes", "--wait", "--output", "json"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["namespace"], Value::Null);
    assert_eq!(doc["deleted"]["vms"], 2);
    assert_eq!(
        c.managed_total(NS, None) + c.managed_total("team-b", None),
        0
    );
}

const TTY: [(&str, &str); 1] = [("VIRTWORK_ASSUME_TTY", "1")];

#[test]
fn answering_yes_deletes() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let out = c.run(&["--namespace", NS, "cleanup"], Some("  YES \n"), &TTY);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Proceed with deletion? (yes/NO): "),
        "prompt on stderr: {stderr}"
    );
    assert!(
        stderr.contains("Resources to be deleted in namespace virtwork"),
        "{stderr}"
    );
    assert!(
        !text(&out.stdout).contains("Proceed"),
        "stdout carries only the summary"
    );
    assert_eq!(c.managed("virtualmachines", NS, None), Vec::<String>::new());
}

/// Nothing deleted, said on stdout and in the error line, exit 1 (a requested deletion did
/// not happen), recorded as aborted.
fn assert_declined(c: &Cluster, out: &Output) {
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cleanup aborted by user"));
    assert!(
        text(&out.stderr)
            .lines()
            .any(|l| l.starts_with("Error: cleanup aborted at the prompt: nothing was deleted")),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("aborted"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        c.managed("virtualmachines", NS, None).len(),
        1,
        "nothing may be deleted"
    );
    assert_eq!(c.server.count("delete", "virtualmachines"), 0);
    let audit = c.cleanup_audit();
    let last = audit.last().unwrap();
    assert_eq!(last.status, "aborted");
    assert_eq!(
        last.error_summary.as_deref(),
        Some("user declined confirmation")
    );
}

#[test]
fn answering_no_aborts() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    for answer in ["no\n", "N\n", "\n"] {
        let out = c.run(&["--namespace", NS, "cleanup"], Some(answer), &TTY);
        assert_declined(&c, &out);
    }
}

#[test]
fn on_a_terminal_an_unclear_answer_is_asked_again_and_y_deletes() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let out = c.run(&["--namespace", NS, "cleanup"], Some("maybe\ny\n"), &TTY);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.matches("Proceed with deletion? (yes/NO): ").count(),
        2,
        "asked twice: {stderr}"
    );
    assert!(stderr.contains("Please answer yes or no."), "{stderr}");
    assert_eq!(c.managed("virtualmachines", NS, None), Vec::<String>::new());
    // Unclear to the end of input: nothing deleted, exit 1.
    c.seed_run(NS, RUN_B, "cpu", 1);
    let out = c.run(&["--namespace", NS, "cleanup"], Some("maybe\n"), &TTY);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(c.managed("virtualmachines", NS, None).len(), 1);
}

#[test]
fn end_of_input_at_the_prompt_aborts() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let out = c.run(&["--namespace", NS, "cleanup"], Some(""), &TTY);
    assert_declined(&c, &out);
}

/// A piped answer works as in the Go tool (`echo yes | virtwork cleanup`, and `y` as the
/// prompt suggests); any other line declines with exit 1, so a script does not go on as if
/// it had succeeded.
#[test]
fn a_piped_yes_confirms_without_a_terminal() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    for declined in ["no\n", "maybe\n"] {
        let out = c.run(&["--namespace", NS, "cleanup"], Some(declined), &[]);
        assert_declined(&c, &out);
    }
    let out = c.run(&["--namespace", NS, "cleanup"], Some("y\n"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Proceed with deletion? (yes/NO): \n"),
        "{stderr}"
    );
    assert_eq!(c.managed("virtualmachines", NS, None), Vec::<String>::new());
}

/// Empty stdin (closed, `</dev/null`, a pod) is nobody answering: refused with the hint, not
/// taken as a "no" that would look like a successful cleanup.
#[test]
fn without_a_terminal_empty_stdin_refuses_instead_of_guessing() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    for stdin in [Some(""), None] {
        let out = c.run(&["--namespace", NS, "cleanup"], stdin, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("not a terminal and gave no answer") && stderr.contains("--yes"),
            "{stderr}"
        );
        assert_eq!(c.server.count("delete", "virtualmachines"), 0);
        assert_eq!(c.managed("virtualmachines", NS, None).len(), 1);
    }
}

#[test]
fn dry_run_previews_and_deletes_nothing() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 2);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "cleanup",
            "--dry-run",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("dry-run mode — no resources were deleted"));
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "dry_run");
    assert_eq!(doc["found"]["vms"], 2);
    assert_eq!(doc["found"]["dvs"], 2);
    assert_eq!(doc["deleted"]["total"], 0);
    let deletes: u64 = KINDS.iter().map(|k| c.server.count("delete", k)).sum();
    assert_eq!(deletes, 0);
    assert_eq!(c.cleanup_audit()[0].command, "cleanup --dry-run");
}

#[test]
fn deletion_under_injected_faults_still_deletes_everything() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "disk", 4);
    c.seed_run(NS, RUN_B, "cpu", 3);
    c.seed_foreign(NS);
    c.server.set_faults(Faults {
        error_rate: 0.2,
        error_codes: vec![500, 503, 429],
        after_commit_rate: 0.05,
        seed: 6,
        ..Faults::default()
    });
    let out = cleanup_json(&c, &[]);
    c.server.set_faults(Faults::default());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["failures"], json!([]));
    assert_eq!(doc["wait"]["all_gone"], true);
    assert_eq!(c.managed_total(NS, None), 0);
    assert!(c.foreign_present(NS));
}

#[test]
fn a_permanent_403_on_secrets_deletes_everything_else_and_exits_1() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 2);
    c.server
        .update_faults(|f| f.denials.push(Denial::new("delete", "secrets")));
    let out = c.run(
        &["--namespace", NS, "--output", "json", "cleanup", "--yes"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cleanup warning"), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("Error: cleanup could not delete 2 object(s): deleting secret virtwork/virtwork-cpu-0-cloudinit"),
        "{last}"
    );
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "completed_with_errors");
    assert_eq!(doc["failures"].as_array().unwrap().len(), 2);
    assert_eq!(doc["failures"][0]["kind"], "Secret");
    assert_eq!(doc["deleted"]["vms"], 2);
    assert_eq!(doc["deleted"]["services"], 1);
    assert_eq!(c.managed("secrets", NS, None).len(), 2);
    for kind in ["virtualmachines", "services", "datavolumes"] {
        assert_eq!(c.managed(kind, NS, None), Vec::<String>::new(), "{kind}");
    }
    assert_eq!(c.cleanup_audit()[0].status, "failed");
}

/// A kind the user may not list (here Services: 403 on list) does not stop the cleanup:
/// everything else is deleted, the kind is reported in text and `failures[]`, exit 1.
#[test]
fn a_kind_that_cannot_be_listed_is_reported_and_everything_else_is_deleted() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 2);
    c.server
        .update_faults(|f| f.denials.push(Denial::new("list", "services")));
    let out = c.run(
        &["--namespace", NS, "--output", "json", "cleanup", "--yes"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let last = text(&out.stderr).lines().last().unwrap().to_string();
    assert!(
        last.starts_with("Error: cleanup could not list 1 kind(s), whose objects were not deleted")
            && last.contains("services"),
        "{last}"
    );
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "completed_with_errors");
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["kind"], "Service");
    assert_eq!(failures[0]["name"], "");
    assert!(failures[0]["error"].as_str().unwrap().contains("forbidden"));
    assert_eq!(doc["deleted"]["vms"], 2);
    assert_eq!(doc["deleted"]["secrets"], 2);
    for kind in ["virtualmachines", "secrets", "datavolumes"] {
        assert_eq!(c.managed(kind, NS, None), Vec::<String>::new(), "{kind}");
    }
    assert_eq!(
        c.managed("services", NS, None).len(),
        1,
        "not listed, not deleted"
    );
    // The text summary says so too.
    c.seed_run(NS, RUN_B, "cpu", 1);
    let out = c.run(&["--namespace", NS, "cleanup", "--yes"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("services"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn wait_returns_only_after_garbage_collection_finished() {
    // Slow garbage collection so that, without waiting, dependents would still exist.
    let c = Cluster::with(Options {
        controllers: ControllerOptions {
            gc_delay: Duration::from_millis(400),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    c.seed_run(NS, RUN_A, "disk", 3);
    let out = c.run(
        &["--namespace", NS, "cleanup", "--yes", "--wait"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // State at exit: no VMI, DataVolume or PVC survives (PVCs carry no labels of ours).
    for kind in KINDS {
        assert_eq!(
            c.server.objects(kind, Some(NS)),
            Vec::<Value>::new(),
            "{kind} still present"
        );
    }
    assert!(text(&out.stdout).contains("Waited: every deleted object is gone."));
}

#[test]
fn wait_times_out_naming_what_remains() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    // A finalizer nobody removes keeps this Secret terminating forever.
    c.server.insert(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "stuck", "namespace": NS, "finalizers": ["example.com/hold"],
                      "labels": { MANAGED_BY: "virtwork", "virtwork/run-id": RUN_A } },
        "data": {},
    }));
    let out = cleanup_json(&c, &["--timeout", "2"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("timed out after 2s") && stderr.contains("secret virtwork/stuck"),
        "{stderr}"
    );
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "wait_timed_out");
    assert_eq!(doc["wait"]["remaining"], json!(["secret virtwork/stuck"]));
}

#[test]
fn an_interrupt_stops_issuing_deletes_and_exits_130() {
    // SIGINT is sent with kill(1) (Debian package procps).
    if std::process::Command::new("kill")
        .arg("-l")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_KILL").as_deref() != Ok("1"),
            "kill(1) required (VIRTWORK_REQUIRE_KILL=1) but not found"
        );
        eprintln!("skipping: kill(1) not found (install procps)");
        return;
    }
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 30);
    // Slow requests and a tight rate limit keep the deletion going long enough to interrupt.
    c.server
        .update_faults(|f| f.latency = Duration::from_millis(50));
    let child = c
        .command(&[
            "--namespace",
            NS,
            "--output",
            "json",
            "--qps",
            "5",
            "--burst",
            "1",
            "cleanup",
            "--yes",
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = c
        .server
        .wait_until(seed::SETTLE, |s| s.count("delete", "virtualmachines") >= 1);
    assert!(started, "cleanup never started deleting");
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "interrupted");
    let deleted = doc["deleted"]["vms"].as_u64().unwrap();
    assert!(doc["not_attempted"].as_u64().unwrap() > 0, "{doc}");
    // What the summary says was deleted is what is gone; the rest is untouched.
    let left = c.managed("virtualmachines", NS, None).len() as u64;
    assert!(
        left > 0 && deleted + left <= 30,
        "deleted {deleted}, left {left}"
    );
    assert!(
        c.managed("secrets", NS, None).len() == 30,
        "secrets are deleted after VMs"
    );
    assert_eq!(c.cleanup_audit()[0].status, "cancelled");
}

#[test]
fn a_cleanup_too_big_for_its_timeout_at_its_rate_says_so_before_deleting() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 30);
    // 30 VMs with their Secrets, DataVolumes and Services: about 24 s of deletes at --qps 5.
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--qps",
            "5",
            "--burst",
            "1",
            "cleanup",
            "--yes",
            "--timeout",
            "3",
        ],
        None,
        &[],
    );
    let stderr = text(&out.stderr);
    let warning = stderr
        .lines()
        .find(|l| l.contains("deletes at --qps 5 take at least"))
        .unwrap_or_else(|| panic!("no up-front warning: {stderr}"));
    assert!(
        warning.contains("of --timeout 3s are left") && warning.contains("raise --timeout"),
        "{warning}"
    );
    let first_delete = c
        .server
        .request_log()
        .iter()
        .position(|r| r.verb == "delete");
    assert!(first_delete.is_some(), "it still deletes what fits");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !c.managed("virtualmachines", NS, None).is_empty()
            || !c.managed("secrets", NS, None).is_empty(),
        "3 s at 5/s cannot delete 120 objects"
    );
}

#[test]
fn a_real_run_then_cleanup_leaves_no_managed_object_and_marks_the_audit() {
    let c = Cluster::start();
    c.seed_foreign(NS);
    let run = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "run",
            "--workloads",
            "cpu,disk,network",
            "--no-wait",
        ],
        None,
        &[],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let run_id = json_doc(&run)["run_id"].as_str().unwrap().to_string();
    let vms = c.managed("virtualmachines", NS, Some(&run_id));
    assert_eq!(vms.len(), 4, "cpu, disk, network server + client: {vms:?}");

    let out = c.run(
        &[
            "--namespace",
            NS,
            "--log-format",
            "json",
            "cleanup",
            "--yes",
            "--wait",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("\"vms_deleted\":4"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(c.managed_total(NS, None), 0);
    assert!(c.foreign_present(NS));

    // The run's audit rows are marked deleted and the cleanup links to the run.
    let conn = rusqlite::Connection::open(c.db()).unwrap();
    let deleted: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM vm_details v JOIN audit_log a ON v.audit_id = a.id
             WHERE a.run_id = ?1 AND v.status = 'deleted' AND v.deleted_at IS NOT NULL",
            [&run_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(deleted, 4);
    let secrets_deleted: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM resource_details r JOIN audit_log a ON r.audit_id = a.id
             WHERE a.run_id = ?1 AND r.resource_type = 'Secret' AND r.status = 'deleted'",
            [&run_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(secrets_deleted, 4);
    let row = c.cleanup_audit().pop().unwrap();
    assert_eq!(row.linked_run_ids, Some(format!("[\"{run_id}\"]")));
}

#[test]
fn run_id_with_delete_namespace_still_asks() {
    // Deleting the namespace takes more than the run's objects (the namespace itself), so
    // `--run-id` alone does not skip the prompt. (Another run's objects keep the namespace:
    // see deleting_the_namespace_of_one_run_never_takes_another_runs_vms.)
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "cleanup",
            "--run-id",
            RUN_A,
            "--delete-namespace",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("and the namespace"),
        "{}",
        text(&out.stderr)
    );
    assert!(c.server.get("namespaces", "", NS).is_some());
    assert_eq!(c.managed("virtualmachines", NS, None).len(), 1);
}

#[test]
fn an_endless_list_stops_with_a_clear_error_bounded_memory_and_no_secret_data() {
    let c = Cluster::start();
    // Managed Secrets with real payloads: a list that keeps them would grow with every page.
    let payload = base64_of(&"x".repeat(4096));
    for i in 0..100 {
        c.server.insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": format!("virtwork-cpu-{i}-cloudinit"), "namespace": NS,
                          "labels": { MANAGED_BY: "virtwork", "virtwork/run-id": RUN_A } },
            "data": { "userdata": payload },
        }));
    }
    c.server.update_faults(|f| {
        f.endless_list = Some(EndlessList {
            resource: "secrets".into(),
            same_token: false,
        })
    });
    let run = seed::run_guarded(
        c.command(&[
            "--namespace",
            NS,
            "cleanup",
            "--dry-run",
            "--timeout",
            "120",
        ]),
        Duration::from_secs(60),
        400 * 1024,
    );
    let out = run.output.unwrap_or_else(|| {
        panic!(
            "cleanup did not stop by itself (peak RSS {} MiB)",
            run.peak_rss_kib / 1024
        )
    });
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let last = text(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        last.contains("listing secrets in virtwork") && last.contains("after 200 pages"),
        "{last}"
    );
    // Memory stays at the size of one listing, not of every page received.
    assert!(
        run.peak_rss_kib < 100 * 1024,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
    let secret_lists: Vec<_> = c
        .server
        .request_log()
        .into_iter()
        .filter(|r| r.verb == "list" && r.resource == "secrets")
        .collect();
    assert_eq!(secret_lists.len(), 200);
    for list in &secret_lists {
        assert!(
            list.accept.contains("as=PartialObjectMetadataList"),
            "Secret data was requested: {}",
            list.accept
        );
    }
    assert_eq!(c.cleanup_audit()[0].status, "failed");
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

// ---------------------------------------------------------------------------------------------
// --delete-namespace: only what virtwork created, only when nothing foreign is in it
// ---------------------------------------------------------------------------------------------

fn delete_namespace(c: &Cluster, ns: &str) -> Output {
    c.run(
        &[
            "--namespace",
            ns,
            "--output",
            "json",
            "cleanup",
            "--yes",
            "--delete-namespace",
            "--wait",
            "--timeout",
            "60",
        ],
        None,
        &[],
    )
}

fn namespace_deletes(c: &Cluster) -> Vec<RequestRecord> {
    c.server
        .request_log()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.resource == "namespaces")
        .collect()
}

/// Exit 1, one error line naming the namespace and `reason`, JSON status `namespace_kept`,
/// the namespace still there, no delete sent for it, and the run's objects deleted anyway.
fn assert_kept(c: &Cluster, ns: &str, out: &Output, reason: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("Error: kept namespace {ns}: ")) && last.contains(reason),
        "{last}"
    );
    let doc = json_doc(out);
    assert_eq!(doc["status"], "namespace_kept", "{doc}");
    assert!(
        doc["namespace_kept"].as_str().unwrap().contains(reason),
        "{doc}"
    );
    assert_eq!(doc["namespace_deleted"], false);
    assert!(
        c.server.get("namespaces", "", ns).is_some(),
        "{ns} was deleted"
    );
    assert!(
        namespace_deletes(c).is_empty(),
        "a namespace delete was sent"
    );
    assert_eq!(
        c.managed_total(ns, None),
        0,
        "the rest of the cleanup did not happen"
    );
}

#[test]
fn a_namespace_labelled_by_an_earlier_version_is_kept() {
    let c = Cluster::start();
    // An earlier virtwork ran in this team's namespace and labelled it.
    c.legacy_labelled_namespace("team-a");
    c.seed_run("team-a", RUN_A, "cpu", 1);
    let out = delete_namespace(&c, "team-a");
    assert_kept(&c, "team-a", &out, "no virtwork/created-by-run annotation");
}

#[test]
fn a_namespace_holding_objects_virtwork_does_not_manage_is_kept() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "disk", 1);
    c.seed_foreign(NS);
    // Someone else's workload: a Pod and its ConfigMap.
    c.server.insert(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "app-config", "namespace": NS }, "data": { "k": "v" },
    }));
    c.server.insert(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web-0", "namespace": NS },
        "spec": { "containers": [{ "name": "web", "image": "nginx" }] },
    }));
    let out = delete_namespace(&c, NS);
    assert_kept(&c, NS, &out, "object(s) virtwork does not manage");
    let reason = json_doc(&out)["namespace_kept"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.starts_with("it holds 7 object(s) virtwork does not manage: ConfigMap app-config, "),
        "{reason}"
    );
    assert!(c.foreign_present(NS), "a foreign object was deleted");
    assert!(c.server.get("pods", NS, "web-0").is_some());

    // A dry run says so up front and exits 0.
    let preview = c.run(
        &[
            "--namespace",
            NS,
            "cleanup",
            "--dry-run",
            "--delete-namespace",
        ],
        None,
        &[],
    );
    assert_eq!(preview.status.code(), Some(0), "{}", text(&preview.stderr));
    assert!(
        text(&preview.stdout).contains(&format!("The namespace {NS} will be kept: it holds")),
        "{}",
        text(&preview.stdout)
    );
}

#[test]
fn protected_namespaces_are_never_deleted_even_when_virtwork_created_them() {
    let c = Cluster::start();
    for ns in ["default", "kube-system", "openshift-cnv", "virtwork-system"] {
        // As if virtwork had created it and nothing else were in it.
        c.namespace(ns, true);
        c.seed_run(ns, RUN_B, "cpu", 1);
        let out = delete_namespace(&c, ns);
        let expected = match ns {
            "default" => "the cluster's default namespace",
            "kube-system" => "kube-* namespaces belong to Kubernetes",
            "openshift-cnv" => "openshift* namespaces belong to the OpenShift platform",
            _ => "the namespace virtwork itself runs in",
        };
        assert_kept(&c, ns, &out, expected);
        // Nothing left to delete: still a refusal, not "nothing to clean up".
        let again = delete_namespace(&c, ns);
        assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
        assert_eq!(json_doc(&again)["status"], "namespace_kept");
    }
}

#[test]
fn a_namespace_the_run_created_is_deleted_with_a_uid_precondition() {
    let c = Cluster::start();
    let ns = "fresh";
    let run = c.run(
        &[
            "--namespace",
            ns,
            "--output",
            "json",
            "run",
            "--workloads",
            "cpu,disk",
            "--timeout",
            "60",
        ],
        None,
        &[],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let run_id = json_doc(&run)["run_id"].as_str().unwrap().to_string();
    let namespace = c.server.get("namespaces", "", ns).unwrap();
    assert_eq!(
        namespace["metadata"]["annotations"][seed::CREATED_BY_RUN],
        run_id.as_str()
    );
    // What the cluster and KubeVirt add is not in the way: the CA ConfigMap, the default
    // ServiceAccount, the VMs' virt-launcher Pods and the DataVolume's PVC.
    assert!(c.server.get("configmaps", ns, "kube-root-ca.crt").is_some());
    assert!(!c.server.objects("pods", Some(ns)).is_empty());

    let out = delete_namespace(&c, ns);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "completed", "{doc}");
    assert_eq!(doc["namespace_deleted"], true);
    assert_eq!(doc["namespace_kept"], Value::Null);
    assert!(c.server.get("namespaces", "", ns).is_none());
    let deletes = namespace_deletes(&c);
    assert_eq!(deletes.len(), 1);
    assert_eq!(
        deletes[0].delete_options.as_ref().unwrap()["preconditions"]["uid"],
        namespace["metadata"]["uid"],
        "{:?}",
        deletes[0]
    );
}

/// Whatever else a user keeps in the namespace keeps it: any kind the server lists in
/// discovery counts, not only the kinds virtwork creates.
#[test]
fn a_namespace_holding_any_foreign_kind_is_kept() {
    let foreign = [
        (
            "Deployment web",
            json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": { "name": "web", "namespace": NS },
                    "spec": { "selector": { "matchLabels": { "app": "web" } },
                              "template": { "metadata": { "labels": { "app": "web" } },
                                            "spec": { "containers": [{ "name": "web", "image": "nginx" }] } } } }),
        ),
        (
            "CronJob nightly",
            json!({ "apiVersion": "batch/v1", "kind": "CronJob",
                    "metadata": { "name": "nightly", "namespace": NS },
                    "spec": { "schedule": "0 3 * * *", "jobTemplate": { "spec": {} } } }),
        ),
        (
            "RoleBinding team-edit",
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": { "name": "team-edit", "namespace": NS },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit" },
                    "subjects": [{ "kind": "User", "name": "alice" }] }),
        ),
        (
            "VolumeSnapshot before-upgrade",
            json!({ "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                    "metadata": { "name": "before-upgrade", "namespace": NS },
                    "spec": { "source": { "persistentVolumeClaimName": "data" } } }),
        ),
        (
            "Widget blue",
            json!({ "apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": { "name": "blue", "namespace": NS }, "spec": { "size": 3 } }),
        ),
    ];
    for (shown, object) in foreign {
        let c = Cluster::start();
        c.seed_run(NS, RUN_A, "cpu", 1);
        c.server.insert(object);
        let out = delete_namespace(&c, NS);
        assert_kept(
            &c,
            NS,
            &out,
            &format!("it holds 1 object(s) virtwork does not manage: {shown}"),
        );
    }
}

/// What the cluster adds on its own does not keep the namespace: OpenShift's per-namespace
/// RoleBindings, Events (core and events.k8s.io, about our VM or about objects already gone:
/// a real cluster keeps them an hour), and Pod metrics (a view of the Pods, not objects).
#[test]
fn events_cluster_role_bindings_and_metrics_do_not_keep_the_namespace() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let vm_uid = c
        .server
        .get("virtualmachines", NS, "virtwork-cpu-0")
        .unwrap()["metadata"]["uid"]
        .clone();
    c.server.insert(json!({ "apiVersion": "v1", "kind": "Event",
        "metadata": { "name": "virtwork-cpu-0.1", "namespace": NS },
        "involvedObject": { "kind": "VirtualMachine", "name": "virtwork-cpu-0", "namespace": NS, "uid": vm_uid },
        "reason": "SuccessfulCreate", "message": "Started the virtual machine" }));
    // About a VM of an earlier cleanup, deleted already: its uid matches nothing here.
    c.server.insert(json!({ "apiVersion": "v1", "kind": "Event",
        "metadata": { "name": "virtwork-cpu-0-0a1b2c.2", "namespace": NS },
        "involvedObject": { "kind": "VirtualMachine", "name": "virtwork-cpu-0-0a1b2c", "namespace": NS, "uid": "gone-since" },
        "reason": "SuccessfulDelete", "message": "Deleted the virtual machine" }));
    c.server.insert(json!({ "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": { "name": "virt-launcher-x.3", "namespace": NS },
        "regarding": { "kind": "Pod", "name": "virt-launcher-x", "namespace": NS, "uid": "gone-too" },
        "reason": "Killing", "note": "Stopping container compute", "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "kubelet", "reportingInstance": "node-1", "action": "Kill", "type": "Normal" }));
    c.server.insert(json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "system:image-pullers", "namespace": NS },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:image-puller" },
        "subjects": [{ "kind": "Group", "name": format!("system:serviceaccounts:{NS}") }] }));
    c.server.insert(
        json!({ "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
        "metadata": { "name": "virt-launcher-virtwork-cpu-0-abcde", "namespace": NS } }),
    );
    let out = delete_namespace(&c, NS);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(json_doc(&out)["namespace_deleted"], true);
    assert!(c.server.get("namespaces", "", NS).is_none());
}

/// No shipped role may list every kind (that would let virtwork's token read the whole
/// cluster). A kind the account may not list is not read: in a namespace virtwork created
/// with no RoleBinding beyond the cluster's, only a cluster-wide writer could have put
/// anything there. The kinds virtwork creates and RoleBindings must be readable: a refusal of
/// one of those keeps the namespace, naming it.
#[test]
fn only_the_kinds_virtwork_creates_and_rolebindings_must_be_readable() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.insert(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": { "name": "blue", "namespace": NS }, "spec": { "size": 3 },
    }));
    c.server.update_faults(|f| {
        for kind in ["widgets", "deployments", "configmaps", "pods", "events"] {
            f.denials.push(Denial::new("list", kind));
        }
    });
    let out = delete_namespace(&c, NS);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(json_doc(&out)["namespace_deleted"], true);
    assert!(c.server.get("namespaces", "", NS).is_none());

    // (A refused list of a kind virtwork creates already fails cleanup's own listing.)
    let required = "rolebindings";
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.update_faults(|f| {
        f.denials
            .push(Denial::new("list", required).in_namespace(NS));
    });
    let out = delete_namespace(&c, NS);
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert_eq!(out.status.code(), Some(1), "{required}: {stderr}");
    assert!(
        last.starts_with(&format!("Error: kept namespace {NS}: "))
            && last.contains("could not check it for objects virtwork does not manage")
            && last.contains(required),
        "{required}: {last}"
    );
    assert!(c.server.get("namespaces", "", NS).is_some(), "{required}");
}

/// A Secret is the cluster's only when its type is a service account's: an Opaque Secret
/// annotated as `default`'s token is somebody's and keeps the namespace; a real token of
/// `default` does not.
#[test]
fn a_secret_counts_as_the_clusters_only_with_a_service_account_type() {
    let secret = |name: &str, ty: &str| {
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": ty,
            "metadata": { "name": name, "namespace": NS,
                          "annotations": { "kubernetes.io/service-account.name": "default" } },
            "data": { "token": "c2VjcmV0" },
        })
    };
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.insert(secret("db-password", "Opaque"));
    c.server
        .insert(secret("default-dockercfg-x7k2p", "kubernetes.io/dockercfg"));
    let out = delete_namespace(&c, NS);
    assert_kept(
        &c,
        NS,
        &out,
        "it holds 1 object(s) virtwork does not manage: Secret db-password",
    );

    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.insert(secret(
        "default-token-x7k2p",
        "kubernetes.io/service-account-token",
    ));
    c.server
        .insert(secret("default-dockercfg-x7k2p", "kubernetes.io/dockercfg"));
    let out = delete_namespace(&c, NS);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(c.server.get("namespaces", "", NS).is_none());
}

/// An API group whose discovery fails could serve anything: the namespace is kept, naming
/// it; a view group that is down (metrics-server) is not read and does not matter.
#[test]
fn a_failed_discovery_keeps_the_namespace_unless_only_a_view_is_down() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server
        .update_faults(|f| f.unavailable_groups.push("example.com".into()));
    let out = delete_namespace(&c, NS);
    assert_kept(
        &c,
        NS,
        &out,
        "could not read discovery of example.com/v1: the server is currently unable to handle the request",
    );

    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server
        .update_faults(|f| f.unavailable_groups.push("metrics.k8s.io".into()));
    let out = delete_namespace(&c, NS);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(c.server.get("namespaces", "", NS).is_none());
}

/// `cleanup --run-id A --delete-namespace` deletes run A's objects, and keeps the namespace
/// while run B's VMs are in it: they are not this cleanup's to take down.
#[test]
fn deleting_the_namespace_of_one_run_never_takes_another_runs_vms() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run(NS, RUN_B, "memory", 1);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "cleanup",
            "--run-id",
            RUN_A,
            "--yes",
            "--delete-namespace",
            "--wait",
            "--timeout",
            "60",
        ],
        None,
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "namespace_kept", "{doc}");
    let reason = doc["namespace_kept"].as_str().unwrap();
    assert!(
        reason.starts_with("it holds 9 object(s) virtwork does not manage: ")
            && reason.contains(&format!("(run {RUN_B})")),
        "{reason}"
    );
    assert!(c.server.get("namespaces", "", NS).is_some());
    assert!(
        namespace_deletes(&c).is_empty(),
        "a namespace delete was sent"
    );
    assert_eq!(
        c.managed_total(NS, Some(RUN_A)),
        0,
        "run A was not cleaned up"
    );
    assert!(
        c.server
            .get("virtualmachines", NS, "virtwork-memory-0")
            .is_some()
    );
    assert!(c.managed_total(NS, Some(RUN_B)) > 0);
}

/// A namespace delete the API server refuses is a failure of its own: reported last among the
/// warnings and failures (kind `Namespace`, empty name), neither deleted nor "kept", exit 1,
/// and everything else in scope deleted.
#[test]
fn a_refused_namespace_delete_is_reported_as_the_namespace_failure() {
    let c = Cluster::start();
    let ns = "refused";
    let run = c.run(
        &[
            "--namespace",
            ns,
            "--output",
            "json",
            "run",
            "--workloads",
            "cpu",
            "--timeout",
            "60",
        ],
        None,
        &[],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    c.server
        .update_faults(|f| f.denials.push(Denial::new("delete", "namespaces")));

    let out = delete_namespace(&c, ns);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "Error: cleanup could not delete 1 object(s): deleting namespace refused: "
        ),
        "{last}"
    );
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "completed_with_errors", "{doc}");
    assert_eq!(doc["namespace_deleted"], false);
    assert_eq!(doc["namespace_kept"], Value::Null);
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc}");
    assert_eq!(failures[0]["kind"], "Namespace");
    assert_eq!(failures[0]["namespace"], ns);
    assert_eq!(failures[0]["name"], "");
    let warnings = doc["warnings"].as_array().unwrap();
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("deleting namespace refused: "),
        "{doc}"
    );
    assert!(c.server.get("namespaces", "", ns).is_some());
    assert_eq!(c.managed_total(ns, None), 0, "the rest was not deleted");
    assert_eq!(c.cleanup_audit()[0].status, "failed");
}

/// The Go tool's deployment labelled its own Secret and audit PVC `managed-by: virtwork`, in
/// the namespace its VMs went to. No run created them (no run-id label), so cleanup deletes
/// the runs' objects around them and leaves them alone, as `status` does not list them.
#[test]
fn objects_with_the_managed_by_label_but_no_run_id_are_never_touched() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.insert(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "virtwork-secrets", "namespace": NS,
                      "labels": { MANAGED_BY: "virtwork", "app.kubernetes.io/name": "virtwork" } },
        "data": {},
    }));
    c.server.insert(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": { "name": "virtwork-audit-data", "namespace": NS,
                      "labels": { MANAGED_BY: "virtwork", "app.kubernetes.io/name": "virtwork" } },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
    }));
    let out = cleanup_json(&c, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["deleted"]["vms"], 1, "{doc}");
    assert_eq!(
        doc["deleted"]["secrets"], 1,
        "only the run's cloud-init Secret: {doc}"
    );
    assert!(c.server.get("secrets", NS, "virtwork-secrets").is_some());
    assert!(
        c.server
            .get("persistentvolumeclaims", NS, "virtwork-audit-data")
            .is_some()
    );
    let touched: Vec<String> = c
        .server
        .request_log()
        .into_iter()
        .filter(|r| r.verb == "delete" || r.verb == "patch" || r.verb == "update")
        .filter(|r| r.name == "virtwork-secrets" || r.name == "virtwork-audit-data")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
}

#[test]
fn a_large_cleanup_on_a_terminal_shows_a_live_view_while_deleting_and_waiting() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 30);
    // util-linux `script` gives the binary a terminal and copies what it shows to stdout.
    let inner = format!(
        "stty cols 100 rows 40; {} --kubeconfig {} --audit-db {} cleanup --yes --wait --timeout 1m",
        env!("CARGO_BIN_EXE_virtwork"),
        c.dir.path().join("kubeconfig").display(),
        c.db().display()
    );
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .current_dir(c.dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", c.dir.path())
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` runs the binary on a pty");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("] deleting ") && screen.contains(" objects"),
        "no live view:\n{screen}"
    );
    assert!(
        screen.contains("] waiting for ") && screen.contains(" deleted objects to be gone"),
        "no live view while waiting:\n{screen}"
    );

    c.seed_run(NS, RUN_B, "cpu", 30);
    let plain = c.run(&["cleanup", "--yes"], None, &[]);
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
    assert!(
        !text(&plain.stderr).contains("] deleting "),
        "a view without a terminal"
    );
}
