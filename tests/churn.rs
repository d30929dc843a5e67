//! `virtwork churn` end to end: the real binary against the fake API server, whose KubeVirt
//! simulation serves the restart/stop/start subresources and VirtualMachineInstanceMigrations
//! with their phases. Rates are checked by counting requests in the server's log (a band, not
//! wall-clock limits).

use crate::seed;
use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use seed::{Cluster, NS, RUN_A, RUN_B, SETTLE, json_doc, text};
use serde_json::Value;

/// Seeds `n` cpu VMs of run A and waits until every VMI runs.
fn fleet(n: usize) -> Cluster {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", n);
    wait_all_running(&c, n);
    c
}

/// `n` cpu VMs of run A without data disks (live-migratable), all running.
fn migratable_fleet(n: usize) -> Cluster {
    let c = Cluster::start();
    let labels = serde_json::json!({
        "app.kubernetes.io/managed-by": "virtwork",
        "app.kubernetes.io/component": "cpu",
        "virtwork/run-id": RUN_A,
    });
    for i in 0..n {
        c.server.insert(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": { "name": format!("virtwork-cpu-{i}"), "namespace": NS, "labels": labels },
            "spec": {
                "runStrategy": "Always",
                "template": {
                    "metadata": { "labels": labels },
                    "spec": {
                        "domain": { "devices": {} },
                        "volumes": [{ "name": "rootdisk", "containerDisk": { "image": "quay.io/containerdisks/fedora:42" } }],
                    },
                },
            },
        }));
    }
    wait_all_running(&c, n);
    c
}

fn vmi_phase(s: &support::FakeApiServer, vm: &str) -> Option<String> {
    s.get("virtualmachineinstances", NS, vm)
        .and_then(|v| v["status"]["phase"].as_str().map(String::from))
}

fn wait_all_running(c: &Cluster, n: usize) {
    let running = c.server.wait_until(SETTLE, |s| {
        (0..n).all(|i| vmi_phase(s, &format!("virtwork-cpu-{i}")).as_deref() == Some("Running"))
    });
    assert!(running, "not every VMI runs");
}

/// Lifecycle requests in the log as (action, VM name), in order.
fn lifecycle_requests(c: &Cluster) -> Vec<(String, String)> {
    c.server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.starts_with("virtualmachines/") && r.status == 202)
        .map(|r| (r.resource["virtualmachines/".len()..].to_string(), r.name))
        .collect()
}

fn audit_rows(c: &Cluster, sql: &str) -> Vec<Vec<Option<String>>> {
    let conn = rusqlite::Connection::open(c.db()).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let columns = stmt.column_count();
    stmt.query_map([], |row| {
        (0..columns)
            .map(|i| row.get::<_, Option<String>>(i))
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn restarts_run_at_the_requested_rate_on_the_requested_share() {
    let c = fleet(10);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "5s",
            "--rate",
            "120/m",
            "--share",
            "50",
            "--actions",
            "restart",
            "--seed",
            "7",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let restarts = lifecycle_requests(&c);
    // 120/m over 5 s is 10 actions; within 10 %.
    assert!(
        (9..=11).contains(&restarts.len()),
        "{} restarts: {restarts:?}",
        restarts.len()
    );
    assert!(restarts.iter().all(|(action, _)| action == "restart"));
    let touched: BTreeSet<&str> = restarts.iter().map(|(_, vm)| vm.as_str()).collect();
    assert_eq!(touched.len(), 5, "50 % of 10 VMs: {touched:?}");
    let doc = json_doc(&out);
    assert_eq!(doc["command"], "churn");
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["seed"], 7);
    assert_eq!(doc["vms"]["selected"], 5);
    assert_eq!(doc["counts"]["restart"]["started"], restarts.len());
    assert_eq!(doc["counts"]["restart"]["succeeded"], restarts.len());
    assert_eq!(doc["counts"]["migrate"]["started"], 0);
    assert_eq!(doc["failures"], Value::Array(vec![]));
    // Each restarted VM runs a new instance.
    wait_all_running(&c, 10);
    // The audit record: one churn execution, one event per action.
    let rows = audit_rows(
        &c,
        "SELECT command, status, linked_run_ids FROM audit_log WHERE command = 'churn'",
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][1].as_deref(), Some("success"));
    assert_eq!(
        rows[0][2].as_deref(),
        Some(format!("[\"{RUN_A}\"]").as_str())
    );
    let events = audit_rows(
        &c,
        "SELECT e.message FROM events e JOIN audit_log a ON a.id = e.audit_id
         WHERE a.command = 'churn' AND e.event_type = 'churn_action'",
    );
    assert_eq!(events.len(), restarts.len());
    assert!(
        events[0][0]
            .as_deref()
            .unwrap()
            .starts_with("restart virtwork/virtwork-cpu-")
    );
    // `audit show` names the churned run and lists the actions.
    let churn_id = doc["churn_id"].as_str().unwrap();
    let show = c.run(&["audit", "show", churn_id], None, &[]);
    let shown = text(&show.stdout);
    assert!(
        shown.contains(&format!("Churned runs:    {RUN_A}")),
        "{shown}"
    );
    assert_eq!(
        shown.matches("churn_action ").count(),
        restarts.len(),
        "{shown}"
    );
}

#[test]
fn stop_start_and_migrate_follow_kubevirt_and_cleanup_removes_the_migrations() {
    let c = migratable_fleet(4);
    // Another run's VM in the same namespace is never touched.
    c.seed_run(NS, RUN_B, "memory", 1);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "3s",
            "--rate",
            "2/s",
            "--actions",
            "stop-start,migrate=2",
            "--seed",
            "3",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let stops = doc["counts"]["stop_start"]["succeeded"].as_u64().unwrap();
    let migrations = doc["counts"]["migrate"]["succeeded"].as_u64().unwrap();
    assert!(stops >= 1 && migrations >= 1, "{doc}");
    assert_eq!(
        stops + migrations,
        doc["started"].as_u64().unwrap(),
        "{doc}"
    );
    // Every stop is followed by a start of the same VM.
    let requests = lifecycle_requests(&c);
    let mut owed: BTreeMap<String, usize> = BTreeMap::new();
    for (action, vm) in &requests {
        assert!(vm.starts_with("virtwork-cpu-"), "{vm} is not run A's");
        match action.as_str() {
            "stop" => *owed.entry(vm.clone()).or_default() += 1,
            "start" => *owed.get_mut(vm).expect("a start after a stop") -= 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert!(owed.values().all(|n| *n == 0), "{owed:?}");
    assert_eq!(requests.len() as u64, 2 * stops);
    // The migrations: labelled, Succeeded, and their VMIs moved node.
    let objects = c
        .server
        .objects("virtualmachineinstancemigrations", Some(NS));
    assert_eq!(objects.len() as u64, migrations);
    for m in &objects {
        let labels = &m["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/managed-by"], "virtwork");
        assert_eq!(labels["virtwork/run-id"], RUN_A);
        assert_eq!(labels["virtwork/churn-id"], doc["churn_id"]);
        assert_eq!(m["status"]["phase"], "Succeeded");
        let vmi = m["spec"]["vmiName"].as_str().unwrap();
        let state = c.server.get("virtualmachineinstances", NS, vmi).unwrap()["status"].clone();
        if state["migrationState"]["migrationUid"] == m["metadata"]["uid"] {
            assert_eq!(state["migrationState"]["completed"], true);
            assert_eq!(state["nodeName"], state["migrationState"]["targetNode"]);
        }
    }
    wait_all_running(&c, 4);
    // cleanup of the run removes its migrations with everything else.
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "cleanup",
            "--yes",
            "--run-id",
            RUN_A,
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(json_doc(&out)["deleted"]["migrations"], migrations);
    assert!(
        c.server
            .objects("virtualmachineinstancemigrations", Some(NS))
            .is_empty()
    );
}

#[test]
fn an_interrupt_starts_no_new_action_and_starts_every_stopped_vm_again() {
    if std::process::Command::new("kill")
        .arg("-l")
        .output()
        .is_err()
    {
        eprintln!("skipping: kill(1) not found (install procps)");
        return;
    }
    let c = fleet(6);
    // Guests take 3 s to shut down, so the interrupt finds VMs stopping.
    c.server.set_controllers(support::ControllerOptions {
        stop_delay: std::time::Duration::from_secs(3),
        ..Default::default()
    });
    let child = c
        .command(&[
            "--namespace",
            NS,
            "--output",
            "json",
            "--verbose",
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "10m",
            "--rate",
            "10/s",
            "--actions",
            "stop-start",
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stopped = c
        .server
        .wait_until(SETTLE, |s| s.count("update", "virtualmachines/stop") >= 2);
    assert!(stopped, "churn never stopped a VM");
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "interrupted");
    assert!(doc["not_started"].as_u64().unwrap() > 0, "{doc}");
    let restored = doc["restored"].as_array().unwrap();
    assert!(
        !restored.is_empty(),
        "{doc}\n{:?}\n{}",
        lifecycle_requests(&c),
        text(&out.stderr)
    );
    // Every VM stopped was started again: no stop without its start, and all run.
    let mut owed: BTreeMap<String, i32> = BTreeMap::new();
    for (action, vm) in lifecycle_requests(&c) {
        *owed.entry(vm).or_default() += if action == "stop" { 1 } else { -1 };
    }
    assert!(owed.values().all(|n| *n == 0), "{owed:?}");
    for i in 0..6 {
        let vm = c
            .server
            .get("virtualmachines", NS, &format!("virtwork-cpu-{i}"))
            .unwrap();
        assert_eq!(vm["spec"]["runStrategy"], "Always", "{vm}");
    }
    wait_all_running(&c, 6);
    let rows = audit_rows(&c, "SELECT status FROM audit_log WHERE command = 'churn'");
    assert_eq!(rows[0][0].as_deref(), Some("cancelled"));
    let events = audit_rows(
        &c,
        "SELECT e.message FROM events e WHERE e.event_type = 'churn_restored'",
    );
    assert_eq!(events.len(), restored.len());
}

#[test]
fn a_dry_run_prints_the_same_schedule_for_a_seed_and_acts_on_nothing() {
    let c = fleet(3);
    let args = [
        "--namespace",
        NS,
        "churn",
        "--dry-run",
        "--duration",
        "10s",
        "--rate",
        "1/s",
        "--seed",
        "11",
    ];
    let first = c.run(&args, None, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let again = c.run(&args, None, &[]);
    let schedule = |out: &std::process::Output| -> Vec<String> {
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("  +"))
            .map(String::from)
            .collect()
    };
    assert_eq!(schedule(&first).len(), 10, "{}", text(&first.stdout));
    assert_eq!(schedule(&first), schedule(&again));
    assert!(lifecycle_requests(&c).is_empty());
    assert_eq!(
        c.server.count("create", "virtualmachineinstancemigrations"),
        0
    );
    let json = c.run(&[&["--output", "json"][..], &args[..]].concat(), None, &[]);
    let doc = json_doc(&json);
    assert_eq!(doc["status"], "dry_run");
    assert_eq!(doc["schedule"].as_array().unwrap().len(), 10);
}

#[test]
fn bad_churn_input_is_one_line_naming_the_flag_and_contacts_nothing() {
    let c = fleet(1);
    c.server.clear_request_log();
    for (flag, value, expected) in [
        ("--rate", "0/m", "expected actions per time unit"),
        ("--share", "0", "expected a percentage from 1 to 100"),
        ("--actions", "reboot", "expected a comma-separated list"),
        ("--duration", "30", "did you mean \"30s\""),
    ] {
        let out = c.run(&["--namespace", NS, "churn", flag, value], None, &[]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let stderr = text(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(expected),
            "{stderr}"
        );
    }
    assert!(c.server.request_log().is_empty());
    // No running VM in scope is a runtime failure, not a silent success.
    let out = c.run(&["--namespace", "elsewhere", "churn"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no running VMs in namespace elsewhere"));
}

#[test]
fn a_vm_somebody_else_is_stopping_is_left_alone() {
    let c = fleet(3);
    c.server.set_controllers(support::ControllerOptions {
        stop_delay: std::time::Duration::from_secs(30),
        ..Default::default()
    });
    // An operator stops virtwork-cpu-0; its guest is still shutting down (VMI Running, marked
    // for deletion) when churn starts.
    let mut vm = c
        .server
        .get("virtualmachines", NS, "virtwork-cpu-0")
        .unwrap();
    vm["spec"]["runStrategy"] = serde_json::json!("Halted");
    c.server.insert(vm);
    let marked = c.server.wait_until(SETTLE, |s| {
        s.get("virtualmachineinstances", NS, "virtwork-cpu-0")
            .is_some_and(|v| v["metadata"]["deletionTimestamp"].is_string())
    });
    assert!(marked);
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--duration",
            "3s",
            "--rate",
            "2/s",
            "--actions",
            "stop-start,restart",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(json_doc(&out)["vms"]["running"], 2);
    assert!(!lifecycle_requests(&c).is_empty());
    // Not even a refused request reached it.
    let touched: Vec<String> = c
        .server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.starts_with("virtualmachines/") && r.name == "virtwork-cpu-0")
        .map(|r| format!("{} {}", r.resource, r.status))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
    let vm = c
        .server
        .get("virtualmachines", NS, "virtwork-cpu-0")
        .unwrap();
    assert_eq!(
        vm["spec"]["runStrategy"], "Halted",
        "churn never starts somebody else's VM"
    );
}

#[test]
fn vms_that_cannot_live_migrate_get_no_migration() {
    // seed_run's VMs have ReadWriteOnce data disks: LiveMigratable=False.
    let c = fleet(3);
    let vmi = c
        .server
        .get("virtualmachineinstances", NS, "virtwork-cpu-0")
        .unwrap();
    let conditions = vmi["status"]["conditions"].as_array().unwrap().clone();
    assert!(
        conditions
            .iter()
            .any(|x| x["type"] == "LiveMigratable" && x["status"] == "False"),
        "{conditions:?}"
    );
    let out = c.run(
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--duration",
            "2s",
            "--rate",
            "2/s",
            "--actions",
            "migrate",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["skipped"], 4, "{doc}");
    assert_eq!(doc["counts"]["migrate"]["started"], 0);
    assert_eq!(
        c.server.count("create", "virtualmachineinstancemigrations"),
        0
    );
}
