//! `virtwork verify` end to end: the real binary against the fake API server, whose
//! service proxy serves KubeVirt's per-VMI metrics (counters growing with each VM's
//! workload, one VM's flat) and forwards to a REAL Prometheus scraping them every second.
//!
//! Tests that need Prometheus skip with a notice when it is not installed and fail instead
//! under `VIRTWORK_REQUIRE_PROMETHEUS=1` (CI). The others check bad input, discovery and
//! the request pattern without Prometheus.

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::names::tagged;
use support::prometheus::{Prometheus, ScrapeJob, tool};
use support::promstub::{Answer, ONE_SAMPLE, PromStub};
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

    /// A TLS API server whose kubeconfig trusts its CA plus `extra_ca_pem` (another
    /// server's CA, e.g. a route's).
    fn start_tls(extra_ca_pem: &str) -> Env {
        let server = FakeApiServer::start(Options {
            tls: true,
            token: Some(TOKEN.into()),
            namespaces: vec![NS.into(), "openshift-monitoring".into()],
            ..Default::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let bundle = format!("{}{extra_ca_pem}", server.ca_pem().unwrap());
        let kubeconfig =
            support::apiserver::tls::kubeconfig(server.url(), Some(&bundle), Some(TOKEN), None);
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).unwrap();
        Env { server, dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_audited(None, args)
    }

    /// [`Env::command`] recording into (and reading) the audit database `db`; None:
    /// `--no-audit`.
    fn command_audited(&self, db: Option<&Path>, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"));
        match db {
            Some(db) => cmd.arg("--audit-db").arg(db),
            None => cmd.arg("--no-audit"),
        };
        cmd.args(args)
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
    with_prometheus_rules(env, None)
}

/// [`with_prometheus`] evaluating the rule file `rules` too.
fn with_prometheus_rules(env: &Env, rules: Option<&str>) -> Option<Prometheus> {
    let binary = tool("prometheus")?;
    let address = env.server.url().trim_start_matches("http://").to_string();
    let prometheus = Prometheus::start_with_rules(
        &binary,
        &[ScrapeJob {
            name: "kubevirt".into(),
            address,
            path: METRICS_PATH.into(),
            bearer: Some(TOKEN.into()),
        }],
        rules,
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
        "45",
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
        lines[0].starts_with("VM") && lines[0].ends_with("RESULT"),
        "no query column unless asked for: {table}"
    );
    assert!(!table.contains("rate("), "{table}");
    let out = env.run(&[
        "--namespace",
        NS,
        "verify",
        "--window",
        "30s",
        "--show-queries",
    ]);
    let with_queries = text(&out.stdout);
    assert!(
        with_queries.lines().next().unwrap().ends_with("QUERY"),
        "{with_queries}"
    );
    assert!(
        with_queries.contains("rate(kubevirt_vmi_vcpu_seconds_total{"),
        "{with_queries}"
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
        "--prometheus-allow-http-token",
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
        "--prometheus-allow-http-token",
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
        "cpu,memory",
        "--vm-count",
        "5",
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    env.server.clear_request_log();
    let out = env.run(&["--namespace", NS, "verify", "--window", "1m"]);
    assert_eq!(out.status.code(), Some(1), "no data means missing");
    // Queries are grouped by namespace and signal, not sent per VM: one probe, then a value
    // and a facts query for each of the two signals, for all ten VMs.
    let queries = env
        .server
        .request_log()
        .iter()
        .filter(|r| r.path.contains("prometheus-k8s") && r.path.ends_with("/api/v1/query"))
        .count();
    assert_eq!(queries, 1 + 2 * 2, "{:#?}", env.server.request_log());
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
    // The namespace GET asks whether openshift-monitoring exists before the monitoring
    // fallback is tried (anyone may create a namespace named monitoring on OpenShift).
    let expected: Vec<(String, String, String)> = [
        ("get", "namespaces", ""),
        ("get", "routes", "openshift-monitoring"),
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
    // The skipped route is warned about, with why.
    assert!(
        stderr.contains("WARN")
            && stderr.contains("not using the cluster's monitoring route")
            && stderr.contains("not found"),
        "{stderr}"
    );
    env.server.update_faults(|f| f.denials.clear());

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
    // A `monitoring/prometheus-k8s` answering as a healthy Prometheus: on OpenShift anyone
    // allowed to create namespaces could have put it there, so it is not even asked.
    env.monitoring(Backend::Respond(200, ONE_SAMPLE.into()));
    let asked_before = env
        .server
        .request_log()
        .iter()
        .filter(|r| r.path.contains("/namespaces/monitoring/services/"))
        .count();
    let out = env.run(&["--namespace", NS, "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("thanos-querier:web: answered HTTP 401")
            && stderr.contains("--prometheus with its route URL"),
        "{stderr}"
    );
    assert!(
        stderr.contains("monitoring/http:prometheus-k8s:web: not tried, since the cluster has an openshift-monitoring namespace")
            && stderr.contains("pass --prometheus URL"),
        "{stderr}"
    );
    let asked_after = env
        .server
        .request_log()
        .iter()
        .filter(|r| r.path.contains("/namespaces/monitoring/services/"))
        .count();
    assert_eq!(asked_before, asked_after, "{stderr}");
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
        (vec!["verify", "--expect-alert", "9lives"], "--expect-alert"),
        (vec!["verify", "--forbid-alert", "a-b"], "--forbid-alert"),
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
    let loaded = value(&second, &vm0) - value(&first, &vm0);
    let idle = value(&second, &vm1) - value(&first, &vm1);
    assert!(loaded > 0.0 && idle >= 0.0, "{loaded} {idle}");
    assert!(idle < loaded / 10.0, "a flat VM idles: {idle} vs {loaded}");
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
    let annotations = &vm["metadata"]["annotations"];
    assert!(
        annotations["virtwork/signals-digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{annotations}"
    );
    assert!(
        annotations.get("virtwork/signals").is_none(),
        "no query is stored on the cluster: {annotations}"
    );
    env.monitoring(Backend::Respond(
        200,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2048"]}]}}"#.into(),
    ));
    let verify_json = |env: &Env| {
        env.run(&[
            "--namespace",
            NS,
            "--output",
            "json",
            "verify",
            "--window",
            "2m",
            "--catalog-dir",
            catalog.to_str().unwrap(),
        ])
    };
    let out = verify_json(&env);
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

    // Someone who may patch the VM plants a query and its digest: verify sends nothing of
    // it and reports the VM as unverifiable.
    let forged = r#"[{"name":"http-rx","query":"vector(1e9)","threshold":0}]"#;
    let mut patched = vm.clone();
    patched["metadata"]["annotations"]["virtwork/signals"] = json!(forged);
    patched["metadata"]["annotations"]["virtwork/signals-digest"] = json!("sha256:0000");
    env.server.insert(patched);
    env.server.clear_request_log();
    let out = verify_json(&env);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = json_doc(&out);
    assert_eq!(
        doc["vms"][0]["signals"][0]["status"], "unverifiable",
        "{doc:#}"
    );
    assert!(
        text(&out.stderr).contains("declares other signals than the run recorded"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        env.server
            .request_log()
            .iter()
            .all(|r| !r.query.contains("1e9") && !r.path.contains("1e9")),
        "the planted query was sent"
    );

    // Without the local entry the VM cannot be judged either, and says so.
    env.server.insert(vm.clone());
    std::fs::remove_dir_all(catalog.join("web")).unwrap();
    let out = verify_json(&env);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("local catalog entry \"web\""),
        "{}",
        text(&out.stderr)
    );
}

/// Runs `cmd`, killing it after `limit` (a hang guard: a command that hangs or grows without
/// bound fails the test instead of the machine).
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stderr:\n{}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn run_cpu_vm(env: &Env) {
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
}

#[test]
fn an_endless_prometheus_answer_fails_at_the_cap_naming_the_server() {
    let env = Env::start();
    run_cpu_vm(&env);
    let stub = PromStub::start(Answer::Endless, false);
    let cmd = env.command(&["--namespace", NS, "verify", "--prometheus", stub.url()]);
    let out = run_bounded(cmd, Duration::from_secs(60));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("Error: ")).unwrap();
    assert!(
        error.contains("larger than 16 MiB") && error.contains(stub.url()),
        "{error}"
    );
    // The signal's value and series facts are asked at once, so two queries may go out;
    // none of them is sent again after its answer went past the cap.
    let requests = stub.requests();
    let mut queries: Vec<&str> = requests.iter().map(|r| r.path_and_query.as_str()).collect();
    queries.sort_unstable();
    queries.dedup();
    assert!(
        !requests.is_empty() && queries.len() == requests.len(),
        "an oversized answer is not retried: {requests:#?}"
    );
}

#[test]
fn a_prometheus_url_gets_only_the_token_the_flags_name_and_never_over_http_by_default() {
    let env = Env::start();
    run_cpu_vm(&env);
    let stub = PromStub::start(Answer::Json(ONE_SAMPLE.into()), false);
    let url = stub.url().to_string();
    std::fs::write(env.path("token"), "file-token-abc\n").unwrap();
    let token_file = env.path("token");
    let verify = |extra: &[&str]| {
        let mut args = vec!["--namespace", NS, "verify", "--prometheus", &url];
        args.extend_from_slice(extra);
        env.run(&args)
    };

    // No flag: no token at all (the kubeconfig's token stays with the API server).
    let out = verify(&[]);
    assert!(!stub.requests().is_empty(), "{}", text(&out.stderr));
    assert_eq!(stub.authorizations(), vec![None]);

    // A token over plain http is refused before any request, whichever token it is.
    for flag in [
        vec!["--prometheus-token-file", token_file.as_str()],
        vec!["--prometheus-use-cluster-token"],
    ] {
        let before = stub.requests().len();
        let out = verify(&flag);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(
            stderr.contains(flag[0])
                && stderr.contains("plain http")
                && stderr.contains("--prometheus-allow-http-token"),
            "{stderr}"
        );
        assert_eq!(stub.requests().len(), before, "{flag:?} sent a request");
    }

    // Allowed explicitly: exactly the token asked for.
    let mut seen = Vec::new();
    for (flag, expected) in [
        (
            vec!["--prometheus-token-file", token_file.as_str()],
            "Bearer file-token-abc".to_string(),
        ),
        (
            vec!["--prometheus-use-cluster-token"],
            format!("Bearer {TOKEN}"),
        ),
    ] {
        let before = stub.requests().len();
        let mut args = flag.clone();
        args.push("--prometheus-allow-http-token");
        let out = verify(&args);
        let new: Vec<Option<String>> = stub.requests()[before..]
            .iter()
            .map(|r| r.authorization.clone())
            .collect();
        assert!(!new.is_empty(), "{flag:?}: {}", text(&out.stderr));
        assert!(
            new.iter().all(|a| a.as_deref() == Some(expected.as_str())),
            "{flag:?}: {new:?}"
        );
        seen.push(expected);
    }
    assert_eq!(seen.len(), 2);
}

#[test]
fn a_prometheus_refusing_the_at_modifier_gets_the_plain_subquery_for_the_oldest_samples() {
    let env = Env::start();
    run_cpu_vm(&env);
    let vm = t(&env, "virtwork-cpu-0");
    let sample = |fact: &str, value: &str| {
        format!(r#"{{"metric":{{"virtwork_fact":"{fact}"}},"value":[1000,"{value}"]}}"#)
    };
    let vector = |samples: Vec<String>| {
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            samples.join(",")
        )
    };
    // Ten seconds of 1 s scrapes, busy: 0.1 over the 60 s window is 0.6 over its 10 s, so
    // the series' youth explains the shortfall, which is known only with its oldest sample.
    let facts = vector(vec![
        sample(&format!("age|{vm}"), "0.5"),
        sample(&format!("samples|{vm}"), "11"),
        sample(&format!("first|{vm}"), "990"),
        sample("now|", "1000"),
    ]);
    let stub = PromStub::start(
        Answer::ByQuery {
            rules: vec![
                (
                    " @ ".into(),
                    r#"{"status":"error","errorType":"bad_data","error":"@ modifier is disabled"}"#
                        .into(),
                ),
                ("virtwork_part".into(), facts),
                ("timestamp(".into(), vector(vec![sample(&vm, "990")])),
                ("label_join(".into(), vector(vec![sample(&vm, "0.1")])),
            ],
            otherwise: ONE_SAMPLE.into(),
        },
        false,
    );
    let (_, doc, stderr) = verify_json(&env, "60s", &["--prometheus", stub.url()]);
    let (status, note) = signal_of(&doc, &vm, "vcpu-busy");
    assert_eq!(status, "too_young", "{stderr}\n{doc:#}");
    assert!(note.contains("its series began 10s ago"), "{note}");
    let queries: Vec<String> = stub
        .requests()
        .iter()
        .map(|r| support::promstub::percent_decoded(&r.path_and_query))
        .collect();
    let refused = queries.iter().position(|q| q.contains(" @ "));
    let fallback = queries
        .iter()
        .position(|q| q.contains("min_over_time(timestamp(") && !q.contains(" @ "));
    assert!(
        matches!((refused, fallback), (Some(r), Some(f)) if r < f),
        "{queries:#?}"
    );
}

#[test]
fn url_userinfo_is_refused_and_never_shown() {
    let env = Env::start();
    let stub = PromStub::start(Answer::Json(ONE_SAMPLE.into()), false);
    let url = stub.url().replace("http://", "http://alice:s3cret@");
    let out = env.run(&[
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--prometheus",
        &url,
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(stub.url()) && stderr.contains("--prometheus-token-file"),
        "{stderr}"
    );
    let everything = format!("{stderr}{}", text(&out.stdout));
    assert!(
        !everything.contains("s3cret") && !everything.contains("alice"),
        "{everything}"
    );
    assert!(stub.requests().is_empty());
    assert!(env.server.request_log().is_empty());
}

#[test]
fn token_files_must_be_small_regular_files_and_are_checked_like_ssh_keys() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::start();
    let fifo = env.path("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::write(env.path("bell"), "tok\x07en\n").unwrap();
    std::fs::write(env.path("huge"), vec![b'a'; 65 * 1024]).unwrap();
    for (file, reason) in [
        (fifo.as_str(), "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (&env.path("bell"), "control or non-ASCII character"),
        (&env.path("huge"), "larger than 64 KiB"),
    ] {
        let cmd = env.command(&[
            "verify",
            "--prometheus",
            "https://prometheus.example",
            "--prometheus-token-file",
            file,
        ]);
        let out = run_bounded(cmd, Duration::from_secs(20));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(
            stderr.contains("--prometheus-token-file") && stderr.contains(reason),
            "{file}: {stderr}"
        );
        assert!(!stderr.contains("tok\x07en"), "{stderr}");
    }
    assert!(env.server.request_log().is_empty());

    // A token others can read is used, with a warning saying how to fix it.
    let stub = PromStub::start(Answer::Json(ONE_SAMPLE.into()), true);
    let token = env.path("open-token");
    std::fs::write(&token, "t0ken\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = env.run(&[
        "--namespace",
        NS,
        "verify",
        "--prometheus",
        stub.url(),
        "--prometheus-token-file",
        &token,
    ]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("readable by group or others (mode 0644)") && stderr.contains("chmod 600"),
        "{stderr}"
    );
}

fn thanos_route(host: &str) -> Value {
    json!({
        "apiVersion": "route.openshift.io/v1", "kind": "Route",
        "metadata": {"name": "thanos-querier", "namespace": "openshift-monitoring"},
        "spec": {
            "host": host,
            "port": {"targetPort": "web"},
            "tls": {"termination": "reencrypt", "insecureEdgeTerminationPolicy": "Redirect"},
            "to": {"kind": "Service", "name": "thanos-querier", "weight": 100},
        },
    })
}

#[test]
fn openshift_monitoring_route_is_used_with_the_users_token_over_verified_https() {
    let route = PromStub::start(Answer::Json(ONE_SAMPLE.into()), true);
    let env = Env::start_tls(route.ca_pem().unwrap());
    // As on OpenShift: thanos-querier's auth proxy refuses the service proxy (no token).
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
    env.server.insert(thanos_route(route.host()));
    run_cpu_vm(&env);

    let out = env.run(&["--namespace", NS, "--output", "json", "verify"]);
    let stderr = text(&out.stderr);
    let doc = json_doc(&out);
    assert_eq!(doc["prometheus_via"], "route", "{stderr}");
    let described = doc["prometheus"].as_str().unwrap();
    assert!(
        described.contains("openshift-monitoring/thanos-querier")
            && described.contains(route.url()),
        "{described}"
    );
    assert!(stderr.contains(r#"via="route""#), "{stderr}");
    assert_eq!(
        route.authorizations(),
        vec![Some(format!("Bearer {TOKEN}"))]
    );
    let queried = route.requests();
    assert!(
        queried
            .iter()
            .any(|r| r.path_and_query.starts_with("/api/v1/query?query="))
    );
    // The text report says it too.
    let out = env.run(&["--namespace", NS, "verify"]);
    let table = text(&out.stdout);
    assert!(
        table.contains(&format!(
            "route openshift-monitoring/thanos-querier {}",
            route.url()
        )),
        "{table}"
    );

    // A route whose certificate the kubeconfig's CA and the system do not vouch for gets
    // no request at all (the handshake fails before any header is sent).
    let impostor = PromStub::start(Answer::Json(ONE_SAMPLE.into()), true);
    env.server.insert(thanos_route(impostor.host()));
    let out = env.run(&["--namespace", NS, "verify"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(impostor.requests().is_empty(), "{:?}", impostor.requests());
    assert!(
        stderr.contains("route openshift-monitoring/thanos-querier:")
            && stderr.contains("invalid peer certificate")
            && stderr.contains("thanos-querier:web: answered HTTP 401"),
        "{stderr}"
    );
}

#[test]
fn without_a_monitoring_route_verify_falls_back_to_the_service_proxy_and_says_so() {
    let env = Env::start();
    env.monitoring(Backend::Respond(200, ONE_SAMPLE.into()));
    run_cpu_vm(&env);
    let out = env.run(&["--namespace", NS, "--output", "json", "verify"]);
    let doc = json_doc(&out);
    assert_eq!(
        doc["prometheus_via"],
        "service-proxy",
        "{}",
        text(&out.stderr)
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains(r#"via="service-proxy""#), "{stderr}");

    // A route that is not served over TLS is never used (the token would go in clear).
    env.server.insert(json!({
        "apiVersion": "route.openshift.io/v1", "kind": "Route",
        "metadata": {"name": "thanos-querier", "namespace": "openshift-monitoring"},
        "spec": {"host": "127.0.0.1:9", "to": {"kind": "Service", "name": "thanos-querier"}},
    }));
    let out = env.run(&["--namespace", NS, "--output", "json", "verify"]);
    assert_eq!(json_doc(&out)["prometheus_via"], "service-proxy");

    // Nor is one the user may not read: the denial is a finding, not the end.
    env.server.insert(thanos_route("127.0.0.1:9"));
    env.server.update_faults(|f| {
        f.denials
            .push(Denial::new("get", "routes").in_namespace("openshift-monitoring"))
    });
    let out = env.run(&["--namespace", NS, "--output", "json", "verify"]);
    assert_eq!(json_doc(&out)["prometheus_via"], "service-proxy");
    assert!(
        env.server
            .request_log()
            .iter()
            .any(|r| r.resource == "routes" && r.status == 403)
    );
}

#[test]
fn a_prometheus_url_is_reached_through_the_proxy_kubectl_would_use() {
    let env = Env::start();
    run_cpu_vm(&env);
    let stub = PromStub::start(Answer::Json(ONE_SAMPLE.into()), false);
    let proxy = support::proxy::CountingProxy::start(stub.host().parse().unwrap());
    // A name only the proxy "resolves"; the API server (loopback) is never proxied.
    let mut cmd = env.command(&[
        "--namespace",
        NS,
        "verify",
        "--prometheus",
        "http://prometheus.invalid:9090",
    ]);
    cmd.env("HTTP_PROXY", proxy.url());
    let out = cmd.output().unwrap();
    let stderr = text(&out.stderr);
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.target.contains("prometheus.invalid:9090")),
        "{stderr}"
    );
    assert!(!stub.requests().is_empty(), "{stderr}");
    assert!(stderr.contains("via proxy http://127.0.0.1:"), "{stderr}");
}

/// `virtwork run` of `workloads` (one VM each unless `--vm-count` is in `extra`).
/// A fleet of N cpu VMs (`run --vm-count N` plus `extra`; N is the number of names asked
/// for) scraped by a real Prometheus: the environment, the Prometheus and the VMs' names in
/// order. None without a Prometheus binary (the test then has nothing to check against).
fn cpu_fleet<const N: usize>(extra: &[&str]) -> Option<(Env, Prometheus, [String; N])> {
    let env = Env::start();
    let prometheus = with_prometheus(&env)?;
    let count = N.to_string();
    let mut args = vec!["--vm-count", count.as_str()];
    args.extend_from_slice(extra);
    run(&env, "cpu", &args);
    let names = std::array::from_fn(|i| t(&env, &format!("virtwork-cpu-{i}")));
    Some((env, prometheus, names))
}

fn run(env: &Env, workloads: &str, extra: &[&str]) {
    let mut args = vec![
        "--namespace",
        NS,
        "run",
        "--workloads",
        workloads,
        "--timeout",
        "60",
    ];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "run failed:\n{}",
        text(&out.stderr)
    );
}

/// `verify --output json --window <window>` plus `extra`: (exit code, document, stderr).
fn verify_json(env: &Env, window: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let mut args = vec![
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--window",
        window,
    ];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    (out.status.code(), json_doc(&out), text(&out.stderr))
}

/// The status and note of one signal of one VM in a verify document.
fn signal_of(doc: &Value, vm: &str, signal: &str) -> (String, String) {
    let vm_doc = doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == vm)
        .unwrap_or_else(|| panic!("VM {vm} not in {doc:#}"));
    let s = vm_doc["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["signal"] == signal)
        .unwrap_or_else(|| panic!("signal {signal} not in {vm_doc:#}"));
    (
        s["status"].as_str().unwrap().to_string(),
        s["note"].as_str().unwrap_or("").to_string(),
    )
}

/// Waits until Prometheus holds at least `samples` vCPU samples of VM `vm` (hang guard).
/// Merge-patches one annotation of VM `name` over HTTP, as `kubectl annotate` by anyone
/// allowed to patch VMs would.
fn annotate_vm(env: &Env, name: &str, key: &str, value: &str) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
            "virtualmachines",
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(env.server.client().await, NS, &resource);
        let patch = json!({"metadata": {"annotations": {key: value}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the VM is patched");
    });
}

/// A VM's annotation `key` as the fake API server holds it.
fn vm_annotation(env: &Env, name: &str, key: &str) -> String {
    env.server
        .objects("virtualmachines", Some(NS))
        .iter()
        .find(|vm| vm["metadata"]["name"] == name)
        .and_then(|vm| {
            vm["metadata"]["annotations"][key]
                .as_str()
                .map(String::from)
        })
        .unwrap_or_else(|| panic!("VM {name} has no annotation {key}"))
}

/// Lines of `stderr` at WARN level that contain `needle`.
fn warn_lines<'a>(stderr: &'a str, needle: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(needle))
        .collect()
}

#[test]
fn a_patched_params_annotation_cannot_turn_a_below_into_a_pass() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    let db = env.dir.path().join("audit.db");
    let args = [
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--timeout",
        "60",
    ];
    let out = env.command_audited(Some(&db), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (idle, healthy) = (t(&env, "virtwork-cpu-0"), t(&env, "virtwork-cpu-1"));
    let annotation = "virtwork/signal-params";
    let planned = vm_annotation(&env, &idle, annotation);
    // The run recorded exactly what it put on the VMs.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let recorded: String = conn
        .query_row(
            "SELECT signal_params FROM workload_details WHERE workload_type = 'cpu'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(recorded, planned);
    assert!(
        planned.contains("\"cpu-load-percent\":\"100\""),
        "{planned}"
    );

    // The VM's load stopped (vCPU at idle, about 0.02); someone who may patch VMs lowers its
    // threshold from 0.5 to 0.005 so that it would pass.
    env.server.set_metrics_flat(NS, &idle, true);
    annotate_vm(&env, &idle, annotation, r#"{"cpu-load-percent":"1"}"#);
    wait_for_samples(&prometheus, &idle, 12);

    let verify = |db: &Path| {
        let args = [
            "--namespace",
            NS,
            "--output",
            "json",
            "verify",
            "--window",
            "10s",
        ];
        let out = env.command_audited(Some(db), &args).output().unwrap();
        (out.status.code(), json_doc(&out), text(&out.stderr))
    };
    let source = |doc: &Value, vm: &str| {
        doc["vms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == vm)
            .unwrap()["params_source"]
            .clone()
    };
    let (code, doc, stderr) = verify(&db);
    assert_eq!(code, Some(1), "{stderr}\n{doc:#}");
    assert_eq!(signal_of(&doc, &idle, "vcpu-busy").0, "below", "{doc:#}");
    assert_eq!(signal_of(&doc, &healthy, "vcpu-busy").0, "pass", "{doc:#}");
    let threshold = doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == idle.as_str())
        .unwrap()["signals"][0]["threshold"]
        .as_f64();
    assert_eq!(
        threshold,
        Some(0.5),
        "judged by the recorded cpu-load-percent 100"
    );
    assert_eq!(
        (source(&doc, &idle), source(&doc, &healthy)),
        (json!("audit-db"), json!("audit-db"))
    );
    let warned = warn_lines(&stderr, "differ");
    assert_eq!(
        warned.len(),
        1,
        "one WARN line, for the patched VM only:\n{stderr}"
    );
    assert!(
        warned[0].contains(&format!("VM {NS}/{idle}"))
            && warned[0].contains(r#"{"cpu-load-percent":"1"}"#)
            && warned[0].contains(&format!("(recorded {planned})"))
            && warned[0].contains("judged by the recorded"),
        "{}",
        warned[0]
    );

    // On another machine (no database at the path) the annotation is all there is: the
    // patched VM passes, which verify says once for the whole fleet.
    let elsewhere = env.dir.path().join("elsewhere.db");
    let (code, doc, stderr) = verify(&elsewhere);
    assert_eq!(code, Some(0), "{stderr}\n{doc:#}");
    assert_eq!(signal_of(&doc, &idle, "vcpu-busy").0, "pass", "{doc:#}");
    assert_eq!(
        (source(&doc, &idle), source(&doc, &healthy)),
        (json!("annotation"), json!("annotation"))
    );
    let fallback = warn_lines(&stderr, "judged by their virtwork/signal-params annotation");
    assert_eq!(fallback.len(), 1, "said once, not per VM:\n{stderr}");
    assert!(
        fallback[0].contains("2 VM(s)") && fallback[0].contains("there is no audit database at"),
        "{}",
        fallback[0]
    );
    assert!(!elsewhere.exists(), "verify never creates a database");
}

/// Merge-patches VM `name` with `patch` over HTTP, as `kubectl patch` by anyone allowed to
/// patch VMs would.
fn patch_vm(env: &Env, name: &str, patch: Value) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
            "virtualmachines",
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(env.server.client().await, NS, &resource);
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the VM is patched");
    });
}

#[test]
fn a_vm_relabelled_or_deleted_out_of_its_recorded_run_fails_verify_run_id() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    let db = env.dir.path().join("audit.db");
    let args = [
        "--namespace",
        NS,
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "4",
        "--timeout",
        "60",
    ];
    let out = env.command_audited(Some(&db), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id =
        env.server.objects("virtualmachines", Some(NS))[0]["metadata"]["labels"]["virtwork/run-id"]
            .as_str()
            .unwrap()
            .to_string();
    let [kept, moved, stripped, deleted] =
        std::array::from_fn(|i| t(&env, &format!("virtwork-cpu-{i}")));
    // A VM editor moves one VM into another run and strips another's run label; a third VM
    // is deleted. None of them is in `--run-id`'s scope any more.
    let other = "0badc0de-0000-4000-8000-000000000000";
    patch_vm(
        &env,
        &moved,
        json!({"metadata": {"labels": {"virtwork/run-id": other}}}),
    );
    patch_vm(
        &env,
        &stripped,
        json!({"metadata": {"labels": {"virtwork/run-id": null}}}),
    );
    env.server.remove("virtualmachines", NS, &deleted);
    wait_for_samples(&prometheus, &kept, 12);

    let verify = |output: &str| {
        let args = [
            "--namespace",
            NS,
            "--output",
            output,
            "verify",
            "--window",
            "10s",
            "--run-id",
            &run_id,
        ];
        env.command_audited(Some(&db), &args).output().unwrap()
    };
    let out = verify("json");
    let (doc, stderr) = (json_doc(&out), text(&out.stderr));
    // The one VM left in scope passes; the run still fails, naming what became of the rest.
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{doc:#}");
    assert_eq!(signal_of(&doc, &kept, "vcpu-busy").0, "pass", "{doc:#}");
    assert_eq!(doc["passed"], json!(false));
    let absent = doc["absent"].as_array().unwrap();
    let reason = |vm: &str| {
        absent
            .iter()
            .find(|a| a["name"] == vm)
            .unwrap_or_else(|| panic!("{vm} not in absent: {doc:#}"))
            .clone()
    };
    assert_eq!(absent.len(), 3, "{doc:#}");
    assert_eq!(reason(&moved)["reason"], "relabelled");
    assert_eq!(reason(&moved)["run_id_label"], other);
    assert!(
        reason(&moved)["note"]
            .as_str()
            .unwrap()
            .contains(&format!("changed to {other}"))
    );
    assert_eq!(reason(&stripped)["reason"], "relabelled");
    assert!(
        reason(&stripped)["note"]
            .as_str()
            .unwrap()
            .contains("was removed")
    );
    assert_eq!(reason(&deleted)["reason"], "deleted");
    assert_eq!(reason(&deleted)["namespace"], NS);
    assert!(
        stderr.contains(&format!("3 VM(s) run {run_id} recorded are not in scope")),
        "{stderr}"
    );
    // The text report lists each, and fails alike.
    let out = verify("text");
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            "VMs run {run_id} recorded that are not in scope (3"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "  {NS}/{deleted}: deleted: no VM {deleted} in namespace {NS}"
        )),
        "{report}"
    );
    // Without the run's record there is nothing to compare against: the VM in scope passes.
    let elsewhere = env.dir.path().join("elsewhere.db");
    let args = [
        "--namespace",
        NS,
        "verify",
        "--window",
        "10s",
        "--run-id",
        &run_id,
    ];
    let out = env
        .command_audited(Some(&elsewhere), &args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

fn wait_for_samples(prometheus: &Prometheus, vm: &str, samples: usize) {
    let promql = format!(
        "count_over_time(kubevirt_vmi_vcpu_seconds_total{{name=\"{vm}\",id=\"0\"}}[5m]) >= {samples}"
    );
    assert!(
        prometheus.wait_for_series(&promql, 1, Duration::from_secs(120)),
        "Prometheus never held {samples} samples of {vm}:\n{}",
        prometheus.log()
    );
}

#[test]
fn a_fresh_healthy_vm_is_too_young_then_passes() {
    let Some((env, prometheus, [vm, broken])) = cpu_fleet(&[]) else {
        return;
    };
    env.server.set_metrics_flat(NS, &broken, true);
    wait_for_samples(&prometheus, &vm, 2);
    // Seconds old, the series cannot fill a minute: a rate over it reads low, which is
    // youth, not a missing load.
    let (code, doc, stderr) = verify_json(&env, "1m", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let (status, note) = signal_of(&doc, &vm, "vcpu-busy");
    assert_eq!(status, "too_young", "{doc:#}");
    assert!(
        note.contains("the VM is only") && note.contains("inside the 1m window"),
        "{note}"
    );
    // Just as young, an idle VM is idle over its own seconds too: waiting cannot help it.
    assert_eq!(signal_of(&doc, &broken, "vcpu-busy").0, "below", "{doc:#}");
    // Once the window is full, --wait sees it pass.
    env.server.set_metrics_flat(NS, &broken, false);
    let (code, doc, stderr) = verify_json(&env, "1m", &["--wait", "--timeout", "150"]);
    assert_eq!(code, Some(0), "{stderr}\n{doc:#}");
    assert_eq!(signal_of(&doc, &vm, "vcpu-busy").0, "pass");
}

/// Makes VMI `name` look created `secs_ago` seconds ago, as a VM that has run that long
/// would: the VMI is taken out and put back with the older creationTimestamp (its uid,
/// status and so its metrics counters kept). The fake VM controller may recreate the VMI in
/// between; then this tries again.
fn age_vmi(env: &Env, name: &str, secs_ago: i64) {
    let created = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(secs_ago))
        .round(jiff::Unit::Second)
        .unwrap()
        .to_string();
    for _ in 0..20 {
        let mut vmi = env
            .server
            .get("virtualmachineinstances", NS, name)
            .expect("the VMI exists");
        vmi["metadata"]["creationTimestamp"] = json!(created);
        env.server.remove("virtualmachineinstances", NS, name);
        env.server.insert(vmi);
        let now = env.server.get("virtualmachineinstances", NS, name).unwrap();
        if now["metadata"]["creationTimestamp"] == json!(created) {
            return;
        }
    }
    panic!("VMI {name} could not be aged");
}

#[test]
fn a_level_is_too_young_only_while_the_vm_is() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    run(&env, "memory", &[]);
    let vm = t(&env, "virtwork-memory-0");
    // Stuck at the idle 12 % of its memory, far below what its payload fills.
    env.server.set_metrics_flat(NS, &vm, true);
    // The 10m window's subquery steps every 10 s here: a series a few seconds old may hold no
    // step yet (no data); 15 samples put one inside it, so the aged VM's level is read.
    wait_for_samples(&prometheus, &vm, 15);
    // Seconds old, within the time a guest may take to boot: youth may explain it.
    let (code, doc, stderr) = verify_json(&env, "10m", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let (status, note) = signal_of(&doc, &vm, "memory-used");
    assert_eq!(status, "too_young", "{doc:#}");
    assert!(
        note.contains("the VM is only") && note.contains("300s"),
        "{note}"
    );
    // Eight minutes old (its series still began inside the window, as after a scrape gap):
    // past the time a level may take to start, the shortfall is the VM's, with its real age.
    age_vmi(&env, &vm, 480);
    let (code, doc, stderr) = verify_json(&env, "10m", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let (status, note) = signal_of(&doc, &vm, "memory-used");
    assert_eq!(status, "below", "{doc:#}");
    assert!(note.contains("s old, past the 300s"), "{note}");
    let age: f64 = note
        .split("the VM is ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no age in {note}"));
    assert!(
        (480.0..560.0).contains(&age),
        "the VMI's age, not the series': {note}"
    );
    assert!(
        stderr.contains(&format!("virtwork/{vm} signal memory-used (observed 12.0%")),
        "{stderr}"
    );
}

#[test]
fn a_vm_whose_series_stop_is_stale_not_passed() {
    let Some((env, prometheus, [vm0, vm1])) = cpu_fleet(&[]) else {
        return;
    };
    wait_for_samples(&prometheus, &vm1, 15);
    env.server.set_metrics_hidden(NS, &vm1, true);
    assert!(prometheus.wait_for_none(
        &format!("kubevirt_vmi_vcpu_seconds_total{{name=\"{vm1}\"}}"),
        Duration::from_secs(30)
    ));
    // Its last 10 s of samples still hold a high rate: only the freshness check fails it.
    let (code, doc, stderr) = verify_json(&env, "10s", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let (status, note) = signal_of(&doc, &vm1, "vcpu-busy");
    assert_eq!(status, "stale", "{doc:#}");
    assert!(note.contains("stale"), "{note}");
    assert_eq!(signal_of(&doc, &vm0, "vcpu-busy").0, "pass");
    assert!(
        stderr.contains(&format!("virtwork/{vm1} signal vcpu-busy (stale")),
        "{stderr}"
    );
}

#[test]
fn a_stopped_vm_fails_as_not_running() {
    let Some((env, prometheus, [vm0, vm1])) = cpu_fleet(&[]) else {
        return;
    };
    wait_for_samples(&prometheus, &vm1, 12);
    let mut vm = env.server.get("virtualmachines", NS, &vm1).unwrap();
    vm["spec"]["runStrategy"] = json!("Halted");
    if let Some(spec) = vm["spec"].as_object_mut() {
        spec.remove("running");
    }
    env.server.insert(vm);
    assert!(env.server.wait_until(Duration::from_secs(30), |s| {
        s.get("virtualmachineinstances", NS, &vm1).is_none()
    }));
    let out = env.run(&["--namespace", NS, "verify", "--window", "10s"]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}\n{table}", text(&out.stderr));
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("virtwork/{vm1} ")))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("NOT RUNNING"), "{table}");
    assert!(
        table.contains("not running: it has no VMI (stopped)"),
        "{table}"
    );
    let (_, doc, _) = verify_json(&env, "10s", &[]);
    assert_eq!(signal_of(&doc, &vm1, "vcpu-busy").0, "not_running");
    assert_eq!(signal_of(&doc, &vm0, "vcpu-busy").0, "pass");
}

#[test]
fn a_relabelled_namespace_is_named_when_its_data_is_missing() {
    let env = Env::start();
    env.server.set_namespace_relabelled(true);
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    run(&env, "cpu", &[]);
    assert!(prometheus.wait_for_series(
        "count_over_time(kubevirt_vmi_vcpu_seconds_total{exported_namespace=\"virtwork\"}[5m]) >= 3",
        1,
        Duration::from_secs(60)
    ));
    let (code, doc, stderr) = verify_json(&env, "10s", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let (status, note) = signal_of(&doc, &t(&env, "virtwork-cpu-0"), "vcpu-busy");
    assert_eq!(status, "no_data", "{doc:#}");
    assert!(
        note.contains("exported_namespace") && note.contains("honorLabels"),
        "{note}"
    );
}

/// The `counter_unit` and observed value of VM `vm`'s vcpu-busy in a verify document.
fn vcpu_unit_of(doc: &Value, vm: &str) -> (String, f64) {
    let s = doc["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == vm)
        .and_then(|v| v["signals"].as_array())
        .and_then(|s| s.iter().find(|s| s["signal"] == "vcpu-busy"))
        .unwrap_or_else(|| panic!("{vm} vcpu-busy not in {doc:#}"));
    (
        s["counter_unit"].as_str().unwrap_or("-").to_string(),
        s["observed"].as_f64().unwrap_or(f64::NAN),
    )
}

#[test]
fn the_vcpu_counter_unit_is_decided_per_vm() {
    let Some((env, prometheus, [ms, seconds, ms_idle])) = cpu_fleet(&[]) else {
        return;
    };
    // A virt-handler rollout: two VMs' nodes still count milliseconds, one already seconds.
    env.server.set_vcpu_millis_for(NS, &ms);
    env.server.set_vcpu_millis_for(NS, &ms_idle);
    // The idle one runs at 2% of a vCPU: 20 "seconds" per second on its counter.
    env.server.set_metrics_flat(NS, &ms_idle, true);
    wait_for_samples(&prometheus, &ms_idle, 15);
    let (code, doc, stderr) = verify_json(&env, "10s", &[]);
    assert_eq!(code, Some(1), "{stderr}\n{doc:#}");
    let idle = signal_of(&doc, &ms_idle, "vcpu-busy");
    assert_eq!(idle.0, "below", "{doc:#}");
    assert!(idle.1.contains("milliseconds"), "{}", idle.1);
    // The VM in seconds keeps its value: the milliseconds of its neighbours are theirs.
    assert_eq!(signal_of(&doc, &seconds, "vcpu-busy").0, "pass", "{doc:#}");
    assert_eq!(signal_of(&doc, &ms, "vcpu-busy").0, "pass", "{doc:#}");
    let (unit, observed) = vcpu_unit_of(&doc, &seconds);
    assert_eq!(unit, "seconds", "{doc:#}");
    assert!(observed > 0.5 && observed <= 1.2, "{observed}");
    let (unit, observed) = vcpu_unit_of(&doc, &ms);
    assert_eq!(unit, "milliseconds", "{doc:#}");
    assert!(
        observed > 0.5 && observed <= 1.2,
        "in seconds per second: {observed}"
    );
    assert_eq!(vcpu_unit_of(&doc, &ms_idle).0, "milliseconds");
    assert!(
        !signal_of(&doc, &seconds, "vcpu-busy")
            .1
            .contains("milliseconds"),
        "{doc:#}"
    );
}

#[test]
fn a_series_that_died_early_neither_refuses_the_window_nor_fails_its_neighbours() {
    let Some((env, prometheus, [healthy, died])) = cpu_fleet(&[]) else {
        return;
    };
    wait_for_samples(&prometheus, &died, 3);
    env.server.set_metrics_hidden(NS, &died, true);
    wait_for_samples(&prometheus, &healthy, 25);
    // The dead series' few samples spread over its 20-odd seconds must not read as a scrape
    // every 10 s: the 4 s window is accepted (Prometheus scrapes every second).
    let (code, doc, stderr) = verify_json(&env, "4s", &[]);
    assert_eq!(code, Some(1), "{stderr}\n{doc:#}");
    assert_eq!(signal_of(&doc, &healthy, "vcpu-busy").0, "pass", "{doc:#}");
    assert_eq!(signal_of(&doc, &died, "vcpu-busy").0, "stale", "{doc:#}");
}

/// [`with_prometheus`] with the rule evaluation interval (the default subquery step) at
/// `evaluation_secs`, scraping every second.
fn with_prometheus_evaluating_every(env: &Env, evaluation_secs: u64) -> Option<Prometheus> {
    let binary = tool("prometheus")?;
    let address = env.server.url().trim_start_matches("http://").to_string();
    let prometheus = Prometheus::start_with_evaluation(
        &binary,
        &[ScrapeJob {
            name: "kubevirt".into(),
            address,
            path: METRICS_PATH.into(),
            bearer: Some(TOKEN.into()),
        }],
        None,
        evaluation_secs,
    );
    env.monitoring(Backend::Upstream(prometheus.url.clone()));
    Some(prometheus)
}

#[test]
fn subqueries_step_at_the_scrape_interval_not_the_evaluation_interval() {
    let env = Env::start();
    // kube-prometheus and OpenShift evaluate every 30 s: a subquery without a step would
    // hold no step at all in a 5 s window.
    let Some(prometheus) = with_prometheus_evaluating_every(&env, 30) else {
        return;
    };
    run(
        &env,
        "memory,chaos-disk",
        &["--params", "chaos-disk.release-sleep=5"],
    );
    let (memory, disk) = (
        t(&env, "virtwork-memory-0"),
        t(&env, "virtwork-chaos-disk-0"),
    );
    wait_for_samples(&prometheus, &disk, 45);
    for _ in 0..3 {
        let (code, doc, stderr) = verify_json(&env, "5s", &[]);
        let (status, _) = signal_of(&doc, &memory, "memory-used");
        assert_eq!(status, "pass", "{stderr}\n{doc:#}");
        let query = doc["vms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == memory)
            .and_then(|v| v["signals"].as_array())
            .and_then(|s| s.iter().find(|s| s["signal"] == "memory-used"))
            .and_then(|s| s["query"].as_str())
            .unwrap_or_else(|| panic!("{doc:#}"))
            .to_string();
        // Stepped at the measured 1 s scrape interval (jitter may read it a little under or
        // over), never at the 30 s evaluation interval nor without a step.
        let step_ms: u64 = query
            .split_once("[5s:")
            .and_then(|(_, rest)| rest.split_once("ms]"))
            .and_then(|(ms, _)| ms.parse().ok())
            .unwrap_or_else(|| panic!("no [5s:<n>ms] step: {query}"));
        assert!((500..=2_000).contains(&step_ms), "{query}");
        assert_ne!(code, Some(2), "{stderr}");
        // 40 s windows hold the 60 s fill: at the scrape interval's step every one sees it.
        let (_, doc, stderr) = verify_json(&env, "40s", &[]);
        assert_eq!(
            signal_of(&doc, &disk, "fs-fill").0,
            "pass",
            "{stderr}\n{doc:#}"
        );
        assert!(!stderr.contains("Prometheus refused"), "{stderr}");
    }
}

#[test]
fn a_tps_vm_in_its_pause_is_not_failed() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    // Short rounds: two rounds of 2 s (each followed by the round pause), then the cycle pause.
    run(
        &env,
        "cpu,tps",
        &["--params", "tps.iterations=1,tps.duration=2"],
    );
    assert!(prometheus.wait_for_series(
        "count_over_time(kubevirt_vmi_network_transmit_packets_total{kubernetes_vmi_label_app_kubernetes_io_component=\"tps\"}[5m]) >= 10",
        2,
        Duration::from_secs(60)
    ));
    // Both tps VMs at least 20 s into their cycle pause.
    assert!(prometheus.wait_for_none(
        "rate(kubevirt_vmi_network_transmit_packets_total{kubernetes_vmi_label_app_kubernetes_io_component=\"tps\"}[20s]) > 20",
        Duration::from_secs(90)
    ));
    let (code, doc, stderr) = verify_json(&env, "20s", &[]);
    assert_eq!(code, Some(0), "{stderr}\n{doc:#}");
    for vm in [
        t(&env, "virtwork-tps-server-0"),
        t(&env, "virtwork-tps-client-0"),
    ] {
        let (status, note) = signal_of(&doc, &vm, "net-tx-packets");
        assert_eq!(status, "not_expected", "{vm}: {doc:#}");
        assert!(note.contains("longer than 32s"), "{note}");
    }
}

/// A 10/90 % cpu step of 60 s: with Prometheus scraping every second (up to two on a busy
/// machine), each 30 s phase holds the 6 samples a phase is judged on past the rate window of
/// three scrapes and the level change.
const CPU_STEP: &str =
    "cpu.profile=step,cpu.profile-low=10,cpu.profile-high=90,cpu.profile-period=60s";

#[test]
fn a_profiled_vm_is_judged_phase_by_phase_and_one_stuck_high_fails() {
    let Some((env, prometheus, [following, stuck])) = cpu_fleet(&["--params", CPU_STEP]) else {
        return;
    };
    env.server.set_profile_stuck_high(NS, &stuck);
    // Two periods and a little more in Prometheus before judging a 120 s window (summed over
    // the vCPU's `state` series, which change with the level).
    let promql = format!(
        "sum by (name) (count_over_time(kubevirt_vmi_vcpu_seconds_total{{name=\"{following}\",id=\"0\"}}[5m])) >= 125"
    );
    assert!(
        prometheus.wait_for_series(&promql, 1, Duration::from_secs(240)),
        "Prometheus never held 125 samples:\n{}",
        prometheus.log()
    );
    let (code, doc, stderr) = verify_json(&env, "120s", &[]);
    assert_eq!(code, Some(1), "{stderr}\n{doc:#}");
    let signal = |vm: &str| -> Value {
        let vm_doc = doc["vms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == vm)
            .unwrap();
        vm_doc["signals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["signal"] == "vcpu-busy")
            .unwrap()
            .clone()
    };
    let good = signal(&following);
    assert_eq!(good["status"], "pass", "{good:#}");
    let report = &good["profile"];
    assert!(
        report["shape"]
            .as_str()
            .unwrap()
            .starts_with("step: level 90"),
        "{report:#}"
    );
    assert!(report["correlation"].as_f64().unwrap() > 0.8, "{report:#}");
    assert!(report["clock_start"].is_string(), "{report:#}");
    let judged: Vec<(u64, &str)> = report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] != "not_judged")
        .map(|p| (p["level"].as_u64().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    // Two periods: each level's phases judged and passing (the one cut by the window's
    // start may be too short to judge).
    assert!(judged.len() >= 3, "{report:#}");
    for level in [10, 90] {
        assert!(
            judged.iter().any(|(l, s)| *l == level && *s == "pass"),
            "a passing phase at level {level}: {report:#}"
        );
    }
    let bad = signal(&stuck);
    assert_eq!(bad["status"], "off_profile", "{bad:#}");
    // Either no clock start explains its flat series, or the best one finds its low phases
    // above their ceiling.
    let low_above = bad["profile"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["level"] == 10 && p["status"] == "above");
    let unexplained = bad["profile"]["summary"]
        .as_str()
        .unwrap()
        .contains("does not follow the profile's shape");
    assert!(low_above || unexplained, "{bad:#}");
    assert!(
        stderr.contains(&format!(
            "VM {NS}/{stuck} signal vcpu-busy (off its load profile"
        )),
        "{stderr}"
    );

    // The text names the missed phases under the table.
    let out = env.run(&["--namespace", NS, "verify", "--window", "120s"]);
    let stdout = text(&out.stdout);
    eprintln!("verify table of a profiled run:\n{stdout}");
    assert!(stdout.contains("step profile"), "{stdout}");
    assert!(
        stdout.contains("at level 10: observed") || stdout.contains("does not follow"),
        "{stdout}"
    );

    // A window shorter than the period cannot tell the phases apart: not expected, saying
    // which window would do.
    let (_, doc, _) = verify_json(&env, "20s", &[]);
    let (status, note) = signal_of(&doc, &following, "vcpu-busy");
    assert_eq!(status, "not_expected", "{doc:#}");
    assert!(note.contains("--window 60s"), "{note}");
}

#[test]
fn a_window_shorter_than_two_scrapes_is_refused_with_the_interval() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    run(&env, "cpu", &[]);
    wait_for_samples(&prometheus, &t(&env, "virtwork-cpu-0"), 5);
    let out = env.run(&["--namespace", NS, "verify", "--window", "1s"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("scrapes these series every 1.")
            && stderr.contains("use --window 2s or longer"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no verdicts on a refused window");
    let out = env.run(&["--namespace", NS, "verify", "--window", "2s"]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn nothing_expected_fails_alike_in_exit_code_text_and_json() {
    let env = Env::start();
    run(&env, "network", &[]);
    // A 10 s window can fall entirely into iperf3's pause: nothing is expected, so nothing
    // is verified, whether Prometheus answers or not (here it is not even there).
    let unreachable = ["--prometheus", "http://127.0.0.1:9"];
    let mut args = vec!["--namespace", NS, "verify", "--window", "10s"];
    args.extend_from_slice(&unreachable);
    let out = env.run(&args);
    let table = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{table}");
    assert!(
        table.lines().last().unwrap().contains("nothing verified"),
        "{table}"
    );
    assert!(stderr.contains("nothing was verified"), "{stderr}");
    let mut args = vec![
        "--namespace",
        NS,
        "--output",
        "json",
        "verify",
        "--window",
        "10s",
    ];
    args.extend_from_slice(&unreachable);
    let out = env.run(&args);
    assert_eq!(out.status.code(), Some(1));
    let doc = json_doc(&out);
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["summary"]["expected"], 0);
}

#[test]
fn wait_waits_for_the_whole_timeout() {
    let env = Env::start();
    env.monitoring(Backend::Respond(
        200,
        r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
    ));
    run(&env, "cpu", &[]);
    // A 1m window polls every 15 s: the last round still comes at the 5 s deadline, not
    // one poll interval before it.
    let started = std::time::Instant::now();
    let (code, doc, stderr) = verify_json(&env, "1m", &["--wait", "--timeout", "5"]);
    let waited = started.elapsed();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        waited >= Duration::from_secs(5),
        "returned after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(30),
        "returned after {waited:?}"
    );
    assert!(doc["rounds"].as_u64().unwrap() >= 2, "{doc:#}");
    assert!(
        stderr.contains("still missing after --timeout 5s"),
        "{stderr}"
    );
}

/// A rule file for the test Prometheus: one alert the loaded cpu VM fires, one it must not.
const TEST_RULES: &str = "groups:
  - name: virtwork-test
    rules:
      - alert: VirtworkTestCpuBusy
        expr: sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[10s])) > 0.5
        for: 3s
      - alert: VirtworkTestCpuIdle
        expr: sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[10s])) < 0.1
        for: 3s
      - alert: VirtworkTestCpuBusyForAMinute
        expr: sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[10s])) > 0.5
        for: 60s
";

#[test]
fn alert_rules_evaluated_by_prometheus_are_checked_against_the_load() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus_rules(&env, Some(TEST_RULES)) else {
        return;
    };
    run(&env, "cpu", &[]);
    // Older than the 20 s window, so the signal itself is judged, not its youth.
    let vm = t(&env, "virtwork-cpu-0");
    wait_for_samples(&prometheus, &vm, 25);
    // --wait waits out a rule's for: (60 s here, not over yet) for an expected alert.
    let asked = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (code, doc, stderr) = verify_json(
        &env,
        "20s",
        &[
            "--wait",
            "--timeout",
            "150",
            "--expect-alert",
            "VirtworkTestCpuBusyForAMinute",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}\n{doc:#}");
    let fired = doc["alerts"]["fired"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["alertname"] == "VirtworkTestCpuBusyForAMinute")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        fired["first_firing"].as_f64().unwrap() > asked,
        "the alert fired after verify was asked, so verify waited for it: {doc:#}"
    );
    assert!(
        prometheus.wait_for_series(
            "ALERTS{alertname=\"VirtworkTestCpuBusy\",alertstate=\"firing\"}",
            1,
            Duration::from_secs(60)
        ),
        "the rule never fired:\n{}",
        prometheus.log()
    );
    let out = env.run(&[
        "--namespace",
        NS,
        "verify",
        "--window",
        "20s",
        "--alerts",
        "--expect-alert",
        "VirtworkTestCpuBusy",
        "--forbid-alert",
        "VirtworkTestCpuIdle",
    ]);
    let report = text(&out.stdout);
    eprintln!("verify --alerts report from the test run:\n{report}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{report}",
        text(&out.stderr)
    );
    let alert_row = report
        .lines()
        .find(|l| l.starts_with("VirtworkTestCpuBusy"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        alert_row.contains(&format!("virtwork/{vm}")) && alert_row.ends_with("firing"),
        "{report}"
    );
    assert!(
        report.contains("alert VirtworkTestCpuBusy must fire: met"),
        "{report}"
    );
    assert!(
        report.contains("alert VirtworkTestCpuIdle must not fire: met"),
        "{report}"
    );

    let (code, doc, stderr) = verify_json(&env, "20s", &["--expect-alert", "VirtworkTestCpuIdle"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("expected alert VirtworkTestCpuIdle did not fire for any of the VMs"),
        "{stderr}"
    );
    assert_eq!(doc["passed"], false);
    assert_eq!(
        doc["alerts"]["fired"][0]["alertname"], "VirtworkTestCpuBusy",
        "{doc:#}"
    );
    assert_eq!(doc["alerts"]["expectations"][0]["met"], false);

    let (code, _, stderr) = verify_json(&env, "20s", &["--forbid-alert", "VirtworkTestCpuBusy"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "forbidden alert VirtworkTestCpuBusy fired for virtwork/{vm}"
        )),
        "{stderr}"
    );
}

/// Benchmark (ignored; run with `--ignored --nocapture`): verify on 1,000 VMs of mixed
/// workloads against the real Prometheus: wall time, queries sent, peak RSS. With
/// `VIRTWORK_BENCH_BINARY` set (e.g. `target/release/virtwork`), that binary is measured
/// too, right after, against the same fleet.
#[test]
#[ignore]
fn bench_verify_1000_vms() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus(&env) else {
        return;
    };
    run(
        &env,
        "cpu,memory,disk,network",
        &[
            "--vm-count",
            "250",
            "--qps",
            "1000",
            "--burst",
            "1000",
            "--no-wait",
        ],
    );
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            1000,
            Duration::from_secs(300)
        ),
        "{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(35));
    let cmd = env.command(&[
        "--namespace",
        NS,
        "--qps",
        "1000",
        "--burst",
        "1000",
        "verify",
        "--window",
        "30s",
    ]);
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut programs = vec![cmd.get_program().to_owned()];
    programs.extend(std::env::var_os("VIRTWORK_BENCH_BINARY"));
    let mut first = true;
    for program in programs {
        if !std::mem::take(&mut first) {
            std::thread::sleep(Duration::from_secs(10));
        }
        // The previous verify's load on the test process can make a 1 s scrape time out,
        // and Prometheus then marks every series stale: measure on current series only.
        assert!(
            prometheus.wait_for_series(
                "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
                1000,
                Duration::from_secs(120)
            ),
            "{}",
            prometheus.log()
        );
        env.server.clear_request_log();
        let started = std::time::Instant::now();
        let out = cmd_with_time(&env, &program, &args);
        let wall = started.elapsed();
        let queries = env
            .server
            .request_log()
            .iter()
            .filter(|r| r.path.ends_with("/api/v1/query"))
            .count();
        let stderr = text(&out.stderr);
        let rss = stderr
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .unwrap_or("?")
            .to_string();
        let summary = text(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        // Why it failed, when it did (a VMI the simulated controllers have not started yet).
        let error = stderr
            .lines()
            .find(|l| l.starts_with("Error: "))
            .unwrap_or_default()
            .to_string();
        // The test process serves the API, the proxy and the metrics: under load a scrape
        // can time out, and Prometheus then marks every series stale (verify says so).
        let range = wall.as_secs() + 2;
        let failed_scrapes = prometheus
            .get(&format!(
                "/api/v1/query?query=count_over_time(up%5B{range}s%5D)-sum_over_time(up%5B{range}s%5D)"
            ))
            .and_then(|(_, body)| {
                let doc: Value = serde_json::from_str(&body).ok()?;
                doc["data"]["result"][0]["value"][1].as_str().map(String::from)
            })
            .unwrap_or_else(|| "?".into());
        eprintln!(
            "BENCH verify 1000 VMs ({}): wall {wall:?}, queries {queries}, peak RSS {rss} KiB, exit {:?}, \
             failed scrapes of the fake metrics meanwhile {failed_scrapes}\n{summary}\n{error}",
            Path::new(&program).display(),
            out.status.code()
        );
    }
}

/// Runs the binary under `/usr/bin/time -v` with the env's environment.
fn cmd_with_time(env: &Env, program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> Output {
    Command::new("/usr/bin/time")
        .arg("-v")
        .arg(program)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_prometheus_nobody_answers_at_fails_at_once_naming_the_address() {
    let env = Env::start();
    run_cpu_vm(&env);
    for (url, cause) in [
        ("http://127.0.0.1:9", "refused"),
        ("http://virtwork-no-such-host.invalid:9090", "lookup"),
    ] {
        let cmd = env.command(&["--namespace", NS, "verify", "--prometheus", url]);
        // The hang guard is shorter than verify's 60 s of retries: a retried refusal fails it.
        let out = run_bounded(cmd, Duration::from_secs(45));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let error = stderr.lines().find(|l| l.starts_with("Error: ")).unwrap();
        assert!(
            error.contains(&format!("cannot reach Prometheus at {url}"))
                && error.to_ascii_lowercase().contains(cause)
                && error.contains("not retried"),
            "{error}"
        );
        assert!(!error.contains("--timeout"), "{error}");
    }
}

#[test]
fn a_prometheus_that_keeps_dropping_connections_is_retried_and_the_error_says_for_how_long() {
    let env = Env::start();
    run_cpu_vm(&env);
    // Accepts every connection and closes it without an answer: a transient failure.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let cmd = env.command(&[
        "--namespace",
        NS,
        "verify",
        "--prometheus",
        &url,
        "--wait",
        "--timeout",
        "1",
    ]);
    let out = run_bounded(cmd, Duration::from_secs(90));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("Error: ")).unwrap();
    assert!(
        error.contains(&format!("querying Prometheus ({url})"))
            && error.contains("gave up after")
            && error.contains("verify retries timeouts, dropped connections, 429 and 5xx")
            && error.contains("--timeout with --wait, else 60 s"),
        "{error}"
    );
}

/// A rule that fires within seconds of a cpu VM's load and resolves as soon as it stops.
const FLIP_RULES: &str = "groups:
  - name: virtwork-test-flip
    rules:
      - alert: VirtworkTestCpuBusyNow
        expr: sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[3s])) > 0.5
      - alert: VirtworkTestNeverFires
        expr: vector(1) < 0
";

#[test]
fn firing_for_counts_only_the_time_the_alert_was_firing() {
    let env = Env::start();
    let Some(prometheus) = with_prometheus_rules(&env, Some(FLIP_RULES)) else {
        return;
    };
    run(&env, "cpu", &[]);
    let vm = t(&env, "virtwork-cpu-0");
    let firing = "ALERTS{alertname=\"VirtworkTestCpuBusyNow\",alertstate=\"firing\"}";
    assert!(
        prometheus.wait_for_series(firing, 1, Duration::from_secs(90)),
        "{}",
        prometheus.log()
    );
    // Firing about 15 s, resolved about 30 s, firing again about 10 s.
    std::thread::sleep(Duration::from_secs(15));
    env.server.set_metrics_flat(NS, &vm, true);
    assert!(prometheus.wait_for_none(firing, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(30));
    env.server.set_metrics_flat(NS, &vm, false);
    assert!(prometheus.wait_for_series(firing, 1, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(10));
    let (_, doc, stderr) = verify_json(&env, "2m", &["--alerts"]);
    let fired = doc["alerts"]["fired"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["alertname"] == "VirtworkTestCpuBusyNow")
        .unwrap_or_else(|| panic!("{stderr}\n{doc:#}"))
        .clone();
    let first = fired["first_firing"].as_f64().unwrap();
    let last = fired["last_firing"].as_f64().unwrap();
    let seconds = fired["firing_seconds"].as_f64().unwrap();
    eprintln!("fired {first}..{last}, firing for {seconds}s");
    assert!(last - first >= 50.0, "{fired:#}");
    // About 25 s of firing over more than 50 s: the resolved half minute is not counted.
    assert!(
        (15.0..=40.0).contains(&seconds),
        "firing for {seconds}s between {first} and {last}: {fired:#}"
    );
    assert!(fired["firing_now"].as_bool().unwrap(), "{fired:#}");

    // An expected alert that never fires says how long verify waited for it.
    let (code, _, stderr) = verify_json(
        &env,
        "20s",
        &[
            "--wait",
            "--timeout",
            "5",
            "--expect-alert",
            "VirtworkTestNeverFires",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("expected alert VirtworkTestNeverFires did not fire")
            && stderr.contains("by the end of --timeout 5s"),
        "{stderr}"
    );
}
