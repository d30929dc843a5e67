//! Simulated cluster controllers: KubeVirt's VM controller (VM → VMI with phases Pending →
//! Scheduling → Scheduled → Running, VM printableStatus/ready, the VMI readiness probe:
//! Ready=True some time after Running, never for a VM whose workload unit is broken), CDI (DataVolume → PVC,
//! phase Succeeded), the garbage collector (ownerReferences, Background and Foreground
//! propagation) and the namespace lifecycle (Terminating, contents removed, then the
//! namespace). They react to store events on the server's runtime with configurable delays.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::http::Shared;
use super::resources::{self, RESOURCES};
use super::store::{EventType, Key, Store, StoreEvent, meta_str, owner_uids};

/// Timing and behaviour of the simulated controllers.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Controllers on at all (off: objects just sit in the store).
    pub enabled: bool,
    /// VMI Pending → Scheduling.
    pub pending_delay: Duration,
    /// VMI Scheduling → Scheduled (once its DataVolumes and cloud-init Secret are ready).
    pub scheduling_delay: Duration,
    /// VMI Scheduled → Running (or Failed).
    pub scheduled_delay: Duration,
    /// DataVolume created → Succeeded (and its PVC Bound).
    pub datavolume_delay: Duration,
    /// Owner deleted → dependents garbage-collected (Background propagation).
    pub gc_delay: Duration,
    /// Namespace marked Terminating → contents removed → namespace removed.
    pub namespace_delete_delay: Duration,
    /// Running VMI → condition AgentConnected=True (a guest agent came up); None = no agent.
    pub agent_connect_delay: Option<Duration>,
    /// VMs whose containerDisk image contains this substring fail (VMI Failed, VM
    /// printableStatus CrashLoopBackOff).
    pub fail_image_pattern: Option<String>,
    /// VMs whose image contains this substring never schedule (VMI Scheduling, VM
    /// printableStatus ErrorUnschedulable).
    pub unschedulable_image_pattern: Option<String>,
    /// VMs whose image contains this substring cannot pull it: the VMI stays Scheduling with
    /// `Synchronized=False` (reason ErrImagePull, then ImagePullBackOff, with the kubelet's
    /// message), and the VM's printableStatus follows.
    pub unpullable_image_pattern: Option<String>,
    /// DataVolumes whose storage class contains this substring fail to populate: CDI's
    /// importer stops (`Running=False`, reason Error, with its message), the VM shows
    /// DataVolumeError and its VMI never leaves Scheduling.
    pub failing_storage_class_pattern: Option<String>,
    /// A Running VMI with a `readinessProbe` reports condition Ready=False until this delay
    /// has passed (the probe's first success: the workload units came up), then Ready=True.
    /// VMIs without a probe are Ready as soon as they run, as in KubeVirt.
    pub workload_ready_delay: Duration,
    /// VMs whose image contains this substring have a workload unit that never becomes
    /// active: their readiness probe never passes, so Ready stays False.
    pub broken_unit_image_pattern: Option<String>,
    /// The eviction strategy of VMIs that set none (the KubeVirt CR's
    /// `spec.configuration.evictionStrategy`); OpenShift Virtualization's default is
    /// `LiveMigrate`. `None`: no cluster default (the eviction is granted).
    pub cluster_eviction_strategy: Option<String>,
    /// Marked for evacuation → migrated to another schedulable node.
    pub migration_delay: Duration,
    /// Finalized migrations kept per VMI; older ones are garbage-collected (KubeVirt: 5).
    pub finalized_migrations_kept: usize,
    /// A halted VM's VMI → gone: the guest's shutdown. Meanwhile the VMI carries a
    /// deletionTimestamp and the VM is `Stopping`.
    pub stop_delay: Duration,
    /// VMs whose image contains this substring run with their guest paused by an I/O error
    /// from the start: condition `Paused=True` (reason PausedIOError, as virt-handler sets
    /// it, kubevirt pkg/virt-handler/vm.go), `Ready=False`, and the VM reads `Paused`.
    pub paused_image_pattern: Option<String>,
    /// A Failed VMI of a VM whose run strategy restarts it (`Always`) is replaced by a new
    /// one after this back-off, as KubeVirt's VM controller does (kubevirt
    /// pkg/virt-controller/watch/vm/vm.go: start-failure back-off, CrashLoopBackOff
    /// meanwhile); `None`: the failed VMI stays (the fake's behaviour before retries were
    /// modelled, which status fixtures rely on).
    pub crash_restart_delay: Option<Duration>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            enabled: true,
            pending_delay: Duration::from_millis(20),
            scheduling_delay: Duration::from_millis(20),
            scheduled_delay: Duration::from_millis(20),
            datavolume_delay: Duration::from_millis(30),
            agent_connect_delay: Some(Duration::from_millis(20)),
            gc_delay: Duration::from_millis(20),
            namespace_delete_delay: Duration::from_millis(50),
            fail_image_pattern: Some("fail".into()),
            unschedulable_image_pattern: Some("unschedulable".into()),
            unpullable_image_pattern: Some("unpullable".into()),
            failing_storage_class_pattern: Some("failing".into()),
            workload_ready_delay: Duration::from_millis(60),
            broken_unit_image_pattern: Some("brokenunit".into()),
            cluster_eviction_strategy: Some("LiveMigrate".into()),
            migration_delay: Duration::from_millis(50),
            finalized_migrations_kept: 5,
            stop_delay: Duration::from_millis(20),
            paused_image_pattern: Some("ioerror".into()),
            crash_restart_delay: None,
        }
    }
}

// Positions in RESOURCES, checked at compile time so a reordering cannot silently break
// the controllers.
const NS: usize = 0;
const SECRET: usize = 1;
const PVC: usize = 3;
const VM: usize = 4;
const VMI: usize = 5;
const DV: usize = 6;

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
const _: () = assert!(same(RESOURCES[NS].plural, "namespaces"));
const _: () = assert!(same(RESOURCES[SECRET].plural, "secrets"));
const _: () = assert!(same(RESOURCES[PVC].plural, "persistentvolumeclaims"));
const _: () = assert!(same(RESOURCES[VM].plural, "virtualmachines"));
const _: () = assert!(same(RESOURCES[VMI].plural, "virtualmachineinstances"));
const _: () = assert!(same(RESOURCES[DV].plural, "datavolumes"));

fn idx(plural: &str) -> usize {
    resources::lookup(plural).unwrap()
}

fn owner_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta_str(owner, "name"),
        "uid": meta_str(owner, "uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

fn terminating(obj: &Value) -> bool {
    !meta_str(obj, "deletionTimestamp").is_empty()
}

fn images(vm_or_vmi_spec: &Value) -> Vec<String> {
    vm_or_vmi_spec
        .get("volumes")
        .and_then(Value::as_array)
        .map(|vols| {
            vols.iter()
                .filter_map(|v| v.pointer("/containerDisk/image").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn matches_pattern(images: &[String], pattern: &Option<String>) -> bool {
    pattern
        .as_deref()
        .is_some_and(|p| !p.is_empty() && images.iter().any(|i| i.contains(p)))
}

/// Whether a VMI's readiness is decided by a probe.
fn has_readiness_probe(vmi: &Value) -> bool {
    vmi.pointer("/spec/readinessProbe")
        .is_some_and(Value::is_object)
}

/// The VMI's condition Ready is True.
fn condition_ready(vmi: &Value) -> bool {
    vmi.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|x| x["type"] == "Ready" && x["status"] == "True")
        })
}

fn wants_running(vm: &Value) -> bool {
    match vm.pointer("/spec/runStrategy").and_then(Value::as_str) {
        Some(s) => matches!(s, "Always" | "RerunOnFailure" | "Once"),
        None => vm
            .pointer("/spec/running")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

/// Runs until the server stops, reacting to every committed change.
pub async fn run(shared: Arc<Shared>) {
    let mut changes = shared.changes.clone();
    let mut cursor = 0usize;
    let mut namespaces_in_progress: BTreeSet<String> = BTreeSet::new();
    loop {
        let events: Vec<StoreEvent> = {
            let store = shared.store.lock().unwrap();
            let evs = store.event_log[cursor..].to_vec();
            cursor = store.event_log.len();
            evs
        };
        let opts = shared.controller.lock().unwrap().clone();
        if opts.enabled {
            for ev in &events {
                react(&shared, &opts, ev, &mut namespaces_in_progress);
            }
            foreground_pass(&shared);
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

fn react(
    shared: &Arc<Shared>,
    opts: &ControllerOptions,
    ev: &StoreEvent,
    ns_in_progress: &mut BTreeSet<String>,
) {
    let key: Key = (ev.res, ev.namespace.clone(), ev.name.clone());
    match (ev.res, ev.event_type) {
        (_, EventType::Deleted) => {
            let uid = meta_str(&ev.object, "uid").to_string();
            schedule_gc(shared, opts.gc_delay, uid);
        }
        (NS, _) if terminating(&ev.object) => {
            let uid = meta_str(&ev.object, "uid").to_string();
            if ns_in_progress.insert(uid) {
                schedule_namespace_deletion(shared, opts.namespace_delete_delay, ev.name.clone());
            }
        }
        (VM, _) => {
            let mut store = shared.store.lock().unwrap();
            reconcile_vm(&mut store, &key);
            let vmi_key = (VMI, key.1.clone(), key.2.clone());
            if let Some(vmi) = store.objects.get(&vmi_key).filter(|v| terminating(v)) {
                let uid = meta_str(vmi, "uid").to_string();
                spawn_shutdown(shared, vmi_key, uid, opts.stop_delay);
            }
        }
        (NS, EventType::Added) => {
            let mut store = shared.store.lock().unwrap();
            publish_namespace_defaults(&mut store, &ev.name);
        }
        (VMI, EventType::Added) => {
            {
                let mut store = shared.store.lock().unwrap();
                create_launcher_pod(&mut store, &ev.object);
            }
            spawn_vmi_progress(shared, key, meta_str(&ev.object, "uid").to_string());
        }
        (res, EventType::Added) if RESOURCES[res].kind == "VirtualMachineInstanceMigration" => {
            super::lifecycle::spawn_migration(
                shared,
                key,
                meta_str(&ev.object, "uid").to_string(),
                opts.scheduling_delay,
            );
        }
        (DV, EventType::Added) => {
            {
                let mut store = shared.store.lock().unwrap();
                ensure_pvc_for_dv(&mut store, &ev.object);
            }
            spawn_dv_progress(
                shared,
                key,
                meta_str(&ev.object, "uid").to_string(),
                opts.datavolume_delay,
            );
        }
        _ => {}
    }
    if ev.res == VMI && ev.event_type == EventType::Deleted {
        // A restart's Stop is done once its VMI is gone: the VM controller acts on the Start.
        let mut store = shared.store.lock().unwrap();
        for vm in owner_vm_names(&ev.object) {
            let vm_key = (VM, ev.namespace.clone(), vm);
            if super::lifecycle::has_state_change_requests(&store, &vm_key) {
                reconcile_vm(&mut store, &vm_key);
            }
        }
    }
    follow_vmi_and_pods(shared, ev, &(ev.res, ev.namespace.clone(), ev.name.clone()));
    if ev.res == VMI || ev.res == DV {
        // The owning VM's status follows its VMI and volumes.
        let owners = owner_vm_names(&ev.object);
        let mut store = shared.store.lock().unwrap();
        for vm in owners {
            refresh_vm_status(&mut store, &(VM, ev.namespace.clone(), vm));
        }
    }
}

/// The names of the VirtualMachines owning `object`.
fn owner_vm_names(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r["kind"] == "VirtualMachine")
                .filter_map(|r| r["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Launcher Pods follow their VMI (node, IP, readiness), Services' endpoints follow the
/// Pods, and a VMI marked for evacuation is migrated (endpoints.rs, drain.rs).
fn follow_vmi_and_pods(shared: &Arc<Shared>, ev: &StoreEvent, key: &Key) {
    let (pods, services) = (idx("pods"), idx("services"));
    if ev.res == VMI && ev.event_type != EventType::Deleted {
        {
            let mut store = shared.store.lock().unwrap();
            if let Some(vmi) = store.objects.get(key).cloned() {
                super::endpoints::sync_launcher_pods(&mut store, &vmi);
            }
        }
        super::drain::on_vmi_change(shared, key);
    }
    if ev.res == pods || ev.res == services {
        let mut store = shared.store.lock().unwrap();
        super::endpoints::sync_endpoints(&mut store, &ev.namespace);
    }
}

/// What kube-controller-manager puts in every new namespace: the `kube-root-ca.crt` ConfigMap
/// (root CA publisher) and the `default` ServiceAccount (service account controller).
fn publish_namespace_defaults(store: &mut Store, ns: &str) {
    let configmaps = idx("configmaps");
    if store
        .objects
        .contains_key(&(configmaps, ns.to_string(), "kube-root-ca.crt".to_string()))
    {
        return;
    }
    store.upsert(
        configmaps,
        json!({
            "metadata": { "name": "kube-root-ca.crt", "namespace": ns,
                          "annotations": { "kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc." } },
            "data": { "ca.crt": "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n" },
        }),
    );
    store.upsert(
        idx("serviceaccounts"),
        json!({ "metadata": { "name": "default", "namespace": ns } }),
    );
}

/// KubeVirt runs each VMI in a `virt-launcher-<vmi>-<suffix>` Pod that carries the VMI's
/// labels and is owned by it (so garbage collection removes it with the VMI).
fn create_launcher_pod(store: &mut Store, vmi: &Value) {
    let name = meta_str(vmi, "name");
    let ns = meta_str(vmi, "namespace");
    let suffix: String = meta_str(vmi, "uid")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(5)
        .collect();
    let mut labels = vmi
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels["kubevirt.io"] = json!("virt-launcher");
    labels["vm.kubevirt.io/name"] = json!(name);
    labels["kubevirt.io/domain"] = json!(name);
    store.upsert(
        idx("pods"),
        json!({
            "metadata": {
                "name": format!("virt-launcher-{name}-{suffix}"),
                "namespace": ns,
                "labels": labels,
                "annotations": { "kubevirt.io/domain": name },
                "ownerReferences": [owner_ref(vmi)],
            },
            "spec": { "containers": [{ "name": "compute", "image": "quay.io/kubevirt/virt-launcher" }] },
            "status": { "phase": "Running" },
        }),
    );
}

/// Creates missing DataVolumes and the VMI for a VM, deletes the VMI of a stopped VM, and
/// recomputes the VM's status.
pub(super) fn reconcile_vm(store: &mut Store, key: &Key) {
    let Some(vm) = store.objects.get(key).cloned() else {
        return;
    };
    if terminating(&vm) {
        return;
    }
    let ns = key.1.clone();
    let vm_uid = meta_str(&vm, "uid").to_string();
    for tmpl in vm
        .pointer("/spec/dataVolumeTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        let dv_name = tmpl
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if dv_name.is_empty()
            || store
                .objects
                .contains_key(&(DV, ns.clone(), dv_name.clone()))
        {
            continue;
        }
        let mut metadata = tmpl.get("metadata").cloned().unwrap_or(json!({}));
        metadata["namespace"] = json!(ns);
        metadata["ownerReferences"] = json!([owner_ref(&vm)]);
        let dv = json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": metadata,
            "spec": tmpl.get("spec").cloned().unwrap_or(json!({})),
            "status": { "phase": "Pending", "progress": "N/A" },
        });
        store.upsert(DV, dv);
    }
    let vmi_key = (VMI, ns.clone(), key.2.clone());
    super::lifecycle::take_state_change_requests(store, key, &vmi_key);
    let existing = store.objects.get(&vmi_key).cloned();
    if wants_running(&vm) {
        if existing.is_none() {
            let template = vm.pointer("/spec/template").cloned().unwrap_or(json!({}));
            let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
            if !metadata.is_object() {
                metadata = json!({});
            }
            metadata["name"] = json!(key.2);
            metadata["namespace"] = json!(ns);
            metadata["ownerReferences"] = json!([owner_ref(&vm)]);
            let labels = metadata
                .as_object_mut()
                .unwrap()
                .entry("labels")
                .or_insert(json!({}));
            labels["kubevirt.io/vm"] = json!(key.2);
            let vmi = json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstance",
                "metadata": metadata,
                "spec": template.get("spec").cloned().unwrap_or(json!({})),
                "status": { "phase": "Pending" },
            });
            store.upsert(VMI, vmi);
        }
    } else if let Some(mut vmi) = existing
        && owner_uids(&vmi).contains(&vm_uid)
        && !terminating(&vmi)
    {
        // The guest shuts down: the VMI is marked, and removed after `stop_delay`.
        vmi["metadata"]["deletionTimestamp"] = json!(jiff::Timestamp::now().to_string());
        store.put(&vmi_key, vmi);
    }
    refresh_vm_status(store, key);
}

fn dv_names(vm_spec_template_spec: &Value, vm: &Value) -> Vec<String> {
    let mut names: Vec<String> = vm
        .pointer("/spec/dataVolumeTemplates")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t.pointer("/metadata/name").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    for v in vm_spec_template_spec
        .get("volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if let Some(n) = v.pointer("/dataVolume/name").and_then(Value::as_str)
            && !names.iter().any(|x| x == n)
        {
            names.push(n.to_string());
        }
    }
    names
}

fn volumes_ready(store: &Store, ns: &str, names: &[String]) -> bool {
    names.iter().all(|n| {
        store
            .objects
            .get(&(DV, ns.to_string(), n.clone()))
            .and_then(|dv| dv.pointer("/status/phase"))
            .and_then(Value::as_str)
            == Some("Succeeded")
    })
}

fn cloud_init_secrets(spec: &Value) -> Vec<String> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .map(|vols| {
            vols.iter()
                .flat_map(|v| {
                    [
                        "/cloudInitNoCloud/secretRef/name",
                        "/cloudInitNoCloud/networkDataSecretRef/name",
                        "/cloudInitConfigDrive/secretRef/name",
                    ]
                    .into_iter()
                    .filter_map(move |p| v.pointer(p).and_then(Value::as_str).map(String::from))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn refresh_vm_status(store: &mut Store, key: &Key) {
    let Some(mut vm) = store.objects.get(key).cloned() else {
        return;
    };
    let ns = &key.1;
    let spec = vm
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or(json!({}));
    let vmi = store
        .objects
        .get(&(VMI, ns.clone(), key.2.clone()))
        .cloned();
    let dvs = dv_names(&spec, &vm);
    let phase = vmi
        .as_ref()
        .and_then(|v| v.pointer("/status/phase"))
        .and_then(Value::as_str)
        .unwrap_or("");
    // KubeVirt's precedence (first match wins; kubevirt pkg/virt-controller/watch/vm/vm.go,
    // setPrintableStatus): Terminating, Stopping, Paused, Running, DataVolumeError,
    // ErrorUnschedulable, Provisioning, ErrImagePull, ImagePullBackOff, Starting,
    // CrashLoopBackOff, Stopped. (A failed VMI is kept until `crash_restart_delay` replaces
    // it, so Failed reads CrashLoopBackOff at once.)
    let printable = if terminating(&vm) {
        "Terminating"
    } else if !wants_running(&vm) {
        if vmi.is_some() { "Stopping" } else { "Stopped" }
    } else if phase == "Running" && vmi_condition(vmi.as_ref(), "Paused", "True", "PausedIOError") {
        "Paused"
    } else if phase == "Running" {
        "Running"
    } else if datavolume_error(store, ns, &dvs) {
        "DataVolumeError"
    } else if vmi_condition(vmi.as_ref(), "PodScheduled", "False", "Unschedulable") {
        "ErrorUnschedulable"
    } else if !volumes_ready(store, ns, &dvs) {
        "Provisioning"
    } else if vmi_condition(vmi.as_ref(), "Synchronized", "False", "ErrImagePull") {
        "ErrImagePull"
    } else if vmi_condition(vmi.as_ref(), "Synchronized", "False", "ImagePullBackOff") {
        "ImagePullBackOff"
    } else if phase == "Failed" {
        "CrashLoopBackOff"
    } else {
        "Starting"
    };
    let ready = phase == "Running" && vmi.as_ref().is_some_and(condition_ready);
    // The VMI's conditions but Ready are copied to the VM, as KubeVirt syncs them (that is
    // where `kubectl describe vm` shows a pull error or the scheduler's message).
    let mut conditions = vec![json!({
        "type": "Ready",
        "status": if ready { "True" } else { "False" },
        "reason": if ready { "" } else { printable },
    })];
    conditions.extend(
        vmi.as_ref()
            .and_then(|v| v.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c["type"] != "Ready")
            .cloned(),
    );
    if phase == "Failed"
        && let Some(message) = vmi
            .as_ref()
            .and_then(|v| v.pointer("/status/conditions/0/message"))
    {
        // The start failure KubeVirt records before restarting the VMI.
        conditions.push(json!({
            "type": "Failure", "status": "True", "reason": "FailedCreate", "message": message,
        }));
    }
    let mut status = json!({
        "printableStatus": printable,
        "ready": ready,
        "created": vmi.is_some(),
        "conditions": conditions,
    });
    if wants_running(&vm) {
        status["runStrategy"] = vm
            .pointer("/spec/runStrategy")
            .cloned()
            .unwrap_or(json!("Always"));
    }
    // Requests virt-api added stay until the VM controller has acted on them.
    if let Some(requests) = vm
        .pointer("/status/stateChangeRequests")
        .filter(|r| r.as_array().is_some_and(|r| !r.is_empty()))
    {
        status["stateChangeRequests"] = requests.clone();
    }
    if vm.get("status") != Some(&status) {
        vm["status"] = status;
        store.put(key, vm);
    }
}

fn ensure_pvc_for_dv(store: &mut Store, dv: &Value) {
    let ns = meta_str(dv, "namespace").to_string();
    let name = meta_str(dv, "name").to_string();
    if store.objects.contains_key(&(PVC, ns.clone(), name.clone())) {
        return;
    }
    let size = dv
        .pointer("/spec/storage/resources/requests/storage")
        .or_else(|| dv.pointer("/spec/pvc/resources/requests/storage"))
        .cloned()
        .unwrap_or(json!("1Gi"));
    let mut metadata = json!({ "name": name, "namespace": ns, "ownerReferences": [owner_ref(dv)] });
    if let Some(l) = dv.pointer("/metadata/labels") {
        metadata["labels"] = l.clone();
    }
    let class = dv
        .pointer("/spec/storage/storageClassName")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| cdi_default_class(store));
    let given = dv
        .pointer("/spec/storage/accessModes")
        .filter(|m| m.as_array().is_some_and(|m| !m.is_empty()))
        .cloned();
    let given_volume = dv
        .pointer("/spec/storage/volumeMode")
        .filter(|m| m.as_str().is_some_and(|m| !m.is_empty()))
        .cloned();
    // CDI fills in what the DataVolume's `storage` leaves out from the class's
    // StorageProfile (containerized-data-importer pkg/controller/datavolume/util.go,
    // renderPvcSpecVolumeModeAndAccessModesAndStorageClass): neither given, the first claim
    // property set's (getDefaultVolumeAndAccessMode); only the volume mode, the access modes
    // of the first set with that volume mode (getDefaultAccessModes); only the access modes,
    // the volume mode of the first set offering one of them, else Kubernetes' default
    // Filesystem (getDefaultVolumeMode). When it cannot, it creates no PVC and records
    // ErrClaimNotValid on the Bound condition (controller-base.go syncCommon;
    // conditions.go updateBoundCondition).
    let sets = storage_profile_sets(store, class.as_deref());
    let has_access = |set: &Value| set["accessModes"].as_array().is_some_and(|m| !m.is_empty());
    let class_name = class.as_deref().unwrap_or("").to_string();
    let (access_modes, volume_mode) = match (given, given_volume, sets) {
        (Some(modes), Some(volume), _) => (modes, volume),
        // A store holding no StorageProfiles (most tests): every class gives ReadWriteOnce
        // Filesystem.
        (access, volume, None) => (
            access.unwrap_or(json!(["ReadWriteOnce"])),
            volume.unwrap_or(json!("Filesystem")),
        ),
        (Some(modes), None, Some(sets)) => {
            let wanted = |m: &Value| modes.as_array().is_some_and(|given| given.contains(m));
            let volume = sets
                .iter()
                .find(|set| {
                    set["accessModes"]
                        .as_array()
                        .is_some_and(|m| m.iter().any(wanted))
                })
                .and_then(|set| set.get("volumeMode").cloned())
                .unwrap_or(json!("Filesystem"));
            (modes, volume)
        }
        (None, Some(volume), Some(sets)) => {
            match sets
                .iter()
                .find(|set| set.get("volumeMode") == Some(&volume) && has_access(set))
            {
                Some(set) => (set["accessModes"].clone(), volume),
                None => {
                    let message =
                        format!("no matching accessMode specified in StorageProfile {class_name}");
                    claim_not_valid(store, dv, ns, name, &message);
                    return;
                }
            }
        }
        (None, None, Some(sets)) if has_access(&sets[0]) => (
            sets[0]["accessModes"].clone(),
            sets[0]
                .get("volumeMode")
                .cloned()
                .unwrap_or(json!("Filesystem")),
        ),
        (None, None, Some(_)) => {
            let message = format!("no accessMode specified in StorageProfile {class_name}");
            claim_not_valid(store, dv, ns, name, &message);
            return;
        }
    };
    store.upsert(
        PVC,
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": { "accessModes": access_modes, "resources": { "requests": { "storage": size } },
                      "volumeMode": volume_mode, "storageClassName": class },
            "status": { "phase": "Pending" },
        }),
    );
}

/// CDI's answer to a DataVolume whose claim it cannot complete: no PVC, ErrClaimNotValid.
fn claim_not_valid(store: &mut Store, dv: &Value, ns: String, name: String, message: &str) {
    let mut dv = dv.clone();
    dv["status"] = json!({
        "phase": "",
        "conditions": [
            { "type": "Bound", "status": "False", "reason": "ErrClaimNotValid",
              "message": message },
            { "type": "Ready", "status": "False", "reason": "ErrClaimNotValid",
              "message": message },
            { "type": "Running", "status": "False" },
        ],
    });
    store.put(&(DV, ns, name), dv);
}

/// The `status.claimPropertySets` of `class`'s StorageProfile, `[{}]`-padded so the first
/// entry can be indexed: `None` when the store holds no StorageProfile at all (the fake then
/// behaves as before profiles were modelled), `Some([{}])` for a class without a profile or
/// with no sets (as CDI sees an unknown provisioner).
fn storage_profile_sets(store: &Store, class: Option<&str>) -> Option<Vec<Value>> {
    let profiles = idx("storageprofiles");
    let any = store
        .objects
        .range((profiles, String::new(), String::new())..)
        .take_while(|((res, _, _), _)| *res == profiles)
        .next()
        .is_some();
    if !any {
        return None;
    }
    let sets = class
        .and_then(|c| store.objects.get(&(profiles, String::new(), c.to_string())))
        .and_then(|p| p.pointer("/status/claimPropertySets"))
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| vec![json!({})]);
    Some(sets)
}

/// The class CDI gives a DataVolume that names none: the virtualization default
/// (`storageclass.kubevirt.io/is-default-virt-class`), else the Kubernetes default.
fn cdi_default_class(store: &Store) -> Option<String> {
    let classes = idx("storageclasses");
    let marked = |annotation: &str| {
        store
            .objects
            .iter()
            .filter(|((res, _, _), _)| *res == classes)
            .find(|(_, class)| {
                class
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(annotation))
                    == Some(&json!("true"))
            })
            .map(|((_, _, name), _)| name.clone())
    };
    marked("storageclass.kubevirt.io/is-default-virt-class")
        .or_else(|| marked("storageclass.kubernetes.io/is-default-class"))
}

fn spawn_dv_progress(shared: &Arc<Shared>, key: Key, uid: String, delay: Duration) {
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut store = shared.store.lock().unwrap();
        let Some(mut dv) = store.objects.get(&key).cloned() else {
            return;
        };
        if meta_str(&dv, "uid") != uid || terminating(&dv) {
            return;
        }
        // CDI refused the claim (no PVC): nothing to populate until the profile changes.
        if !store
            .objects
            .contains_key(&(PVC, key.1.clone(), key.2.clone()))
        {
            return;
        }
        let failing = shared
            .controller
            .lock()
            .unwrap()
            .failing_storage_class_pattern
            .clone();
        let class = dv
            .pointer("/spec/storage/storageClassName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if failing
            .as_deref()
            .is_some_and(|p| !p.is_empty() && class.contains(p))
        {
            // CDI's importer pod keeps failing: the DataVolume reports why and never succeeds.
            dv["status"] = json!({
                "phase": "ImportInProgress",
                "progress": "N/A",
                "restartCount": 3,
                "conditions": [
                    { "type": "Bound", "status": "True", "reason": "Bound" },
                    { "type": "Running", "status": "False", "reason": "Error",
                      "message": "Unable to process data: Unable to create blank image: \
                                  qemu-img: /data/disk.img: Could not write to the image: \
                                  No space left on device" },
                    { "type": "Ready", "status": "False" },
                ],
            });
            store.put(&key, dv);
            return;
        }
        dv["status"] = json!({
            "phase": "Succeeded",
            "progress": "100.0%",
            "conditions": [
                { "type": "Bound", "status": "True", "reason": "Bound" },
                { "type": "Ready", "status": "True" },
            ],
        });
        store.put(&key, dv);
        let pvc_key = (PVC, key.1.clone(), key.2.clone());
        if let Some(mut pvc) = store.objects.get(&pvc_key).cloned() {
            let size = pvc
                .pointer("/spec/resources/requests/storage")
                .cloned()
                .unwrap_or(json!("1Gi"));
            pvc["spec"]["volumeName"] = json!(format!("pvc-{}", meta_str(&pvc, "uid")));
            let access_modes = pvc["spec"]["accessModes"].clone();
            pvc["status"] = json!({ "phase": "Bound", "accessModes": access_modes, "capacity": { "storage": size } });
            store.put(&pvc_key, pvc);
        }
    });
}

/// Drives one VMI through its phases; each step is a committed change (a watch event).
fn spawn_vmi_progress(shared: &Arc<Shared>, key: Key, uid: String) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut changes = shared.changes.clone();
        loop {
            let opts = shared.controller.lock().unwrap().clone();
            let phase = {
                let store = shared.store.lock().unwrap();
                match store.objects.get(&key) {
                    Some(v) if meta_str(v, "uid") == uid && !terminating(v) => v
                        .pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or("Pending")
                        .to_string(),
                    _ => return,
                }
            };
            let delay = match phase.as_str() {
                "Pending" => opts.pending_delay,
                "Scheduling" => opts.scheduling_delay,
                "Scheduled" => opts.scheduled_delay,
                "Running"
                    if !agent_connected(&shared, &key) && opts.agent_connect_delay.is_some() =>
                {
                    opts.agent_connect_delay.unwrap_or_default()
                }
                "Running" if probe_pending(&shared, &key, &opts) => opts.workload_ready_delay,
                "Failed" => match opts.crash_restart_delay {
                    Some(delay) => {
                        tokio::time::sleep(delay).await;
                        let mut store = shared.store.lock().unwrap();
                        if store
                            .objects
                            .get(&key)
                            .is_some_and(|v| meta_str(v, "uid") == uid)
                        {
                            // The VM controller deletes the failed VMI and starts a new one.
                            store.remove_now(&key);
                            reconcile_vm(&mut store, &(VM, key.1.clone(), key.2.clone()));
                        }
                        return;
                    }
                    None => return,
                },
                _ => return,
            };
            tokio::time::sleep(delay).await;
            let advanced = {
                let mut store = shared.store.lock().unwrap();
                advance_vmi(&mut store, &key, &uid, &opts)
            };
            if !advanced {
                // Blocked (volumes, Secret, unschedulable): wait for any change, re-check.
                let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
            }
        }
    });
}

/// A Running VMI whose readiness probe will pass but has not yet.
fn probe_pending(shared: &Shared, key: &Key, opts: &ControllerOptions) -> bool {
    let store = shared.store.lock().unwrap();
    store.objects.get(key).is_some_and(|vmi| {
        has_readiness_probe(vmi)
            && !condition_ready(vmi)
            && !matches_pattern(
                &images(vmi.get("spec").unwrap_or(&Value::Null)),
                &opts.broken_unit_image_pattern,
            )
    })
}

fn agent_connected(shared: &Shared, key: &Key) -> bool {
    let store = shared.store.lock().unwrap();
    store
        .objects
        .get(key)
        .and_then(|v| v.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|x| x["type"] == "AgentConnected"))
}

fn advance_vmi(store: &mut Store, key: &Key, uid: &str, opts: &ControllerOptions) -> bool {
    let Some(mut vmi) = store.objects.get(key).cloned() else {
        return false;
    };
    if meta_str(&vmi, "uid") != uid {
        return false;
    }
    let ns = key.1.clone();
    let spec = vmi.get("spec").cloned().unwrap_or(json!({}));
    let phase = vmi
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
        .to_string();
    let next = match phase.as_str() {
        "Pending" => {
            vmi["status"] = json!({
                "phase": "Scheduling",
                "conditions": [{ "type": "Ready", "status": "False", "reason": "PodNotExists" }],
            });
            true
        }
        "Scheduling" => {
            let dvs: Vec<String> = spec
                .get("volumes")
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(|x| x.pointer("/dataVolume/name").and_then(Value::as_str))
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            let secrets_ready = cloud_init_secrets(&spec)
                .iter()
                .all(|s| store.objects.contains_key(&(SECRET, ns.clone(), s.clone())));
            if matches_pattern(&images(&spec), &opts.unschedulable_image_pattern) {
                let cond = json!([{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm.",
                }]);
                if vmi.pointer("/status/conditions") != Some(&cond) {
                    vmi["status"]["conditions"] = cond;
                    store.put(key, vmi);
                    refresh_vm_status(store, &(VM, ns.clone(), key.2.clone()));
                }
                return false;
            }
            if !secrets_ready || !volumes_ready(store, &ns, &dvs) {
                return false;
            }
            if matches_pattern(&images(&spec), &opts.unpullable_image_pattern) {
                pull_fails(store, key, vmi, &images(&spec));
                return false;
            }
            // Every node cordoned: the VMI waits, as the scheduler's pod would.
            let Some(node) =
                super::drain::pick_node(store, None, &super::drain::tolerations_of(&vmi))
            else {
                return false;
            };
            vmi["status"] = json!({
                "phase": "Scheduled",
                "nodeName": node,
                "conditions": [{ "type": "Ready", "status": "False", "reason": "GuestNotRunning" }],
            });
            true
        }
        "Running" => {
            let probed = has_readiness_probe(&vmi);
            let broken = matches_pattern(&images(&spec), &opts.broken_unit_image_pattern);
            let paused = matches_pattern(&images(&spec), &opts.paused_image_pattern);
            let conditions = vmi["status"]["conditions"].as_array_mut();
            match conditions {
                // A paused guest runs nothing: its probe never passes, its agent is silent.
                _ if paused => false,
                Some(c)
                    if opts.agent_connect_delay.is_some()
                        && !c.iter().any(|x| x["type"] == "AgentConnected") =>
                {
                    c.push(json!({ "type": "AgentConnected", "status": "True" }));
                    true
                }
                // The probe passes once: the workload units are active.
                Some(c) if probed && !broken => {
                    let mut changed = false;
                    for x in c.iter_mut().filter(|x| x["type"] == "Ready") {
                        if x["status"] != "True" {
                            *x = json!({ "type": "Ready", "status": "True" });
                            changed = true;
                        }
                    }
                    changed
                }
                _ => false,
            }
        }
        "Scheduled" => {
            let node = vmi
                .pointer("/status/nodeName")
                .cloned()
                .unwrap_or(json!(super::drain::DEFAULT_NODE));
            if matches_pattern(&images(&spec), &opts.fail_image_pattern) {
                let image = images(&spec).join(", ");
                vmi["status"] = json!({
                    "phase": "Failed",
                    "nodeName": node,
                    "reason": "PodFailed",
                    "conditions": [{
                        "type": "Ready",
                        "status": "False",
                        "reason": "GuestFailed",
                        "message": format!("virt-launcher failed: the guest of image {image} crashed while booting"),
                    }],
                });
            } else {
                let n = store.rv % 250 + 2;
                // With a readiness probe, Ready waits for the probe to pass.
                let ready = if has_readiness_probe(&vmi) {
                    json!({
                        "type": "Ready", "status": "False", "reason": "ReadinessProbeNotPassed",
                        "message": "the readiness probe has not passed yet",
                    })
                } else {
                    json!({ "type": "Ready", "status": "True" })
                };
                let migratable = live_migratable(store, &ns, &spec);
                let mut conditions = vec![ready, migratable];
                if matches_pattern(&images(&spec), &opts.paused_image_pattern) {
                    // The guest hit an I/O error as it started: libvirt paused it and the pod
                    // is not ready.
                    conditions[0] =
                        json!({ "type": "Ready", "status": "False", "reason": "GuestPaused" });
                    conditions.push(json!({
                        "type": "Paused", "status": "True", "reason": "PausedIOError",
                        "message": "VMI was paused, low-level IO error detected",
                    }));
                }
                vmi["status"] = json!({
                    "phase": "Running",
                    "nodeName": node,
                    "interfaces": [{ "name": "default", "ipAddress": format!("10.244.0.{n}") }],
                    "conditions": conditions,
                });
            }
            true
        }
        _ => false,
    };
    if next {
        store.put(key, vmi);
        refresh_vm_status(store, &(VM, ns, key.2.clone()));
    }
    next
}

/// The kubelet cannot pull the VMI's containerDisk image: KubeVirt reports the launcher
/// pod's waiting reason on `Synchronized=False`, ErrImagePull first, then ImagePullBackOff.
fn pull_fails(store: &mut Store, key: &Key, mut vmi: Value, images: &[String]) {
    let image = images.first().cloned().unwrap_or_default();
    let pulled_once = vmi
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|x| x["type"] == "Synchronized"));
    let (reason, message) = if pulled_once {
        (
            "ImagePullBackOff",
            format!("Back-off pulling image \"{image}\""),
        )
    } else {
        (
            "ErrImagePull",
            format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": \
                 failed to resolve reference \"{image}\": {image}: not found"
            ),
        )
    };
    let conditions = json!([
        { "type": "Ready", "status": "False", "reason": "PodNotReady" },
        { "type": "PodScheduled", "status": "True" },
        { "type": "Synchronized", "status": "False", "reason": reason, "message": message },
    ]);
    if vmi.pointer("/status/conditions") == Some(&conditions) {
        return;
    }
    vmi["status"]["conditions"] = conditions;
    store.put(key, vmi);
    refresh_vm_status(store, &(VM, key.1.clone(), key.2.clone()));
}

/// Whether a DataVolume is in error as KubeVirt judges it for DataVolumeError: phase Failed,
/// or its importer stopped (`Running=False`, reason Error or ImagePullFailed).
fn datavolume_error(store: &Store, ns: &str, names: &[String]) -> bool {
    names.iter().any(|n| {
        store
            .objects
            .get(&(DV, ns.to_string(), n.clone()))
            .is_some_and(|dv| {
                dv.pointer("/status/phase") == Some(&json!("Failed"))
                    || dv
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|c| {
                            c.iter().any(|x| {
                                x["type"] == "Running"
                                    && x["status"] == "False"
                                    && (x["reason"] == "Error" || x["reason"] == "ImagePullFailed")
                            })
                        })
            })
    })
}

/// A VMI condition with this type, status and reason.
fn vmi_condition(vmi: Option<&Value>, type_: &str, status: &str, reason: &str) -> bool {
    vmi.and_then(|v| v.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|x| x["type"] == type_ && x["status"] == status && x["reason"] == reason)
        })
}

/// Removes the shutting-down VMI `key` (still `uid`) after `delay`.
fn spawn_shutdown(shared: &Arc<Shared>, key: Key, uid: String, delay: Duration) {
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut store = shared.store.lock().unwrap();
        if store
            .objects
            .get(&key)
            .is_some_and(|v| meta_str(v, "uid") == uid)
        {
            store.remove_now(&key);
        }
    });
}

/// The VMI's `LiveMigratable` condition as virt-controller sets it: False with reason
/// `DisksNotLiveMigratable` when a DataVolume disk is not ReadWriteMany (CDI's default access
/// mode here is ReadWriteOnce), else True.
fn live_migratable(store: &Store, ns: &str, vmi_spec: &Value) -> Value {
    let rwo = vmi_spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/dataVolume/name").and_then(Value::as_str))
        .any(|dv| {
            // KubeVirt reads the claim (pkg/storage/types/pvc.go: HasSharedAccessMode): its
            // modes are what CDI settled on, the DataVolume's own when it gave them.
            let modes = store
                .objects
                .get(&(PVC, ns.to_string(), dv.to_string()))
                .and_then(|c| c.pointer("/spec/accessModes").cloned())
                .or_else(|| {
                    store
                        .objects
                        .get(&(DV, ns.to_string(), dv.to_string()))
                        .and_then(|d| {
                            d.pointer("/spec/storage/accessModes")
                                .or_else(|| d.pointer("/spec/pvc/accessModes"))
                                .cloned()
                        })
                });
            !modes
                .and_then(|m| m.as_array().cloned())
                .is_some_and(|m| m.iter().any(|x| x == "ReadWriteMany"))
        });
    if rwo {
        json!({
            "type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable",
            "message": "cannot migrate VMI: PVC is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)",
        })
    } else {
        json!({ "type": "LiveMigratable", "status": "True" })
    }
}

/// Background garbage collection: after `delay`, removes objects all of whose owners are gone.
fn schedule_gc(shared: &Arc<Shared>, delay: Duration, owner_uid: String) {
    if owner_uid.is_empty() {
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut store = shared.store.lock().unwrap();
        for dep in store.dependents_of(&owner_uid) {
            let Some(obj) = store.objects.get(&dep) else {
                continue;
            };
            if owner_uids(obj).iter().all(|u| !store.uid_exists(u)) {
                store.remove_now(&dep);
            }
        }
    });
}

/// Foreground deletion: owners marked with the `foregroundDeletion` finalizer lose their
/// dependents first, then disappear.
fn foreground_pass(shared: &Arc<Shared>) {
    let mut store = shared.store.lock().unwrap();
    let owners = store.foreground_owners();
    for key in owners {
        // An earlier owner of this pass may already have removed it (a chain VM → VMI → Pod).
        let Some(owner) = store.objects.get(&key) else {
            continue;
        };
        let uid = meta_str(owner, "uid").to_string();
        let deps = store.dependents_of(&uid);
        if deps.is_empty() {
            let mut obj = store.objects[&key].clone();
            let fins = obj["metadata"]["finalizers"].as_array_mut().unwrap();
            fins.retain(|f| f != "foregroundDeletion");
            if fins.is_empty() {
                store.remove_now(&key);
            } else {
                store.put(&key, obj);
            }
        } else {
            for d in deps {
                let Some(dep) = store.objects.get(&d) else {
                    continue;
                };
                let dep_uid = meta_str(dep, "uid").to_string();
                if store.dependents_of(&dep_uid).is_empty() {
                    store.remove_now(&d);
                } else if !terminating(&store.objects[&d]) {
                    let mut o = store.objects[&d].clone();
                    o["metadata"]["deletionTimestamp"] = json!(
                        jiff::Timestamp::now()
                            .round(jiff::Unit::Second)
                            .unwrap()
                            .to_string()
                    );
                    o["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
                    store.put(&d, o);
                }
            }
        }
    }
}

/// Namespace lifecycle: after `delay`, remove everything in the namespace, then the namespace.
fn schedule_namespace_deletion(shared: &Arc<Shared>, delay: Duration, ns: String) {
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut store = shared.store.lock().unwrap();
        // Dependents first so owners never vanish before what they own.
        let mut keys: Vec<Key> = store
            .objects
            .keys()
            .filter(|k| k.1 == ns && RESOURCES[k.0].namespaced)
            .cloned()
            .collect();
        keys.sort_by_key(|k| std::cmp::Reverse(depth_rank(k.0)));
        for k in keys {
            store.remove_now(&k);
        }
        store.remove_now(&(NS, String::new(), ns));
    });
}

fn depth_rank(res: usize) -> usize {
    match res {
        r if r == idx("persistentvolumeclaims") => 3,
        r if r == idx("virtualmachineinstances") || r == idx("datavolumes") => 2,
        _ => 1,
    }
}
