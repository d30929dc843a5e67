//! Nodes during a drain, as KubeVirt and kube-apiserver handle them: which node a new VMI is
//! scheduled to (cordoned nodes excluded), the eviction of a virt-launcher Pod (`POST
//! pods/<name>/eviction`) decided as KubeVirt's eviction webhook and its PodDisruptionBudgets
//! decide it, and the live migration an eviction triggers.
//!
//! The decision follows virt-api's pod eviction admitter and KubeVirt's "Handling Eviction
//! Requests" design: with strategy `None` (or none set and no cluster default) the eviction
//! is granted and the VM's run strategy restarts it elsewhere; `LiveMigrate` marks a
//! migratable VMI for evacuation and answers 429 until the migration has moved it (the
//! source Pod is then gone), and denies a VMI that cannot migrate with 429 for as long as
//! the drain retries; `LiveMigrateIfPossible` migrates what can migrate and evicts the
//! rest; `External` marks the VMI and denies. A VMI can migrate when each of its volumes is
//! a ReadWriteMany claim (containerdisk and cloud-init disks are copied).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::controllers::ControllerOptions;
use super::http::Shared;
use super::resources;
use super::status::ApiError;
use super::store::{Key, Store, WriteResult, meta_str};

/// The node of VMIs when the store holds no Node objects (most tests).
pub const DEFAULT_NODE: &str = "fake-node-0";

fn idx(plural: &str) -> usize {
    resources::lookup(plural).unwrap()
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Whether a pod tolerating `tolerations` may be placed on `node`, as the scheduler's
/// TaintToleration filter decides (kubernetes pkg/scheduler/framework/plugins/tainttoleration/
/// taint_toleration.go: only `NoSchedule` and `NoExecute` taints filter; matching follows
/// `Toleration.ToleratesTaint` in k8s.io/api/core/v1/toleration.go), and whether KubeVirt's
/// launcher may go there at all: virt-controller puts the node selector
/// `kubevirt.io/schedulable: "true"` on every launcher Pod (pkg/virt-controller/services/
/// template.go), and virt-handler sets that label to `"false"` on a node it stops serving.
/// Nodes without the label count as labelled `"true"`, so stores seeded with bare Nodes keep
/// scheduling as before.
pub fn admits(node: &Value, tolerations: &[Value]) -> bool {
    if node.pointer("/spec/unschedulable") == Some(&json!(true))
        || str_at(node, "/metadata/labels/kubevirt.io~1schedulable") == "false"
    {
        return false;
    }
    let tolerated = |taint: &Value| {
        tolerations.iter().any(|t| {
            let effect = str_at(t, "/effect");
            let key = str_at(t, "/key");
            let effect_ok = effect.is_empty() || effect == str_at(taint, "/effect");
            let key_ok = key.is_empty() || key == str_at(taint, "/key");
            let value_ok = match str_at(t, "/operator") {
                "Exists" => true,
                _ => str_at(t, "/value") == str_at(taint, "/value"),
            };
            effect_ok && key_ok && value_ok
        })
    };
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|taint| matches!(str_at(taint, "/effect"), "NoSchedule" | "NoExecute"))
        .all(tolerated)
}

/// The tolerations a VMI's launcher Pod carries: the VMI's own (virt-controller copies
/// `spec.tolerations` to the Pod).
pub fn tolerations_of(vmi: &Value) -> Vec<Value> {
    vmi.pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The node for a new VMI (or a migration target, `except` its source) whose launcher
/// tolerates `tolerations`: [`DEFAULT_NODE`] without Node objects; else the node admitting
/// it ([`admits`]: not cordoned, taints tolerated) running the fewest launcher Pods; `None`
/// when no node admits it.
pub fn pick_node(store: &Store, except: Option<&str>, tolerations: &[Value]) -> Option<String> {
    let nodes = idx("nodes");
    // Nodes are cluster-scoped: keys (nodes, "", name), one range of the ordered store.
    let all_nodes: Vec<(&String, &Value)> = store
        .objects
        .range((nodes, String::new(), String::new())..)
        .take_while(|((res, _, _), _)| *res == nodes)
        .map(|((_, _, name), node)| (name, node))
        .collect();
    if all_nodes.is_empty() {
        return Some(DEFAULT_NODE.to_string());
    }
    let schedulable: Vec<String> = all_nodes
        .into_iter()
        .filter(|(_, node)| admits(node, tolerations))
        .map(|(name, _)| name.clone())
        .filter(|name| Some(name.as_str()) != except)
        .collect();
    let pods = idx("pods");
    let load = |node: &str| {
        store
            .objects
            .iter()
            .filter(|((res, _, _), pod)| *res == pods && str_at(pod, "/spec/nodeName") == node)
            .count()
    };
    schedulable.into_iter().min_by_key(|n| load(n))
}

/// Whether KubeVirt could live-migrate `vmi`: every claim it mounts is ReadWriteMany.
pub fn migratable(store: &Store, vmi: &Value) -> bool {
    let ns = meta_str(vmi, "namespace");
    let pvcs = idx("persistentvolumeclaims");
    vmi.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.pointer("/dataVolume/name")
                .or_else(|| v.pointer("/persistentVolumeClaim/claimName"))
                .and_then(Value::as_str)
        })
        .all(|claim| {
            store
                .objects
                .get(&(pvcs, ns.to_string(), claim.to_string()))
                .and_then(|pvc| pvc.pointer("/spec/accessModes"))
                .and_then(Value::as_array)
                .is_some_and(|modes| modes.iter().any(|m| m == "ReadWriteMany"))
        })
}

/// What happens to one eviction request of a virt-launcher Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Granted: the Pod is deleted (its VMI stops; the VM starts a new one elsewhere).
    Evict,
    /// Denied with 429, the VMI marked for evacuation; a migration follows (not for
    /// `External`, which waits for an outside controller).
    Evacuate { migrate: bool },
    /// Denied with 429 and this message.
    Deny(String),
}

/// KubeVirt's decision for a launcher Pod whose VMI has `strategy` (its own, else the
/// cluster's), can or cannot migrate, and is or is not already marked for evacuation.
pub fn decide(strategy: Option<&str>, migratable: bool, marked: bool, vmi: &str) -> Eviction {
    const PDB: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
    let protected = match strategy {
        Some("LiveMigrate") | Some("External") => true,
        Some("LiveMigrateIfPossible") => migratable,
        _ => false,
    };
    if marked && protected {
        return Eviction::Deny(PDB.to_string());
    }
    match strategy {
        Some("LiveMigrate") if migratable => Eviction::Evacuate { migrate: true },
        Some("LiveMigrate") => Eviction::Deny(format!(
            "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied the \
             request: VMI {vmi} is configured with an eviction strategy but is not live-migratable"
        )),
        Some("LiveMigrateIfPossible") if migratable => Eviction::Evacuate { migrate: true },
        Some("External") => Eviction::Evacuate { migrate: false },
        _ => Eviction::Evict,
    }
}

/// `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`.
pub fn evict(
    store: &mut Store,
    opts: &ControllerOptions,
    ns: &str,
    pod_name: &str,
    dry_run: bool,
) -> Result<WriteResult, ApiError> {
    let pods = idx("pods");
    let pod = store.get(pods, ns, pod_name)?;
    let vmi_key: Key = (idx("virtualmachineinstances"), ns.to_string(), vmi_of(&pod));
    let vmi = store.objects.get(&vmi_key).cloned();
    let decision = match (&vmi, str_at(&pod, "/metadata/labels/kubevirt.io")) {
        (Some(vmi), "virt-launcher") => {
            let strategy = vmi
                .pointer("/spec/evictionStrategy")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| opts.cluster_eviction_strategy.clone());
            let marked = !str_at(vmi, "/status/evacuationNodeName").is_empty();
            let name = format!("{ns}/{}", vmi_key.2);
            decide(strategy.as_deref(), migratable(store, vmi), marked, &name)
        }
        _ => Eviction::Evict,
    };
    let evacuating = |vmi: &str| {
        ApiError::new(
            429,
            "TooManyRequests",
            format!(
                "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied \
                 the request: Eviction triggered evacuation of VMI \"{ns}/{vmi}\""
            ),
        )
    };
    match decision {
        Eviction::Deny(message) => Err(ApiError::new(429, "TooManyRequests", message)),
        Eviction::Evacuate { .. } if dry_run => Err(evacuating(&vmi_key.2)),
        Eviction::Evacuate { .. } => {
            let mut vmi = vmi.expect("a VMI decided the evacuation");
            let node = str_at(&vmi, "/status/nodeName").to_string();
            vmi["status"]["evacuationNodeName"] = json!(node);
            store.put(&vmi_key, vmi);
            Err(evacuating(&vmi_key.2))
        }
        Eviction::Evict => {
            if !dry_run {
                store.remove_now(&(pods, ns.to_string(), pod_name.to_string()));
                if let Some(vmi) = vmi.filter(|_| !vmi_key.2.is_empty()) {
                    stop_vmi(store, &vmi_key, &vmi);
                }
            }
            Ok(WriteResult {
                code: 201,
                body: json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "code": 201 }),
                warnings: vec![],
            })
        }
    }
}

/// The VMI a launcher Pod runs (KubeVirt's `kubevirt.io/domain` annotation, else its owner).
fn vmi_of(pod: &Value) -> String {
    let annotated = str_at(pod, "/metadata/annotations/kubevirt.io~1domain");
    if !annotated.is_empty() {
        return annotated.to_string();
    }
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["kind"] == "VirtualMachineInstance"))
        .and_then(|r| r["name"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The launcher is gone: the VMI stops, and its VM (run strategy `Always`) starts a new one.
fn stop_vmi(store: &mut Store, key: &Key, vmi: &Value) {
    store.remove_now(key);
    let owner = vmi
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["kind"] == "VirtualMachine"))
        .and_then(|r| r["name"].as_str())
        .map(str::to_string);
    if let Some(vm) = owner {
        super::controllers::reconcile_vm(store, &(idx("virtualmachines"), key.1.clone(), vm));
    }
}

/// KubeVirt's evacuation controller: a VMI marked for evacuation whose strategy migrates it
/// gets a migration (once).
pub fn on_vmi_change(shared: &Arc<Shared>, key: &Key) {
    let uid = {
        let mut store = shared.store.lock().unwrap();
        let Some(mut vmi) = store.objects.get(key).cloned() else {
            return;
        };
        let source = str_at(&vmi, "/status/evacuationNodeName").to_string();
        let external = str_at(&vmi, "/spec/evictionStrategy") == "External";
        let in_progress = vmi.pointer("/status/migrationState/completed") == Some(&json!(false));
        if source.is_empty() || external || in_progress {
            return;
        }
        // KubeVirt's evacuation controller creates the migration (GenerateNewMigration in
        // pkg/virt-controller/watch/drain/evacuation/evacuation.go: generateName
        // `kubevirt-evacuation-`, the evacuation annotation, no labels of the VM's).
        let mut migration = json!({
            "metadata": {
                "generateName": "kubevirt-evacuation-",
                "namespace": key.1,
                "annotations": {"kubevirt.io/evacuationMigration": source},
            },
            "spec": {"vmiName": key.2},
            "status": {"phase": "Running"},
        });
        super::lifecycle::stamp_phase(&mut migration, "Running");
        let created = store.upsert(idx("virtualmachineinstancemigrations"), migration);
        vmi["status"]["migrationState"] = json!({
            "sourceNode": source,
            "completed": false,
            "migrationUid": meta_str(&created, "uid"),
            "startTimestamp": jiff::Timestamp::now().to_string(),
        });
        store.put(key, vmi.clone());
        meta_str(&vmi, "uid").to_string()
    };
    spawn_migration(shared, key.clone(), uid);
}

/// Moves the VMI to another schedulable node after `migration_delay`: a target launcher Pod
/// there, the source Pod gone, the VMI's node updated and its evacuation mark cleared.
fn spawn_migration(shared: &Arc<Shared>, key: Key, uid: String) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut changes = shared.changes.clone();
        loop {
            let (delay, keep) = {
                let c = shared.controller.lock().unwrap();
                (c.migration_delay, c.finalized_migrations_kept)
            };
            tokio::time::sleep(delay).await;
            let done = {
                let mut store = shared.store.lock().unwrap();
                match store.objects.get(&key).cloned() {
                    Some(vmi) if meta_str(&vmi, "uid") == uid => {
                        let source = str_at(&vmi, "/status/nodeName").to_string();
                        match pick_node(&store, Some(&source), &tolerations_of(&vmi)) {
                            Some(target) => {
                                complete_migration(&mut store, &key, vmi, &target, keep);
                                true
                            }
                            None => false,
                        }
                    }
                    _ => true,
                }
            };
            if done {
                return;
            }
            // No node to go to: wait for one to be uncordoned or added.
            let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
        }
    });
}

fn complete_migration(store: &mut Store, key: &Key, mut vmi: Value, target: &str, keep: usize) {
    let pods = idx("pods");
    let source = str_at(&vmi, "/status/nodeName").to_string();
    let sources: Vec<Key> = store
        .dependents_of(meta_str(&vmi, "uid"))
        .into_iter()
        .filter(|k| k.0 == pods)
        .collect();
    let Some(template) = sources.first().and_then(|k| store.objects.get(k)).cloned() else {
        return;
    };
    let mut pod = json!({
        "metadata": {
            "name": format!("virt-launcher-{}-m{}", key.2, store.rv),
            "namespace": key.1,
            "labels": template.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
            "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
            "ownerReferences": template.pointer("/metadata/ownerReferences").cloned().unwrap_or(json!([])),
        },
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
        "status": { "phase": "Running" },
    });
    pod["spec"]["nodeName"] = json!(target);
    store.upsert(pods, pod);
    for source_pod in sources {
        store.remove_now(&source_pod);
    }
    vmi["status"]["nodeName"] = json!(target);
    vmi["status"]
        .as_object_mut()
        .unwrap()
        .remove("evacuationNodeName");
    let started = vmi
        .pointer("/status/migrationState")
        .cloned()
        .unwrap_or(json!({}));
    let state = json!({
        "sourceNode": source, "targetNode": target, "completed": true,
        "migrationUid": started["migrationUid"],
        "startTimestamp": started["startTimestamp"],
        "endTimestamp": jiff::Timestamp::now().to_string(),
    });
    vmi["status"]["migrationState"] = state.clone();
    store.put(key, vmi);
    finish_evacuation(store, key, state, keep);
}

/// The evacuation's migration object ends Succeeded with the VMI's final state; then
/// KubeVirt's garbage collection of finalized migrations runs (lifecycle.rs).
fn finish_evacuation(store: &mut Store, key: &Key, state: Value, keep: usize) {
    let res = idx("virtualmachineinstancemigrations");
    let uid = state["migrationUid"].as_str().unwrap_or("").to_string();
    let found = store
        .objects
        .iter()
        .find(|((r, ns, _), m)| *r == res && *ns == key.1 && meta_str(m, "uid") == uid)
        .map(|(k, m)| (k.clone(), m.clone()));
    let Some((migration_key, mut migration)) = found else {
        return;
    };
    super::lifecycle::stamp_phase(&mut migration, "Succeeded");
    migration["status"]["phase"] = json!("Succeeded");
    migration["status"]["migrationState"] = state;
    store.put(&migration_key, migration);
    super::lifecycle::collect_finalized(store, &migration_key, keep);
}
