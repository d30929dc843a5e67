//! `virtwork churn` end to end: the real binary against the fake API server, whose KubeVirt
//! simulation serves the restart/stop/start subresources and VirtualMachineInstanceMigrations
//! with their phases. Rates are checked by counting requests in the server's log (a band, not
//! wall-clock limits).
//!
//! The fake's restart follows virt-api (pkg/virt-api/rest/lifecycle.go; before KubeVirt 1.5
//! pkg/virt-api/rest/subresource.go): a restart adds `status.stateChangeRequests` (Stop with
//! the VMI's uid, Start), the old VMI shuts down and the requests stay until it is gone, and
//! a restart meanwhile is a 500 "unable to complete request: stop/start already underway"
//! (getChangeRequestJson). Faults after commit (a dropped answer, a gateway's 504) apply to
//! these requests as to any write; see tests/fake_apiserver.rs for the server on its own.

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
    // The time from each restart to its VM running again, as percentiles.
    let latency = &doc["latency"]["actions"]["restart"];
    assert_eq!(latency["count"], restarts.len(), "{doc}");
    let (p50, max) = (
        latency["p50_seconds"].as_f64().unwrap(),
        latency["max_seconds"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= max, "{latency}");
    assert_eq!(doc["latency"]["actions"]["migrate"], Value::Null);
    // Without a terminal, the progress goes to the log.
    let stderr = text(&out.stderr);
    assert!(stderr.contains("under way"), "{stderr}");
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
    let measured = audit_rows(
        &c,
        "SELECT e.message FROM events e WHERE e.event_type = 'churn_latency'",
    );
    let measured: Value = serde_json::from_str(measured[0][0].as_deref().unwrap()).unwrap();
    assert_eq!(measured, doc["latency"]);
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
        let stamped: Vec<&str> = m["status"]["phaseTransitionTimestamps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["phase"].as_str().unwrap())
            .collect();
        assert!(stamped.contains(&"TargetReady"), "{stamped:?}");
        let vmi = m["spec"]["vmiName"].as_str().unwrap();
        let state = c.server.get("virtualmachineinstances", NS, vmi).unwrap()["status"].clone();
        if state["migrationState"]["migrationUid"] == m["metadata"]["uid"] {
            assert_eq!(state["migrationState"]["completed"], true);
            assert_eq!(state["nodeName"], state["migrationState"]["targetNode"]);
        }
    }
    // Each migration phase, from the migration's creation, as percentiles.
    for phase in [
        "scheduling",
        "scheduled",
        "target_ready",
        "running",
        "succeeded",
    ] {
        assert_eq!(
            doc["latency"]["migration_phases"][phase]["count"], migrations,
            "{phase}: {doc}"
        );
    }
    assert_eq!(doc["latency"]["actions"]["stop_start"]["count"], stops);
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
            "--yes",
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
            "--yes",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["skipped"], 4, "{doc}");
    assert_eq!(doc["skipped_by_cause"]["no_migratable_vm"], 4, "{doc}");
    assert_eq!(doc["counts"]["migrate"]["started"], 0);
    assert_eq!(
        c.server.count("create", "virtualmachineinstancemigrations"),
        0
    );
}

/// Spawns churn with `args` (stdin closed).
fn spawn(c: &Cluster, args: &[&str]) -> std::process::Child {
    c.command(args)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Every request on VM `vm`'s lifecycle subresources, as (subresource, status), whatever the
/// answer.
fn lifecycle_attempts(c: &Cluster, vm: &str) -> Vec<(String, u16)> {
    c.server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.starts_with("virtualmachines/") && r.name == vm)
        .map(|r| (r.resource["virtualmachines/".len()..].to_string(), r.status))
        .collect()
}

/// A foreign VM under `name`: another object (new uid), not virtwork's, Halted.
fn foreign_halted_vm(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": { "name": name, "namespace": NS, "labels": { "team": "someone-else" } },
        "spec": {
            "runStrategy": "Halted",
            "template": { "spec": { "domain": { "devices": {} } } },
        },
    })
}

/// Security (issue 35, item 2): churn lists the fleet once, then acts on names for up to a
/// week. A VM relabelled to another run, or deleted and replaced by a foreign VM under the
/// same name, between the listing and the first action is never acted on.
#[test]
fn a_vm_relabelled_or_replaced_after_the_listing_is_never_acted_on() {
    let c = fleet(3);
    // The permission check sits between the listing and the first action: hold it so the
    // fleet can change meanwhile.
    c.server.update_faults(|f| {
        f.scripted.push(support::ScriptedFault::new(
            "create",
            "selfsubjectaccessreviews",
            support::FaultAction::Delay(std::time::Duration::from_secs(2)),
        ));
    });
    let child = spawn(
        &c,
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
            "4/s",
            "--actions",
            "restart,stop-start",
        ],
    );
    let listed = c.server.wait_until(SETTLE, |s| {
        s.count("create", "selfsubjectaccessreviews") >= 1
    });
    assert!(listed, "churn never checked its permissions");
    // virtwork-cpu-0 now belongs to run B; virtwork-cpu-1 is somebody else's stopped VM.
    let mut relabelled = c
        .server
        .get("virtualmachines", NS, "virtwork-cpu-0")
        .unwrap();
    relabelled["metadata"]["labels"]["virtwork/run-id"] = serde_json::json!(RUN_B);
    c.server.insert(relabelled);
    c.server.remove("virtualmachines", NS, "virtwork-cpu-1");
    c.server.insert(foreign_halted_vm("virtwork-cpu-1"));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    for vm in ["virtwork-cpu-0", "virtwork-cpu-1"] {
        assert_eq!(
            lifecycle_attempts(&c, vm),
            vec![],
            "{vm} was acted on: {doc}"
        );
    }
    assert!(
        !lifecycle_attempts(&c, "virtwork-cpu-2").is_empty(),
        "{doc}"
    );
    // Both are other objects now (the name's new VM has another uid): each skipped once,
    // then never chosen again.
    assert_eq!(doc["skipped_by_cause"]["vm_replaced"], 2, "{doc}");
    let foreign = c
        .server
        .get("virtualmachines", NS, "virtwork-cpu-1")
        .unwrap();
    assert_eq!(foreign["spec"]["runStrategy"], "Halted");
    let skipped = audit_rows(
        &c,
        "SELECT e.message FROM events e WHERE e.event_type = 'churn_skipped'",
    );
    assert_eq!(skipped.len(), 2, "{skipped:?}");
}

/// Security (issue 35, item 2): a VM churn stopped and that was replaced by a foreign,
/// Halted VM under the same name before the restore is never started; the stop-start under
/// way ends at once instead.
#[test]
fn the_restore_never_starts_a_foreign_vm_that_took_the_name() {
    if std::process::Command::new("kill")
        .arg("-l")
        .output()
        .is_err()
    {
        eprintln!("skipping: kill(1) not found (install procps)");
        return;
    }
    let c = fleet(2);
    c.server.set_controllers(support::ControllerOptions {
        stop_delay: std::time::Duration::from_secs(5),
        ..Default::default()
    });
    let child = spawn(
        &c,
        &[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "10m",
            "--rate",
            "1/s",
            "--actions",
            "stop-start",
        ],
    );
    // The request log holds a request once it is answered (its counter counts it on
    // arrival): wait for the answered stop.
    let mut victim = String::new();
    let stopped = c.server.wait_until(SETTLE, |s| {
        let stop = s
            .request_log()
            .into_iter()
            .find(|r| r.resource == "virtualmachines/stop");
        victim = stop.map(|r| r.name).unwrap_or_default();
        !victim.is_empty()
    });
    assert!(stopped, "churn never stopped a VM");
    c.server.remove("virtualmachines", NS, &victim);
    c.server.insert(foreign_halted_vm(&victim));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let starts: Vec<(String, u16)> = lifecycle_attempts(&c, &victim)
        .into_iter()
        .filter(|(action, _)| action == "start")
        .collect();
    assert_eq!(starts, vec![], "{doc}");
    let foreign = c.server.get("virtualmachines", NS, &victim).unwrap();
    assert_eq!(foreign["spec"]["runStrategy"], "Halted", "{doc}");
    let cut: Vec<&Value> = doc["cut_short"].as_array().unwrap().iter().collect();
    assert!(
        cut.iter().any(|x| x["vm"] == format!("{NS}/{victim}")
            && x["why"] == "VM replaced since churn started"),
        "{doc}"
    );
    assert!(
        !doc["restored"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == &format!("{NS}/{victim}")),
        "{doc}"
    );
}

/// Lost answers (a dropped connection or a gateway's 504 after the restart, stop or start
/// went through) are resolved by reading the VM and VMI, never by sending again: one request
/// per action, one new VMI per restart.
#[test]
fn lost_answers_are_resolved_by_reading_the_vm_never_by_resending() {
    let c = fleet(4);
    c.server.update_faults(|f| {
        for (resource, action) in [
            (
                "virtualmachines/restart",
                support::FaultAction::DropAfterCommit,
            ),
            (
                "virtualmachines/restart",
                support::FaultAction::FailAfterCommit(504),
            ),
            (
                "virtualmachines/stop",
                support::FaultAction::DropAfterCommit,
            ),
            (
                "virtualmachines/start",
                support::FaultAction::FailAfterCommit(504),
            ),
        ] {
            f.scripted
                .push(support::ScriptedFault::new("update", resource, action).times(2));
        }
    });
    let vmis_before = c.server.events().len();
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
            "4s",
            "--rate",
            "2/s",
            "--actions",
            "restart,stop-start",
            "--seed",
            "5",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let restarts = doc["counts"]["restart"]["succeeded"].as_u64().unwrap();
    let stop_starts = doc["counts"]["stop_start"]["succeeded"].as_u64().unwrap();
    assert_eq!(restarts + stop_starts, 8, "{doc}");
    assert_eq!(doc["failures"], Value::Array(vec![]), "{doc}");
    let log = c.server.request_log();
    let sent = |resource: &str| log.iter().filter(|r| r.resource == resource).count() as u64;
    assert_eq!(
        sent("virtualmachines/restart"),
        restarts,
        "a restart was sent twice"
    );
    assert_eq!(
        sent("virtualmachines/stop"),
        stop_starts,
        "a stop was sent twice"
    );
    assert_eq!(
        sent("virtualmachines/start"),
        stop_starts,
        "a start was sent twice"
    );
    assert!(
        log.iter()
            .any(|r| r.resource.starts_with("virtualmachines/") && r.status == 0),
        "no answer was lost"
    );
    // One new VMI per action: no VM restarted twice.
    let new_vmis = c.server.events()[vmis_before..]
        .iter()
        .filter(|e| {
            e.event_type == support::EventType::Added
                && e.object["kind"] == "VirtualMachineInstance"
        })
        .count() as u64;
    assert_eq!(new_vmis, restarts + stop_starts, "{doc}");
    wait_all_running(&c, 4);
}

/// A VM deleted while its action is under way ends that action at once ("VM deleted"),
/// not after the per-action limit, and the report says so.
#[test]
fn a_vm_deleted_mid_action_ends_its_action_at_once() {
    let c = fleet(1);
    // Its guest takes a minute to shut down: without the check, churn would wait on it.
    c.server.set_controllers(support::ControllerOptions {
        stop_delay: std::time::Duration::from_secs(60),
        ..Default::default()
    });
    let child = spawn(
        &c,
        &[
            "--namespace",
            NS,
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "1s",
            "--rate",
            "1/s",
            "--actions",
            "stop-start",
        ],
    );
    let stopped = c
        .server
        .wait_until(SETTLE, |s| s.count("update", "virtualmachines/stop") >= 1);
    assert!(stopped);
    c.server.remove("virtualmachines", NS, "virtwork-cpu-0");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(
        summary.contains(&format!(
            "Ended early: stop-start {NS}/virtwork-cpu-0: VM deleted"
        )),
        "{summary}"
    );
    assert!(!summary.contains("NOT started again"), "{summary}");
    assert_eq!(
        c.server.count("update", "virtualmachines/start"),
        0,
        "nothing to start"
    );
}

/// Permissions first: without the right to start VMs, a stop-start churn refuses before
/// touching anything (it used to stop every VM it picked and leave them down), naming the
/// missing permission in one line.
#[test]
fn a_missing_permission_refuses_before_anything_is_touched() {
    let c = fleet(2);
    c.server.update_faults(|f| {
        f.authorizer = Some(support::Authorizer::new(|attributes, _| {
            !(attributes.resource == "virtualmachines" && attributes.subresource == "start")
        }));
    });
    let out = c.run(
        &[
            "--namespace",
            NS,
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "2s",
            "--rate",
            "2/s",
            "--actions",
            "restart,stop-start",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("update virtualmachines/start")
            && last.contains("subresources.kubevirt.io")
            && last.contains("nothing was touched"),
        "{stderr}"
    );
    // Word for word the example docs/churn.md gives.
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/churn.md")).unwrap();
    let example = doc
        .split("nothing touched: e.g. `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("docs/churn.md quotes the refusal");
    assert_eq!(last, format!("Error: {example}"));
    assert!(
        c.server
            .request_log()
            .iter()
            .all(|r| !r.resource.starts_with("virtualmachines/")),
        "a lifecycle request was sent"
    );
    // The restart-only churn the policy allows goes ahead.
    let ok = c.run(
        &[
            "--namespace",
            NS,
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "1s",
            "--rate",
            "2/s",
            "--actions",
            "restart",
        ],
        None,
        &[],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
}

/// docs/churn.md's Permissions section names every permission churn checks and every request
/// it makes on KubeVirt's objects (a real churn of all three actions, every question and
/// request recorded by the fake server's authorizer), and deploy/rbac.yaml's Role grants
/// each: a user given that list can churn.
#[test]
fn the_documented_permissions_are_the_ones_churn_uses() {
    let c = migratable_fleet(2);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let record = std::sync::Arc::clone(&seen);
    c.server.update_faults(|f| {
        f.authorizer = Some(support::Authorizer::new(move |attributes, _| {
            if attributes.group.ends_with("kubevirt.io") {
                record
                    .lock()
                    .unwrap()
                    .insert((attributes.verb.clone(), attributes.rbac_resource()));
            }
            true
        }));
    });
    let out = c.run(
        &[
            "--namespace",
            NS,
            "churn",
            "--run-id",
            RUN_A,
            "--duration",
            "3s",
            "--rate",
            "2/s",
            "--actions",
            "restart,stop-start,migrate",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/churn.md")).unwrap();
    let section = doc
        .split("## Permissions")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    let named = |word: &str| section.contains(&format!("`{word}`"));
    let rbac =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml")).unwrap();
    let role = rbac.split("kind: Role\n").nth(1).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|(_, r)| r == "virtualmachines/stop")
            && seen
                .iter()
                .any(|(v, r)| v == "create" && r == "virtualmachineinstancemigrations"),
        "the churn asked about or used every action's resources: {seen:?}"
    );
    for (verb, resource) in &seen {
        // status's list of VMs and VMIs is named as "what status needs".
        if verb == "list"
            && ["virtualmachines", "virtualmachineinstances"].contains(&resource.as_str())
        {
            continue;
        }
        assert!(
            named(verb) && named(resource),
            "docs/churn.md#permissions does not name {verb} on {resource}: {section}"
        );
        assert!(
            role.contains(resource.as_str()),
            "deploy/rbac.yaml's Role does not grant {resource}"
        );
    }
}

/// A 429 on a migration create is retried like any write (the migration's fixed name makes
/// a retry after a lost answer meet AlreadyExists, never a second migration).
#[test]
fn migration_creates_are_retried_after_429_and_lost_answers_without_duplicates() {
    let c = migratable_fleet(2);
    c.server.update_faults(|f| {
        f.scripted.push(
            support::ScriptedFault::new(
                "create",
                "virtualmachineinstancemigrations",
                support::FaultAction::Fail(429),
            )
            .times(2),
        );
        f.scripted.push(support::ScriptedFault::new(
            "create",
            "virtualmachineinstancemigrations",
            support::FaultAction::DropAfterCommit,
        ));
    });
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
            "2s",
            "--rate",
            "1/s",
            "--actions",
            "migrate",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["counts"]["migrate"]["succeeded"], 2, "{doc}");
    let objects = c
        .server
        .objects("virtualmachineinstancemigrations", Some(NS));
    assert_eq!(objects.len(), 2, "one migration per action");
}

/// After N consecutive identical failures churn stops, starts again what it stopped and
/// says why (exit 1).
#[test]
fn a_streak_of_identical_failures_stops_churn() {
    let c = fleet(4);
    c.server.update_faults(|f| {
        f.scripted.push(
            support::ScriptedFault::new(
                "update",
                "virtualmachines/restart",
                support::FaultAction::Fail(422),
            )
            .times(100),
        );
    });
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
            "30s",
            "--rate",
            "4/s",
            "--actions",
            "restart",
            "--max-failures",
            "3",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let reason = doc["stopped_early"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("3 consecutive restart actions failed the same way"),
        "{doc}"
    );
    assert!(doc["not_started"].as_u64().unwrap() > 100, "{doc}");
    assert!(doc["counts"]["restart"]["failed"].as_u64().unwrap() >= 3);
}

/// Without --run-id churn acts on every run in scope: it asks first, and a pipe that gives
/// no answer refuses (exit 2) with nothing touched; `--yes` or a piped "yes" goes ahead.
#[test]
fn churn_without_a_run_id_asks_first() {
    let c = fleet(1);
    c.seed_run(NS, RUN_B, "memory", 1);
    let args = [
        "--namespace",
        NS,
        "churn",
        "--duration",
        "1s",
        "--rate",
        "1/s",
        "--actions",
        "restart",
    ];
    let out = c.run(&args, None, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--run-id") && stderr.contains("--yes"),
        "{stderr}"
    );
    assert!(
        c.server
            .request_log()
            .iter()
            .all(|r| !r.resource.starts_with("virtualmachines/"))
    );
    let no = c.run(&args, Some("no\n"), &[]);
    assert_eq!(no.status.code(), Some(1), "{}", text(&no.stderr));
    assert!(text(&no.stderr).contains("nothing was touched"));
    assert!(
        c.server
            .request_log()
            .iter()
            .all(|r| !r.resource.starts_with("virtualmachines/"))
    );
    let yes = c.run(&args, Some("yes\n"), &[]);
    assert_eq!(yes.status.code(), Some(0), "{}", text(&yes.stderr));
    assert_eq!(c.server.count("update", "virtualmachines/restart"), 1);
}

const TTY: [(&str, &str); 1] = [("VIRTWORK_ASSUME_TTY", "1")];

/// Whether churn sent any request naming one VM (an action, or a subresource call).
fn touched_a_vm(c: &Cluster) -> bool {
    c.server
        .request_log()
        .iter()
        .any(|r| r.resource.starts_with("virtualmachines/"))
}

/// Churn's prompt is cleanup's: on a terminal an unclear answer is asked again and `y`
/// proceeds; a piped `y` proceeds; the end of input on a terminal (Ctrl-D) is a no, exit 1
/// with nothing touched.
#[test]
fn churn_asks_again_on_a_terminal_and_takes_y() {
    let c = fleet(1);
    c.seed_run(NS, RUN_B, "memory", 1);
    let args = [
        "--namespace",
        NS,
        "churn",
        "--duration",
        "1s",
        "--rate",
        "1/s",
        "--actions",
        "restart",
    ];
    for stdin in ["", "maybe\n"] {
        let out = c.run(&args, Some(stdin), &TTY);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{stdin:?}: {}",
            text(&out.stderr)
        );
        assert!(text(&out.stderr).contains("nothing was touched"));
        assert!(!touched_a_vm(&c), "{stdin:?}");
    }
    let out = c.run(&args, Some("maybe\ny\n"), &TTY);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.matches("Proceed with churn? (yes/NO): ").count(),
        2,
        "asked twice: {stderr}"
    );
    assert!(stderr.contains("Please answer yes or no."), "{stderr}");
    assert_eq!(c.server.count("update", "virtualmachines/restart"), 1);
    // From a pipe, `Y` proceeds as `yes` does.
    let out = c.run(&args, Some("Y\n"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(c.server.count("update", "virtualmachines/restart"), 2);
}
