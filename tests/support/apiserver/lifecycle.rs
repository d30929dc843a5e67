//! KubeVirt's VM lifecycle API as virt-api serves it, and the migration controller:
//!
//! - `PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/{restart,
//!   stop,start}` with virt-api's rules (pkg/virt-api/rest/lifecycle.go; before KubeVirt
//!   1.5 the same handlers lived in pkg/virt-api/rest/subresource.go): `stop` sets
//!   `runStrategy: Halted` (the VM controller then deletes the VMI: printableStatus Stopping,
//!   Stopped), `start` sets `Always` (a new VMI), `restart` adds the `stateChangeRequests`
//!   Stop (with the VMI's uid) + Start, which the VM controller turns into a new VMI once the
//!   old one has shut down; while they are pending another restart is refused with a 500
//!   InternalError "unable to complete request: stop/start already underway"
//!   (getChangeRequestJson). A refused request is a 409 Conflict with virt-api's message;
//!   success is `202 Accepted` with an empty body. Scripted and random faults apply to these
//!   requests as to any write, including a drop or an error after the change committed (a
//!   gateway's 504 in front of virt-api).
//! - `VirtualMachineInstanceMigration`: Pending → Scheduling → Scheduled → PreparingTarget →
//!   TargetReady → Running → Succeeded, each a watch event stamped in
//!   `status.phaseTransitionTimestamps`; Running sets the VMI's `status.migrationState` (source and target node,
//!   target pod), Succeeded moves the VMI's `nodeName` to the target and marks the state
//!   completed. A migration of a VMI that is missing or not Running fails (phase Failed).
//!   Each phase is stamped in `status.phaseTransitionTimestamps` and the migration carries
//!   the VMI's `migrationState` in its own status, as KubeVirt's migration controller
//!   writes them. A migration created with a phase already set (the evacuation
//!   controller's, see drain.rs) is not driven here.
//! - Garbage collection of finalized migrations: once one ends, only the newest
//!   `ControllerOptions::finalized_migrations_kept` finalized migrations of its VMI are kept
//!   (KubeVirt keeps 5: `defaultFinalizedMigrationGarbageCollectionBuffer` and
//!   `garbageCollectFinalizedMigrations` in pkg/virt-controller/watch/migration/migration.go).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::http::Shared;
use super::resources::{self, RESOURCES};
use super::status::ApiError;
use super::store::{Key, Store, meta_str};

/// One lifecycle request: `PUT .../virtualmachines/{name}/{action}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleRequest {
    pub namespace: String,
    pub name: String,
    /// `restart`, `stop` or `start`.
    pub action: String,
}

/// The request behind `path`, when it is a VM lifecycle subresource.
pub fn parse(path: &str) -> Option<LifecycleRequest> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        [
            "apis",
            "subresources.kubevirt.io",
            "v1",
            "namespaces",
            ns,
            "virtualmachines",
            name,
            action @ ("restart" | "stop" | "start"),
        ] => Some(LifecycleRequest {
            namespace: ns.to_string(),
            name: name.to_string(),
            action: action.to_string(),
        }),
        _ => None,
    }
}

fn index(plural: &str) -> usize {
    resources::find("kubevirt.io", "v1", plural).expect("kubevirt.io/v1 resource")
}

fn conflict(name: &str, why: &str) -> ApiError {
    let vm = &RESOURCES[index("virtualmachines")];
    let mut error = ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on virtualmachine.kubevirt.io \"{name}\": {why}"),
    );
    error.details = Some(vm.details(name));
    error
}

/// Serves one lifecycle request: 202 or the error.
pub fn serve(shared: &Shared, method: &str, request: &LifecycleRequest) -> Result<u16, ApiError> {
    if method != "PUT" {
        return Err(ApiError::method_not_allowed(method));
    }
    let vm_res = index("virtualmachines");
    let vmi_res = index("virtualmachineinstances");
    let mut store = shared.store.lock().unwrap();
    let vm_key: Key = (vm_res, request.namespace.clone(), request.name.clone());
    let Some(mut vm) = store.objects.get(&vm_key).cloned() else {
        return Err(ApiError::not_found(&RESOURCES[vm_res], &request.name));
    };
    let vmi = store
        .objects
        .get(&(vmi_res, request.namespace.clone(), request.name.clone()))
        .cloned();
    let vmi_phase = vmi
        .as_ref()
        .and_then(|v| v.pointer("/status/phase"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let vmi_final = matches!(vmi_phase, "Succeeded" | "Failed");
    let strategy = vm
        .pointer("/spec/runStrategy")
        .and_then(Value::as_str)
        .unwrap_or("Always")
        .to_string();
    let name = &request.name;
    match (request.action.as_str(), strategy.as_str()) {
        ("restart", "Halted" | "Once") => {
            return Err(conflict(
                name,
                &format!("RunStategy {strategy} does not support manual restart requests"),
            ));
        }
        ("restart", _) => {
            let Some(vmi) = &vmi else {
                return Err(conflict(name, "VM is not running: Halted"));
            };
            // getChangeRequestJson: requests already pending (a restart whose VMI is still
            // shutting down) make the patch impossible, answered as an InternalError (500).
            if vm
                .pointer("/status/stateChangeRequests")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty())
            {
                return Err(ApiError::new(
                    500,
                    "InternalError",
                    "Internal error occurred: unable to complete request: stop/start already underway",
                ));
            }
            vm["status"]["stateChangeRequests"] = json!([
                { "action": "Stop", "uid": meta_str(vmi, "uid") },
                { "action": "Start" },
            ]);
        }
        ("stop", "Halted") if vmi.is_none() || vmi_final => {
            return Err(conflict(name, "VM is not running"));
        }
        ("stop", "Halted") => {
            return Err(conflict(
                name,
                "Halted only supports manual stop requests with a shorter graceperiod",
            ));
        }
        ("stop", _) => vm["spec"]["runStrategy"] = json!("Halted"),
        ("start", _) if vmi.is_some() && !vmi_final && !vmi_phase.is_empty() => {
            return Err(conflict(name, "VM is already running"));
        }
        ("start", "Halted") => vm["spec"]["runStrategy"] = json!("Always"),
        ("start", _) => {
            return Err(conflict(
                name,
                &format!("{strategy} does not support manual start requests"),
            ));
        }
        _ => {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
    }
    store.put(&vm_key, vm);
    Ok(202)
}

/// Whether the VM at `vm_key` carries state change requests not yet acted on.
pub fn has_state_change_requests(store: &Store, vm_key: &Key) -> bool {
    store
        .objects
        .get(vm_key)
        .and_then(|vm| vm.pointer("/status/stateChangeRequests"))
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

/// The VM controller's share of a restart (pkg/virt-controller/watch/vm.go): a Stop request
/// naming the current VMI shuts it down gracefully (the VMI is marked for deletion and goes
/// after the controllers' `stop_delay`), and the requests stay on the VM meanwhile, so a
/// second restart in that window meets virt-api's "already underway". Once that VMI is gone
/// the requests are cleared and the caller creates the new VMI (the Start).
pub fn take_state_change_requests(store: &mut Store, vm_key: &Key, vmi_key: &Key) {
    let Some(vm) = store.objects.get(vm_key).cloned() else {
        return;
    };
    let Some(requests) = vm
        .pointer("/status/stateChangeRequests")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
        .cloned()
    else {
        return;
    };
    if let Some(vmi) = store.objects.get(vmi_key).cloned() {
        let current_uid = meta_str(&vmi, "uid").to_string();
        let stops_current = requests
            .iter()
            .any(|r| r["action"] == "Stop" && r["uid"].as_str() == Some(current_uid.as_str()));
        if stops_current {
            if meta_str(&vmi, "deletionTimestamp").is_empty() {
                let mut vmi = vmi;
                vmi["metadata"]["deletionTimestamp"] = json!(jiff::Timestamp::now().to_string());
                store.put(vmi_key, vmi);
            }
            return;
        }
    }
    let mut vm = vm;
    if let Some(status) = vm.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("stateChangeRequests");
    }
    store.put(vm_key, vm);
}

/// Drives one migration through its phases (see the module doc).
pub fn spawn_migration(shared: &Arc<Shared>, key: Key, uid: String, step: Duration) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let driven = {
            let store = shared.store.lock().unwrap();
            store
                .objects
                .get(&key)
                .is_some_and(|m| m.pointer("/status/phase").is_none())
        };
        if !driven {
            return;
        }
        // virt-controller's migration phases (pkg/virt-controller/watch/migration), each
        // stamped in status.phaseTransitionTimestamps.
        for phase in [
            "Scheduling",
            "Scheduled",
            "PreparingTarget",
            "TargetReady",
            "Running",
            "Succeeded",
        ] {
            tokio::time::sleep(step).await;
            let keep = shared.controller.lock().unwrap().finalized_migrations_kept;
            let mut store = shared.store.lock().unwrap();
            let going = advance_migration(&mut store, &key, &uid, phase);
            if !going || phase == "Succeeded" {
                collect_finalized(&mut store, &key, keep);
                return;
            }
        }
    });
}

/// Moves migration `key` (still `uid`) to `phase` and updates its VMI; false when the
/// migration is gone or failed.
fn advance_migration(store: &mut Store, key: &Key, uid: &str, phase: &str) -> bool {
    let Some(mut migration) = store.objects.get(key).cloned() else {
        return false;
    };
    if meta_str(&migration, "uid") != uid {
        return false;
    }
    let vmi_name = migration
        .pointer("/spec/vmiName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let vmi_key: Key = (index("virtualmachineinstances"), key.1.clone(), vmi_name);
    let vmi = store.objects.get(&vmi_key).cloned();
    let running = vmi
        .as_ref()
        .and_then(|v| v.pointer("/status/phase"))
        .and_then(Value::as_str)
        == Some("Running");
    let Some(mut vmi) = vmi.filter(|_| running) else {
        stamp_phase(&mut migration, "Failed");
        migration["status"]["phase"] = json!("Failed");
        store.put(key, migration);
        return false;
    };
    let source = vmi
        .pointer("/status/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("fake-node-0")
        .to_string();
    let target = next_node(&source);
    match phase {
        "Running" => {
            vmi["status"]["migrationState"] = json!({
                "migrationUid": uid,
                "sourceNode": source,
                "targetNode": target,
                "targetPod": format!("virt-launcher-{}-target", meta_str(&vmi, "name")),
                "startTimestamp": jiff::Timestamp::now().to_string(),
                "completed": false,
                "mode": "PreCopy",
            });
            store.put(&vmi_key, vmi.clone());
        }
        "Succeeded" => {
            let state = &mut vmi["status"]["migrationState"];
            let target = state["targetNode"].as_str().unwrap_or(&target).to_string();
            state["completed"] = json!(true);
            state["endTimestamp"] = json!(jiff::Timestamp::now().to_string());
            vmi["status"]["nodeName"] = json!(target);
            store.put(&vmi_key, vmi.clone());
        }
        _ => {}
    }
    // The VMI's migrationState is the migration's once the target runs.
    if let Some(state) = vmi.pointer("/status/migrationState").cloned()
        && matches!(phase, "Running" | "Succeeded")
    {
        if !migration["status"].is_object() {
            migration["status"] = json!({});
        }
        migration["status"]["migrationState"] = state;
    }
    stamp_phase(&mut migration, phase);
    migration["status"]["phase"] = json!(phase);
    store.put(key, migration);
    true
}

/// Appends `phase` and the time to the migration's `status.phaseTransitionTimestamps`.
pub fn stamp_phase(migration: &mut Value, phase: &str) {
    // metav1.Time: whole seconds on the wire.
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let created = meta_str(migration, "creationTimestamp").to_string();
    if !migration["status"].is_object() {
        migration["status"] = json!({});
    }
    let mut stamps = migration["status"]["phaseTransitionTimestamps"]
        .as_array()
        .cloned()
        // Pending from the creation on.
        .unwrap_or_else(|| {
            vec![json!({ "phase": "Pending", "phaseTransitionTimestamp": created })]
        });
    stamps.push(json!({ "phase": phase, "phaseTransitionTimestamp": now }));
    migration["status"]["phaseTransitionTimestamps"] = json!(stamps);
}

/// KubeVirt's garbage collection of finalized migrations: of the finalized (Succeeded or
/// Failed) migrations of the VMI that migration `key` names, only the newest `keep` stay.
pub fn collect_finalized(store: &mut Store, key: &Key, keep: usize) {
    let Some(vmi_name) = store
        .objects
        .get(key)
        .and_then(|m| m.pointer("/spec/vmiName"))
        .and_then(Value::as_str)
        .map(String::from)
    else {
        return;
    };
    let mut finalized: Vec<(String, Key)> = store
        .objects
        .iter()
        .filter(|((res, ns, _), m)| {
            *res == key.0
                && *ns == key.1
                && m.pointer("/spec/vmiName").and_then(Value::as_str) == Some(vmi_name.as_str())
                && matches!(
                    m.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
        })
        .map(|(k, m)| (meta_str(m, "creationTimestamp").to_string(), k.clone()))
        .collect();
    // Oldest first (creation time, then resource order), as vmimCollection sorts.
    finalized.sort();
    let excess = finalized.len().saturating_sub(keep);
    for (_, old) in finalized.into_iter().take(excess) {
        store.remove_now(&old);
    }
}

/// The node after `node` in a three-node fake cluster (`fake-node-0` → `fake-node-1` → ...).
fn next_node(node: &str) -> String {
    let n: u32 = node
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    format!("fake-node-{}", (n + 1) % 3)
}
