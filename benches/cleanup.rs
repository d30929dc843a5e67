//! Cleanup throughput against the fake API server: 1,000 VMs with their cloud-init Secrets and
//! DataVolumes (and the PVCs and VMIs the fixture's controllers derive from them), 10 ms of
//! server latency per request, deleted by the real binary with `--yes --wait`.
//!
//! The client-side rate limit (`--qps`, `--burst`) is the designed bottleneck, so the figure
//! that matters is the achieved fraction of the QPS bound: the time the token bucket alone
//! would need for the requests actually sent ((requests - burst) / qps) divided by the wall
//! time. Also reports the binary's peak RSS and CPU time (sampled from `/proc`). No
//! assertions — the figures go to docs/performance.md ("Cleanup").
//!
//! Run: `cargo bench --bench cleanup` (env `BENCH_VMS`, default 1000; `BENCH_QPS`, a comma
//! list, default `50,200`). Under `cargo test --all-targets` (no `--bench`) it does one smoke
//! round of 50 VMs at QPS 200.

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

fn seed(server: &FakeApiServer, vms: usize) {
    server.insert(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": NS, "labels": { "app.kubernetes.io/managed-by": "virtwork" } },
    }));
    let labels = json!({
        "app.kubernetes.io/managed-by": "virtwork",
        "app.kubernetes.io/name": "virtwork-disk",
        "app.kubernetes.io/component": "disk",
        "virtwork/run-id": RUN_ID,
    });
    for i in 0..vms {
        let vm = format!("virtwork-disk-{i}");
        server.insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": format!("{vm}-cloudinit"), "namespace": NS, "labels": labels },
            "data": { "userdata": "I2Nsb3VkLWNvbmZpZwo=" },
        }));
        server.insert(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": { "name": vm, "namespace": NS, "labels": labels },
            "spec": {
                "runStrategy": "Always",
                "dataVolumeTemplates": [{
                    "metadata": { "name": format!("data-{vm}"), "labels": labels },
                    "spec": { "source": { "blank": {} }, "storage": { "resources": { "requests": { "storage": "1Gi" } } } },
                }],
                "template": {
                    "metadata": { "labels": labels },
                    "spec": {
                        "domain": { "devices": {} },
                        "volumes": [
                            { "name": "cloudinit", "cloudInitNoCloud": { "secretRef": { "name": format!("{vm}-cloudinit") } } },
                            { "name": "datadisk", "dataVolume": { "name": format!("data-{vm}") } },
                        ],
                    },
                },
            },
        }));
    }
    let settled = server.wait_until(Duration::from_secs(600), |s| {
        s.objects("persistentvolumeclaims", Some(NS)).len() == vms
            && s.objects("virtualmachineinstances", Some(NS)).len() == vms
    });
    assert!(settled, "fixture did not settle");
}

fn total_requests(server: &FakeApiServer) -> u64 {
    server.counters().values().sum()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this without it, where one
    // small round proves the benchmark still works (the full one takes minutes).
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let vms: usize = std::env::var("BENCH_VMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if benchmarking { 1000 } else { 50 });
    let default_qps = if benchmarking { "50,200" } else { "200" };
    let qps_list: Vec<f64> = std::env::var("BENCH_QPS")
        .unwrap_or_else(|_| default_qps.into())
        .split(',')
        .filter_map(|q| q.trim().parse().ok())
        .collect();
    println!("cleanup of {vms} VMs (+ Secrets, DataVolumes, PVCs, VMIs), 10 ms server latency");
    for qps in qps_list {
        let server = FakeApiServer::start(Options::default());
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        seed(&server, vms);
        server.set_faults(Faults {
            latency: Duration::from_millis(10),
            ..Faults::default()
        });
        let before = total_requests(&server);
        server.clear_request_log();
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_virtwork"))
            .env_clear()
            .env("HOME", dir.path())
            .args([
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--no-audit",
                "--namespace",
                NS,
            ])
            .args([
                "--qps",
                &qps.to_string(),
                "--burst",
                &BURST.to_string(),
                "--output",
                "json",
            ])
            .args([
                "--log-format",
                "json",
                "--verbose",
                "cleanup",
                "--yes",
                "--wait",
                // 10,000 VMs at --qps 50 need ~800 s, over the default limit of 600 s.
                "--timeout",
                "3600",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Drained concurrently: 10,000 VMs' worth of JSON logs exceed a pipe buffer.
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
        assert!(status.success(), "{}", String::from_utf8_lossy(&stderr));
        let doc: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        let requests = total_requests(&server) - before;
        let stderr = String::from_utf8_lossy(&stderr);
        let at = |needle: &str, last: bool| {
            let mut lines = stderr.lines().filter(|l| l.contains(needle));
            let line = if last {
                lines.next_back()
            } else {
                lines.next()
            };
            line.and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .and_then(|v| v["time"].as_str().map(String::from))
                .unwrap_or_default()
        };
        let log = server.request_log();
        let deletes: Vec<_> = log.iter().filter(|r| r.verb == "delete").collect();
        let mean_ms = deletes
            .iter()
            .map(|r| r.duration.as_secs_f64())
            .sum::<f64>()
            / deletes.len().max(1) as f64
            * 1000.0;
        let max_inflight = deletes
            .iter()
            .map(|r| r.inflight_at_start)
            .max()
            .unwrap_or(0);
        println!(
            "  server: {} deletes, mean {mean_ms:.1} ms each, at most {max_inflight} in flight",
            deletes.len()
        );
        println!(
            "  discovered {} | first delete {} | last delete {} | complete {}",
            at("resources to be deleted", false),
            at("\"msg\":\"delete\"", false),
            at("\"msg\":\"delete\"", true),
            at("cleanup complete", false)
        );
        let bound = (requests.saturating_sub(u64::from(BURST))) as f64 / qps;
        println!(
            "qps {qps:>5} burst {BURST}: {requests} requests ({} deleted, {} already gone), \
             wall {:.1} s, QPS bound {:.1} s, fraction of bound {:.2}",
            doc["deleted"]["total"],
            doc["already_gone"]["total"],
            wall.as_secs_f64(),
            bound,
            bound / wall.as_secs_f64()
        );
        // Clock ticks of 10 ms, sampled until just before exit.
        let cpu_s = ticks as f64 / 100.0;
        println!(
            "  virtwork: peak RSS {:.1} MiB, CPU (user + system) {cpu_s:.2} s = {:.3} ms per request",
            peak_kib as f64 / 1024.0,
            cpu_s * 1000.0 / requests.max(1) as f64
        );
    }
}
