//! `virtwork status` end to end: the real binary against the fake API server, with a
//! running and a failed VM produced by the fixture's KubeVirt simulation.

mod seed;
mod support;

use seed::{Cluster, NS, RUN_A, RUN_B, SETTLE, json_doc, text};
use serde_json::Value;

/// Seeds a running cpu run (A) and a failing memory run (B), and waits for the phases.
fn running_and_failed() -> Cluster {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run_with_image(NS, RUN_B, "memory", 1, "quay.io/example/fail:1");
    let phase = |s: &support::FakeApiServer, vm: &str| {
        s.get("virtualmachineinstances", NS, vm)
            .and_then(|v| v["status"]["phase"].as_str().map(String::from))
    };
    let settled = c.server.wait_until(SETTLE, |s| {
        phase(s, "virtwork-cpu-0").as_deref() == Some("Running")
            && phase(s, "virtwork-memory-0").as_deref() == Some("Failed")
    });
    assert!(settled, "fixture VMIs did not reach Running/Failed");
    c
}

#[test]
fn status_shows_a_running_and_a_failed_vm() {
    let c = running_and_failed();
    let out = c.run(
        &["--namespace", NS, "--output", "json", "status"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["command"], "status");
    let runs = doc["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![RUN_A, RUN_B], "runs sorted by id");

    let running = &runs[0]["vms"][0];
    assert_eq!(running["name"], "virtwork-cpu-0");
    assert_eq!(running["workload"], "cpu");
    assert_eq!(running["role"], Value::Null);
    assert_eq!(running["printable_status"], "Running");
    assert_eq!(running["vmi_phase"], "Running");
    assert!(
        running["node"].as_str().is_some_and(|n| !n.is_empty()),
        "{running}"
    );
    assert!(running["age_seconds"].as_i64().is_some_and(|a| a >= 0));

    let failed = &runs[1]["vms"][0];
    assert_eq!(failed["name"], "virtwork-memory-0");
    assert_eq!(failed["printable_status"], "CrashLoopBackOff");
    assert_eq!(failed["vmi_phase"], "Failed");

    // The human table has one row per VM, sorted by run, with the phases.
    let table = c.run(&["--namespace", NS, "status"], None, &[]);
    assert_eq!(table.status.code(), Some(0));
    let stdout = text(&table.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("RUN ID"), "{stdout}");
    assert!(
        lines[1].starts_with(RUN_A) && lines[1].contains("Running"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with(RUN_B)
            && lines[2].contains("CrashLoopBackOff")
            && lines[2].contains("Failed"),
        "{stdout}"
    );
    assert_eq!(lines[3], "2 run(s), 2 VM(s) in namespace virtwork.");
}

#[test]
fn status_of_one_run() {
    let c = running_and_failed();
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "status",
            "--run-id",
            RUN_B,
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["run_id_filter"], RUN_B);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["runs"][0]["vms"][0]["name"], "virtwork-memory-0");
}

#[test]
fn status_across_namespaces() {
    let c = Cluster::start();
    c.namespace("team-b", true);
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run("team-b", RUN_B, "cpu", 2);
    let out = c.run(&["--output", "json", "status", "-A"], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["namespace"], Value::Null);
    assert_eq!(doc["runs"][1]["vm_count"], 2);
    assert_eq!(doc["runs"][1]["vms"][0]["namespace"], "team-b");
}

#[test]
fn no_runs_is_a_clear_message_and_success() {
    let c = Cluster::start();
    let out = c.run(&["--namespace", NS, "status"], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "No virtwork runs found in namespace virtwork.\n"
    );
}

#[test]
fn a_run_id_that_is_not_a_uuid_is_bad_input() {
    let c = Cluster::start();
    let out = c.run(&["status", "--run-id", "yesterday"], None, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--run-id"));
}

#[test]
fn a_server_repeating_a_continue_token_is_stopped_with_a_clear_error() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.update_faults(|f| {
        f.endless_list = Some(support::EndlessList {
            resource: "virtualmachines".into(),
            same_token: true,
        })
    });
    let run = seed::run_guarded(
        c.command(&["--namespace", NS, "status"]),
        std::time::Duration::from_secs(60),
        400 * 1024,
    );
    let out = run.output.expect("status did not stop by itself");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let last = text(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        last.contains("listing VMs in virtwork") && last.contains("same continue token"),
        "{last}"
    );
    assert_eq!(c.server.count("list", "virtualmachines"), 2);
}
