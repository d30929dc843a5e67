//! The in-cluster deployment (`deploy/`, Kustomize) rendered with the real `kubectl kustomize`.
//!
//! Checks what an operator relies on: the set of objects of both layouts (the default, confined
//! to one VM namespace, and `deploy/overlays/cluster-wide`), that none of the tool's own objects
//! carries `app.kubernetes.io/managed-by=virtwork` (cleanup selects on it and would delete the
//! tool's Secret and audit PVC), the restricted pod security settings with writable /data and
//! /tmp, that every `VIRTWORK_*` key the manifests set is one the binary reads (from
//! `virtwork::config::env_keys()`) and that the binary accepts the shipped values, that the VM
//! namespace is configured in one place, and the Job examples (deadline beyond their timeout,
//! run end to end). The RBAC of each layout is installed as the policy of the fake API server
//! (tests/support), which then refuses every request and access review it does not allow while
//! the real binary runs, status and cleanup: nothing the tool needs may be refused, and every
//! grant must be used. kubectl is at /usr/bin/kubectl on the dev machines; the tests skip with
//! a notice without it and fail instead when `VIRTWORK_REQUIRE_KUBECTL=1`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_yaml::Value;

use crate::support;

use support::{AccessAttributes, Authorizer};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl kustomize <dir>` as parsed documents, or None (skip) without kubectl.
fn render(dir: &Path) -> Option<Vec<Value>> {
    let required = std::env::var("VIRTWORK_REQUIRE_KUBECTL").as_deref() == Ok("1");
    let out = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
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
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(parse_documents(&String::from_utf8(out.stdout).unwrap()))
}

/// The default layout (`kubectl kustomize deploy/`).
fn rendered() -> Option<Vec<Value>> {
    NAMESPACED.render()
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

fn object_set(items: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    items
        .iter()
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect()
}

/// The tool's own objects, the same in both layouts.
const TOOL_OBJECTS: &[(&str, &str)] = &[
    ("ConfigMap", "virtwork-config"),
    ("Deployment", "virtwork"),
    ("Namespace", "virtwork-system"),
    ("PersistentVolumeClaim", "virtwork-audit-data"),
    ("Secret", "virtwork-secrets"),
    ("ServiceAccount", "virtwork"),
];

/// Cluster-scoped objects have no namespace; the Role and RoleBinding live in the VM namespace
/// (the ConfigMap's VIRTWORK_NAMESPACE); everything else in the tool's own namespace, apart
/// from the VMs, so `cleanup --delete-namespace` cannot take the tool down with it.
fn assert_placement(docs: &[Value]) {
    let vm_ns = vm_namespace(docs);
    assert_ne!(vm_ns, "virtwork-system", "the VMs need their own namespace");
    for doc in docs {
        let (kind, name) = kind_name(doc);
        let expected = match kind.as_str() {
            "ClusterRole" | "ClusterRoleBinding" | "Namespace" => None,
            "Role" | "RoleBinding" => Some(vm_ns.as_str()),
            _ => Some("virtwork-system"),
        };
        assert_eq!(namespace_of(doc), expected, "{kind}/{name}");
    }
}

#[test]
fn kustomization_renders_exactly_the_tools_objects() {
    let Some(docs) = rendered() else { return };
    let got: BTreeSet<(String, String)> = docs.iter().map(kind_name).collect();
    let vm_ns = vm_namespace(&docs);
    let mut expected = object_set(TOOL_OBJECTS);
    expected.extend(object_set(&[
        ("ClusterRole", "virtwork"),
        ("ClusterRoleBinding", "virtwork"),
        ("Namespace", &vm_ns),
        ("Role", "virtwork"),
        ("RoleBinding", "virtwork"),
    ]));
    assert_eq!(got, expected);
    assert_placement(&docs);
    // The deployment makes the VM namespace, so it carries no label of virtwork's runs.
    let labels = s(find(&docs, "Namespace", &vm_ns), &["metadata", "labels"]);
    assert!(labels.get("app.kubernetes.io/managed-by").is_none());
}

#[test]
fn cluster_wide_overlay_renders_the_tool_with_cluster_wide_rbac_only() {
    let Some(docs) = CLUSTER_WIDE.render() else {
        return;
    };
    let got: BTreeSet<(String, String)> = docs.iter().map(kind_name).collect();
    let mut expected = object_set(TOOL_OBJECTS);
    expected.extend(object_set(&[
        ("ClusterRole", "virtwork"),
        ("ClusterRoleBinding", "virtwork"),
    ]));
    assert_eq!(
        got, expected,
        "no VM namespace, no Role: virtwork creates namespaces"
    );
    assert_placement(&docs);
    // Everything but the RBAC is the default layout's, byte for byte.
    let base = rendered().unwrap();
    for (kind, name) in TOOL_OBJECTS {
        assert_eq!(
            find(&docs, kind, name),
            find(&base, kind, name),
            "{kind}/{name}"
        );
    }
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
    docs.extend(CLUSTER_WIDE.render().unwrap());
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

/// The least time Kubernetes must leave a Job beyond virtwork's own --timeout: pulling the
/// image and scheduling the pod count against activeDeadlineSeconds, and so do the preflight,
/// the creates and the audit write around the timed wait.
const JOB_DEADLINE_MARGIN_SECS: u64 = 120;

/// Each Job example passes an explicit `--timeout` and has an `activeDeadlineSeconds` beyond
/// it by a margin: virtwork's own timeout ends a slow run first (with a clear error and its
/// audit record), and the deadline only stops a pod that hangs anyway.
#[test]
fn job_examples_have_a_deadline_beyond_their_timeout() {
    for file in ["job-run.yaml", "job-cleanup.yaml"] {
        let job = example(file);
        let deadline = job["spec"]
            .get("activeDeadlineSeconds")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| {
                panic!("{file}: no spec.activeDeadlineSeconds: a hung pod runs forever")
            });
        let container = &pod_spec(&job)["containers"][0];
        let args: Vec<&str> = env_value(container, "VIRTWORK_ARGS")
            .unwrap()
            .split_whitespace()
            .collect();
        let timeout: u64 = args
            .iter()
            .position(|a| *a == "--timeout")
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| {
                panic!(
                    "{file}: VIRTWORK_ARGS has no --timeout: the deadline must be derived from \
                     the timeout the Job passes, not from a ConfigMap value that can change"
                )
            })
            .parse()
            .unwrap_or_else(|e| panic!("{file}: --timeout is not a number of seconds: {e}"));
        assert!(
            deadline >= timeout + JOB_DEADLINE_MARGIN_SECS,
            "{file}: activeDeadlineSeconds {deadline} leaves less than \
             {JOB_DEADLINE_MARGIN_SECS}s beyond --timeout {timeout}: Kubernetes would kill the \
             pod before virtwork's own timeout reports what did not get ready"
        );
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
// RBAC: each layout enforced by the test API server while the real binary works

/// One shipped kustomization with its own RBAC.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// The directory `kubectl kustomize` renders, relative to the repository.
    dir: &'static str,
    /// The file its grants are written in (named in failure messages).
    rbac_file: &'static str,
}

/// The default: a Role in the VM namespace, a minimal ClusterRole.
const NAMESPACED: Layout = Layout {
    dir: "deploy",
    rbac_file: "deploy/rbac.yaml",
};

/// The opt-in overlay for work in every namespace.
const CLUSTER_WIDE: Layout = Layout {
    dir: "deploy/overlays/cluster-wide",
    rbac_file: "deploy/overlays/cluster-wide/rbac.yaml",
};

impl Layout {
    fn render(&self) -> Option<Vec<Value>> {
        render(&repo().join(self.dir))
    }
}

/// One verb on one resource, granted to the tool's ServiceAccount by one rule of one role
/// through one binding.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    /// e.g. `Role virtwork/virtwork rule 1 (RoleBinding virtwork/virtwork)`.
    origin: String,
    /// Some(ns): requests in ns only (bound by a RoleBinding); None: everywhere.
    namespace: Option<String>,
    group: String,
    /// `resource` or `resource/subresource`, as RBAC spells it.
    resource: String,
    verb: String,
    resource_names: Vec<String>,
}

impl Grant {
    /// RBAC's rule match (k8s.io/kubernetes rbac `RuleAllows`) within the binding's scope
    /// ([`grants_of`] lets no wildcard through).
    fn allows(&self, request: &AccessAttributes) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| *ns == request.namespace)
            && self.group == request.group
            && self.resource == request.rbac_resource()
            && self.verb == request.verb
            && (self.resource_names.is_empty() || self.resource_names.contains(&request.name))
    }

    /// Whether every request this grant allows is also allowed by `other`.
    fn is_covered_by(&self, other: &Grant) -> bool {
        self.group == other.group
            && self.resource == other.resource
            && self.verb == other.verb
            && (other.namespace.is_none() || other.namespace == self.namespace)
            && (other.resource_names.is_empty()
                || (!self.resource_names.is_empty()
                    && self
                        .resource_names
                        .iter()
                        .all(|n| other.resource_names.contains(n))))
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{} {}`", self.verb, self.resource)?;
        if !self.resource_names.is_empty() {
            write!(f, " on {:?}", self.resource_names)?;
        }
        write!(f, " (group {:?}) ", self.group)?;
        match &self.namespace {
            Some(ns) => write!(f, "in namespace {ns}")?,
            None => write!(f, "in every namespace and at the cluster scope")?,
        }
        write!(f, ", from {}", self.origin)
    }
}

/// (namespace, name) of the ServiceAccount the shipped Deployment runs as.
fn tool_identity(docs: &[Value]) -> (String, String) {
    let deployment = find(docs, "Deployment", "virtwork");
    (
        s(deployment, &["metadata", "namespace"])
            .as_str()
            .unwrap()
            .to_string(),
        s(pod_spec(deployment), &["serviceAccountName"])
            .as_str()
            .unwrap()
            .to_string(),
    )
}

fn strings_at(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .map(|i| i.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn namespace_of(doc: &Value) -> Option<&str> {
    doc.get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
}

/// Every grant the rendered layout gives the tool's ServiceAccount. Fails on wildcards, on a
/// binding for anyone else, on a dangling roleRef and on a role nothing binds.
fn grants_of(layout: Layout, docs: &[Value]) -> Vec<Grant> {
    let (sa_namespace, sa_name) = tool_identity(docs);
    let file = layout.rbac_file;
    let mut grants = Vec::new();
    let mut bound_roles: BTreeSet<(String, String, String)> = BTreeSet::new();
    for binding in docs {
        let (kind, name) = kind_name(binding);
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        let subjects = s(binding, &["subjects"]).as_sequence().unwrap();
        for subject in subjects {
            let is_tool = s(subject, &["kind"]).as_str() == Some("ServiceAccount")
                && s(subject, &["name"]).as_str() == Some(sa_name.as_str())
                && subject.get("namespace").and_then(Value::as_str) == Some(sa_namespace.as_str());
            assert!(
                is_tool,
                "{file}: {kind} {name} binds {subject:?}, not the tool's ServiceAccount \
                 {sa_namespace}/{sa_name}"
            );
        }
        let binding_namespace = namespace_of(binding).map(str::to_string);
        assert_eq!(
            binding_namespace.is_some(),
            kind == "RoleBinding",
            "{file}: {kind} {name}: only a RoleBinding has a namespace"
        );
        let role_kind = s(binding, &["roleRef", "kind"]).as_str().unwrap();
        let role_name = s(binding, &["roleRef", "name"]).as_str().unwrap();
        let role = docs
            .iter()
            .find(|d| {
                kind_name(d) == (role_kind.to_string(), role_name.to_string())
                    && (role_kind == "ClusterRole"
                        || namespace_of(d) == binding_namespace.as_deref())
            })
            .unwrap_or_else(|| {
                panic!(
                    "{file}: {kind} {name} refers to {role_kind} {role_name}, which is not shipped"
                )
            });
        let role_label = match namespace_of(role) {
            Some(ns) => format!("{role_kind} {ns}/{role_name}"),
            None => format!("{role_kind} {role_name}"),
        };
        bound_roles.insert((
            role_kind.to_string(),
            namespace_of(role).unwrap_or_default().to_string(),
            role_name.to_string(),
        ));
        let binding_label = match &binding_namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        for (index, rule) in s(role, &["rules"])
            .as_sequence()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert!(
                rule.get("nonResourceURLs").is_none(),
                "{file}: {role_label} rule {index}: discovery needs no grant"
            );
            let resource_names = strings_at(rule, "resourceNames");
            for group in strings_at(rule, "apiGroups") {
                for resource in strings_at(rule, "resources") {
                    for verb in strings_at(rule, "verbs") {
                        let grant = Grant {
                            origin: format!("{role_label} rule {index} ({binding_label})"),
                            namespace: binding_namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                            resource_names: resource_names.clone(),
                        };
                        assert_no_wildcard(file, &grant);
                        grants.push(grant);
                    }
                }
            }
        }
    }
    for role in docs {
        let (kind, name) = kind_name(role);
        if kind == "Role" || kind == "ClusterRole" {
            let key = (
                kind.clone(),
                namespace_of(role).unwrap_or_default().to_string(),
                name.clone(),
            );
            assert!(
                bound_roles.contains(&key),
                "{file}: {kind} {name} is bound to nothing: remove it or bind it"
            );
        }
    }
    assert!(!grants.is_empty(), "{file}: no grants rendered");
    // A grant another one already covers is a second place to forget when narrowing.
    for (i, grant) in grants.iter().enumerate() {
        for (j, other) in grants.iter().enumerate() {
            assert!(
                i == j || !grant.is_covered_by(other),
                "{file}: {grant} is already granted by {other}: remove one of them"
            );
        }
    }
    grants
}

/// Fails on a wildcard in a grant's group, resource or verb: `list` on every resource would
/// let the tool's token read the whole cluster, and any other wildcard grants what nobody
/// reviewed.
fn assert_no_wildcard(file: &str, grant: &Grant) {
    assert!(
        ![&grant.group, &grant.resource, &grant.verb]
            .iter()
            .any(|v| v.contains('*')),
        "{file}: {grant} has a wildcard: name each group, resource and verb"
    );
}

/// What the test API server's RBAC policy decided, kept for the assertions.
#[derive(Debug, Default)]
struct Ledger {
    /// Indexes of the grants some request or access review was allowed by.
    used: BTreeSet<usize>,
    /// Every refused request or access review, with where it came from.
    refused: Vec<(AccessAttributes, String)>,
}

/// Faults that make the server enforce exactly `grants`, recording into `ledger`.
fn enforcing(grants: &Arc<Vec<Grant>>, ledger: &Arc<Mutex<Ledger>>) -> support::Faults {
    let (grants, ledger) = (grants.clone(), ledger.clone());
    support::Faults {
        authorizer: Some(Authorizer::new(move |request, via| {
            let allowed_by: Vec<usize> = grants
                .iter()
                .enumerate()
                .filter(|(_, g)| g.allows(request))
                .map(|(i, _)| i)
                .collect();
            let mut ledger = ledger.lock().unwrap();
            if allowed_by.is_empty() {
                ledger.refused.push((request.clone(), via.to_string()));
                false
            } else {
                ledger.used.extend(allowed_by);
                true
            }
        })),
        ..Default::default()
    }
}

/// The environment the shipped pod gets from its ConfigMap and Secret (envFrom).
fn pod_env(docs: &[Value]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (kind, name, field) in [
        ("ConfigMap", "virtwork-config", "data"),
        ("Secret", "virtwork-secrets", "stringData"),
    ] {
        for (k, v) in s(find(docs, kind, name), &[field]).as_mapping().unwrap() {
            env.push((k.as_str().unwrap().into(), v.as_str().unwrap().into()));
        }
    }
    env
}

/// The namespace the shipped configuration sends VMs to.
fn vm_namespace(docs: &[Value]) -> String {
    s(
        find(docs, "ConfigMap", "virtwork-config"),
        &["data", "VIRTWORK_NAMESPACE"],
    )
    .as_str()
    .unwrap()
    .to_string()
}

/// Every Namespace the layout creates: they exist before virtwork first runs.
fn rendered_namespaces(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(kind_name)
        .filter(|(kind, _)| kind == "Namespace")
        .map(|(_, name)| name)
        .collect()
}

/// Runs `cmd` to completion with stdout/stderr captured in files (no pipe can fill up and
/// block the child); None when it had to be killed after the hang guard.
fn output_within_guard(mut cmd: Command) -> Option<std::process::Output> {
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
            return Some(std::process::Output {
                status,
                stdout: std::fs::read(&out_path).unwrap(),
                stderr: std::fs::read(&err_path).unwrap(),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn output_bounded(cmd: Command, what: &str) -> std::process::Output {
    output_within_guard(cmd).unwrap_or_else(|| panic!("{what} did not finish"))
}

/// Seconds virtwork may wait in a scenario (VIRTWORK_TIMEOUT). The ConfigMap's 600 would
/// outlast the hang guard when RBAC refuses a watch, which the watcher retries until then.
const SCENARIO_TIMEOUT_SECS: &str = "60";

/// The real binary against the fake server, with the pod's environment as the Deployment
/// gives it (ConfigMap and Secret; the timeout shortened), no audit database. None: it hung.
fn virtwork_in_pod(
    kubeconfig: &Path,
    home: &Path,
    env: &[(String, String)],
    args: &[String],
) -> Option<std::process::Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--no-audit")
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("VIRTWORK_TIMEOUT", SCENARIO_TIMEOUT_SECS)
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(home);
    output_within_guard(cmd)
}

/// A test API server enforcing one layout's RBAC, with the layout's namespaces created.
struct Enforced {
    docs: Vec<Value>,
    grants: Arc<Vec<Grant>>,
    ledger: Arc<Mutex<Ledger>>,
    server: support::FakeApiServer,
    dir: tempfile::TempDir,
}

impl Enforced {
    fn start(layout: Layout, docs: Vec<Value>, extra_namespaces: &[&str]) -> Enforced {
        let grants = Arc::new(grants_of(layout, &docs));
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let mut namespaces = rendered_namespaces(&docs);
        namespaces.extend(extra_namespaces.iter().map(|n| n.to_string()));
        let server = support::FakeApiServer::start(support::Options {
            namespaces,
            faults: enforcing(&grants, &ledger),
            ..Default::default()
        });
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .unwrap();
        Enforced {
            docs,
            grants,
            ledger,
            server,
            dir,
        }
    }

    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Runs one command as the pod would; returns its output (None: it hung and was killed)
    /// and what RBAC refused.
    fn run(
        &self,
        args: &[String],
    ) -> (
        Option<std::process::Output>,
        Vec<(AccessAttributes, String)>,
    ) {
        self.ledger.lock().unwrap().refused.clear();
        let out = virtwork_in_pod(
            &self.kubeconfig(),
            self.dir.path(),
            &pod_env(&self.docs),
            args,
        );
        let refused = std::mem::take(&mut self.ledger.lock().unwrap().refused);
        (out, refused)
    }

    /// Back to enforcement only, after a scenario's scripted faults.
    fn reset_faults(&self) {
        self.server
            .set_faults(enforcing(&self.grants, &self.ledger));
    }
}

/// One command of a layout's proof, and what it finds on the cluster besides earlier work.
struct Scenario {
    label: &'static str,
    args: Vec<String>,
    before: Box<dyn Fn(&support::FakeApiServer)>,
}

/// `virtwork churn` taking one `action` (in `namespace`, else the configured one).
fn churn_once(action: &'static str, namespace: Option<&'static str>) -> Vec<&'static str> {
    let mut args = vec![
        "churn",
        "--duration",
        "1s",
        "--rate",
        "1/s",
        "--actions",
        action,
        // Every run in scope: the prompt would refuse without a terminal.
        "--yes",
    ];
    if let Some(ns) = namespace {
        args.extend(["--namespace", ns]);
    }
    args
}

fn scenario(label: &'static str, args: &[&str]) -> Scenario {
    Scenario {
        label,
        args: args.iter().map(|a| a.to_string()).collect(),
        before: Box::new(|_| {}),
    }
}

impl Scenario {
    fn before(mut self, prepare: impl Fn(&support::FakeApiServer) + 'static) -> Scenario {
        self.before = Box::new(prepare);
        self
    }
}

/// The responses to the creates of a Service, a Secret and a VM are lost: the retry meets
/// AlreadyExists and reads the object to see whether it is ours.
fn lose_create_responses(server: &support::FakeApiServer) {
    server.update_faults(|f| {
        for resource in ["services", "secrets", "virtualmachines"] {
            f.scripted.push(support::ScriptedFault::new(
                "create",
                resource,
                support::FaultAction::DropAfterCommit,
            ));
        }
    });
}

/// A VMI of ours whose VM is gone (deleted with orphan propagation): cleanup deletes it.
/// Garbage collection and namespace deletion are slowed to seconds from here on, so a `--wait`
/// lasts long enough for every kind's watch, the namespace's included, to open: which grants
/// the proof sees used must not depend on how fast this machine happens to be.
fn orphaned_vmi_in(namespace: &str) -> impl Fn(&support::FakeApiServer) + 'static {
    let namespace = namespace.to_string();
    move |server| {
        server.set_controllers(support::ControllerOptions {
            gc_delay: std::time::Duration::from_secs(3),
            namespace_delete_delay: std::time::Duration::from_secs(3),
            ..Default::default()
        });
        server.insert(serde_json::json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {
                "name": "orphan",
                "namespace": namespace,
                "labels": {
                    "app.kubernetes.io/managed-by": "virtwork",
                    "app.kubernetes.io/component": "cpu",
                    "virtwork/run-id": "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f"
                }
            },
            "spec": {"domain": {"devices": {}}}
        }));
    }
}

/// The proof for one layout: every scenario runs the real binary against a server enforcing
/// exactly the layout's RBAC (requests and access reviews alike). Nothing virtwork asks for
/// may be refused, every scenario must succeed, and every grant must be used by some request
/// or access review. Failures name the request or the grant and the file to edit.
fn assert_layout_grants_exactly(
    layout: Layout,
    extra_namespaces: &[&str],
    scenarios: Vec<Scenario>,
) {
    let Some(docs) = layout.render() else { return };
    let cluster = Enforced::start(layout, docs, extra_namespaces);
    let file = layout.rbac_file;
    for scenario in &scenarios {
        (scenario.before)(&cluster.server);
        let (out, mut refused) = cluster.run(&scenario.args);
        cluster.reset_faults();
        if scenario.args.iter().any(|a| a == "--delete-namespace") {
            refused.retain(|(request, _)| !is_best_effort_read(&cluster.grants, request));
        }
        let label = scenario.label;
        let args = &scenario.args;
        let stderr = out
            .as_ref()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .unwrap_or_else(|| "(virtwork hung and was killed)".into());
        if !refused.is_empty() {
            let mut needs: Vec<String> = refused
                .iter()
                .map(|(request, via)| format!("  {request}  ({via})"))
                .collect();
            needs.dedup();
            panic!(
                "{file}: `{label}` (virtwork {args:?}) was refused what it needs; add to {file}:\n{}\nvirtwork's stderr:\n{stderr}",
                needs.join("\n"),
            );
        }
        let out = out.unwrap_or_else(|| panic!("{file}: `{label}`: virtwork {args:?} hung"));
        // A failed scenario proves nothing about what the tool needs.
        assert!(
            out.status.success(),
            "{file}: `{label}`: virtwork {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let used = cluster.ledger.lock().unwrap().used.clone();
    let unused: Vec<String> = cluster
        .grants
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, g)| format!("  {g}"))
        .collect();
    assert!(
        unused.is_empty(),
        "{file} grants what no scenario ({}) used; remove it (or add the scenario that needs it):\n{}",
        scenarios
            .iter()
            .map(|s| s.label)
            .collect::<Vec<_>>()
            .join(", "),
        unused.join("\n")
    );
}

/// `cleanup --delete-namespace` lists every namespaced kind it may and skips one RBAC refuses
/// (the layouts name only what virtwork needs): a refused list inside a namespace of a kind no
/// grant names is expected there. Whether skipping it was right is the scenario's outcome and
/// the cleanup tests' business; a kind some grant names but not for this request is still a
/// refusal to fix.
fn is_best_effort_read(grants: &[Grant], request: &AccessAttributes) -> bool {
    request.verb == "list"
        && !request.namespace.is_empty()
        && !grants
            .iter()
            .any(|g| g.group == request.group && g.resource == request.rbac_resource())
}

/// The default layout: everything virtwork does in its VM namespace — runs (with lost create
/// responses, a server dry run), status, cleanup preview, cleanup with --wait and an orphaned
/// VMI — is allowed by the Role there and the minimal ClusterRole, and each of their grants
/// is needed. The pod's own ConfigMap chooses the namespace, as in the cluster.
#[test]
fn namespaced_layout_grants_exactly_what_virtwork_does_in_its_namespace() {
    let Some(docs) = NAMESPACED.render() else {
        return;
    };
    let ns = vm_namespace(&docs);
    let workloads = ["--workloads", "cpu,disk,network"];
    let scenarios = vec![
        // Readiness watch; data disks (StorageClass preflight); the namespace (made by the
        // deployment, so without virtwork's label) is labelled.
        scenario(
            "run",
            &[&["run", "--timeout", "120"][..], &workloads[..]].concat(),
        ),
        scenario("status", &["status"]),
        // One action each: restart, stop-start and a migration (left for cleanup --wait).
        scenario("churn restart", &churn_once("restart", None)),
        scenario("churn stop-start", &churn_once("stop-start", None)),
        scenario("churn migrate", &churn_once("migrate", None)),
        scenario("cleanup preview", &["cleanup", "--dry-run"]),
        scenario("cleanup --wait", &["cleanup", "--yes", "--wait"]).before(orphaned_vmi_in(&ns)),
        scenario(
            "run with lost create responses",
            &["run", "--no-wait", "--workloads", "network"],
        )
        .before(lose_create_responses),
        scenario(
            "server dry run",
            &["run", "--dry-run=server", "--workloads", "memory"],
        ),
        scenario("cleanup", &["cleanup", "--yes"]),
    ];
    assert_layout_grants_exactly(NAMESPACED, &[], scenarios);
}

/// The cluster-wide overlay: runs into a new and an existing namespace (created / labelled),
/// lost create responses, a server dry run, status and cleanup in one and in all namespaces,
/// `--delete-namespace` with `--wait` — all allowed, every grant needed.
#[test]
fn cluster_wide_overlay_grants_exactly_what_virtwork_does_in_any_namespace() {
    let workloads = ["--workloads", "cpu,disk,network"];
    let scenarios = vec![
        scenario(
            "run into a new namespace",
            &[
                &["run", "--namespace", "fresh", "--timeout", "120"][..],
                &workloads[..],
            ]
            .concat(),
        ),
        scenario(
            "run into an existing namespace",
            &[
                &["run", "--namespace", "existing", "--timeout", "120"][..],
                &workloads[..],
            ]
            .concat(),
        ),
        scenario(
            "run with lost create responses",
            &[
                "run",
                "--namespace",
                "lossy",
                "--no-wait",
                "--workloads",
                "network",
            ],
        )
        .before(lose_create_responses),
        scenario(
            "server dry run",
            &[
                "run",
                "--namespace",
                "existing",
                "--dry-run=server",
                "--workloads",
                "memory",
            ],
        ),
        scenario("status", &["status", "--namespace", "fresh"]),
        scenario("status -A", &["status", "--all-namespaces"]),
        scenario("churn restart", &churn_once("restart", Some("existing"))),
        scenario(
            "churn stop-start",
            &churn_once("stop-start", Some("existing")),
        ),
        scenario("churn migrate", &churn_once("migrate", Some("existing"))),
        scenario(
            "cleanup preview",
            &["cleanup", "--namespace", "fresh", "--dry-run"],
        ),
        scenario(
            "cleanup --delete-namespace --wait",
            &[
                "cleanup",
                "--namespace",
                "fresh",
                "--yes",
                "--wait",
                "--delete-namespace",
            ],
        )
        .before(orphaned_vmi_in("fresh")),
        scenario(
            "cleanup -A --wait",
            &["cleanup", "--all-namespaces", "--yes", "--wait"],
        ),
    ];
    assert_layout_grants_exactly(CLUSTER_WIDE, &["existing"], scenarios);
}

/// Every shipped manifest: each kustomization as `kubectl kustomize` renders it, and every
/// YAML file under deploy/ as written (the monitoring RBAC and the Job examples are applied
/// on their own).
fn every_shipped_manifest() -> Option<Vec<(String, Vec<Value>)>> {
    fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo().join("deploy"), &mut files);
    files.sort();
    let mut manifests = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(repo()).unwrap().display().to_string();
        let name = file.file_name().unwrap().to_string_lossy();
        if name == "kustomization.yaml" {
            manifests.push((
                format!("kubectl kustomize {}", file.parent().unwrap().display()),
                render(file.parent().unwrap())?,
            ));
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            let text = std::fs::read_to_string(file).unwrap();
            manifests.push((shown, parse_documents(&text)));
        }
    }
    Some(manifests)
}

/// No shipped role holds a wildcard: `list` on `*` would let the token of an exec-able
/// Deployment read the whole cluster (Route TLS keys, inline credentials in workload
/// templates, the RBAC inventory, every custom resource), and any other `*` grants what no
/// review saw. Checked on every rule of every Role and ClusterRole in every shipped manifest,
/// not only the layouts' bound ones.
#[test]
fn no_shipped_manifest_grants_a_wildcard() {
    let Some(manifests) = every_shipped_manifest() else {
        return;
    };
    let mut roles = 0;
    for (source, docs) in &manifests {
        for doc in docs {
            let (kind, name) = kind_name(doc);
            if kind != "Role" && kind != "ClusterRole" {
                continue;
            }
            roles += 1;
            assert!(
                doc.get("aggregationRule").is_none(),
                "{source}: {kind} {name} aggregates other roles: its rules are not reviewable here"
            );
            let rules = doc.get("rules").and_then(Value::as_sequence);
            for (index, rule) in rules.into_iter().flatten().enumerate() {
                for field in [
                    "apiGroups",
                    "resources",
                    "verbs",
                    "resourceNames",
                    "nonResourceURLs",
                ] {
                    let values = strings_at(rule, field);
                    assert!(
                        !values.iter().any(|v| v.contains('*')),
                        "{source}: {kind} {name} rule {index} has `*` in {field} {values:?}: \
                         name each group, resource and verb"
                    );
                }
            }
        }
    }
    // Both layouts and the monitoring kits were seen.
    assert!(
        roles >= 4,
        "only {roles} roles found in {} manifests",
        manifests.len()
    );
}

/// What replaced list-on-everything: under exactly the overlay's rules, `cleanup
/// --delete-namespace` keeps a namespace virtwork created once someone has been given rights
/// in it (a RoleBinding, which virtwork never creates), and keeps it for a foreign object of a
/// kind virtwork creates; kinds it may not list are skipped, not fatal. Nothing the check
/// needs is refused.
#[test]
fn cluster_wide_overlay_keeps_a_namespace_someone_was_given_rights_in() {
    let Some(docs) = CLUSTER_WIDE.render() else {
        return;
    };
    let cluster = Enforced::start(CLUSTER_WIDE, docs, &[]);
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let named_refusals = |refused: &[(AccessAttributes, String)]| -> Vec<String> {
        refused
            .iter()
            .filter(|(r, _)| !is_best_effort_read(&cluster.grants, r))
            .map(|(r, via)| format!("{r} ({via})"))
            .collect()
    };
    let foreign = [
        (
            "RoleBinding team-edit",
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "team-edit", "namespace": "fresh"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "User", "name": "alice"}]
            }),
            ("rolebindings", "team-edit"),
        ),
        (
            "Service web",
            serde_json::json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "fresh"},
                "spec": {"ports": [{"port": 80}]}
            }),
            ("services", "web"),
        ),
    ];
    for (shown, object, (plural, name)) in foreign {
        let (out, refused) = cluster.run(&args(&[
            "run",
            "--namespace",
            "fresh",
            "--no-wait",
            "--workloads",
            "cpu",
        ]));
        let out = out.expect("run finished");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(refused.is_empty(), "{refused:?}");
        cluster.server.insert(object);
        let (out, refused) = cluster.run(&args(&[
            "cleanup",
            "--namespace",
            "fresh",
            "--yes",
            "--delete-namespace",
        ]));
        let out = out.expect("cleanup finished");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let refused = named_refusals(&refused);
        assert!(refused.is_empty(), "RBAC refused {refused:?}:\n{stderr}");
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "kept namespace fresh: it holds 1 object(s) virtwork does not manage: {shown}"
            )),
            "{stderr}"
        );
        assert!(cluster.server.get("namespaces", "", "fresh").is_some());
        assert!(cluster.server.get(plural, "fresh", name).is_some());
        cluster.server.remove(plural, "fresh", name);
    }
    // Nothing foreign left: the same check deletes it.
    let (out, refused) = cluster.run(&args(&[
        "cleanup",
        "--namespace",
        "fresh",
        "--yes",
        "--delete-namespace",
    ]));
    let out = out.expect("cleanup finished");
    let refused = named_refusals(&refused);
    assert!(refused.is_empty(), "RBAC refused {refused:?}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Deleted (the server may still be finalizing it).
    let gone = cluster.server.get("namespaces", "", "fresh");
    assert!(
        gone.is_none() || gone.as_ref().unwrap()["metadata"]["deletionTimestamp"].is_string(),
        "{gone:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        cluster
            .server
            .request_log()
            .iter()
            .any(|r| r.verb == "delete" && r.resource == "namespaces"),
        "no namespace delete was sent"
    );
}

/// The default layout confines virtwork: across all namespaces, or in any namespace but its
/// own, status, cleanup and run are refused by RBAC with a clear error (exit 1), and nothing
/// is created or deleted — not another namespace's objects, not its own.
#[test]
fn namespaced_layout_keeps_virtwork_out_of_other_namespaces() {
    let Some(docs) = NAMESPACED.render() else {
        return;
    };
    let own = vm_namespace(&docs);
    let cluster = Enforced::start(NAMESPACED, docs, &["elsewhere"]);
    let ours = |name: &str, namespace: &str| {
        serde_json::json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {
                    "app.kubernetes.io/managed-by": "virtwork",
                    "app.kubernetes.io/component": "cpu",
                    "virtwork/run-id": "6f1c2b3a-4d5e-4f60-8a9b-0c1d2e3f4a5b"
                }
            },
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}
        })
    };
    cluster.server.insert(ours("virtwork-cpu-0", "elsewhere"));
    cluster.server.insert(ours("virtwork-cpu-0", &own));
    let cases: [(&str, &[&str], &str); 4] = [
        ("status -A", &["status", "--all-namespaces"], "forbidden"),
        (
            "cleanup -A",
            &["cleanup", "--all-namespaces", "--yes"],
            "forbidden",
        ),
        (
            "cleanup in another namespace",
            &["cleanup", "--namespace", "elsewhere", "--yes"],
            "forbidden",
        ),
        (
            "run into another namespace",
            &["run", "--namespace", "elsewhere", "--workloads", "cpu"],
            "not allowed to create secrets in namespace elsewhere",
        ),
    ];
    for (label, args, expected) in cases {
        cluster.server.clear_request_log();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (out, refused) = cluster.run(&args);
        let out = out.unwrap_or_else(|| panic!("{label}: virtwork hung"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{label}: {stderr}");
        assert!(!refused.is_empty(), "{label}: RBAC refused nothing");
        assert!(
            stderr.to_lowercase().contains(expected),
            "{label}: stderr does not say {expected:?}:\n{stderr}"
        );
        let writes: Vec<String> = cluster
            .server
            .request_log()
            .iter()
            .filter(|r| r.committed && r.resource != "selfsubjectaccessreviews")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(writes.is_empty(), "{label} changed the cluster: {writes:?}");
        for namespace in ["elsewhere", own.as_str()] {
            assert!(
                cluster
                    .server
                    .get("virtualmachines", namespace, "virtwork-cpu-0")
                    .is_some(),
                "{label} deleted the VM in {namespace}"
            );
        }
    }
}

/// The VM namespace is chosen in one place, the ConfigMap's VIRTWORK_NAMESPACE: change only
/// that and the rendered Namespace, Role, RoleBinding and the ClusterRole's namespace rule all
/// follow, so the permissions are where the pod sends its VMs and nowhere else.
#[test]
fn the_vm_namespace_is_chosen_in_one_place() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("deploy"), copy.path());
    let configmap = copy.path().join("tool/configmap.yaml");
    let text = std::fs::read_to_string(&configmap).unwrap();
    let default = "\n  VIRTWORK_NAMESPACE: virtwork\n";
    assert!(text.contains(default), "tool/configmap.yaml: {text}");
    std::fs::write(
        &configmap,
        text.replace(default, "\n  VIRTWORK_NAMESPACE: loadtest-7\n"),
    )
    .unwrap();
    let Some(docs) = render(copy.path()) else {
        return;
    };
    assert_eq!(vm_namespace(&docs), "loadtest-7");
    assert_eq!(
        rendered_namespaces(&docs)
            .into_iter()
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(["loadtest-7".to_string(), "virtwork-system".to_string()])
    );
    let grants = grants_of(NAMESPACED, &docs);
    for grant in &grants {
        if let Some(ns) = &grant.namespace {
            assert_eq!(ns, "loadtest-7", "{grant}");
        }
        if grant.resource == "namespaces" && !grant.resource_names.is_empty() {
            assert_eq!(grant.resource_names, ["loadtest-7"], "{grant}");
        }
    }
    let allowed = |verb: &str, group: &str, resource: &str, namespace: &str, name: &str| {
        let request = AccessAttributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        };
        grants.iter().any(|g| g.allows(&request))
    };
    assert!(allowed(
        "create",
        "kubevirt.io",
        "virtualmachines",
        "loadtest-7",
        ""
    ));
    assert!(allowed("get", "", "namespaces", "", "loadtest-7"));
    assert!(!allowed(
        "create",
        "kubevirt.io",
        "virtualmachines",
        "virtwork",
        ""
    ));
    assert!(!allowed("get", "", "namespaces", "", "virtwork"));
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The shipped Job examples, run for real: the entrypoint (as in the image) with the Job's
/// environment (its own variables plus the ConfigMap and Secret) in front of the real binary,
/// against a test API server enforcing the default layout's RBAC. The run Job creates its VMs
/// in the VM namespace and prints one JSON document; the cleanup Job deletes them again,
/// without a prompt; RBAC refuses neither anything.
#[test]
fn job_examples_work_end_to_end_through_the_entrypoint() {
    let Some(docs) = NAMESPACED.render() else {
        return;
    };
    let namespace = vm_namespace(&docs);
    let cluster = Enforced::start(NAMESPACED, docs, &[]);
    let dir = cluster.dir.path();
    for (file, expect_vms) in [("job-run.yaml", true), ("job-cleanup.yaml", false)] {
        let job = example(file);
        let container = &pod_spec(&job)["containers"][0];
        cluster.ledger.lock().unwrap().refused.clear();
        let mut cmd = Command::new("sh");
        cmd.arg(repo().join("entrypoint.sh"))
            .env_clear()
            .envs(pod_env(&cluster.docs))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("KUBECONFIG", cluster.kubeconfig())
            // As in the image: the binary, and the audit database under the working directory.
            .env("VIRTWORK_BIN", env!("CARGO_BIN_EXE_virtwork"))
            .env("VIRTWORK_AUDIT_DB", dir.join("virtwork.db"))
            .current_dir(dir);
        for name in ["VIRTWORK_COMMAND", "VIRTWORK_ARGS", "VIRTWORK_AFTER_RUN"] {
            cmd.env(name, env_value(container, name).unwrap());
        }
        let out = output_bounded(cmd, file);
        let refused = std::mem::take(&mut cluster.ledger.lock().unwrap().refused);
        assert!(
            refused.is_empty(),
            "{file} needs what {} does not grant: {refused:?}",
            NAMESPACED.rbac_file
        );
        assert!(
            out.status.success(),
            "{file} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{file}: stdout is not one JSON document ({e})"));
        assert!(doc.is_object(), "{file}: {doc}");
        let vms = cluster
            .server
            .objects("virtualmachines", Some(&namespace))
            .len();
        if expect_vms {
            assert!(vms >= 2, "{file} created {vms} VMs in {namespace}");
        } else {
            assert_eq!(vms, 0, "{file} left VMs behind");
        }
    }
}

/// The monitoring kit's RBAC (deploy/monitoring/rbac-*.yaml) gives the tool's ServiceAccount
/// exactly what `virtwork verify` needs in-cluster: `get` on the service proxy of the
/// Prometheus it discovers and, on OpenShift, `get` on the monitoring Route it reads first,
/// in that monitoring namespace only. The requests are the ones tests/verify.rs sees verify
/// make; the grants must allow them and nothing else.
#[test]
fn monitoring_rbac_grants_verify_the_service_proxy_and_route_and_nothing_else() {
    let Some(tool) = NAMESPACED.render() else {
        return;
    };
    let deployment = find(&tool, "Deployment", "virtwork").clone();
    let kits: [(&str, &str, &[&str]); 2] = [
        (
            "deploy/monitoring/rbac-kube-prometheus.yaml",
            "monitoring",
            &["/api/v1/namespaces/monitoring/services/http:prometheus-k8s:web/proxy/api/v1/query"],
        ),
        (
            "deploy/monitoring/rbac-openshift.yaml",
            "openshift-monitoring",
            &[
                "/apis/route.openshift.io/v1/namespaces/openshift-monitoring/routes/thanos-querier",
                "/api/v1/namespaces/openshift-monitoring/services/https:thanos-querier:web/proxy/api/v1/query",
            ],
        ),
    ];
    for (file, namespace, request_paths) in kits {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let mut docs = parse_documents(&text);
        // The binding must name the ServiceAccount the shipped Deployment runs as.
        docs.push(deployment.clone());
        let grants = grants_of(
            Layout {
                dir: "deploy",
                rbac_file: file,
            },
            &docs,
        );
        let described: Vec<String> = grants.iter().map(ToString::to_string).collect();
        assert_eq!(
            grants.len(),
            request_paths.len(),
            "{file}: one grant per request verify makes, got {described:?}"
        );
        for path in request_paths {
            let request = AccessAttributes::from_request("GET", path, &Default::default())
                .expect("a resource request");
            let granted: Vec<&Grant> = grants.iter().filter(|g| g.allows(&request)).collect();
            assert!(
                granted.len() == 1
                    && granted[0].namespace.as_deref() == Some(namespace)
                    && granted[0].verb == "get",
                "{file}: {path} is not granted exactly once as a get in {namespace}: {described:?}"
            );
            let elsewhere = path.replace(
                &format!("/namespaces/{namespace}/"),
                "/namespaces/virtwork/",
            );
            let elsewhere =
                AccessAttributes::from_request("GET", &elsewhere, &Default::default()).unwrap();
            assert!(
                !grants.iter().any(|g| g.allows(&elsewhere)),
                "{file}: the grant reaches beyond {namespace}"
            );
        }
        let routes: Vec<&Grant> = grants.iter().filter(|g| g.resource == "routes").collect();
        assert!(
            routes
                .iter()
                .all(|g| g.resource_names == ["thanos-querier"]),
            "{file}: routes are granted by name only: {described:?}"
        );
    }
}
