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

    // The wide table has one row per VM, sorted by run, with the phases.
    let table = c.run(&["--namespace", NS, "-o", "wide", "status"], None, &[]);
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

    let table = text(
        &c.run(&["--namespace", NS, "-o", "wide", "status"], None, &[])
            .stdout,
    );
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
    let table = text(&c.run(&["-n", NS, "-o", "wide", "status"], None, &[]).stdout);
    let at = |name: &str| table.find(&format!("{name} ")).unwrap_or(usize::MAX);
    assert!(at("virtwork-cpu-2") < at("virtwork-cpu-10"), "{table}");
}

/// A fleet of 300 VMs, two of them unschedulable, plus a second run: the default view is one
/// line per run with its VMs by state, its workloads and the oldest VM not ready with the
/// scheduler's reason; `-o wide` is one row per VM; the document has both.
#[test]
fn a_fleet_of_300_vms_is_one_line_per_run_and_wide_is_one_row_per_vm() {
    let c = Cluster::start();
    // A hang guard for 300 VMs' worth of simulated controllers on a loaded machine.
    let settle = std::time::Duration::from_secs(180);
    c.seed_run_within(
        NS,
        RUN_A,
        "cpu",
        298,
        "quay.io/containerdisks/fedora:42",
        settle,
    );
    // The later runs' controllers share the server with the first 298 VMs: same guard.
    c.seed_run_within(
        NS,
        RUN_A,
        "memory",
        2,
        "quay.io/example/unschedulable:1",
        settle,
    );
    c.seed_run_within(
        NS,
        RUN_B,
        "disk",
        1,
        "quay.io/containerdisks/fedora:42",
        settle,
    );
    let status = |s: &support::FakeApiServer, vm: &str| {
        s.get("virtualmachines", NS, vm)
            .and_then(|v| v["status"]["printableStatus"].as_str().map(String::from))
    };
    let settled = c.server.wait_until(settle, |s| {
        (0..298).all(|i| status(s, &format!("virtwork-cpu-{i}")).as_deref() == Some("Running"))
            && (0..2).all(|i| {
                status(s, &format!("virtwork-memory-{i}")).as_deref() == Some("ErrorUnschedulable")
            })
            && status(s, "virtwork-disk-0").as_deref() == Some("Running")
    });
    assert!(settled, "fixture VMs did not settle");

    let out = c.run(&["--namespace", NS, "status"], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "a header, one line per run, the totals:\n{stdout}"
    );
    assert!(
        lines[0].starts_with("RUN ID")
            && lines[0].contains("READY")
            && lines[0].contains("OLDEST NOT READY"),
        "{stdout}"
    );
    let a = lines[1];
    assert!(a.starts_with(RUN_A), "{stdout}");
    for part in [
        " virtwork ",
        " 298/300 ",
        "298 Running, 2 ErrorUnschedulable",
        " cpu,memory ",
        "virtwork-memory-0 (",
        "): ErrorUnschedulable: 0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm.",
    ] {
        assert!(a.contains(part), "{part:?} not in {a}");
    }
    let b = lines[2];
    assert!(
        b.starts_with(RUN_B) && b.contains(" 1/1 ") && b.contains("1 Running") && b.ends_with(" -"),
        "{stdout}"
    );
    assert_eq!(lines[3], "2 run(s), 301 VM(s) in namespace virtwork.");

    let wide = c.run(&["--namespace", NS, "-o", "wide", "status"], None, &[]);
    assert_eq!(wide.status.code(), Some(0), "{}", text(&wide.stderr));
    let wide = text(&wide.stdout);
    let rows: Vec<&str> = wide.lines().collect();
    assert_eq!(rows.len(), 1 + 301 + 1, "header, a row per VM, totals");
    assert!(
        rows[0].starts_with("RUN ID ") && rows[0].contains("  NAMESPACE  VM "),
        "{}",
        rows[0]
    );
    let memory = rows
        .iter()
        .find(|r| r.contains("virtwork-memory-1 "))
        .unwrap();
    assert!(
        memory.contains("ErrorUnschedulable")
            && memory.ends_with("3 Insufficient devices.kubevirt.io/kvm."),
        "{memory}"
    );
    // The same choice through the environment.
    let from_env = c.run(
        &["--namespace", NS, "status"],
        None,
        &[("VIRTWORK_OUTPUT", "wide")],
    );
    let from_env = text(&from_env.stdout);
    assert_eq!(from_env.lines().count(), rows.len());
    assert_eq!(from_env.lines().next(), Some(rows[0]));

    let doc = json_doc(&c.run(&["--namespace", NS, "-o", "json", "status"], None, &[]));
    let run = &doc["runs"][0];
    assert_eq!(run["run_id"], RUN_A);
    assert_eq!(
        run["vms"].as_array().unwrap().len(),
        300,
        "per-VM detail stays"
    );
    let summary = &run["summary"];
    assert_eq!(summary["vm_count"], 300);
    assert_eq!(summary["ready"], 298);
    assert_eq!(summary["by_status"]["Running"], 298);
    assert_eq!(summary["by_status"]["ErrorUnschedulable"], 2);
    assert_eq!(summary["by_readiness"]["ready"], 298);
    assert_eq!(summary["by_readiness"]["stuck"], 2);
    assert_eq!(summary["workloads"], serde_json::json!(["cpu", "memory"]));
    assert_eq!(summary["namespaces"], serde_json::json!([NS]));
    assert_eq!(summary["oldest_not_ready"]["name"], "virtwork-memory-0");
    assert_eq!(summary["oldest_not_ready"]["state"], "ErrorUnschedulable");
    assert_eq!(
        summary["oldest_not_ready"]["reason"],
        "0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm."
    );
    let stuck = run["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "virtwork-memory-1")
        .unwrap();
    assert_eq!(stuck["readiness"], "stuck");
    assert_eq!(doc["runs"][1]["summary"]["oldest_not_ready"], Value::Null);
}

/// `status --watch` as a child whose stdout lines arrive on a channel as they are written.
struct Watching {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watching {
    fn start(c: &Cluster, args: &[&str]) -> Self {
        let mut child = c
            .command(args)
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Watching {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `part` (a hang guard of 60 s).
    fn wait_for(&mut self, part: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(part) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no line with {part:?}; seen:\n{}", self.seen.join("\n"));
                }
            }
        }
    }

    /// Waits for the exit (a hang guard of 60 s): the code, the rest of stdout, and stderr.
    fn finish(mut self) -> (Option<i32>, Vec<String>, String) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "status --watch did not end; seen:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = self.child.wait_with_output().unwrap();
        self.seen.extend(self.lines.iter());
        (out.status.code(), self.seen, text(&out.stderr))
    }
}

/// The only node, cordoned: VMIs wait in Scheduling until it is uncordoned.
fn node(cordoned: bool) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": "node-a" },
        "spec": { "unschedulable": cordoned },
        "status": { "allocatable": { "cpu": "64", "memory": "256Gi" } },
    })
}

/// Waits until the first `vms` cpu VMs read Starting (volumes ready, VMI not scheduled).
fn starting(c: &Cluster, vms: usize) {
    let settled = c.server.wait_until(SETTLE, |s| {
        (0..vms).all(|i| {
            s.get("virtualmachines", NS, &format!("virtwork-cpu-{i}"))
                .is_some_and(|v| v["status"]["printableStatus"] == "Starting")
        })
    });
    assert!(settled, "fixture VMs did not reach Starting");
}

/// `--watch` follows VMs the fake server holds (every node cordoned) and then moves to
/// Running: with stdout a pipe it prints a line per change and ends with exit 0 once every
/// VM runs and is ready.
#[test]
fn watch_follows_the_vms_until_every_one_runs_and_exits_0() {
    let c = Cluster::start();
    c.server.insert(node(true));
    c.seed_run(NS, RUN_A, "cpu", 3);
    starting(&c, 3);
    let mut watch = Watching::start(&c, &["--namespace", NS, "status", "--watch"]);
    let first = watch.wait_for(RUN_A);
    assert!(
        first.contains(&format!(
            "{RUN_A} in virtwork: 0/3 ready; 3 Starting; oldest not ready virtwork-cpu-0 ("
        )),
        "{first}"
    );
    // Lines start with the time of the change.
    let clock = first.split(' ').next().unwrap();
    assert!(clock.len() == 8 && clock.as_bytes()[2] == b':', "{first}");
    c.server.insert(node(false));
    let (code, lines, stderr) = watch.finish();
    assert_eq!(code, Some(0), "{stderr}\n{}", lines.join("\n"));
    let run_lines: Vec<&String> = lines.iter().filter(|l| l.contains(RUN_A)).collect();
    assert!(
        run_lines
            .last()
            .unwrap()
            .ends_with(": 3/3 ready; 3 Running"),
        "{}",
        lines.join("\n")
    );
    // Only changes are printed: no two consecutive lines of the run say the same.
    let said = |l: &str| {
        l.split_once(' ')
            .unwrap()
            .1
            .split(" (")
            .next()
            .unwrap()
            .to_string()
    };
    for pair in run_lines.windows(2) {
        assert_ne!(said(pair[0]), said(pair[1]), "{}", lines.join("\n"));
    }
    assert_eq!(
        lines.last().unwrap(),
        "All 3 VM(s) of 1 run(s) are running and ready."
    );
}

/// A VM whose VMI fails (crash-looping under run strategy Always) ends `--watch` with exit 1
/// once it stayed so for the `--fail-fast` grace, naming it and KubeVirt's reason; a fleet that
/// does not get ready ends at `--timeout`, naming the oldest VM not ready.
#[test]
fn watch_ends_with_exit_1_on_a_failed_vm_and_at_the_timeout() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.seed_run_with_image(NS, RUN_A, "memory", 1, "quay.io/example/fail:1");
    let mut watch = Watching::start(
        &c,
        &["--namespace", NS, "status", "--watch", "--fail-fast=1s"],
    );
    watch.wait_for(RUN_A);
    let (code, lines, stderr) = watch.finish();
    assert_eq!(code, Some(1), "{stderr}\n{}", lines.join("\n"));
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "Error: VM virtwork-memory-0 in namespace virtwork stayed CrashLoopBackOff"
        ) && last.contains("for 1s (--fail-fast)"),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("1/2 ready; 1 CrashLoopBackOff, 1 Running")),
        "{}",
        lines.join("\n")
    );

    // Held in Scheduling for good: --timeout ends it.
    let held = Cluster::start();
    held.server.insert(node(true));
    held.seed_run(NS, RUN_B, "cpu", 2);
    starting(&held, 2);
    let out = held.run(
        &[
            "--namespace",
            NS,
            "-o",
            "json",
            "status",
            "--watch",
            "--timeout",
            "3s",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("Error: 0 of 2 VM(s) ready when --timeout 3s ran out; oldest not ready: virtwork-cpu-0 in namespace virtwork (")
            && last.ends_with("Starting"),
        "{stderr}"
    );
    // JSON: one document per change, each with the summary and the VMs.
    let docs: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 1, "nothing changed after the first read");
    assert_eq!(docs[0]["runs"][0]["summary"]["by_status"]["Starting"], 2);

    // Nothing to follow is said, not waited on.
    let out = held.run(
        &["--namespace", NS, "status", "--watch", "--run-id", RUN_A],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!(
            "no VMs of run {RUN_A} in namespace virtwork: nothing to follow"
        )),
        "{}",
        text(&out.stderr)
    );
}

/// Ctrl-C while following stops at once with exit 130, what was printed intact.
#[test]
fn watch_stops_cleanly_on_ctrl_c() {
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
    c.server.insert(node(true));
    c.seed_run(NS, RUN_A, "cpu", 2);
    starting(&c, 2);
    let mut watch = Watching::start(&c, &["--namespace", NS, "status", "--watch"]);
    watch.wait_for("0/2 ready");
    let pid = watch.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let (code, lines, stderr) = watch.finish();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(lines[0].contains("0/2 ready; 2 Starting"), "{lines:?}");
}
