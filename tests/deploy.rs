//! The in-cluster deployment (`deploy/`, Kustomize) rendered with the real `kubectl kustomize`.
//!
//! Checks what an operator relies on: the set of objects, that none of the tool's own objects
//! carries `app.kubernetes.io/managed-by=virtwork` (cleanup selects on it and would delete the
//! tool's Secret and audit PVC), the restricted pod security settings with writable /data and
//! /tmp, that every `VIRTWORK_*` key the manifests set is one the binary reads (from
//! `virtwork::config::env_keys()`) and that the binary accepts the shipped values, and the Job
//! examples. Finally the ClusterRole is checked against the requests the real binary sends to
//! the fake API server (tests/support) during run, status and cleanup: everything it sends is
//! granted and everything granted is sent. kubectl is at /usr/bin/kubectl on the dev machines;
//! the tests skip with a notice without it and fail instead when `VIRTWORK_REQUIRE_KUBECTL=1`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

mod support;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl kustomize deploy/` as parsed documents, or None (skip) without kubectl.
fn rendered() -> Option<Vec<Value>> {
    let required = std::env::var("VIRTWORK_REQUIRE_KUBECTL").as_deref() == Ok("1");
    let out = match Command::new("kubectl")
        .arg("kustomize")
        .arg(repo().join("deploy"))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(
                !required,
                "kubectl is required (VIRTWORK_REQUIRE_KUBECTL=1): {e}"
            );
            eprintln!("SKIP: kubectl not installed");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(parse_documents(&String::from_utf8(out.stdout).unwrap()))
}

fn parse_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

fn example(name: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("deploy/examples").join(name)).unwrap();
    let mut docs = parse_documents(&text);
    assert_eq!(docs.len(), 1, "{name} holds one object");
    docs.remove(0)
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    let mut cur = v;
    for key in path {
        cur = cur
            .get(*key)
            .unwrap_or_else(|| panic!("missing {} in {v:?}", path.join(".")));
    }
    cur
}

fn kind_name(v: &Value) -> (String, String) {
    (
        s(v, &["kind"]).as_str().unwrap().to_string(),
        v["metadata"]
            .get("name")
            .or_else(|| v["metadata"].get("generateName"))
            .and_then(Value::as_str)
            .expect("metadata.name or generateName")
            .to_string(),
    )
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind_name(d) == (kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind}/{name} rendered"))
}

#[test]
fn kustomization_renders_exactly_the_tools_objects() {
    let Some(docs) = rendered() else { return };
    let got: BTreeSet<(String, String)> = docs.iter().map(kind_name).collect();
    let expected: BTreeSet<(String, String)> = [
        ("ClusterRole", "virtwork"),
        ("ClusterRoleBinding", "virtwork"),
        ("ConfigMap", "virtwork-config"),
        ("Deployment", "virtwork"),
        ("Namespace", "virtwork-system"),
        ("PersistentVolumeClaim", "virtwork-audit-data"),
        ("Secret", "virtwork-secrets"),
        ("ServiceAccount", "virtwork"),
    ]
    .iter()
    .map(|(k, n)| (k.to_string(), n.to_string()))
    .collect();
    assert_eq!(got, expected);

    let cluster_scoped = ["ClusterRole", "ClusterRoleBinding", "Namespace"];
    for doc in &docs {
        let (kind, name) = kind_name(doc);
        let namespace = doc.get("metadata").and_then(|m| m.get("namespace"));
        if cluster_scoped.contains(&kind.as_str()) {
            assert!(namespace.is_none(), "{kind}/{name} is cluster-scoped");
        } else {
            // The tool lives apart from the VMs' namespace ("virtwork"), so
            // `cleanup --delete-namespace` cannot take the tool down with it.
            assert_eq!(
                namespace.and_then(Value::as_str),
                Some("virtwork-system"),
                "{kind}/{name}"
            );
        }
    }
    let binding = find(&docs, "ClusterRoleBinding", "virtwork");
    let subject = &s(binding, &["subjects"]).as_sequence().unwrap()[0];
    assert_eq!(s(subject, &["name"]).as_str(), Some("virtwork"));
    assert_eq!(s(subject, &["namespace"]).as_str(), Some("virtwork-system"));
}

/// Every label map in an object: metadata and, for workloads, the pod template.
fn label_maps(doc: &Value) -> Vec<&Value> {
    let mut maps = Vec::new();
    if let Some(l) = doc.get("metadata").and_then(|m| m.get("labels")) {
        maps.push(l);
    }
    if let Some(l) = doc
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
    {
        maps.push(l);
    }
    maps
}

#[test]
fn no_own_object_carries_the_label_cleanup_selects_on() {
    let Some(mut docs) = rendered() else { return };
    docs.push(example("job-run.yaml"));
    docs.push(example("job-cleanup.yaml"));
    for doc in &docs {
        let (kind, name) = kind_name(doc);
        for labels in label_maps(doc) {
            assert!(
                labels.get("app.kubernetes.io/managed-by").is_none(),
                "{kind}/{name} is labelled managed-by; `virtwork cleanup` would delete it"
            );
            assert!(labels.get("virtwork/run-id").is_none(), "{kind}/{name}");
        }
    }
    // The Secret and PVC hold the tool's state: they must carry the identifying labels only.
    let docs = rendered().unwrap();
    for (kind, name) in [
        ("Secret", "virtwork-secrets"),
        ("PersistentVolumeClaim", "virtwork-audit-data"),
    ] {
        let labels = s(find(&docs, kind, name), &["metadata", "labels"]);
        assert_eq!(
            labels.get("app.kubernetes.io/name").and_then(Value::as_str),
            Some("virtwork")
        );
        assert_eq!(
            labels
                .get("app.kubernetes.io/part-of")
                .and_then(Value::as_str),
            Some("virtwork")
        );
    }
}

/// The pod spec of a Deployment or Job.
fn pod_spec(doc: &Value) -> &Value {
    s(doc, &["spec", "template", "spec"])
}

fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container
        .get("env")?
        .as_sequence()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|e| e.get("value"))
        .and_then(Value::as_str)
}

fn assert_restricted_pod(what: &str, pod: &Value) {
    assert_eq!(
        s(pod, &["serviceAccountName"]).as_str(),
        Some("virtwork"),
        "{what}"
    );
    assert_eq!(
        s(pod, &["terminationGracePeriodSeconds"]).as_u64(),
        Some(120),
        "{what}: time to record a cancelled run"
    );
    assert_eq!(
        s(pod, &["securityContext", "runAsNonRoot"]).as_bool(),
        Some(true),
        "{what}"
    );
    assert_eq!(
        s(pod, &["securityContext", "seccompProfile", "type"]).as_str(),
        Some("RuntimeDefault")
    );
    let containers = s(pod, &["containers"]).as_sequence().unwrap();
    assert_eq!(containers.len(), 1, "{what}");
    let c = &containers[0];
    let sc = s(c, &["securityContext"]);
    assert_eq!(
        s(sc, &["allowPrivilegeEscalation"]).as_bool(),
        Some(false),
        "{what}"
    );
    assert_eq!(
        s(sc, &["readOnlyRootFilesystem"]).as_bool(),
        Some(true),
        "{what}"
    );
    assert_eq!(s(sc, &["runAsNonRoot"]).as_bool(), Some(true), "{what}");
    let dropped: Vec<&str> = s(sc, &["capabilities", "drop"])
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(dropped, ["ALL"], "{what}");
    assert!(
        sc.get("capabilities").unwrap().get("add").is_none(),
        "{what}"
    );
    for key in ["requests", "limits"] {
        let r = s(c, &["resources", key]);
        assert!(
            r.get("cpu").is_some() && r.get("memory").is_some(),
            "{what} {key}"
        );
    }

    // With a read-only root, /data (audit DB, PVC) and /tmp must be volumes.
    let mounts: Vec<(&str, &str)> = s(c, &["volumeMounts"])
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| {
            (
                s(m, &["mountPath"]).as_str().unwrap(),
                s(m, &["name"]).as_str().unwrap(),
            )
        })
        .collect();
    let volumes = s(pod, &["volumes"]).as_sequence().unwrap();
    let volume = |name: &str| {
        volumes
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{what}: no volume {name}"))
    };
    let data = mounts
        .iter()
        .find(|(p, _)| *p == "/data")
        .expect("/data mount")
        .1;
    assert_eq!(
        s(volume(data), &["persistentVolumeClaim", "claimName"]).as_str(),
        Some("virtwork-audit-data")
    );
    let tmp = mounts
        .iter()
        .find(|(p, _)| *p == "/tmp")
        .expect("/tmp mount")
        .1;
    assert!(
        volume(tmp).get("emptyDir").is_some(),
        "{what}: /tmp is an emptyDir"
    );

    // Configuration comes from the ConfigMap and Secret.
    let sources: Vec<(&str, &str)> = s(c, &["envFrom"])
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            if let Some(r) = e.get("configMapRef") {
                ("configMap", s(r, &["name"]).as_str().unwrap())
            } else {
                ("secret", s(e, &["secretRef", "name"]).as_str().unwrap())
            }
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("configMap", "virtwork-config"),
            ("secret", "virtwork-secrets")
        ],
        "{what}"
    );
}

#[test]
fn deployment_is_restricted_sleeps_by_default_and_never_reruns_a_finished_command() {
    let Some(docs) = rendered() else { return };
    let deployment = find(&docs, "Deployment", "virtwork");
    assert_eq!(s(deployment, &["spec", "replicas"]).as_u64(), Some(1));
    assert_eq!(
        s(deployment, &["spec", "strategy", "type"]).as_str(),
        Some("Recreate")
    );
    let pod = pod_spec(deployment);
    assert_restricted_pod("Deployment", pod);
    let container = &s(pod, &["containers"]).as_sequence().unwrap()[0];
    assert_eq!(env_value(container, "VIRTWORK_COMMAND"), Some(""));
    assert_eq!(env_value(container, "VIRTWORK_ARGS"), Some(""));
    assert_eq!(env_value(container, "VIRTWORK_AFTER_RUN"), Some("sleep"));
    assert_eq!(
        s(container, &["image"]).as_str(),
        Some(format!("quay.io/opdev/virtwork:v{}", env!("CARGO_PKG_VERSION")).as_str()),
        "image tag follows Cargo.toml"
    );
}

#[test]
fn job_examples_run_once_and_exit_with_virtworks_code() {
    for (file, command) in [("job-run.yaml", "run"), ("job-cleanup.yaml", "cleanup")] {
        let job = example(file);
        assert_eq!(s(&job, &["kind"]).as_str(), Some("Job"));
        assert_eq!(
            s(&job, &["metadata", "namespace"]).as_str(),
            Some("virtwork-system")
        );
        assert!(
            job["metadata"].get("generateName").is_some(),
            "{file}: one Job per create"
        );
        assert_eq!(
            s(&job, &["spec", "backoffLimit"]).as_u64(),
            Some(0),
            "{file}"
        );
        let pod = pod_spec(&job);
        assert_eq!(s(pod, &["restartPolicy"]).as_str(), Some("Never"), "{file}");
        assert_restricted_pod(file, pod);
        let container = &s(pod, &["containers"]).as_sequence().unwrap()[0];
        assert_eq!(
            env_value(container, "VIRTWORK_COMMAND"),
            Some(command),
            "{file}"
        );
        assert_eq!(
            env_value(container, "VIRTWORK_AFTER_RUN"),
            Some("exit"),
            "{file}"
        );
        assert_eq!(
            s(container, &["image"]).as_str(),
            Some(format!("quay.io/opdev/virtwork:v{}", env!("CARGO_PKG_VERSION")).as_str()),
            "{file}"
        );
        if command == "cleanup" {
            let args = env_value(container, "VIRTWORK_ARGS").unwrap();
            assert!(
                args.split_whitespace().any(|a| a == "--yes"),
                "a pod cannot confirm"
            );
        }
    }
}

/// Variables the entrypoint (not the binary) reads.
const ENTRYPOINT_KEYS: &[&str] = &[
    "VIRTWORK_COMMAND",
    "VIRTWORK_ARGS",
    "VIRTWORK_AFTER_RUN",
    "VIRTWORK_BIN",
];

fn data_keys(doc: &Value, field: &str) -> Vec<String> {
    s(doc, &[field])
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_env_key_shipped_is_one_the_binary_or_entrypoint_reads() {
    let entrypoint = std::fs::read_to_string(repo().join("entrypoint.sh")).unwrap();
    for key in ENTRYPOINT_KEYS {
        assert!(
            entrypoint.contains(&format!("{key}=")),
            "entrypoint.sh no longer reads {key}"
        );
    }
    let accepted: BTreeSet<&str> = virtwork::config::env_keys()
        .chain(ENTRYPOINT_KEYS.iter().copied())
        .collect();
    let Some(mut docs) = rendered() else { return };
    docs.push(example("job-run.yaml"));
    docs.push(example("job-cleanup.yaml"));
    let mut checked = 0;
    for doc in &docs {
        let (kind, name) = kind_name(doc);
        let keys: Vec<String> = match kind.as_str() {
            "ConfigMap" => data_keys(doc, "data"),
            "Secret" => data_keys(doc, "stringData"),
            "Deployment" | "Job" => s(&pod_spec(doc)["containers"][0], &["env"])
                .as_sequence()
                .unwrap()
                .iter()
                .map(|e| s(e, &["name"]).as_str().unwrap().to_string())
                .collect(),
            _ => continue,
        };
        for key in keys {
            assert!(
                accepted.contains(key.as_str()),
                "{kind}/{name} sets {key}, which neither virtwork nor entrypoint.sh reads"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 15,
        "only {checked} keys found: did the manifests move?"
    );
    // The Secret carries exactly the credentials.
    let docs = rendered().unwrap();
    let secret_keys: BTreeSet<String> =
        data_keys(find(&docs, "Secret", "virtwork-secrets"), "stringData")
            .into_iter()
            .collect();
    assert_eq!(
        secret_keys,
        BTreeSet::from([
            "VIRTWORK_SSH_AUTHORIZED_KEYS".into(),
            "VIRTWORK_SSH_PASSWORD".into()
        ])
    );
}

/// The binary accepts the shipped ConfigMap and (empty) Secret values as its environment: a
/// client dry run with exactly that environment plans VMs and exits 0.
#[test]
fn the_binary_accepts_the_shipped_configuration() {
    let Some(docs) = rendered() else { return };
    let mut env: Vec<(String, String)> = Vec::new();
    for (kind, field) in [("ConfigMap", "data"), ("Secret", "stringData")] {
        let name = if kind == "ConfigMap" {
            "virtwork-config"
        } else {
            "virtwork-secrets"
        };
        for (k, v) in s(find(&docs, kind, name), &[field]).as_mapping().unwrap() {
            env.push((k.as_str().unwrap().into(), v.as_str().unwrap().into()));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args(["run", "--dry-run", "--workloads", "cpu", "--audit-db"])
        // /data/virtwork.db exists only in the pod; the flag outranks the env value.
        .arg(dir.path().join("audit.db"))
        .env_clear()
        .env("HOME", dir.path())
        .envs(env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "shipped configuration rejected:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("kind: VirtualMachine"), "{stdout}");
    assert!(
        stdout.contains("namespace: virtwork\n"),
        "VMs go to VIRTWORK_NAMESPACE: {stdout}"
    );
    // VIRTWORK_LOG_FORMAT=json: every stderr line is one JSON object.
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "not a JSON log line: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// RBAC against the requests the binary really makes

/// (API group, resource, verb) triples the ClusterRole grants.
fn granted(docs: &[Value]) -> BTreeSet<(String, String, String)> {
    let role = find(docs, "ClusterRole", "virtwork");
    let mut out = BTreeSet::new();
    for rule in s(role, &["rules"]).as_sequence().unwrap() {
        let list = |key: &str| -> Vec<String> {
            s(rule, &[key])
                .as_sequence()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        for group in list("apiGroups") {
            for resource in list("resources") {
                for verb in list("verbs") {
                    assert!(
                        verb != "*" && resource != "*",
                        "no wildcards in the ClusterRole"
                    );
                    out.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

/// The (group, resource, verb) a logged request needs, or None for discovery and other
/// non-resource paths (`/api`, `/apis/...` without a resource, `/version`, `/openapi/...`),
/// which every authenticated user may read.
fn required(record: &support::RequestRecord) -> Option<(String, String, String)> {
    let segments: Vec<&str> = record.path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    // rest: [resource, name?, sub?] or ["namespaces", ns, resource, name?, sub?];
    // ["namespaces"] / ["namespaces", name] address namespaces themselves.
    let (resource, name, sub) = match rest {
        [] => return None,
        ["namespaces", _ns, resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
        [resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
    };
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    let watch = record
        .query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (record.method.as_str(), name.is_some()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => panic!("unexpected method {other} {}", record.path),
    };
    Some((group.to_string(), resource, verb.to_string()))
}

/// Runs `cmd` to completion with stdout/stderr captured in files (no pipe can fill up and
/// block the child); the bound only guards against a hang.
fn output_bounded(mut cmd: Command, what: &str) -> std::process::Output {
    let capture = tempfile::tempdir().unwrap();
    let out_path = capture.path().join("stdout");
    let err_path = capture.path().join("stderr");
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            return std::process::Output {
                status,
                stdout: std::fs::read(&out_path).unwrap(),
                stderr: std::fs::read(&err_path).unwrap(),
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("{what} did not finish");
}

/// Runs the real binary against the fake server.
fn virtwork(kubeconfig: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--no-audit")
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(home);
    output_bounded(cmd, &format!("virtwork {args:?}"))
}

/// Every request `run` (fresh and pre-existing namespace, server dry run), `status` and
/// `cleanup` (with --wait, --delete-namespace, -A) send is allowed by the shipped ClusterRole,
/// and every grant is used by one of them: the role is exactly what the tool needs.
#[test]
fn cluster_role_covers_exactly_the_requests_virtwork_makes() {
    let Some(docs) = rendered() else { return };
    let granted = granted(&docs);
    let server = support::FakeApiServer::start(support::Options {
        namespaces: vec!["existing".into()],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let home = dir.path();
    let workloads = ["--workloads", "cpu,disk,network"];
    let scenarios: Vec<(&str, Vec<&str>)> = vec![
        // A fresh namespace: created; readiness watch; data disks (StorageClass preflight).
        (
            "fresh namespace",
            [
                &["run", "--namespace", "fresh", "--timeout", "120"][..],
                &workloads[..],
            ]
            .concat(),
        ),
        // An existing namespace: used as it is, never patched.
        (
            "existing namespace",
            [
                &["run", "--namespace", "existing", "--timeout", "120"][..],
                &workloads[..],
            ]
            .concat(),
        ),
        // Creates whose responses are lost: the retry meets AlreadyExists and reads the object
        // to see whether it is ours.
        (
            "lost responses",
            vec![
                "run",
                "--namespace",
                "lossy",
                "--no-wait",
                "--workloads",
                "network",
            ],
        ),
        // Server-side dry run into the existing namespace, with a workload not yet there.
        (
            "server dry run",
            vec![
                "run",
                "--namespace",
                "existing",
                "--dry-run=server",
                "--workloads",
                "memory",
            ],
        ),
        ("status", vec!["status", "--namespace", "fresh"]),
        ("status -A", vec!["status", "--all-namespaces"]),
        (
            "cleanup preview",
            vec!["cleanup", "--namespace", "fresh", "--dry-run"],
        ),
        // With an orphaned VMI (its VM deleted with orphan propagation): deleted by label.
        (
            "cleanup one namespace",
            vec![
                "cleanup",
                "--namespace",
                "fresh",
                "--yes",
                "--wait",
                "--delete-namespace",
            ],
        ),
        (
            "cleanup -A",
            vec!["cleanup", "--all-namespaces", "--yes", "--wait"],
        ),
    ];
    let mut used: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (label, args) in &scenarios {
        match *label {
            "lost responses" => server.update_faults(|f| {
                for resource in ["services", "secrets", "virtualmachines"] {
                    f.scripted.push(support::ScriptedFault::new(
                        "create",
                        resource,
                        support::FaultAction::DropAfterCommit,
                    ));
                }
            }),
            "cleanup one namespace" => {
                server.insert(serde_json::json!({
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstance",
                    "metadata": {
                        "name": "orphan",
                        "namespace": "fresh",
                        "labels": {
                            "app.kubernetes.io/managed-by": "virtwork",
                            "app.kubernetes.io/component": "cpu",
                            "virtwork/run-id": "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f"
                        }
                    },
                    "spec": {"domain": {"devices": {}}}
                }));
            }
            _ => {}
        }
        server.clear_request_log();
        let out = virtwork(&kubeconfig, home, args);
        server.set_faults(support::Faults::default());
        // Every scenario must succeed, or its requests prove nothing.
        assert!(
            out.status.success(),
            "{label}: virtwork {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = server.request_log();
        assert!(!log.is_empty(), "{label}: no requests");
        for record in &log {
            let Some(need) = required(record) else {
                continue;
            };
            assert!(
                granted.contains(&need),
                "{label}: virtwork {args:?} sent {} {}?{} needing {need:?}, which deploy/rbac.yaml does not grant",
                record.method,
                record.path,
                record.query
            );
            used.insert(need);
        }
        if *label == "lost responses" {
            let reads = log
                .iter()
                .filter(|r| r.method == "GET" && !r.name.is_empty())
                .count();
            assert!(
                reads >= 3,
                "{label}: the retries read the existing objects: {log:?}"
            );
        }
    }
    let unused: Vec<&(String, String, String)> = granted.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "deploy/rbac.yaml grants {unused:?}, which no run/status/cleanup used: remove them"
    );
}

/// The shipped Job examples, run for real: the entrypoint (as in the image) with the Job's
/// environment in front of the real binary, against the fake API server. The run Job creates
/// its VMs and prints one JSON document; the cleanup Job deletes them again, without a prompt.
#[test]
fn job_examples_work_end_to_end_through_the_entrypoint() {
    let server = support::FakeApiServer::start(support::Options::default());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    for (file, expect_vms) in [("job-run.yaml", true), ("job-cleanup.yaml", false)] {
        let job = example(file);
        let container = &pod_spec(&job)["containers"][0];
        let mut cmd = Command::new("sh");
        cmd.arg(repo().join("entrypoint.sh"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .env("KUBECONFIG", &kubeconfig)
            // As in the image: the binary and the audit database under the working directory.
            .env("VIRTWORK_BIN", env!("CARGO_BIN_EXE_virtwork"))
            .env("VIRTWORK_AUDIT_DB", dir.path().join("virtwork.db"))
            .current_dir(dir.path());
        for name in ["VIRTWORK_COMMAND", "VIRTWORK_ARGS", "VIRTWORK_AFTER_RUN"] {
            cmd.env(name, env_value(container, name).unwrap());
        }
        let out = output_bounded(cmd, file);
        assert!(
            out.status.success(),
            "{file} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{file}: stdout is not one JSON document ({e})"));
        assert!(doc.is_object(), "{file}: {doc}");
        let vms = server.objects("virtualmachines", None).len();
        if expect_vms {
            assert!(vms >= 2, "{file} created {vms} VMs");
        } else {
            assert_eq!(vms, 0, "{file} left VMs behind");
        }
    }
}
