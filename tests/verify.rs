//! `virtwork verify` end to end: the real binary against the fake API server, whose
//! service proxy serves KubeVirt's per-VMI metrics (counters growing with each VM's
//! workload, one VM's flat) and forwards to a REAL Prometheus scraping them every second.
//!
//! Tests that need Prometheus skip with a notice when it is not installed and fail instead
//! under `VIRTWORK_REQUIRE_PROMETHEUS=1` (CI). The others check bad input, discovery and
//! the request pattern without Prometheus.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::names::tagged;
use support::prometheus::{Prometheus, ScrapeJob, tool};
use support::{Backend, Denial, FakeApiServer, Options};

const NS: &str = "virtwork";
const TOKEN: &str = "verify-test-token-0123456789";
const METRICS_PATH: &str =
    "/api/v1/namespaces/kubevirt/services/https:kubevirt-prometheus-metrics:metrics/proxy/metrics";

struct Env {
    server: FakeApiServer,
    dir: tempfile::TempDir,
}

impl Env {
    fn start() -> Env {
        let server = FakeApiServer::start(Options {
            token: Some(TOKEN.into()),
            namespaces: vec![NS.into(), "kubevirt".into()],
            ..Default::default()
        });
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .unwrap();
        // virt-handler's metrics behind the Service KubeVirt's ServiceMonitor scrapes.
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

    /// kube-prometheus' Service, answered by `backend`.
    fn monitoring(&self, backend: Backend) {
        self.server.insert(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}),
        );
        self.server
            .insert(service("monitoring", "prometheus-k8s", "web", 9090));
        self.server
            .set_service_backend("monitoring", "prometheus-k8s", "web", backend);
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--no-audit")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn service(namespace: &str, name: &str, port_name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}]},
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_doc(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// Signals of VM `name` in a verify JSON document: signal → status.
/// `name` as the run that created the VMs in `NS` named it.
fn t(env: &Env, name: &str) -> String {
    let vms = env.server.objects("virtualmachines", Some(NS));
    let run_id = vms[0]["metadata"]["labels"]["virtwork/run-id"]
        .as_str()
        .expect("run id label");
    tagged(name, run_id)
}

fn statuses(doc: &Value, name: &str) -> Vec<(String, String)> {
    doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|vm| vm["name"] == name)
        .unwrap_or_else(|| panic!("VM {name} not in {doc}"))["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["signal"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Starts the real Prometheus scraping the fake's KubeVirt metrics through the service
/// proxy, and puts it behind monitoring/prometheus-k8s. None (skip) without Prometheus.
fn with_prometheus(env: &Env) -> Option<Prometheus> {
    let binary = tool("prometheus")?;
    let address = env.server.url().trim_start_matches("http://").to_string();
    let prometheus = Prometheus::start(
        &binary,
        &[ScrapeJob {
            name: "kubevirt".into(),
            address,
            path: METRICS_PATH.into(),
            bearer: Some(TOKEN.into()),
        }],
    );
    env.monitoring(Backend::Upstream(prometheus.url.clone()));
    Some(prometheus)
}

fn run_workloads(env: &Env) {
    let out = env.run(&[
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu,memory,disk,network,chaos-disk",
        "--vm-count",
        "2",
        "--params",
        "chaos-disk.release-sleep=5",
        "--timeout",
        "60",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "run failed:\n{}",
        text(&out.stderr)
    );
}

#[test]
fn verify_passes_for_loaded_vms_and_names_the_flat_one() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    run_workloads(&env);
    let flat_vm = t(&env, "virtwork-cpu-1");
    env.server.set_metrics_flat(NS, &flat_vm, true);
    // Every VMI is scraped (a hang guard, not a timing check).
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            12,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the 12 VMIs:\n{}",
        prometheus.log()
    );

    let out = env.run(&[
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--window",
        "30s",
        "--wait",
        "--timeout",
        "25",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    let error = stderr
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_default();
    assert!(
        error.contains(&format!("virtwork/{flat_vm}")) && error.contains("vcpu-busy"),
        "the error line names the flat VM and its signal: {error}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("Error: ")).count(),
        1
    );
    let doc = json_doc(&out);
    assert_eq!(doc["command"], "verify");
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["summary"]["vms"], 12);
    assert_eq!(doc["summary"]["missing"], 1, "{doc:#}");
    assert!(doc["rounds"].as_u64().unwrap() > 1, "--wait polled");
    assert_eq!(
        statuses(&doc, &flat_vm),
        vec![("vcpu-busy".to_string(), "below".to_string())]
    );
    let flat = &doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == flat_vm.as_str())
        .unwrap()["signals"][0];
    assert!(flat["observed"].as_f64().unwrap() < 0.05, "{flat}");
    assert!(
        flat["query"]
            .as_str()
            .unwrap()
            .contains(&format!(r#"name="{flat_vm}""#))
    );
    for (vm, expected) in [
        ("virtwork-cpu-0", vec![("vcpu-busy", "pass")]),
        ("virtwork-memory-0", vec![("memory-used", "pass")]),
        (
            "virtwork-disk-1",
            vec![
                ("disk-write", "pass"),
                ("disk-read", "not_expected"),
                ("disk-iops", "pass"),
            ],
        ),
        (
            "virtwork-network-server-0",
            vec![("net-rx", "pass"), ("net-tx", "pass")],
        ),
        (
            "virtwork-network-client-1",
            vec![("net-rx", "pass"), ("net-tx", "pass")],
        ),
        ("virtwork-chaos-disk-0", vec![("fs-fill", "pass")]),
    ] {
        let want: Vec<(String, String)> = expected
            .iter()
            .map(|(s, v)| (s.to_string(), v.to_string()))
            .collect();
        assert_eq!(statuses(&doc, &t(&env, vm)), want, "{vm}");
    }

    // Once the flat VM's load starts, --wait sees every signal appear and succeeds.
    env.server.set_metrics_flat(NS, &flat_vm, false);
    let out = env.run(&[
        "--namespace",
        NS,
        "verify",
        "--window",
        "30s",
        "--wait",
        "--timeout",
        "90",
    ]);
    let table = text(&out.stdout);
    eprintln!("verify table from the test run:\n{table}");
    assert_eq!(out.status.code(), Some(0), "{}\n{table}", text(&out.stderr));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("VM") && lines[0].contains("QUERY"),
        "{table}"
    );
    assert!(table.contains(&format!("virtwork/{flat_vm}")) && table.contains("PASS"));
    assert!(
        lines.last().unwrap().starts_with("18 of 18 expected signal(s) present, 0 missing, 2 not expected in this window (12 VM(s), window 30s"),
        "{table}"
    );
}

#[test]
fn verify_reaches_a_prometheus_url_with_the_token_file_and_reports_refused_credentials() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    let out = env.run(&[
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(prometheus.wait_for_series(
        "kubevirt_vmi_vcpu_seconds_total",
        1,
        Duration::from_secs(60)
    ));
    // The fake API server's proxy URL stands for a route that demands a bearer token: only
    // a request carrying the token file's token gets through, with its path prefix kept.
    let url = format!(
        "{}/api/v1/namespaces/monitoring/services/http:prometheus-k8s:web/proxy",
        env.server.url()
    );
    std::fs::write(env.path("token"), format!("{TOKEN}\n")).unwrap();
    let out = env.run(&[
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--window",
        "10s",
        "--wait",
        "--timeout",
        "60",
        "--prometheus",
        &url,
        "--prometheus-token-file",
        &env.path("token"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(doc["prometheus"], url);
    assert_eq!(
        statuses(&doc, &t(&env, "virtwork-cpu-0")),
        vec![("vcpu-busy".to_string(), "pass".to_string())]
    );

    std::fs::write(env.path("wrong"), "not-the-token").unwrap();
    let out = env.run(&[
        "--namespace",
        NS,
        "verify",
        "--prometheus",
        &url,
        "--prometheus-token-file",
        &env.path("wrong"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("refused the credentials") && !stderr.contains("not-the-token"),
        "{stderr}"
    );
}

#[test]
fn verify_sends_only_label_selected_lists_and_proxy_gets() {
    let env = Env::start();
    // A stand-in that answers the Prometheus API with an empty vector: this test is about
    // the requests verify makes on the API server, not about Prometheus.
    env.monitoring(Backend::Respond(
        200,
        r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
    ));
    let out = env.run(&[
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    env.server.clear_request_log();
    let out = env.run(&["--namespace", NS, "verify", "--window", "1m"]);
    assert_eq!(out.status.code(), Some(1), "no data means missing");
    assert!(
        text(&out.stderr).contains(&format!(
            "{} signal vcpu-busy (no data)",
            t(&env, "virtwork-cpu-0")
        )),
        "{}",
        text(&out.stderr)
    );
    let mut seen: Vec<(String, String, String)> = env
        .server
        .request_log()
        .iter()
        .filter(|r| !r.resource.is_empty())
        .map(|r| (r.verb.clone(), r.resource.clone(), r.namespace.clone()))
        .collect();
    seen.sort();
    seen.dedup();
    let expected: Vec<(String, String, String)> = [
        ("get", "services/proxy", "monitoring"),
        ("get", "services/proxy", "openshift-monitoring"),
        ("list", "virtualmachineinstances", NS),
        ("list", "virtualmachines", NS),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(seen, expected);
    for r in env.server.request_log().iter().filter(|r| r.verb == "list") {
        assert!(
            r.query
                .contains("labelSelector=app.kubernetes.io%2Fmanaged-by%3Dvirtwork"),
            "{}",
            r.query
        );
    }
}

#[test]
fn discovery_failures_name_every_candidate_and_the_way_out() {
    let env = Env::start();
    let out = env.run(&["--namespace", NS, "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("openshift-monitoring/https:thanos-querier:web: not found")
            && stderr.contains("monitoring/http:prometheus-k8s:web: not found")
            && stderr.contains("pass --prometheus URL"),
        "{stderr}"
    );

    // OpenShift: thanos-querier's auth proxy refuses what the API server forwards without
    // credentials; the message says so and points at --prometheus.
    env.server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-monitoring"}}));
    env.server.insert(service(
        "openshift-monitoring",
        "thanos-querier",
        "web",
        9091,
    ));
    env.server.set_service_backend(
        "openshift-monitoring",
        "thanos-querier",
        "web",
        Backend::Respond(401, "Unauthorized\n".into()),
    );
    let out = env.run(&["--namespace", NS, "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("thanos-querier:web: answered HTTP 401")
            && stderr.contains("--prometheus with its route URL"),
        "{stderr}"
    );

    // RBAC: a denied proxy is named with the grant it needs.
    env.monitoring(Backend::Respond(200, "{}".into()));
    env.server.update_faults(|f| {
        f.denials
            .push(Denial::new("get", "services/proxy").in_namespace("monitoring"))
    });
    let out = env.run(&["--namespace", NS, "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("forbidden")
            && stderr.contains("grant get on services/proxy in monitoring"),
        "{stderr}"
    );
}

#[test]
fn bad_input_exits_2_before_any_request() {
    let env = Env::start();
    let token = env.path("token");
    std::fs::write(&token, "t").unwrap();
    let empty = env.path("empty");
    std::fs::write(&empty, "\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["verify", "--window", "5 minutes"], "--window"),
        (vec!["verify", "--window", "0s"], "--window"),
        (vec!["verify", "--timeout", "30"], "--wait"),
        (vec!["verify", "--wait", "--timeout", "0"], "--timeout"),
        (
            vec!["verify", "--prometheus", "ftp://prom.example"],
            "--prometheus",
        ),
        (
            vec!["verify", "--prometheus", "prometheus:9090"],
            "--prometheus",
        ),
        (
            vec!["verify", "--prometheus-token-file", &token],
            "--prometheus",
        ),
        (
            vec![
                "verify",
                "--prometheus",
                "https://p.example",
                "--prometheus-token-file",
                "/nonexistent/token",
            ],
            "--prometheus-token-file",
        ),
        (
            vec![
                "verify",
                "--prometheus",
                "https://p.example",
                "--prometheus-token-file",
                &empty,
            ],
            "--prometheus-token-file",
        ),
        (vec!["verify", "--run-id", "yesterday"], "--run-id"),
    ];
    for (args, names) in cases {
        env.server.clear_request_log();
        let out = env.run(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.contains(names), "{args:?} names {names}: {stderr}");
        assert!(
            env.server.request_log().is_empty(),
            "{args:?} sent requests"
        );
    }
}

#[test]
fn metrics_endpoint_follows_workloads_and_flattens_on_request() {
    // The fixture itself: counters grow with load, a flat VMI's do not.
    let env = Env::start();
    let out = env.run(&[
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (vm0, vm1) = (t(&env, "virtwork-cpu-0"), t(&env, "virtwork-cpu-1"));
    env.server.set_metrics_flat(NS, &vm1, true);
    let value = |body: &str, vm: &str| -> f64 {
        body.lines()
            .find(|l| {
                l.starts_with("kubevirt_vmi_vcpu_seconds_total{")
                    && l.contains(&format!("name=\"{vm}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no vcpu series for {vm}:\n{body}"))
    };
    let first = env.server.kubevirt_metrics();
    assert!(first.contains("# TYPE kubevirt_vmi_vcpu_seconds_total counter"));
    assert!(
        first.contains("kubernetes_vmi_label_app_kubernetes_io_component=\"cpu\""),
        "{first}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let second = env.server.kubevirt_metrics();
    assert!(value(&second, &vm0) > value(&first, &vm0));
    assert_eq!(value(&second, &vm1), value(&first, &vm1));
}

fn catalog_entry(dir: &Path, signals_yaml: &str) {
    let entry = dir.join("web");
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(
        entry.join("web.service"),
        "[Unit]\nDescription=web\n[Service]\nExecStart=/usr/bin/python3 -m http.server 8080\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    std::fs::write(
        entry.join("workload.yaml"),
        format!("description: web\nsignals:\n{signals_yaml}"),
    )
    .unwrap();
}

#[test]
fn catalog_signals_are_validated_recorded_and_verified() {
    let env = Env::start();
    let catalog = env.dir.path().join("catalog");
    // validate rejects a template whose placeholder is not a whole quoted value.
    catalog_entry(
        &catalog,
        "  - name: http-rx\n    query: 'rate(kubevirt_vmi_network_receive_bytes_total{namespace=~\"{{namespace}}.*\",name=\"{{name}}\"}[5m])'\n    threshold: 1\n",
    );
    let out = env.run(&["validate", "--catalog-dir", catalog.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL  web")
            && stdout.contains("signal \"http-rx\": query: placeholder {{namespace}}"),
        "{stdout}"
    );

    let query = "sum by (namespace, name) (rate(kubevirt_vmi_network_receive_bytes_total{namespace=\"{{namespace}}\",name=\"{{name}}\"}[{{window}}]))";
    catalog_entry(
        &catalog,
        &format!(
            "  - name: http-rx\n    query: '{query}'\n    threshold: 1024\n    description: requests reach the web server\n"
        ),
    );
    let out = env.run(&["validate", "--catalog-dir", catalog.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // run records the entry's signals on its VMs; verify renders them for each VM.
    let out = env.run(&[
        "--namespace",
        NS,
        "run",
        "--from-catalog",
        "web",
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let web = t(&env, "virtwork-web-0");
    let vm = env.server.get("virtualmachines", NS, &web).unwrap();
    let recorded: Value = serde_json::from_str(
        vm["metadata"]["annotations"]["virtwork/signals"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(recorded[0]["name"], "http-rx");
    env.monitoring(Backend::Respond(
        200,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2048"]}]}}"#.into(),
    ));
    let out = env.run(&[
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--window",
        "2m",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    let signal = &doc["vms"][0]["signals"][0];
    assert_eq!(signal["signal"], "http-rx");
    assert_eq!(signal["status"], "pass");
    assert_eq!(
        signal["query"],
        format!(
            "sum by (namespace, name) (rate(kubevirt_vmi_network_receive_bytes_total{{namespace=\"virtwork\",name=\"{web}\"}}[2m]))"
        )
    );
}
