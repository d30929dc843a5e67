//! `virtwork status` end to end: the real binary against the fake API server, with a
//! running and a failed VM produced by the fixture's KubeVirt simulation.

use crate::seed;
use crate::support;

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
fn a_namespace_that_does_not_exist_is_said_as_such_and_exits_1() {
    let c = Cluster::start();
    let out = c.run(&["--namespace", "no-such-ns", "status"], None, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
    let last = text(&out.stderr).lines().last().unwrap().to_string();
    assert!(
        last.starts_with("Error: namespace no-such-ns does not exist")
            && last.contains("virtwork status -A"),
        "{last}"
    );
}

#[test]
fn a_run_id_that_is_not_a_uuid_is_bad_input() {
    let c = Cluster::start();
    let out = c.run(&["status", "--run-id", "yesterday"], None, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--run-id"));
}

/// Readiness per VM: two runs made by the real binary (so their VMs carry the workload
/// readiness probe), one whose workload unit never comes up (the fixture's `brokenunit`
/// image). Status shows the first ready and the second running but not ready.
#[test]
fn status_shows_workload_readiness_per_vm() {
    let c = Cluster::start();
    for image in [
        "quay.io/containerdisks/fedora:42",
        "quay.io/example/brokenunit:1",
    ] {
        let workload = if image.contains("brokenunit") {
            "memory"
        } else {
            "cpu"
        };
        let out = c.run(
            &[
                "--namespace",
                NS,
                "--no-audit",
                "run",
                "--workloads",
                workload,
                "--container-disk-image",
                image,
                // The VMs carry the workload probe only when this readiness is asked for.
                "--ready-condition",
                "workload",
                "--no-wait",
            ],
            None,
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    // Each run names its VM with its own run tag: find them by workload.
    let vmi = |s: &support::FakeApiServer, workload: &str| {
        s.objects("virtualmachineinstances", Some(NS))
            .into_iter()
            .find(|v| v["metadata"]["labels"]["app.kubernetes.io/component"] == workload)
    };
    let condition = |s: &support::FakeApiServer, workload: &str| {
        vmi(s, workload).and_then(|v| {
            v["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready")
                .and_then(|c| c["status"].as_str().map(String::from))
        })
    };
    let settled = c.server.wait_until(SETTLE, |s| {
        condition(s, "cpu").as_deref() == Some("True")
            && condition(s, "memory").as_deref() == Some("False")
            && vmi(s, "memory").is_some_and(|v| v["status"]["phase"] == "Running")
    });
    assert!(settled, "fixture VMIs did not settle");
    // Give the broken VM the time the healthy one needed to pass its probe: it must not.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = c.run(
        &["--namespace", NS, "--output", "json", "status"],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let vms: Vec<&Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["vms"].as_array().unwrap())
        .collect();
    let by_workload = |workload: &str| *vms.iter().find(|v| v["workload"] == workload).unwrap();
    assert_eq!(by_workload("cpu")["ready"], true);
    assert_eq!(by_workload("memory")["vmi_phase"], "Running");
    assert_eq!(by_workload("memory")["ready"], false);

    let table = text(&c.run(&["--namespace", NS, "status"], None, &[]).stdout);
    let header = table.lines().next().unwrap();
    assert!(header.contains(" READY "), "{table}");
    let column = header.find(" READY ").unwrap() + 1;
    let cell = |line: &str| {
        line[column..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let row = |workload: &str| {
        let vm = by_workload(workload)["name"].as_str().unwrap();
        table.lines().find(|l| l.contains(vm)).unwrap().to_string()
    };
    assert_eq!(cell(&row("cpu")), "yes", "{table}");
    assert_eq!(cell(&row("memory")), "no", "{table}");
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

#[test]
fn context_picks_a_kubeconfig_context_other_than_the_current_one() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    let path = c.dir.path().join("kubeconfig");
    let mut kubeconfig: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // The current context is a dead server; "fake" (the fixture's) stays defined.
    let dead_cluster: serde_yaml::Value =
        serde_yaml::from_str("{name: dead, cluster: {server: 'https://127.0.0.1:9'}}").unwrap();
    let dead_context: serde_yaml::Value =
        serde_yaml::from_str("{name: dead, context: {cluster: dead, user: fake}}").unwrap();
    for (list, item) in [("clusters", dead_cluster), ("contexts", dead_context)] {
        kubeconfig[list].as_sequence_mut().unwrap().push(item);
    }
    kubeconfig["current-context"] = "dead".into();
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();

    let current = c.run(&["status", "--timeout", "3s"], None, &[]);
    assert_eq!(current.status.code(), Some(1), "{}", text(&current.stderr));
    let chosen = c.run(
        &["--context", "fake", "-n", NS, "-o", "json", "status"],
        None,
        &[],
    );
    assert_eq!(chosen.status.code(), Some(0), "{}", text(&chosen.stderr));
    assert_eq!(json_doc(&chosen)["runs"][0]["run_id"], RUN_A);
    let from_env = c.run(
        &["status", "-o", "yaml"],
        None,
        &[("VIRTWORK_CONTEXT", "fake")],
    );
    assert_eq!(
        from_env.status.code(),
        Some(0),
        "{}",
        text(&from_env.stderr)
    );
    let doc: Value = serde_yaml::from_slice(&from_env.stdout).unwrap();
    assert_eq!(doc["command"], "status");
    let unknown = c.run(&["status", "--context", "nope"], None, &[]);
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = text(&unknown.stderr);
    assert!(
        stderr.contains("\"nope\"") && stderr.contains("fake, dead"),
        "{stderr}"
    );
}

#[test]
fn vm_names_sort_naturally() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 11);
    let out = c.run(&["-n", NS, "-o", "json", "status"], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let names: Vec<&str> = doc["runs"][0]["vms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|vm| vm["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..11).map(|i| format!("virtwork-cpu-{i}")).collect();
    assert_eq!(names, expected, "cpu-2 before cpu-10");
    let table = text(&c.run(&["-n", NS, "status"], None, &[]).stdout);
    let at = |name: &str| table.find(&format!("{name} ")).unwrap_or(usize::MAX);
    assert!(at("virtwork-cpu-2") < at("virtwork-cpu-10"), "{table}");
}
