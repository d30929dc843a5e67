//! Side by side: `virtwork run` (at its defaults and at `--qps 200`) against what an
//! operator does by hand with the same objects — `kubectl create -f` of virtwork's dry-run
//! YAML, then `kubectl wait` on every VMI — for the same N against the same fixture
//! (docs/performance.md, "virtwork versus kubectl"). Each scenario gets a fresh fake API
//! server with the same options (10 ms per request, the simulated KubeVirt controllers), so
//! every request in its log belongs to that scenario. Reports wall time and API requests.
//!
//! No assertions: the figures go to docs/performance.md. Run: `cargo bench --bench compare`
//! (env `BENCH_SIZES`, default `300,1000`; `BENCH_LATENCY_MS`, default 10). Under
//! `cargo test --all-targets` (no `--bench` argument) it does one small smoke round.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeApiServer, Faults, Options};

const NS: &str = "virtwork";

struct Outcome {
    wall: Duration,
    requests: usize,
    detail: String,
}

fn server(latency_ms: u64) -> FakeApiServer {
    FakeApiServer::start(Options {
        faults: Faults {
            latency: Duration::from_millis(latency_ms),
            ..Faults::default()
        },
        ..Options::default()
    })
}

fn virtwork(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--no-audit")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null());
    for (key, _) in std::env::vars() {
        if key.starts_with("VIRTWORK_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is installed");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn run_virtwork(vms: u64, latency_ms: u64, extra: &[&str]) -> Outcome {
    let server = server(latency_ms);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let started = Instant::now();
    let out = virtwork(&kubeconfig)
        .args(["--output", "json"])
        .args(extra)
        .args(["run", "--workloads", "cpu", "--timeout", "3600"])
        .args(["--vm-count", &vms.to_string()])
        .output()
        .unwrap();
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "virtwork failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["vms_ready"], vms);
    Outcome {
        wall,
        requests: server.request_log().len(),
        detail: format!(
            "create {:.1} s, wait {:.1} s after the last create",
            doc["durations_ms"]["create"].as_f64().unwrap() / 1000.0,
            doc["durations_ms"]["wait"].as_f64().unwrap() / 1000.0
        ),
    }
}

/// What an operator does by hand: `kubectl create -f` of the dry-run YAML (which opens with the namespace), then
/// `kubectl wait` for every VMI to be Running (virtwork's default ready condition).
fn run_kubectl(vms: u64, latency_ms: u64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plan.yaml");
    // Rendered locally (no server involved), outside the timed part.
    let yaml = virtwork(Path::new("/nonexistent"))
        .args(["run", "--dry-run", "--workloads", "cpu"])
        .args(["--vm-count", &vms.to_string()])
        .output()
        .unwrap();
    assert!(yaml.status.success());
    // The dry run opens with the Namespace itself, so one `kubectl create -f` makes it too
    // (`kubectl create namespace` would send protobuf, which the fixture does not speak).
    let text = String::from_utf8(yaml.stdout).unwrap();
    assert!(
        text.contains("\nkind: Namespace\nmetadata:\n  name: virtwork\n"),
        "the dry run opens with its Namespace:\n{}",
        &text[..text.len().min(200)]
    );
    std::fs::write(&manifest, text).unwrap();

    let server = server(latency_ms);
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let started = Instant::now();
    kubectl(
        &kubeconfig,
        &["create", "-f", manifest.to_str().unwrap(), "-o", "name"],
    );
    let created = started.elapsed();
    kubectl(
        &kubeconfig,
        &[
            "wait",
            "-n",
            NS,
            "--for=jsonpath={.status.phase}=Running",
            "virtualmachineinstances",
            "--all",
            "--timeout=3600s",
        ],
    );
    let wall = started.elapsed();
    // `--all` takes the VMIs that exist when kubectl lists them; count what was reached.
    let running = server
        .objects("virtualmachineinstances", Some(NS))
        .iter()
        .filter(|v| v["status"]["phase"] == "Running")
        .count();
    Outcome {
        wall,
        requests: server.request_log().len(),
        detail: format!(
            "create {:.1} s, wait {:.1} s; {running}/{vms} VMIs Running at the end",
            created.as_secs_f64(),
            (wall - created).as_secs_f64()
        ),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this without it.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<u64> = match std::env::var("BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("BENCH_SIZES: comma-separated VM counts")
            })
            .collect(),
        Err(_) if benchmarking => vec![300, 1000],
        Err(_) => vec![10],
    };
    let latency_ms: u64 = std::env::var("BENCH_LATENCY_MS")
        .ok()
        .map(|v| v.parse().expect("BENCH_LATENCY_MS: milliseconds"))
        .unwrap_or(10);
    println!("fixture latency {latency_ms} ms per request; workload cpu");
    println!(
        "{:>6}  {:<34} {:>9} {:>9}  detail",
        "VMs", "how", "wall (s)", "requests"
    );
    for &vms in &sizes {
        let rows = [
            (
                "virtwork run (defaults: --qps 50)",
                run_virtwork(vms, latency_ms, &[]),
            ),
            (
                "virtwork run --qps 200",
                run_virtwork(vms, latency_ms, &["--qps", "200"]),
            ),
            (
                "kubectl create -f + kubectl wait",
                run_kubectl(vms, latency_ms),
            ),
        ];
        for (how, o) in rows {
            println!(
                "{vms:>6}  {how:<34} {:>9.1} {:>9}  {}",
                o.wall.as_secs_f64(),
                o.requests,
                o.detail
            );
        }
    }
}
