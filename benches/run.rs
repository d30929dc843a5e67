//! Benchmark of `virtwork run` against the fake API server (docs/performance.md, "Run against
//! the fake API server"). Starts the fake server in-process with a fixed per-request latency,
//! runs the real release binary with N VMs, and reports: creation throughput as a fraction of
//! the configured QPS, time from the last VMI reaching Running to process exit, API requests
//! spent waiting, the binary's peak RSS and its CPU time per VM.
//!
//! No assertions: the figures go to docs/performance.md. Run: `cargo bench --bench run`
//! (env `BENCH_VMS` default 1000, `BENCH_LATENCY_MS` default 10, `BENCH_QPS` default 50,
//! `BENCH_BURST` default 100, `BENCH_WORKLOAD_ARGS` default `--workloads cpu`: what selects
//! the workload, split on blanks, e.g. `--catalog-dir DIR --from-catalog big` for one
//! single-role catalog entry). Under `cargo test --all-targets` (no `--bench`) it runs 50 VMs.

#[path = "common/proc.rs"]
mod proc_usage;
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proc_usage::{cpu_ticks, peak_rss_kib};
use support::{FakeApiServer, Faults, Options};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be an integer, got {v:?}"))
        })
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this without it, where a
    // small round proves the benchmark still works (1,000 VMs at QPS 50 take most of a minute).
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let vms = setting("BENCH_VMS", if benchmarking { 1000 } else { 50 });
    let latency_ms = setting("BENCH_LATENCY_MS", 10);
    let qps = setting("BENCH_QPS", 50);
    let burst = setting("BENCH_BURST", 100);
    let workload_args =
        std::env::var("BENCH_WORKLOAD_ARGS").unwrap_or_else(|_| "--workloads cpu".into());
    let binary = env!("CARGO_BIN_EXE_virtwork");

    let server = FakeApiServer::start(Options {
        faults: Faults {
            latency: Duration::from_millis(latency_ms),
            ..Faults::default()
        },
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();

    let started = Instant::now();
    let mut child = Command::new(binary)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--no-audit",
            "--output",
            "json",
            "--qps",
            &qps.to_string(),
            "--burst",
            &burst.to_string(),
        ])
        .arg("run")
        .args(workload_args.split_whitespace())
        .args(["--vm-count", &vms.to_string(), "--timeout", "3600"])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn virtwork");
    let pid = child.id();
    // Drain stdout concurrently: the JSON summary of 1,000 VMs exceeds a pipe buffer.
    let mut child_stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut child_stdout, &mut text).unwrap();
        text
    });

    // Watch the server's store from here: when did the last VMI reach Running?
    let mut peak_kib = 0;
    let mut ticks = 0;
    let mut all_running_at = None;
    let mut wait_requests_before = None;
    loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(t) = cpu_ticks(pid) {
            ticks = ticks.max(t);
        }
        if all_running_at.is_none() {
            if wait_requests_before.is_none() && server.count("create", "virtualmachines") == vms {
                wait_requests_before = Some(server.request_log().len());
            }
            if wait_requests_before.is_some() {
                let vmis = server.objects("virtualmachineinstances", Some("virtwork"));
                let running = vmis
                    .iter()
                    .filter(|v| v["status"]["phase"] == "Running")
                    .count();
                if running as u64 == vms {
                    all_running_at = Some(Instant::now());
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "virtwork failed: {status}");
            break;
        }
        // Fine polling once every VM exists: the wait phase is what is measured.
        let pause = if wait_requests_before.is_some() {
            1
        } else {
            10
        };
        std::thread::sleep(Duration::from_millis(pause));
    }
    let exited_at = Instant::now();
    let exited_wall = jiff::Timestamp::now();
    let stdout = reader.join().unwrap();
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("JSON summary");

    let create_ms = doc["durations_ms"]["create"].as_u64().unwrap();
    let creates = server.count("create", "virtualmachines") + server.count("create", "secrets");
    let throughput = creates as f64 / (create_ms as f64 / 1000.0);
    let log = server.request_log();
    let waiting: Vec<_> = log
        .iter()
        .filter(|r| r.resource == "virtualmachineinstances")
        .collect();
    let tail = all_running_at.map(|t| exited_at.saturating_duration_since(t));

    println!("VMs: {vms}, latency: {latency_ms} ms, qps: {qps}, burst: {burst}");
    println!("total wall time: {:.1} s", started.elapsed().as_secs_f64());
    println!(
        "create phase: {:.1} s, {creates} creates, {throughput:.1} creates/s = {:.0}% of --qps",
        create_ms as f64 / 1000.0,
        100.0 * throughput / qps as f64
    );
    println!("API requests in total: {}", log.len());
    println!(
        "API requests spent waiting (VMI list/watch): {} ({} list, {} watch)",
        waiting.len(),
        waiting.iter().filter(|r| r.verb == "list").count(),
        waiting.iter().filter(|r| r.verb == "watch").count()
    );
    if let Some(before) = wait_requests_before {
        println!("requests after the last VM create: {}", log.len() - before);
    }
    match tail {
        Some(t) => println!(
            "last VMI Running (seen by polling the server) -> exit: {:.0} ms",
            t.as_secs_f64() * 1000.0
        ),
        None => println!("last VMI Running -> exit: VMs were all Running before the poll saw them"),
    }
    // virtwork's own record: when its watch saw the last VM become ready.
    let last_ready = doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["ready_at"].as_str())
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .max();
    if let Some(last) = last_ready {
        let ms = exited_wall.duration_since(last).as_secs_f64() * 1000.0;
        println!("last VM ready (virtwork's ready_at) -> exit: {ms:.0} ms");
    }
    println!("peak RSS of virtwork: {:.1} MiB", peak_kib as f64 / 1024.0);
    // Sampled until just before exit (clock ticks of 10 ms): the printing of the summary
    // at the very end may be missing.
    let cpu_s = ticks as f64 / 100.0;
    println!(
        "CPU time of virtwork (user + system): {cpu_s:.2} s = {:.3} ms per VM",
        cpu_s * 1000.0 / vms as f64
    );
}
