//! The live-cluster end-to-end suite: user-level scenarios that drive the real `virtwork`
//! binary (`run`, `status`, `cleanup`) against a cluster given by kubeconfig, each in its own
//! `virtwork-e2e-<8 hex>` namespace that it deletes again, even when an assertion fails.
//! `live_cluster_e2e` runs them against `VIRTWORK_E2E_KUBECONFIG` (skipped with a notice when
//! unset; `VIRTWORK_E2E_IMAGE` and `VIRTWORK_E2E_TIMEOUT` tune it); the same scenarios always
//! run against the fake API server so the suite cannot rot out of sync with the binary.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::names::tagged;
use support::{FakeApiServer, Options};

/// Readiness and cleanup timeout on a live cluster when `VIRTWORK_E2E_TIMEOUT` is unset.
const DEFAULT_TIMEOUT_SECS: u64 = 900;

/// Where the scenarios run and how patient they are.
struct Target {
    kubeconfig: PathBuf,
    /// `--container-disk-image` for every run; the binary's default when `None`.
    image: Option<String>,
    timeout_secs: u64,
}

/// A unique namespace for one scenario.
fn unique_namespace() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("virtwork-e2e-{}", &id[..8])
}

/// One scenario's namespace and scratch directory (audit DB, working directory). Dropping it
/// deletes everything virtwork made in the namespace, and the namespace itself, so a failed
/// assertion leaves nothing behind on the cluster.
struct Scenario<'t> {
    target: &'t Target,
    namespace: String,
    dir: tempfile::TempDir,
    cleaned_up: bool,
}

impl<'t> Scenario<'t> {
    fn new(target: &'t Target, namespace: &str) -> Self {
        Scenario {
            target,
            namespace: namespace.to_string(),
            dir: tempfile::tempdir().expect("temp dir"),
            cleaned_up: false,
        }
    }

    /// `virtwork --kubeconfig K --audit-db <tmp> --log-format json --namespace NS <args>`.
    fn virtwork(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.arg("--kubeconfig")
            .arg(&self.target.kubeconfig)
            .arg("--audit-db")
            .arg(self.dir.path().join("audit.db"))
            .args(["--log-format", "json", "--namespace", &self.namespace])
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null());
        // The suite's own settings (and a developer's defaults) must not leak into the binary.
        for (key, _) in std::env::vars() {
            if key.starts_with("VIRTWORK_") {
                cmd.env_remove(key);
            }
        }
        cmd.output().expect("spawn virtwork")
    }

    /// `virtwork run` with the target's image and the given arguments.
    fn run(&self, args: &[&str]) -> Output {
        let mut full = vec!["run"];
        if let Some(image) = &self.target.image {
            full.extend(["--container-disk-image", image.as_str()]);
        }
        full.extend(args);
        self.virtwork(&full)
    }

    /// The `runs` of `virtwork status [--run-id ID] --output json` in this namespace.
    fn status_runs(&self, run_id: Option<&str>) -> Vec<Value> {
        let mut args = vec!["--output", "json", "status"];
        if let Some(id) = run_id {
            args.extend(["--run-id", id]);
        }
        let out = self.virtwork(&args);
        assert_exit(&out, 0, "status");
        json_doc(&out)["runs"]
            .as_array()
            .expect("status runs array")
            .clone()
    }

    fn timeout(&self) -> String {
        self.target.timeout_secs.to_string()
    }

    /// Deletes every managed object and the namespace, waiting until they are gone.
    fn cleanup_namespace(&mut self) -> Output {
        self.cleaned_up = true;
        let timeout = self.timeout();
        self.virtwork(&[
            "--output",
            "json",
            "cleanup",
            "--yes",
            "--delete-namespace",
            "--wait",
            "--timeout",
            &timeout,
        ])
    }

    /// The scenario's final step: the namespace cleanup must succeed and leave no run.
    fn finish(mut self) {
        let out = self.cleanup_namespace();
        assert_exit(&out, 0, "cleanup --delete-namespace --wait");
        let doc = json_doc(&out);
        assert!(
            matches!(
                doc["status"].as_str(),
                Some("completed" | "nothing_to_clean_up")
            ),
            "{doc}"
        );
        if let Some(wait) = doc["wait"].as_object() {
            assert_eq!(wait["all_gone"], true, "{doc}");
        }
        self.assert_no_run_left();
    }

    /// After a namespace cleanup, status finds no run: the namespace is gone (status says so
    /// and exits 1, as for any namespace that does not exist), or a live cluster still shows it
    /// terminating with no VM in it (exit 0, no runs).
    fn assert_no_run_left(&self) {
        let out = self.virtwork(&["--output", "json", "status"]);
        match out.status.code() {
            Some(1) => {
                let stderr = text(&out.stderr);
                assert!(
                    stderr.contains(&format!("namespace {} does not exist", self.namespace)),
                    "status exit 1 for another reason than the deleted namespace:\n{stderr}"
                );
            }
            _ => {
                assert_exit(&out, 0, "status after cleanup");
                let runs = json_doc(&out)["runs"].clone();
                assert_eq!(runs, Value::Array(vec![]), "runs left after cleanup");
            }
        }
    }
}

impl Drop for Scenario<'_> {
    fn drop(&mut self) {
        if self.cleaned_up {
            return;
        }
        let out = self.cleanup_namespace();
        if !out.status.success() {
            eprintln!(
                "WARNING: cleanup of namespace {} failed (exit {:?}); delete it by hand:\n{}",
                self.namespace,
                out.status.code(),
                text(&out.stderr)
            );
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: unexpected exit\nstdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn json_doc(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// Names of the VMs in a status `runs[]` entry, in the order status prints them.
fn vm_names(run: &Value) -> Vec<String> {
    run["vms"]
        .as_array()
        .expect("vms array")
        .iter()
        .map(|vm| vm["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The JSON log lines on stderr with the given `msg`.
fn log_lines(out: &Output, msg: &str) -> Vec<Value> {
    text(&out.stderr)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["msg"] == msg)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/// Creates `namespace` as `virtwork run` would (labelled `app.kubernetes.io/managed-by=virtwork`
/// and annotated `virtwork/created-by-run`, so `cleanup --delete-namespace` may remove it)
/// with a kube client built from the kubeconfig.
fn create_managed_namespace(kubeconfig: &Path, namespace: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("kubeconfig usable");
        let client = kube::Client::try_from(config).expect("kube client");
        let namespaces: Api<Namespace> = Api::all(client);
        let object: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": namespace,
                "labels": { "app.kubernetes.io/managed-by": "virtwork" },
                "annotations": { "virtwork/created-by-run": "00000000-0000-4000-8000-000000000000" },
            },
        }))
        .unwrap();
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {namespace}: {e}"));
    });
}

/// `run --dry-run=server` refuses a namespace that does not exist (the API server cannot
/// dry-run namespaced objects there) and, once it exists, submits everything with dryRun=All
/// and persists nothing.
fn server_dry_run_persists_nothing(target: &Target, namespace: &str) {
    let s = Scenario::new(target, namespace);
    let args = [
        "--dry-run=server",
        "--workloads",
        "cpu,network",
        "--output",
        "json",
    ];

    let refused = s.run(&args);
    assert_exit(&refused, 1, "run --dry-run=server without the namespace");
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains(&format!("needs namespace {namespace} to exist")),
        "{stderr}"
    );
    assert_eq!(json_doc(&refused)["created"]["vms"], 0);

    create_managed_namespace(&target.kubeconfig, namespace);
    let out = s.run(&args);
    assert_exit(&out, 0, "run --dry-run=server");
    let doc = json_doc(&out);
    assert_eq!(doc["dry_run"], "server", "{doc}");
    assert_eq!(doc["status"], "success", "{doc}");
    assert_eq!(doc["planned"]["vms"], 3, "cpu + network pair: {doc}");
    assert_eq!(doc["planned"]["services"], 1, "{doc}");
    assert_eq!(doc["created"]["vms"], 0, "{doc}");
    assert_eq!(doc["cleanup_command"], Value::Null, "{doc}");
    assert!(s.status_runs(None).is_empty(), "a dry run left VMs");
    s.finish();
}

/// `run --no-wait` creates one VM that status lists under the run id, and cleanup by run id
/// deletes exactly that VM.
fn no_wait_run_is_listed_and_cleaned_up_by_run_id(target: &Target, namespace: &str) {
    let s = Scenario::new(target, namespace);
    let out = s.run(&["--workloads", "cpu", "--no-wait", "--output", "json"]);
    assert_exit(&out, 0, "run --no-wait");
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "success", "{doc}");
    assert_eq!(doc["created"]["vms"], 1, "{doc}");
    assert_eq!(doc["durations_ms"]["wait"], Value::Null, "no wait: {doc}");
    let run_id = doc["run_id"].as_str().expect("run_id").to_string();
    assert!(uuid::Uuid::parse_str(&run_id).is_ok(), "{run_id}");

    let runs = s.status_runs(Some(&run_id));
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["run_id"], run_id.as_str());
    assert_eq!(vm_names(&runs[0]), vec![tagged("virtwork-cpu-0", &run_id)]);

    let timeout = s.timeout();
    let out = s.virtwork(&[
        "cleanup",
        "--run-id",
        &run_id,
        "--yes",
        "--wait",
        "--timeout",
        &timeout,
    ]);
    assert_exit(&out, 0, "cleanup --run-id");
    assert!(
        text(&out.stderr).contains(r#""vms_deleted":1"#),
        "cleanup log lacks \"vms_deleted\":1:\n{}",
        text(&out.stderr)
    );
    assert!(s.status_runs(Some(&run_id)).is_empty(), "run still listed");
    s.finish();
}

/// The network pair waits until both VMs run, creates the iperf3 Service, and cleanup
/// `--wait` leaves nothing.
fn network_pair_becomes_ready_and_cleans_up(target: &Target, namespace: &str) {
    let s = Scenario::new(target, namespace);
    let timeout = s.timeout();
    let out = s.run(&[
        "--workloads",
        "network",
        "--timeout",
        &timeout,
        "--output",
        "json",
    ]);
    assert_exit(&out, 0, "run --workloads network");
    let doc = json_doc(&out);
    assert_eq!(doc["status"], "success", "{doc}");
    assert_eq!(doc["created"]["vms"], 2, "{doc}");
    assert_eq!(doc["created"]["services"], 1, "{doc}");
    assert_eq!(doc["vms_ready"], 2, "{doc}");
    for vm in doc["vms"].as_array().expect("vms") {
        assert_eq!(vm["phase"], "Running", "{vm}");
        assert_eq!(vm["ready"], true, "{vm}");
    }
    let services: Vec<Value> = log_lines(&out, "service created")
        .into_iter()
        .map(|line| line["service_name"].clone())
        .collect();
    let run_id = doc["run_id"].as_str().expect("run_id");
    assert_eq!(
        services,
        vec![Value::from(tagged("virtwork-iperf3-server", run_id))]
    );

    let runs = s.status_runs(Some(run_id));
    assert_eq!(runs.len(), 1, "{runs:?}");
    let mut names = vm_names(&runs[0]);
    names.sort();
    assert_eq!(
        names,
        vec![
            tagged("virtwork-network-client-0", run_id),
            tagged("virtwork-network-server-0", run_id)
        ]
    );
    for vm in runs[0]["vms"].as_array().unwrap() {
        assert_eq!(vm["vmi_phase"], "Running", "{vm}");
        let role = vm["role"].as_str().unwrap_or_default();
        assert!(
            !role.is_empty() && vm["name"].as_str().unwrap_or_default().contains(role),
            "{vm}"
        );
    }
    s.finish();
}

/// A second run of the same workload into the same namespace grows the fleet: its objects
/// carry its own run tag, so nothing clashes, and `status` lists both runs.
fn second_run_grows_the_fleet(target: &Target, namespace: &str) {
    let s = Scenario::new(target, namespace);
    let mut ids = Vec::new();
    for what in ["first run", "second run"] {
        let out = s.run(&["--workloads", "cpu", "--no-wait", "--output", "json"]);
        assert_exit(&out, 0, what);
        let doc = json_doc(&out);
        assert_eq!(doc["created"]["vms"], 1, "{doc}");
        ids.push(doc["run_id"].as_str().expect("run_id").to_string());
    }
    assert_ne!(ids[0], ids[1]);
    let runs = s.status_runs(None);
    assert_eq!(runs.len(), 2, "both runs exist: {runs:?}");
    for id in &ids {
        let run = runs
            .iter()
            .find(|r| r["run_id"] == id.as_str())
            .unwrap_or_else(|| panic!("run {id} missing: {runs:?}"));
        assert_eq!(vm_names(run), vec![tagged("virtwork-cpu-0", id)]);
    }
    s.finish();
}

/// An unknown workload is bad input: exit 2, one clear error, nothing created.
fn unknown_workload_is_bad_input(target: &Target, namespace: &str) {
    let s = Scenario::new(target, namespace);
    let out = s.run(&["--workloads", "bogus"]);
    assert_exit(&out, 2, "run --workloads bogus");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bogus") && stderr.contains("--workloads"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "bad input prints no result");
    // Refused before the first write: not even the namespace was created.
    s.assert_no_run_left();
    s.finish();
}

type ScenarioFn = fn(&Target, &str);

/// Every scenario with a name for the progress lines, in the order they run.
const SCENARIOS: [(&str, ScenarioFn); 5] = [
    ("server dry run", server_dry_run_persists_nothing),
    (
        "no-wait run + cleanup by run id",
        no_wait_run_is_listed_and_cleaned_up_by_run_id,
    ),
    (
        "network pair readiness",
        network_pair_becomes_ready_and_cleans_up,
    ),
    ("second run grows the fleet", second_run_grows_the_fleet),
    ("unknown workload", unknown_workload_is_bad_input),
];

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

#[test]
fn live_cluster_e2e() {
    let Some(kubeconfig) = std::env::var_os("VIRTWORK_E2E_KUBECONFIG") else {
        println!("SKIP: VIRTWORK_E2E_KUBECONFIG not set");
        return;
    };
    let timeout_secs = match std::env::var("VIRTWORK_E2E_TIMEOUT") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("VIRTWORK_E2E_TIMEOUT={v:?} is not whole seconds")),
        Err(_) => DEFAULT_TIMEOUT_SECS,
    };
    let target = Target {
        kubeconfig: PathBuf::from(kubeconfig),
        image: std::env::var("VIRTWORK_E2E_IMAGE")
            .ok()
            .filter(|s| !s.is_empty()),
        timeout_secs,
    };
    assert!(
        Path::new(&target.kubeconfig).is_file(),
        "VIRTWORK_E2E_KUBECONFIG={} is not a file",
        target.kubeconfig.display()
    );
    for (name, scenario) in SCENARIOS {
        let namespace = unique_namespace();
        println!("e2e: {name} in namespace {namespace}");
        scenario(&target, &namespace);
    }
}

/// Writes other than access reviews that the server committed in `namespace` (dry-run
/// requests are never committed).
fn committed_writes(server: &FakeApiServer, namespace: &str) -> Vec<String> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.committed && r.resource != "selfsubjectaccessreviews")
        .filter(|r| r.namespace == namespace || (r.resource == "namespaces" && r.name == namespace))
        .map(|r| format!("{} {} {}", r.verb, r.resource, r.name))
        .collect()
}

#[test]
fn e2e_scenarios_pass_against_the_fake_api_server() {
    let server = FakeApiServer::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let target = Target {
        kubeconfig,
        image: None,
        timeout_secs: 120,
    };
    for (name, scenario) in SCENARIOS {
        let namespace = unique_namespace();
        server.clear_request_log();
        scenario(&target, &namespace);
        // Beyond what the scenario can see through virtwork: the namespace really is gone,
        // and the scenarios that must create nothing wrote nothing.
        assert!(
            server.get("namespaces", "", &namespace).is_none(),
            "{name}: namespace {namespace} left behind"
        );
        for kind in ["virtualmachines", "secrets", "services", "datavolumes"] {
            assert!(
                server.objects(kind, Some(&namespace)).is_empty(),
                "{name}: {kind} left in {namespace}"
            );
        }
        if name == "server dry run" || name == "unknown workload" {
            // The dry-run scenario creates (and cleanup deletes) the namespace itself.
            let writes: Vec<String> = committed_writes(&server, &namespace)
                .into_iter()
                .filter(|w| !w.ends_with(&format!("namespaces {namespace}")))
                .collect();
            assert!(writes.is_empty(), "{name} persisted: {writes:?}");
        }
    }
}
