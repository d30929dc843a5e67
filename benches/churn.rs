//! `virtwork churn` against the fake API server: 1,000 running VMs, 10 ms of server latency
//! per request, churned by the real binary in two regimes:
//!
//! - **at rate**: a rate the `--qps` budget can carry (restarts at `BENCH_RATE`, default 5/s,
//!   each about four requests); the figure is the achieved action rate, measured between the
//!   first and the last restart request in the server's log, against the requested one;
//! - **QPS-bound**: a rate far above what `--qps` can carry (100/s, every action); the figure
//!   is the fraction of the QPS bound reached: the time the token bucket alone needs for the
//!   requests sent ((requests - burst) / qps) divided by the wall time.
//!
//! Also the binary's peak RSS and CPU time (sampled from `/proc`), and the latency percentiles
//! churn reports (request to running again per action; migration creation to each phase). No
//! assertions — the figures go to docs/performance.md ("Churn").
//!
//! Run: `cargo bench --bench churn` (env `BENCH_VMS`, default 1000; `BENCH_QPS`, default 50;
//! `BENCH_SECS`, the churn duration, default 30; `BENCH_RATE`, default `5/s`). Under `cargo test
//! --all-targets` (no `--bench`) it does one smoke round: 50 VMs, `--qps 200`, 3 s.

#[path = "common/proc.rs"]
mod proc_usage;
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proc_usage::{cpu_ticks, peak_rss_kib};
use serde_json::json;
use support::{FakeApiServer, Faults, Options};

const NS: &str = "virtwork";
const RUN_ID: &str = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";
const BURST: u32 = 100;

/// `vms` running VMs of one run (no disks or cloud-init: only the lifecycle matters here).
fn seed(server: &FakeApiServer, vms: usize) {
    server.insert(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NS },
    }));
    let labels = json!({
        "app.kubernetes.io/managed-by": "virtwork",
        "app.kubernetes.io/component": "cpu",
        "virtwork/run-id": RUN_ID,
    });
    for i in 0..vms {
        server.insert(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": { "name": format!("virtwork-cpu-{i}"), "namespace": NS, "labels": labels },
            "spec": {
                "runStrategy": "Always",
                "template": { "metadata": { "labels": labels }, "spec": { "domain": { "devices": {} } } },
            },
        }));
    }
    let settled = server.wait_until(Duration::from_secs(600), |s| {
        let vmis = s.objects("virtualmachineinstances", Some(NS));
        vmis.len() == vms && vmis.iter().all(|v| v["status"]["phase"] == "Running")
    });
    assert!(settled, "fixture did not settle");
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// What one churn run measured.
struct Measured {
    doc: serde_json::Value,
    wall: Duration,
    requests: u64,
    peak_kib: u64,
    cpu_s: f64,
}

fn churn(server: &FakeApiServer, kubeconfig: &str, qps: &str, args: &[&str]) -> Measured {
    let before: u64 = server.counters().values().sum();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .env_clear()
        .args(["--kubeconfig", kubeconfig, "--no-audit", "--namespace", NS])
        .args([
            "--qps",
            qps,
            "--burst",
            &BURST.to_string(),
            "--output",
            "json",
        ])
        .args(["churn", "--run-id", RUN_ID, "--seed", "1"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let (mut peak_kib, mut ticks) = (0, 0);
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(t) = cpu_ticks(pid) {
            ticks = ticks.max(t);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = started.elapsed();
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let doc: serde_json::Value = serde_json::from_slice(&stdout)
        .unwrap_or_else(|_| panic!("{status}: {}", String::from_utf8_lossy(&stderr)));
    Measured {
        doc,
        wall,
        requests: server.counters().values().sum::<u64>() - before,
        peak_kib,
        cpu_s: ticks as f64 / 100.0,
    }
}

/// The latency percentiles of a churn's document, one line per action kind and per
/// migration phase that has samples.
fn latency_lines(doc: &serde_json::Value) -> String {
    let mut out = String::new();
    let line = |what: &str, stats: &serde_json::Value| {
        format!(
            "  {what:<24} n={:<5} p50 {:.3} s  p90 {:.3} s  p99 {:.3} s  max {:.3} s\n",
            stats["count"],
            stats["p50_seconds"].as_f64().unwrap_or_default(),
            stats["p90_seconds"].as_f64().unwrap_or_default(),
            stats["p99_seconds"].as_f64().unwrap_or_default(),
            stats["max_seconds"].as_f64().unwrap_or_default(),
        )
    };
    for action in ["restart", "stop_start", "migrate"] {
        let stats = &doc["latency"]["actions"][action];
        if !stats.is_null() {
            out.push_str(&line(action, stats));
        }
    }
    if let Some(phases) = doc["latency"]["migration_phases"].as_object() {
        for (phase, stats) in phases {
            out.push_str(&line(&format!("migration to {phase}"), stats));
        }
    }
    out
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this without it, where a
    // small, short round proves the benchmark still works (the full one takes minutes).
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let vms: usize = env_or("BENCH_VMS", if benchmarking { "1000" } else { "50" })
        .parse()
        .unwrap();
    let qps = env_or("BENCH_QPS", if benchmarking { "50" } else { "200" });
    let secs = env_or("BENCH_SECS", if benchmarking { "30" } else { "3" });
    let rate = env_or("BENCH_RATE", "5/s");
    let server = FakeApiServer::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    seed(&server, vms);
    server.set_faults(Faults {
        latency: Duration::from_millis(10),
        ..Faults::default()
    });
    let duration = format!("{secs}s");
    println!("churn of {vms} running VMs, 10 ms server latency, --qps {qps} --burst {BURST}");

    server.clear_request_log();
    let at_rate = churn(
        &server,
        &kubeconfig,
        &qps,
        &[
            "--duration",
            &duration,
            "--rate",
            &rate,
            "--actions",
            "restart",
        ],
    );
    let times: Vec<_> = server
        .request_log()
        .iter()
        .filter(|r| r.resource == "virtualmachines/restart")
        .map(|r| r.timestamp)
        .collect();
    let span = times
        .last()
        .zip(times.first())
        .and_then(|(last, first)| last.duration_since(*first).ok())
        .unwrap_or_default();
    let achieved = (times.len().saturating_sub(1)) as f64 / span.as_secs_f64().max(1e-9);
    let requested = at_rate.doc["rate_per_minute"].as_f64().unwrap() / 60.0;
    println!(
        "at rate {rate}: {} restarts sent, {} succeeded, {} skipped; achieved {achieved:.3}/s vs \
         {requested:.3}/s requested ({:+.1} %); {} requests in {:.1} s; peak RSS {:.1} MiB, \
         CPU {:.2} s",
        times.len(),
        at_rate.doc["counts"]["restart"]["succeeded"],
        at_rate.doc["skipped"],
        (achieved / requested - 1.0) * 100.0,
        at_rate.requests,
        at_rate.wall.as_secs_f64(),
        at_rate.peak_kib as f64 / 1024.0,
        at_rate.cpu_s,
    );
    print!("{}", latency_lines(&at_rate.doc));

    let bound = churn(
        &server,
        &kubeconfig,
        &qps,
        &["--duration", &duration, "--rate", "100/s"],
    );
    let qps_f: f64 = qps.parse().unwrap();
    let least = bound.requests.saturating_sub(u64::from(BURST)) as f64 / qps_f;
    println!(
        "QPS-bound (100/s, every action): {} actions started, {} skipped, {} failed; {} requests \
         in {:.1} s, QPS bound {least:.1} s, fraction of bound {:.2}; peak RSS {:.1} MiB, \
         CPU {:.2} s = {:.3} ms per request",
        bound.doc["started"],
        bound.doc["skipped"],
        bound.doc["failures"].as_array().map_or(0, Vec::len),
        bound.requests,
        bound.wall.as_secs_f64(),
        least / bound.wall.as_secs_f64(),
        bound.peak_kib as f64 / 1024.0,
        bound.cpu_s,
        bound.cpu_s * 1000.0 / bound.requests.max(1) as f64,
    );
    print!("{}", latency_lines(&bound.doc));
}
