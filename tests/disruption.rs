//! `virtwork disruption` end to end: the real binary against the fake API server (its
//! KubeVirt controllers migrate evacuated VMIs through `kubevirt-evacuation-` migrations,
//! evict VMIs that cannot migrate, drive `VirtualMachineInstanceMigration`s and
//! garbage-collect finalized ones) and a REAL Prometheus scraping the fake's KubeVirt
//! metrics. A fleet goes through a real `kubectl drain`, a `virtwork churn` restart, two
//! migrations of one VM (the first garbage-collected) and a VM that stops reporting;
//! `disruption` must name each.
//!
//! Tests that need Prometheus or kubectl skip with a notice when they are not installed
//! and fail instead under `VIRTWORK_REQUIRE_PROMETHEUS=1` (CI).

use crate::support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::apiserver::ControllerOptions;
use support::prometheus::{Prometheus, ScrapeJob, tool};
use support::{Backend, FakeApiServer, Options};

const NS: &str = "virtwork";
const METRICS_PATH: &str =
    "/api/v1/namespaces/kubevirt/services/https:kubevirt-prometheus-metrics:metrics/proxy/metrics";

pub(crate) struct Env {
    pub(crate) server: FakeApiServer,
    pub(crate) dir: tempfile::TempDir,
}

fn service(namespace: &str, name: &str, port_name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}]},
    })
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "250"}},
    })
}

impl Env {
    /// Two nodes, OpenShift Virtualization's `LiveMigrate` default, evacuations taking
    /// 2 s, and one finalized migration kept per VMI (KubeVirt keeps 5), so garbage
    /// collection shows within a test.
    pub(crate) fn start() -> Env {
        let server = FakeApiServer::start(Options {
            namespaces: vec![NS.into(), "kubevirt".into()],
            controllers: ControllerOptions {
                cluster_eviction_strategy: Some("LiveMigrate".into()),
                migration_delay: Duration::from_secs(2),
                finalized_migrations_kept: 1,
                ..ControllerOptions::default()
            },
            ..Default::default()
        });
        for name in ["node-a", "node-b"] {
            server.insert(node(name));
        }
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .unwrap();
        server.insert(service(
            "kubevirt",
            "kubevirt-prometheus-metrics",
            "metrics",
            8443,
        ));
        server.set_service_backend(
            "kubevirt",
            "kubevirt-prometheus-metrics",
            "metrics",
            Backend::KubeVirtMetrics,
        );
        Env { server, dir }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.run_with_db(&self.dir.path().join("audit.db"), args)
    }

    /// [`Env::run`] with the audit database at `db`.
    fn run_with_db(&self, db: &std::path::Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_virtwork"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--audit-db")
            .arg(db)
            .arg("--namespace")
            .arg(NS)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    }

    /// Starts the real Prometheus on the fake's metrics, behind monitoring/prometheus-k8s.
    pub(crate) fn prometheus(&self) -> Option<Prometheus> {
        let binary = tool("prometheus")?;
        let address = self.server.url().trim_start_matches("http://").to_string();
        let prometheus = Prometheus::start(
            &binary,
            &[ScrapeJob {
                name: "kubevirt".into(),
                address,
                path: METRICS_PATH.into(),
                bearer: None,
            }],
        );
        self.server.insert(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}),
        );
        self.server
            .insert(service("monitoring", "prometheus-k8s", "web", 9090));
        self.server.set_service_backend(
            "monitoring",
            "prometheus-k8s",
            "web",
            Backend::Upstream(prometheus.url.clone()),
        );
        Some(prometheus)
    }

    /// The names of the VMs of the run whose `run` output is `out`, sorted.
    pub(crate) fn vms_of(&self, out: &Output) -> Vec<String> {
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("run output is not JSON ({e}): {}", text(&out.stderr)));
        let run_id = doc["run_id"].as_str().expect("run id").to_string();
        let mut names: Vec<String> = self
            .server
            .objects("virtualmachines", Some(NS))
            .iter()
            .filter(|vm| vm["metadata"]["labels"]["virtwork/run-id"] == run_id.as_str())
            .map(|vm| vm["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn vmi_field(&self, name: &str, pointer: &str) -> String {
        self.server
            .get("virtualmachineinstances", NS, name)
            .and_then(|v| v.pointer(pointer).and_then(Value::as_str).map(String::from))
            .unwrap_or_default()
    }

    /// Creates a migration of `vm` (as `virtctl migrate` does) and waits until it is over.
    pub(crate) fn migrate(&self, vm: &str, name: &str) {
        self.server.insert(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"vmiName": vm},
        }));
        let done = self.server.wait_until(Duration::from_secs(10), |s| {
            s.get("virtualmachineinstances", NS, vm).is_some_and(|v| {
                v.pointer("/status/migrationState/completed") == Some(&json!(true))
            }) && s
                .get("virtualmachineinstancemigrations", NS, name)
                .is_none_or(|m| m["status"]["phase"] == "Succeeded")
        });
        assert!(done, "migration {name} of {vm} never ended");
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn assert_ok(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Writes the catalog entry `web` under `catalog` (a python http.server unit) with
/// `signals`, the YAML items of its `signals:` list.
pub(crate) fn write_web_entry(catalog: &std::path::Path, signals: &str) {
    let entry = catalog.join("web");
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(
        entry.join("web.service"),
        "[Unit]\nDescription=web\n[Service]\nExecStart=/usr/bin/python3 -m http.server 8080\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    std::fs::write(
        entry.join("workload.yaml"),
        format!("description: web\nsignals:\n{signals}"),
    )
    .unwrap();
}

fn report_of<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|vm| vm["name"] == name)
        .unwrap_or_else(|| panic!("VM {name} not in {doc:#}"))
}

fn sources(vm: &Value) -> Vec<String> {
    vm["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["from"].as_str().unwrap().to_string())
        .collect()
}

/// A real `kubectl drain` of `node` (evictions retried every 5 s, as it does).
fn kubectl_drain(env: &Env, node: &str) -> Option<Output> {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "kubectl is required alongside Prometheus in CI"
        );
        eprintln!("SKIP: kubectl not installed");
        return None;
    }
    Some(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(env.kubeconfig())
            .args([
                "drain",
                node,
                "--pod-selector",
                "kubevirt.io=virt-launcher",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout",
                "60s",
            ])
            .output()
            .unwrap(),
    )
}

/// The fleet: three cpu VMs (run A), a disk VM with a ReadWriteOnce data disk (run B,
/// evicted rather than migrated) and a cpu VM churn restarts (run C).
struct Fleet {
    a: Vec<String>,
    disk: String,
    churned: String,
}

fn start_fleet(env: &Env) -> Fleet {
    let run = |workloads: &str, count: &str| {
        let out = env.run(&[
            "--output",
            "json",
            "run",
            "--workloads",
            workloads,
            "--vm-count",
            count,
            "--timeout",
            "60",
        ]);
        assert_ok(&out, "run");
        env.vms_of(&out)
    };
    Fleet {
        a: run("cpu", "3"),
        disk: run("disk", "1").remove(0),
        churned: run("cpu", "1").remove(0),
    }
}

#[test]
fn disruption_names_migrations_restarts_and_silent_vms_against_real_prometheus() {
    let env = Env::start();
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    let fleet = start_fleet(&env);
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            5,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the 5 VMIs:\n{}",
        prometheus.log()
    );
    // Every workload established before anything happens (rates need a few scrapes).
    std::thread::sleep(Duration::from_secs(6));
    let started = Instant::now();

    // churn restarts the one VM of run C; the audit database records it.
    let run_c = env
        .server
        .get("virtualmachines", NS, &fleet.churned)
        .unwrap()["metadata"]["labels"]["virtwork/run-id"]
        .as_str()
        .unwrap()
        .to_string();
    let churn = env.run(&[
        "churn",
        "--run-id",
        &run_c,
        "--actions",
        "restart",
        "--duration",
        "1s",
        "--rate",
        "60/m",
        "--seed",
        "1",
    ]);
    assert_ok(&churn, "churn");

    // Drain the disk VM's node: it is evicted and restarts; cpu VMs there are evacuated.
    let drained = env.vmi_field(&fleet.disk, "/status/nodeName");
    let evacuated: Vec<String> = fleet
        .a
        .iter()
        .filter(|vm| env.vmi_field(vm, "/status/nodeName") == drained)
        .cloned()
        .collect();
    let disk_uid = env.vmi_field(&fleet.disk, "/metadata/uid");
    let Some(drain) = kubectl_drain(&env, &drained) else {
        return;
    };
    assert_ok(&drain, "kubectl drain");

    // One VM migrates twice; only the second migration object survives collection.
    let twice = fleet.a[0].clone();
    env.migrate(&twice, "upgrade-move-1");
    std::thread::sleep(Duration::from_secs(3));
    env.migrate(&twice, "upgrade-move-2");
    assert!(
        env.server
            .get("virtualmachineinstancemigrations", NS, "upgrade-move-1")
            .is_none(),
        "the first migration is garbage-collected"
    );

    // Another stops reporting for 8 s.
    let silent = fleet.a[1].clone();
    env.server.set_metrics_hidden(NS, &silent, true);
    std::thread::sleep(Duration::from_secs(8));
    env.server.set_metrics_hidden(NS, &silent, false);
    std::thread::sleep(Duration::from_secs(5));

    let since = format!("{}s", started.elapsed().as_secs() + 5);
    let out = env.run(&[
        "--output",
        "json",
        "disruption",
        "--since",
        &since,
        "--max-interruption",
        "4s",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{doc:#}");
    assert_eq!(doc["interruptions_measured"], true);
    assert_eq!(doc["summary"]["vms"], 5);
    assert_eq!(doc["passed"], false);

    let q = format!(
        "/api/v1/query?query=kubevirt_vmi_vcpu_seconds_total%7Bname%3D%22{}%22%7D%5B60s%5D",
        fleet.disk
    );
    eprintln!("DEBUG {:?}", prometheus.get(&q));
    let disk = report_of(&doc, &fleet.disk);
    assert_eq!(disk["outcome"], "beyond-budget");
    let restart = &disk["restarts"][0];
    assert_ne!(restart["vmi_uid"], disk_uid.as_str(), "a new VMI");
    assert!(
        restart["evidence"].as_str().unwrap().starts_with("new-vmi"),
        "{restart}"
    );

    let churned = report_of(&doc, &fleet.churned);
    assert_eq!(churned["outcome"], "beyond-budget");
    let cause = churned["restarts"][0]["cause"].as_str().unwrap_or_default();
    assert!(cause.starts_with("churn restart"), "{churned:#}");

    for vm in &evacuated {
        let report = report_of(&doc, vm);
        let names: Vec<&str> = report["migrations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["name"].as_str())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("kubevirt-evacuation-")) || *vm == twice,
            "{report:#}"
        );
        // The twice-migrated VM's evacuation object is collected: Prometheus names no node.
        let m = &report["migrations"][0];
        if *vm != twice {
            assert_eq!(m["source_node"], drained.as_str(), "{report:#}");
        } else {
            assert_eq!(m["from"], "prometheus-migration-metrics", "{report:#}");
        }
    }

    let moved = report_of(&doc, &twice);
    let from = sources(moved);
    assert!(from.contains(&"migration-object".to_string()), "{moved:#}");
    assert!(
        from.contains(&"prometheus-migration-metrics".to_string()),
        "the collected migration is read from Prometheus: {moved:#}"
    );
    assert!(
        moved["restarts"].as_array().unwrap().is_empty(),
        "{moved:#}"
    );
    assert!(
        moved["interruption"]["longest_seconds"].as_f64().unwrap() <= 4.0,
        "{moved:#}"
    );

    let quiet = report_of(&doc, &silent);
    assert_eq!(quiet["outcome"], "beyond-budget", "{quiet:#}");
    let longest = quiet["interruption"]["longest_seconds"].as_f64().unwrap();
    assert!(
        (6.0..=14.0).contains(&longest),
        "about 8 s silent: {quiet:#}"
    );
    assert!(
        quiet["restarts"].as_array().unwrap().is_empty(),
        "{quiet:#}"
    );

    let summary = &doc["summary"];
    assert_eq!(summary["beyond_budget"], 3, "{summary:#}");
    assert!(
        summary["migration_seconds"]["max"].as_f64().unwrap() >= 1.0,
        "{summary:#}"
    );
    let error = stderr
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_default();
    assert!(error.contains("beyond the disruption budget"), "{stderr}");

    // The text report shows the same table.
    let out = env.run(&["disruption", "--since", &since, "--max-interruption", "4s"]);
    let table = text(&out.stdout);
    eprintln!("{table}");
    assert!(table.starts_with("VM "), "{table}");
    assert!(table.contains("prometheus-migration-metrics"), "{table}");
    assert!(table.contains("churn restart"), "{table}");

    // From the API alone: migrations and restarts, interruptions said to be unmeasured.
    let out = env.run(&[
        "--output",
        "json",
        "disruption",
        "--since",
        &since,
        "--no-prometheus",
    ]);
    let api_only: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(api_only["interruptions_measured"], false);
    assert!(
        api_only["not_measured_because"]
            .as_str()
            .unwrap()
            .contains("--no-prometheus")
    );
    // The churn restart is in the audit database; the eviction soon after the disk VM's
    // creation cannot be told from its first start without Prometheus.
    let churned = report_of(&api_only, &fleet.churned);
    assert_eq!(churned["outcome"], "beyond-budget", "{churned:#}");
    assert_eq!(churned["restarts"][0]["evidence"], "new-vmi");
    assert_eq!(report_of(&api_only, &silent)["interruption"], Value::Null);
    let moved = report_of(&api_only, &twice);
    assert_eq!(sources(moved), vec!["migration-object"], "{moved:#}");
}

/// disruption judges a VM's workload by verify's resolution: the params its run recorded.
#[test]
fn a_patched_params_annotation_cannot_hide_an_interruption() {
    let env = Env::start();
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    let started = Instant::now();
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run");
    let vm = env.vms_of(&out).remove(0);
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            1,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the VMI:\n{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(6));
    // Its load stops for 10 s (vCPU idle, about 0.02) while someone who may patch VMs lowers
    // its threshold from 0.5 to 0.005.
    let mut patched = env.server.get("virtualmachines", NS, &vm).unwrap();
    patched["metadata"]["annotations"]["virtwork/signal-params"] =
        json!(r#"{"cpu-load-percent":"1"}"#);
    env.server.insert(patched);
    env.server.set_metrics_flat(NS, &vm, true);
    std::thread::sleep(Duration::from_secs(10));
    env.server.set_metrics_flat(NS, &vm, false);
    std::thread::sleep(Duration::from_secs(5));

    let since = format!("{}s", started.elapsed().as_secs() + 5);
    let args = [
        "--output",
        "json",
        "disruption",
        "--since",
        &since,
        "--max-interruption",
        "4s",
    ];
    let out = env.run(&args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stderr)));
    let judged = report_of(&doc, &vm);
    assert_eq!(judged["outcome"], "beyond-budget", "{judged:#}");
    let longest = judged["interruption"]["longest_seconds"].as_f64().unwrap();
    assert!(
        (7.0..=16.0).contains(&longest),
        "about 10 s idle: {judged:#}"
    );
    assert!(
        text(&out.stderr)
            .lines()
            .any(|l| l.contains("WARN") && l.contains("differ")),
        "{}",
        text(&out.stderr)
    );

    // Without the run's record (another machine) the annotation is all there is.
    let out = env.run_with_db(&env.dir.path().join("elsewhere.db"), &args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stderr)));
    let judged = report_of(&doc, &vm);
    assert_ne!(judged["outcome"], "beyond-budget", "{judged:#}");
    let longest = judged["interruption"]["longest_seconds"].as_f64();
    assert!(
        longest.is_some_and(|s| s < 4.0),
        "judged by 0.005: {judged:#}"
    );
}

/// The values of `vm`'s vCPU counter (summed over vCPUs) per node, in time order, as the
/// real Prometheus holds them over the last `seconds`.
fn vcpu_by_node(prometheus: &Prometheus, vm: &str, seconds: u64) -> Vec<(String, Vec<f64>)> {
    let q = format!("sum by (node) (kubevirt_vmi_vcpu_seconds_total{{name=\"{vm}\"}})");
    let end = jiff::Timestamp::now().as_second();
    let encoded: String = q
        .bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect();
    let path = format!(
        "/api/v1/query_range?query={encoded}&start={}&end={end}&step=1",
        end - seconds as i64
    );
    let (_, body) = prometheus.get(&path).expect("Prometheus answers");
    let doc: Value = serde_json::from_str(&body).unwrap();
    doc["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let values = s["values"].as_array().unwrap();
            let node = s["metric"]["node"].as_str().unwrap_or("").to_string();
            let parsed = values
                .iter()
                .map(|v| v[1].as_str().unwrap().parse::<f64>().unwrap())
                .collect();
            (node, parsed)
        })
        .collect()
}

/// KubeVirt garbage-collected a VM's migration object (and its VMI's state names a later
/// migration), so only Prometheus shows it: the node change, the migration times, and the vCPU
/// counter starting afresh on the target (a new QEMU). That reset is the migration, not an
/// unexplained restart; the VM is migrated and within the default budget.
#[test]
fn a_migration_only_prometheus_shows_is_not_a_restart() {
    let env = Env::start();
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    let started = Instant::now();
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run");
    let vm = env.vms_of(&out).remove(0);
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            1,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the VMI:\n{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(6));
    let first_node = env.vmi_field(&vm, "/status/nodeName");
    env.migrate(&vm, "upgrade-move-1");
    // Far enough apart that the second migration's times cannot explain the first reset.
    std::thread::sleep(Duration::from_secs(12));
    env.migrate(&vm, "upgrade-move-2");
    assert!(
        env.server
            .get("virtualmachineinstancemigrations", NS, "upgrade-move-1")
            .is_none(),
        "the first migration is garbage-collected"
    );
    std::thread::sleep(Duration::from_secs(6));
    // The test data is KubeVirt's: each target's counter starts afresh.
    let series = vcpu_by_node(&prometheus, &vm, 60);
    let middle = series
        .iter()
        .find(|(node, _)| *node != first_node)
        .unwrap_or_else(|| panic!("no series after the first migration: {series:?}"));
    let before = series.iter().find(|(node, _)| *node == first_node).unwrap();
    assert!(
        middle.1[0] < before.1.iter().copied().fold(0.0, f64::max),
        "the target's vCPU counter starts afresh: {series:?}"
    );

    let since = format!("{}s", started.elapsed().as_secs() + 5);
    let out = env.run(&["--output", "json", "disruption", "--since", &since]);
    let stderr = text(&out.stderr);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    let report = report_of(&doc, &vm);
    eprintln!("{report:#}");
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{doc:#}");
    assert_eq!(report["outcome"], "migrated", "{report:#}");
    assert!(
        report["restarts"].as_array().unwrap().is_empty(),
        "no restart for the collected migration's counter reset: {report:#}"
    );
    let from = sources(report);
    assert_eq!(from.len(), 2, "{report:#}");
    assert!(
        from.iter().any(|f| f.starts_with("prometheus-")),
        "the collected migration is read from Prometheus: {report:#}"
    );
    assert_eq!(doc["passed"], true);
    assert!(
        doc["budget"]["max_interruption_from"]
            .as_str()
            .unwrap()
            .starts_with("two scrape intervals of"),
        "{doc:#}"
    );

    // A 7-day window: 480 points make a 1,260 s step, so the default budget is two steps.
    let out = env.run(&["--output", "json", "disruption", "--since", "7d"]);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stderr)));
    assert_eq!(doc["step_seconds"], 1260.0, "{doc:#}");
    assert_eq!(
        doc["budget"]["max_interruption_from"], "two query steps of 21m00s",
        "{doc:#}"
    );
    assert_eq!(doc["budget"]["max_interruption_seconds"], 2520.0);
    let out = env.run(&["disruption", "--since", "7d"]);
    let table = text(&out.stdout);
    assert!(
        table.contains("Budget: interruption at most 42m00s (two query steps of 21m00s)"),
        "{table}"
    );
}

/// Prometheus is reached but holds no KubeVirt series for the VMs in scope (it does not
/// scrape virt-handler): interruptions are not measured, with that reason, and the VMs are
/// judged as from the API alone instead of each interrupted for the whole window.
#[test]
fn a_prometheus_without_the_vms_series_measures_no_interruption() {
    let env = Env::start();
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run");
    let vm = env.vms_of(&out).remove(0);
    env.server.set_metrics_hidden(NS, &vm, true);
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    assert!(
        prometheus.wait_for_series("up", 1, Duration::from_secs(60)),
        "Prometheus never scraped:\n{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(3));
    let out = env.run(&["--output", "json", "disruption", "--since", "2m"]);
    let stderr = text(&out.stderr);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{doc:#}");
    assert_eq!(doc["interruptions_measured"], false, "{doc:#}");
    let why = doc["not_measured_because"].as_str().unwrap();
    assert!(
        why.contains("holds no kubevirt_vmi_vcpu_seconds_total series for any of the 1 VM(s)"),
        "{why}"
    );
    assert_eq!(doc["budget"]["max_interruption_from"], "not measured");
    let report = report_of(&doc, &vm);
    assert_eq!(report["outcome"], "undisturbed", "{report:#}");
    assert_eq!(report["interruption"], Value::Null);
    assert!(
        stderr.contains("WARN") && stderr.contains("no kubevirt_vmi_vcpu_seconds_total"),
        "{stderr}"
    );
    let out = env.run(&["disruption", "--since", "2m"]);
    assert!(
        text(&out.stdout).contains("Interruptions not measured: Prometheus ("),
        "{}",
        text(&out.stdout)
    );
}

/// A catalog VM with its local entry is judged, not `unknown`: its entry's own signals are
/// not measured over a window, so it is owed the presence of its vCPU series, and a VM that
/// stops reporting is interrupted.
#[test]
fn a_catalog_vm_is_judged_by_the_presence_of_its_vcpu_series() {
    let env = Env::start();
    let catalog = env.dir.path().join("catalog");
    write_web_entry(
        &catalog,
        "  - name: vcpu-series\n    query: 'count by (namespace, name) (kubevirt_vmi_vcpu_seconds_total{namespace=\"{{namespace}}\",name=\"{{name}}\"})'\n    threshold: 1\n",
    );
    let dir = catalog.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--output",
            "json",
            "run",
            "--timeout",
            "60",
            "--catalog-dir",
            dir,
        ];
        args.extend_from_slice(extra);
        let out = env.run(&args);
        assert_ok(&out, "run");
        env.vms_of(&out).remove(0)
    };
    let kept = run(&["--from-catalog", "web"]);
    let silent = run(&["--from-catalog", "web"]);
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            2,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the VMIs:\n{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(6));
    env.server.set_metrics_hidden(NS, &silent, true);
    std::thread::sleep(Duration::from_secs(12));
    let out = env.run(&[
        "--output",
        "json",
        "disruption",
        "--since",
        "2m",
        "--catalog-dir",
        dir,
    ]);
    let stderr = text(&out.stderr);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{doc:#}");
    let report = report_of(&doc, &kept);
    assert_eq!(report["outcome"], "undisturbed", "{report:#}");
    assert_eq!(
        report["interruption"]["signals"],
        json!(["vcpu-busy"]),
        "{report:#}"
    );
    assert_eq!(report["unknown_because"], json!([]), "{report:#}");
    let report = report_of(&doc, &silent);
    assert_eq!(report["outcome"], "beyond-budget", "{report:#}");
    let longest = report["interruption"]["longest_seconds"].as_f64().unwrap();
    assert!(longest >= 6.0, "silent for 12 s: {report:#}");
}

/// VMs disruption cannot judge do not pass: a catalog VM whose local entry is missing
/// (verify calls it unverifiable) and a VM whose signal query Prometheus rejected are each
/// `unknown` with the reason, the rejection is logged naming the query, and the command
/// exits 1.
#[test]
fn vms_that_cannot_be_judged_are_unknown_with_a_reason_and_fail_the_fleet() {
    use support::promstub::{Answer, ONE_SAMPLE, PromStub};
    let env = Env::start();
    let catalog = env.dir.path().join("catalog");
    let query = "sum by (namespace, name) (rate(kubevirt_vmi_network_receive_bytes_total{namespace=\"{{namespace}}\",name=\"{{name}}\"}[{{window}}]))";
    write_web_entry(
        &catalog,
        &format!("  - name: http-rx\n    query: '{query}'\n    threshold: 1024\n"),
    );
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--from-catalog",
        "web",
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run web");
    let web = env.vms_of(&out).remove(0);
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run cpu");
    let cpu = env.vms_of(&out).remove(0);
    // A Prometheus that shows both VMs' vCPU counters and no migration, and rejects the
    // signal query (as one whose query limits it exceeds does).
    let now = jiff::Timestamp::now().as_second();
    let series = |name: &str| {
        format!(
            r#"{{"metric":{{"name":"{name}","node":"node-a"}},"values":[[{},"10"],[{now},"20"]]}}"#,
            now - 10
        )
    };
    let matrix = |series: &[String]| {
        format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
            series.join(",")
        )
    };
    let stub = PromStub::start(
        Answer::ByQuery {
            rules: vec![
                (
                    "sum by (name, node) (kubevirt_vmi_vcpu_seconds_total".into(),
                    matrix(&[series(&web), series(&cpu)]),
                ),
                ("max by (name".into(), matrix(&[])),
                (
                    "query_range".into(),
                    r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#.into(),
                ),
            ],
            otherwise: ONE_SAMPLE.into(),
        },
        false,
    );
    let elsewhere = env.dir.path().join("no-catalog");
    let args = [
        "--output",
        "json",
        "disruption",
        "--since",
        "5m",
        "--prometheus",
        stub.url(),
        "--catalog-dir",
        elsewhere.to_str().unwrap(),
    ];
    let out = env.run(&args);
    let stderr = text(&out.stderr);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    eprintln!("{doc:#}\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["summary"]["unknown"], 2, "{doc:#}");
    let judged = report_of(&doc, &web);
    assert_eq!(judged["outcome"], "unknown");
    let why = judged["unknown_because"][0].as_str().unwrap();
    assert!(why.starts_with("verify cannot judge it: "), "{why}");
    assert!(why.contains("web"), "{why}");
    let judged = report_of(&doc, &cpu);
    assert_eq!(judged["outcome"], "unknown");
    let why = judged["unknown_because"][0].as_str().unwrap();
    assert!(
        why.starts_with("Prometheus rejected its vcpu-busy signal query (execution: query processing would load too many samples"),
        "{why}"
    );
    assert!(
        stderr.lines().any(|l| l.contains("WARN")
            && l.contains(
                "Prometheus rejected the vcpu-busy signal query for 1 VM(s) of namespace virtwork"
            )),
        "{stderr}"
    );
    let error = stderr
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_default();
    assert!(
        error.contains("could not be judged") && error.contains("(and 1 more VM(s))"),
        "{stderr}"
    );
    let out = env.run(&args[2..]);
    let table = text(&out.stdout);
    assert!(table.contains("Not judged (unknown):"), "{table}");
    assert!(table.contains("2 unknown."), "{table}");
}

#[test]
fn a_fleet_without_prometheus_is_reported_from_the_api_alone() {
    let env = Env::start();
    let fleet = start_fleet(&env);
    env.migrate(&fleet.a[0], "move-1");
    let out = env.run(&["--output", "json", "disruption", "--since", "10m"]);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(doc["interruptions_measured"], false);
    assert!(
        doc["not_measured_because"]
            .as_str()
            .unwrap()
            .contains("Prometheus not reached"),
        "{doc:#}"
    );
    let moved = report_of(&doc, &fleet.a[0]);
    assert_eq!(moved["outcome"], "migrated");
    assert_eq!(moved["migrations"][0]["name"], "move-1");
    assert!(
        moved["migrations"][0]["duration_seconds"]
            .as_f64()
            .is_some()
    );
    assert_eq!(doc["summary"]["undisturbed"], 4);
    let out = env.run(&["disruption", "--since", "10m"]);
    assert!(
        text(&out.stdout).contains("Interruptions not measured: Prometheus not reached"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn bad_windows_exit_2_naming_the_flag_before_any_request() {
    let env = Env::start();
    for (args, flag) in [
        (vec!["disruption", "--since", "2 hours"], "--since"),
        (
            vec![
                "disruption",
                "--from",
                "2026-12-05T12:00:00Z",
                "--to",
                "2026-12-05T10:00:00Z",
            ],
            "--to",
        ),
        (vec!["disruption", "--from", "yesterday"], "--from"),
        (vec!["disruption", "--since", "30d"], "--since"),
        (
            vec!["disruption", "--allow-restarts", "some"],
            "--allow-restarts",
        ),
        (
            vec![
                "disruption",
                "--execution",
                "5f0c0f3e-0000-4000-8000-000000000000",
            ],
            "--execution",
        ),
    ] {
        let before = env.server.request_log().len();
        let out = env.run(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| !l.is_empty()).count(),
            1,
            "{stderr}"
        );
        assert_eq!(
            env.server.request_log().len(),
            before,
            "{args:?} sent a request"
        );
    }
}

/// The bench fleet's timeline, relative to now (seconds): the data covers the last 2 h 10 min
/// at a 30 s scrape (every new QEMU, a migration's target too, starts its vCPU counter at
/// zero); VMs 0-49 migrate twice (the first migration object garbage-collected),
/// 50-99 once (object collected: the VMI's state remains), 100-119 restart (90 s without
/// series, a new VMI on another node), 120-129 stop reporting for 10 minutes (backfilled series carry no staleness
/// markers, so Prometheus' 5-minute lookback hides the first half of a silence).
const BENCH_VMS: usize = 1000;
const BENCH_SPAN: i64 = 7800;
const BENCH_STEP: i64 = 30;

#[derive(Clone, Copy, PartialEq)]
enum BenchEvent {
    None,
    MigrateTwice(i64, i64),
    MigrateOnce(i64),
    Restart(i64),
    Silent(i64),
}

fn bench_event(i: usize) -> BenchEvent {
    let at = |base: i64| -(base - (i as i64 % 50) * 30);
    match i {
        0..=49 => BenchEvent::MigrateTwice(at(5400), at(3000)),
        50..=99 => BenchEvent::MigrateOnce(at(4200)),
        100..=119 => BenchEvent::Restart(at(2400)),
        120..=129 => BenchEvent::Silent(at(1800)),
        _ => BenchEvent::None,
    }
}

fn bench_name(i: usize) -> String {
    let workload = if i.is_multiple_of(2) { "cpu" } else { "memory" };
    format!("virtwork-{workload}-bench0-{i}")
}

/// Writes the fleet's two hours of KubeVirt series as OpenMetrics (families one after the
/// other, each series' samples in time order).
fn write_bench_history(path: &std::path::Path, now: i64) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let families: [(&str, &str, &str); 6] = [
        ("kubevirt_vmi_vcpu_seconds", "counter", "_total"),
        ("kubevirt_vmi_info", "gauge", ""),
        ("kubevirt_vmi_memory_available_bytes", "gauge", ""),
        ("kubevirt_vmi_memory_usable_bytes", "gauge", ""),
        ("kubevirt_vmi_migration_start_time_seconds", "gauge", ""),
        ("kubevirt_vmi_migration_end_time_seconds", "gauge", ""),
    ];
    for (family, kind, suffix) in families {
        writeln!(out, "# TYPE {family} {kind}").unwrap();
        for i in 0..BENCH_VMS {
            let name = bench_name(i);
            if family.contains("memory") && i.is_multiple_of(2) {
                continue;
            }
            let event = bench_event(i);
            // (node, from, to) segments; samples absent outside them.
            let node = |k: usize| format!("node-{}", (i + k) % 10);
            let (start, end) = (now - BENCH_SPAN, now);
            let segments: Vec<(String, i64, i64)> = match event {
                BenchEvent::MigrateTwice(a, b) => vec![
                    (node(0), start, now + a),
                    (node(1), now + a, now + b),
                    (node(2), now + b, end),
                ],
                BenchEvent::MigrateOnce(a) => {
                    vec![(node(0), start, now + a), (node(1), now + a, end)]
                }
                BenchEvent::Restart(r) => {
                    vec![(node(0), start, now + r), (node(1), now + r + 90, end)]
                }
                _ => vec![(node(0), start, end)],
            };
            let migrations: Vec<(String, i64)> = match event {
                BenchEvent::MigrateTwice(a, b) => vec![
                    (format!("{name}-m1"), now + a),
                    (format!("{name}-m2"), now + b),
                ],
                BenchEvent::MigrateOnce(a) => vec![(format!("{name}-m1"), now + a)],
                _ => Vec::new(),
            };
            for (k, (node, from, to)) in segments.iter().enumerate() {
                let mut labels = format!("name=\"{name}\",namespace=\"{NS}\",node=\"{node}\"");
                let migration = k.checked_sub(1).and_then(|m| migrations.get(m));
                match family {
                    "kubevirt_vmi_vcpu_seconds" => labels.push_str(",id=\"0\",state=\"running\""),
                    "kubevirt_vmi_info" => labels.push_str(",phase=\"running\""),
                    "kubevirt_vmi_migration_start_time_seconds"
                    | "kubevirt_vmi_migration_end_time_seconds" => {
                        let Some((m, _)) = migration else { continue };
                        labels.push_str(&format!(",migration_name=\"{m}\""));
                        if family.contains("end") {
                            labels.push_str(",status=\"succeeded\"");
                        }
                    }
                    _ => {}
                }
                let mut t = from - from.rem_euclid(BENCH_STEP);
                while t < *to {
                    if t >= *from {
                        let silent = matches!(event, BenchEvent::Silent(s) if t >= now + s && t < now + s + 600);
                        let value = match family {
                            "kubevirt_vmi_vcpu_seconds" if silent => None,
                            // Each segment is a QEMU of its own: a restart's new VMI and
                            // a migration's target alike count from zero, as KubeVirt's do.
                            "kubevirt_vmi_vcpu_seconds" => Some(0.95 * (t - from) as f64),
                            "kubevirt_vmi_memory_available_bytes" if !silent => Some(2147483648.0),
                            "kubevirt_vmi_memory_usable_bytes" if !silent => Some(322122547.0),
                            "kubevirt_vmi_info" => Some(1.0),
                            "kubevirt_vmi_migration_start_time_seconds" => {
                                migration.map(|m| m.1 as f64)
                            }
                            "kubevirt_vmi_migration_end_time_seconds" => {
                                migration.map(|m| (m.1 + 12) as f64)
                            }
                            _ => None,
                        };
                        if let Some(v) = value {
                            writeln!(out, "{family}{suffix}{{{labels}}} {v} {t}").unwrap();
                        }
                    }
                    t += BENCH_STEP;
                }
            }
        }
    }
    writeln!(out, "# EOF").unwrap();
}

/// The fleet's VMs, VMIs and surviving migration objects, as the API server holds them
/// after the two hours (no controllers run).
fn seed_bench_fleet(server: &FakeApiServer, now: i64) {
    let time = |t: i64| jiff::Timestamp::from_second(t).unwrap().to_string();
    for i in 0..BENCH_VMS {
        let name = bench_name(i);
        let workload = if i.is_multiple_of(2) { "cpu" } else { "memory" };
        let labels = json!({
            "app.kubernetes.io/managed-by": "virtwork",
            "app.kubernetes.io/component": workload,
            "virtwork/run-id": "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f",
        });
        server.insert(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": NS, "labels": labels,
                         "creationTimestamp": time(now - 3 * 3600)},
            "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {
                "cpu": {"cores": 1}, "resources": {"requests": {"memory": "2Gi"}}}}}},
        }));
        let event = bench_event(i);
        let (created, node, state) = match event {
            BenchEvent::Restart(r) => (now + r + 60, (i + 1) % 10, json!(null)),
            BenchEvent::MigrateTwice(_, b) => (
                now - 3 * 3600,
                (i + 2) % 10,
                json!({
                "migrationUid": format!("uid-{name}-m2"), "sourceNode": format!("node-{}", (i + 1) % 10),
                "targetNode": format!("node-{}", (i + 2) % 10), "startTimestamp": time(now + b),
                "endTimestamp": time(now + b + 12), "completed": true}),
            ),
            BenchEvent::MigrateOnce(a) => (
                now - 3 * 3600,
                (i + 1) % 10,
                json!({
                "migrationUid": format!("uid-{name}-m1"), "sourceNode": format!("node-{}", i % 10),
                "targetNode": format!("node-{}", (i + 1) % 10), "startTimestamp": time(now + a),
                "endTimestamp": time(now + a + 12), "completed": true}),
            ),
            _ => (now - 3 * 3600, i % 10, json!(null)),
        };
        server.insert(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": NS, "labels": labels, "uid": format!("vmi-{i}"),
                         "creationTimestamp": time(created)},
            "status": {"phase": "Running", "nodeName": format!("node-{node}"), "migrationState": state,
                       "conditions": [{"type": "LiveMigratable", "status": "True"}]},
        }));
        if let BenchEvent::MigrateTwice(_, b) = event {
            server.insert(json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                "metadata": {"name": format!("{name}-m2"), "namespace": NS, "uid": format!("uid-{name}-m2"),
                             "creationTimestamp": time(now + b - 1)},
                "spec": {"vmiName": name},
                "status": {"phase": "Succeeded", "phaseTransitionTimestamps": [
                    {"phase": "Running", "phaseTransitionTimestamp": time(now + b)},
                    {"phase": "Succeeded", "phaseTransitionTimestamp": time(now + b + 12)}]},
            }));
        }
    }
}

/// The cost of `disruption --since 2h` on 1,000 VMs with two hours of history in a real
/// Prometheus (backfilled with promtool, 30 s scrapes): wall time, peak RSS, queries. Ignored;
/// run with `VIRTWORK_REQUIRE_PROMETHEUS=1 cargo test --test integration
/// disruption::bench_disruption_1000_vms_over_2_hours -- --ignored --nocapture`
/// (`VIRTWORK_BENCH_BINARY` measures another binary, e.g. the release build, too).
#[test]
#[ignore]
fn bench_disruption_1000_vms_over_2_hours() {
    let (Some(binary), Some(promtool)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let server = FakeApiServer::start(Options {
        namespaces: vec![NS.into()],
        controllers: ControllerOptions {
            enabled: false,
            ..ControllerOptions::default()
        },
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    server
        .write_kubeconfig(dir.path().join("kubeconfig"))
        .unwrap();
    let now = jiff::Timestamp::now().as_second();
    let history = dir.path().join("history.om");
    let started = Instant::now();
    write_bench_history(&history, now);
    seed_bench_fleet(&server, now);
    let prometheus = Prometheus::start_with_history(&binary, &promtool, &history);
    eprintln!(
        "BENCH setup (history, backfill, seeding): {:?}",
        started.elapsed()
    );
    let mut programs = vec![std::ffi::OsString::from(env!("CARGO_BIN_EXE_virtwork"))];
    programs.extend(std::env::var_os("VIRTWORK_BENCH_BINARY"));
    // Queries answered and the seconds Prometheus spent answering them, from its own metrics.
    let queries = || {
        prometheus.get("/metrics").map_or((0, 0.0), |(_, body)| {
            let sum = |metric: &str| {
                body.lines()
                    .filter(|l| l.starts_with(metric) && l.contains("/api/v1/query"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>()
            };
            (
                sum("prometheus_http_requests_total") as u64,
                sum("prometheus_http_request_duration_seconds_sum"),
            )
        })
    };
    for program in programs {
        let before = queries();
        let clock = Instant::now();
        let out = Command::new("/usr/bin/time")
            .arg("-v")
            .arg(&program)
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .args([
                "--no-audit",
                "--namespace",
                NS,
                "--qps",
                "1000",
                "--burst",
                "1000",
                "--output",
                "json",
            ])
            .args([
                "disruption",
                "--since",
                "2h",
                "--prometheus",
                &prometheus.url,
            ])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let wall = clock.elapsed();
        let after = queries();
        let (sent, answering) = (after.0 - before.0, after.1 - before.1);
        let stderr = text(&out.stderr);
        let rss = stderr
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .unwrap_or("?")
            .to_string();
        let seconds = |field: &str| {
            stderr
                .lines()
                .find_map(|l| l.trim().strip_prefix(field)?.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let cpu = seconds("User time (seconds): ") + seconds("System time (seconds): ");
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        if let Some(dump) = std::env::var_os("VIRTWORK_BENCH_DUMP") {
            std::fs::write(dump, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
        let summary = &doc["summary"];
        eprintln!(
            "BENCH disruption 1000 VMs over 2h ({}): wall {wall:?}, CPU {cpu:.2} s, Prometheus queries {sent} answered in {answering:.2} s (summed; two in flight), peak RSS {rss} KiB, exit {:?}, step {} s\n{summary}",
            std::path::Path::new(&program).display(),
            out.status.code(),
            doc["step_seconds"]
        );
        // The figures only count when the verdicts are the fleet's.
        assert_eq!(summary["vms"], 1000, "{stderr}");
        assert_eq!(summary["migrations"], 150, "{summary:#}");
        assert_eq!(
            summary["restarted"].as_u64().unwrap() + summary["beyond_budget"].as_u64().unwrap(),
            30,
            "{summary:#}"
        );
        assert_eq!(summary["migrated"], 100, "{summary:#}");
        assert_eq!(summary["undisturbed"], 870, "{summary:#}");
    }
}
