//! Filling clusters: boot-storm control (`--max-starting`, `--ramp`), time-to-ready figures
//! and the terminal at scale, through the real binary against the fake API server. The
//! server's ordered event log (every committed change, by resourceVersion) and its request
//! log are the evidence.

use crate::binary;
use crate::support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use binary::Env;
use serde_json::Value;
use support::{ControllerOptions, EventType, FakeApiServer, Options};

const NS: &str = "virtwork";

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json_output(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A fixture whose VMIs take a while to start (Scheduled -> Running after `start_delay`).
fn slow_start_server(start_delay: Duration) -> FakeApiServer {
    FakeApiServer::start(Options {
        controllers: ControllerOptions {
            scheduled_delay: start_delay,
            ..ControllerOptions::default()
        },
        ..Options::default()
    })
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn seconds_since_epoch(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// Boot-storm control
// ---------------------------------------------------------------------------------------------

#[test]
fn max_starting_never_lets_more_than_n_vms_start_at_once() {
    let server = slow_start_server(Duration::from_millis(400));
    let env = Env::new(&server);
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "12",
        "--max-starting",
        "3",
        "--timeout",
        "120",
    ]);
    assert_success(&out);
    let doc = json_output(&out);
    assert_eq!(doc["vms_ready"], 12, "{doc}");
    assert_eq!(doc["pacing"]["max_starting"], 3, "{doc}");

    // Replay the cluster's history in commit order. A VM is starting from the moment its
    // cloud-init Secret exists (the first object of its unit) until its VMI is Running
    // (the ready condition in force).
    let mut starting = std::collections::BTreeSet::new();
    let mut most = 0;
    let mut created = 0;
    for event in server.events() {
        let object = &event.object;
        match (kind(object), event.event_type) {
            ("Secret", EventType::Added) => {
                let vm = name(object).trim_end_matches("-cloudinit").to_string();
                assert!(starting.insert(vm));
                created += 1;
                most = most.max(starting.len());
                assert!(
                    starting.len() <= 3,
                    "{} VMs starting at once (rv {}): {starting:?}",
                    starting.len(),
                    event.rv
                );
            }
            ("VirtualMachineInstance", EventType::Modified | EventType::Added)
                if object["status"]["phase"] == "Running" =>
            {
                starting.remove(name(object));
            }
            _ => {}
        }
    }
    assert_eq!(created, 12);
    // Closed loop, not serial: the limit was actually used.
    assert_eq!(most, 3, "never more than 3, and 3 at some point");

    // The request log agrees: every VM create came after at most 2 others were pending.
    let log = server.request_log();
    let vm_creates = log
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "virtualmachines")
        .count();
    assert_eq!(vm_creates, 12);
}

#[test]
fn ramp_spreads_creation_evenly_over_the_duration() {
    let server = FakeApiServer::start(Options::default());
    let env = Env::new(&server);
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "60",
        "--ramp",
        "30s",
        "--timeout",
        "300",
    ]);
    assert_success(&out);
    let doc = json_output(&out);
    assert_eq!(doc["pacing"]["ramp"], "30s", "{doc}");
    let mut times: Vec<f64> = server
        .request_log()
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "virtualmachines")
        .map(|r| seconds_since_epoch(r.timestamp))
        .collect();
    times.sort_by(f64::total_cmp);
    assert_eq!(times.len(), 60);
    let span = times[59] - times[0];
    // 60 slots 0.5 s apart: the last one 29.5 s after the first.
    assert!(
        (28.0..32.0).contains(&span),
        "creation spans {span:.1}s, not the ramp's 30s"
    );
    // Evenly: a 5 s window's share is 10 creations; none holds more than twice that.
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..].iter().take_while(|t| **t < start + 5.0).count();
        assert!(
            in_window <= 20,
            "{in_window} VM creations within 5 s from {:.1}s",
            start - times[0]
        );
    }
}

#[test]
fn pacing_flags_are_refused_before_anything_is_sent() {
    let server = FakeApiServer::start(Options::default());
    let env = Env::new(&server);
    let out = env.run(&["run", "--workloads", "cpu", "--ramp", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value \"fast\" for --ramp: expected a duration"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let out = env
        .command(&["run", "--workloads", "cpu", "--no-wait"])
        .env("VIRTWORK_MAX_STARTING", "4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("VIRTWORK_MAX_STARTING needs the readiness wait")
    );
    assert!(server.request_log().is_empty(), "nothing sent on bad input");
    let _ = NS;
}

// ---------------------------------------------------------------------------------------------
// Time to ready
// ---------------------------------------------------------------------------------------------

fn timestamp(vm: &Value, key: &str) -> jiff::Timestamp {
    vm[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing: {vm}"))
        .parse()
        .unwrap()
}

#[test]
fn time_to_ready_is_reported_per_vm_in_the_summary_and_the_audit_record() {
    // Each VMI spends 1 s Scheduling and 1 s Scheduled before Running.
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            scheduling_delay: Duration::from_secs(1),
            scheduled_delay: Duration::from_secs(1),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let env = Env::new(&server);
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "4",
        "--timeout",
        "120",
    ]);
    assert_success(&out);
    let doc = json_output(&out);
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    for vm in doc["vms"].as_array().unwrap() {
        let created = timestamp(vm, "created_at");
        let scheduled = timestamp(vm, "scheduled_at");
        let running = timestamp(vm, "running_at");
        let ready = timestamp(vm, "ready_at");
        let ms = |a: jiff::Timestamp, b: jiff::Timestamp| b.duration_since(a).as_millis();
        // Each time is when the watch saw the phase, never before it happened: Scheduled
        // comes 1 s (Scheduling) after the server created the VM, Running 1 s after that.
        // created_at is stamped when the create response arrives, which a loaded machine
        // delays (by 76 ms once, on a shared 2-core machine), so the lower bounds leave half
        // of each delay as slack; ready = Running for the `running` condition.
        assert!(ms(created, scheduled) >= 500, "{vm}");
        assert!(scheduled <= running, "{vm}");
        assert!(ms(created, running) >= 1500, "{vm}");
        assert_eq!(running, ready, "{vm}");
        assert_eq!(
            vm["time_to_ready_ms"].as_i64().unwrap() as i128,
            ms(created, ready),
            "{vm}"
        );
    }
    let p50 = doc["time_to_ready_ms"]["p50"].as_u64().unwrap();
    let max = doc["time_to_ready_ms"]["max"].as_u64().unwrap();
    assert!(p50 >= 1500 && p50 <= max, "{doc}");
    assert!(doc["vms_per_minute"].as_f64().unwrap() > 0.0, "{doc}");

    // The audit record keeps the same timeline (whole seconds), `audit show` prints it.
    let show = env
        .command(&["--output", "json", "audit", "show", &run_id])
        .output()
        .unwrap();
    assert_success(&show);
    let record: Value = serde_json::from_slice(&show.stdout).unwrap();
    for vm in record["vms"].as_array().unwrap() {
        for key in ["created_at", "scheduled_at", "running_at", "ready_at"] {
            assert!(vm[key].is_string(), "{key} in {vm}");
        }
        assert!(vm["seconds_to_running"].is_i64(), "{vm}");
    }
    let text = env.command(&["audit", "show", &run_id]).output().unwrap();
    assert_success(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("TO SCHEDULED") && text.contains("TO RUNNING"),
        "{text}"
    );

    // The text summary gives the percentiles and the rate.
    let server_text = env.run(&[
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--namespace",
        "other",
    ]);
    assert_success(&server_text);
    let summary = String::from_utf8_lossy(&server_text.stdout);
    assert!(summary.contains("To ready:  p50 "), "{summary}");
    assert!(summary.contains(" VMs/minute ready"), "{summary}");
}

// ---------------------------------------------------------------------------------------------
// The terminal at scale
// ---------------------------------------------------------------------------------------------

/// Drops ANSI escape sequences (colours, cursor movement, line clearing).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The terminal width the live-view test sets.
const COLUMNS: usize = 100;

/// The runs of text a terminal program wrote between its escape sequences, carriage returns
/// and newlines: each frame of a live view, each log line.
fn drawn_texts(raw: &str) -> impl Iterator<Item = &str> {
    raw.split('\u{1b}')
        .map(|piece| match piece.strip_prefix('[') {
            Some(rest) => rest
                .find(|c: char| c.is_ascii_alphabetic())
                .map_or("", |end| &rest[end + 1..]),
            None => piece,
        })
        .flat_map(|piece| piece.split(['\r', '\n']))
        .filter(|text| !text.trim().is_empty())
}

#[test]
fn on_a_terminal_a_200_vm_run_shows_the_live_view_and_few_log_lines() {
    let server = FakeApiServer::start(Options::default());
    let env = Env::new(&server);
    // util-linux `script` runs the binary on a pseudo-terminal and copies what the terminal
    // shows (stdout and stderr) to its own stdout.
    let binary = env!("CARGO_BIN_EXE_virtwork");
    let inner = format!(
        "stty cols {COLUMNS} rows 40; {binary} --kubeconfig {} --audit-db {} run --workloads cpu --vm-count 200 --timeout 300",
        env.kubeconfig.display(),
        env.db().display()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-f", "-c", &inner, "/dev/null"])
        .current_dir(env.dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", env.dir.path())
        .env("COLUMNS", "160")
        .env("LINES", "40")
        .stdin(Stdio::null());
    for (key, _) in std::env::vars() {
        if key.starts_with("VIRTWORK_") {
            cmd.env_remove(key);
        }
    }
    let out = cmd
        .output()
        .expect("util-linux `script` runs the binary on a pty");
    assert_success(&out);
    let raw = String::from_utf8_lossy(&out.stdout);
    let screen = strip_ansi(&raw);
    assert_eq!(server.count("create", "virtualmachines"), 200);

    // The live view was drawn during creation: n/200 VMs created with a rate.
    assert!(
        screen.contains("/200 VMs created, ") && screen.contains("/s"),
        "no creation progress bar:\n{screen}"
    );
    // Each drawn frame fits the terminal: cut, never wrapped onto a second line.
    for frame in
        drawn_texts(&raw).filter(|text| text.contains("] creating") || text.contains("] ready"))
    {
        assert!(
            frame.chars().count() <= COLUMNS,
            "a {}-column frame on a {COLUMNS}-column terminal: {frame:?}",
            frame.chars().count()
        );
    }
    // Log lines: a bounded number at INFO (not one or two per VM), each printed whole above
    // the view (after the view is cleared, the line starts with its timestamp).
    let log_lines: Vec<&str> = screen
        .split('\n')
        .map(|line| {
            line.rsplit('\r')
                .find(|part| !part.trim().is_empty())
                .unwrap_or("")
        })
        .filter(|line| {
            line.contains(" INFO ") || line.contains(" WARN ") || line.contains(" ERROR ")
        })
        .collect();
    assert!(
        (3..=20).contains(&log_lines.len()),
        "{} log lines at INFO:\n{}",
        log_lines.len(),
        log_lines.join("\n")
    );
    for line in &log_lines {
        assert!(
            line.trim_start().starts_with("20"),
            "torn log line (does not start with its timestamp): {line:?}"
        );
        assert!(
            !line.contains("vm created") && !line.contains("secret created"),
            "{line}"
        );
    }
    // Durations read as durations.
    let waiting = log_lines
        .iter()
        .find(|l| l.contains("waiting for VMs to become ready"))
        .expect("the phase change is logged");
    assert!(
        !waiting.contains("timeout=")
            || waiting.contains("timeout=4m")
            || waiting.contains("timeout=5m"),
        "{waiting}"
    );
    // The summary follows the cleared view.
    assert!(screen.contains("Deployment complete."), "{screen}");
}

#[test]
fn without_a_terminal_progress_is_logged_every_few_seconds_not_per_vm() {
    let server = FakeApiServer::start(Options::default());
    let env = Env::new(&server);
    // 200 VMs at the default --qps 50 take about 6 s to create.
    let out = env.run(&[
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "200",
        "--timeout",
        "300",
    ]);
    assert_success(&out);
    let logs = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = logs.lines().collect();
    assert!(lines.len() <= 20, "{} lines:\n{logs}", lines.len());
    assert!(
        lines
            .iter()
            .any(|l| l.contains("creating: ") && l.contains("/s, ETA ")),
        "no periodic progress line:\n{logs}"
    );
    // The count is in the message itself, not only in fields a text log shows after it.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("creating: ") && l.contains("/200 VMs created, ")),
        "no count in the progress line:\n{logs}"
    );
    assert!(!logs.contains("vm created"), "{logs}");
    let verbose = env.run(&[
        "--verbose",
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "3",
        "--namespace",
        "other",
    ]);
    assert_success(&verbose);
    let verbose = String::from_utf8_lossy(&verbose.stderr);
    assert!(
        verbose.contains("vm created") && verbose.contains("vm ready"),
        "{verbose}"
    );
}
