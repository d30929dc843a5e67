//! `virtwork status`: the runs present on the cluster, read from label-selected VMs and VMIs.
//!
//! Owns: [`assemble`], the pure part (join VMs with their VMIs, judge each VM's
//! [`Readiness`] and the reason KubeVirt gives, group by run, sort), the per-run
//! [`RunSummary`] the default view and the documents show, and [`collect`], which lists the
//! two kinds through the shared client and retry policy with the bounds of
//! [`crate::k8s::list`], keeping of each object only the fields it shows.
//! Must not: write to the cluster, or decide when a followed fleet is done (`follow.rs`).

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde::Serialize;

use crate::error::Result;
use crate::k8s::ready::{condition_message, is_stuck_status};
use crate::k8s::scope::{ApiContext, Scope, list_in_scope_reduced};
use crate::kubevirt::VirtualMachineStatus;
use crate::labels;
use crate::model::ManagedKind;

/// Where a VM stands, as `status` judges it from one read of its VM and VMI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// Its VMI runs, not paused, and is not reported unready (condition Ready not False).
    Ready,
    /// On its way: no VMI yet, Provisioning, Scheduling, Starting, or running with a
    /// readiness probe that has not passed yet.
    Pending,
    /// In a state that needs someone to act but can clear (`ErrImagePull`,
    /// `ErrorUnschedulable`, `CrashLoopBackOff`, `Paused`, ...; the list run's readiness
    /// watch uses).
    Stuck,
    /// Its VMI failed and KubeVirt will not start it again (a crash KubeVirt retries reads
    /// `CrashLoopBackOff`, which is stuck).
    Failed,
}

/// One VM of a run as the cluster reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmStatus {
    pub namespace: String,
    pub name: String,
    /// `app.kubernetes.io/component`.
    pub workload: Option<String>,
    /// `virtwork/role` (multi-VM workloads only).
    pub role: Option<String>,
    /// The VM's `status.printableStatus` (Running, Starting, ErrorUnschedulable, ...).
    pub printable_status: Option<String>,
    /// The VMI's `status.phase`, absent when there is no VMI.
    pub vmi_phase: Option<String>,
    /// The VMI's `status.nodeName`.
    pub node: Option<String>,
    /// The VMI's condition Ready: with virtwork's readiness probe, whether every workload
    /// unit is active in the guest. `None` when there is no VMI or no such condition.
    pub ready: Option<bool>,
    /// The VM's `metadata.creationTimestamp`.
    pub created_at: Option<jiff::Timestamp>,
    /// Where the VM stands.
    pub readiness: Readiness,
    /// Why it is not ready, as KubeVirt says it: the message of the condition explaining a
    /// stuck status, else of the VMI's unmet Ready condition. None when ready or unexplained.
    pub reason: Option<String>,
}

impl VmStatus {
    /// The state shown for the VM: its printableStatus (what `kubectl get vm` shows), else
    /// its VMI's phase, else `Unknown`.
    pub fn shown(&self) -> &str {
        self.printable_status
            .as_deref()
            .or(self.vmi_phase.as_deref())
            .unwrap_or("Unknown")
    }

    /// `ErrImagePull: <message>`, or the shown state alone when nothing explains it.
    pub fn why(&self) -> String {
        match (&self.reason, self.readiness) {
            (Some(reason), _) => format!("{}: {reason}", self.shown()),
            (None, Readiness::Pending) if self.vmi_phase.as_deref() == Some("Running") => {
                format!("{}, not ready", self.shown())
            }
            (None, _) => self.shown().to_string(),
        }
    }
}

/// What one run amounts to: the one line of `status` and the `summary` of its document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary<'a> {
    /// Namespaces the run's VMs are in (one, unless VMs without a run id are grouped).
    pub namespaces: Vec<&'a str>,
    pub vm_count: usize,
    pub ready: usize,
    /// VMs per shown state ([`VmStatus::shown`]).
    pub by_status: BTreeMap<&'a str, usize>,
    /// VMs per readiness.
    pub by_readiness: BTreeMap<Readiness, usize>,
    /// The workloads (component labels), sorted.
    pub workloads: Vec<&'a str>,
    /// The VM not ready that was created first (by name among equals).
    #[serde(skip)]
    pub oldest_not_ready: Option<&'a VmStatus>,
}

impl<'a> RunSummary<'a> {
    /// Summarises `run`.
    pub fn of(run: &'a RunStatus) -> Self {
        let mut summary = RunSummary {
            namespaces: Vec::new(),
            vm_count: run.vms.len(),
            ready: 0,
            by_status: BTreeMap::new(),
            by_readiness: BTreeMap::new(),
            workloads: Vec::new(),
            oldest_not_ready: None,
        };
        for vm in &run.vms {
            if !summary.namespaces.contains(&vm.namespace.as_str()) {
                summary.namespaces.push(&vm.namespace);
            }
            if let Some(w) = vm.workload.as_deref()
                && !summary.workloads.contains(&w)
            {
                summary.workloads.push(w);
            }
            *summary.by_status.entry(vm.shown()).or_default() += 1;
            *summary.by_readiness.entry(vm.readiness).or_default() += 1;
            if vm.readiness == Readiness::Ready {
                summary.ready += 1;
                continue;
            }
            // Unknown creation times sort last: they cannot be the oldest we know of.
            let key = |v: &VmStatus| (v.created_at.is_none(), v.created_at);
            if summary
                .oldest_not_ready
                .is_none_or(|oldest| key(vm) < key(oldest))
            {
                summary.oldest_not_ready = Some(vm);
            }
        }
        summary.workloads.sort_unstable();
        summary
    }

    /// The shown states, most VMs first (by name among equals): `[("Running", 298),
    /// ("Provisioning", 2)]`.
    pub fn statuses(&self) -> Vec<(&'a str, usize)> {
        let mut statuses: Vec<_> = self.by_status.iter().map(|(s, n)| (*s, *n)).collect();
        statuses.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        statuses
    }
}

/// One run and its VMs, sorted by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunStatus {
    /// The `virtwork/run-id` label; `None` for VMs without one (runs made with an old
    /// version under `--no-audit`).
    pub run_id: Option<String>,
    pub vms: Vec<VmStatus>,
}

fn label(object: &DynamicObject, key: &str) -> Option<String> {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

fn status_str(object: &DynamicObject, field: &str) -> Option<String> {
    object
        .data
        .get("status")
        .and_then(|s| s.get(field))
        .and_then(|v| v.as_str())
        .filter(|v| !v.is_empty())
        .map(String::from)
}

/// The VMI's `Ready` condition as a bool.
fn ready_condition(vmi: &DynamicObject) -> Option<bool> {
    condition_status(vmi, "Ready")
}

/// Judges one VM from its VM's and VMI's status (`vm_status` as listed: printableStatus and
/// conditions): its readiness and the reason KubeVirt gives when it is not ready.
fn judge(
    vm_status: Option<&serde_json::Value>,
    vmi: Option<&DynamicObject>,
) -> (Readiness, Option<String>) {
    let typed: VirtualMachineStatus = vm_status
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    let printable = typed.printable_status.as_deref().unwrap_or_default();
    let phase = vmi.and_then(|v| status_str(v, "phase"));
    let ready = vmi.and_then(ready_condition);
    let paused = vmi.is_some_and(|v| condition_status(v, "Paused") == Some(true));
    let readiness = match phase.as_deref() {
        _ if is_stuck_status(printable) => Readiness::Stuck,
        Some("Running") if !paused && ready != Some(false) => Readiness::Ready,
        // Under a run strategy that restarts it the VM reads CrashLoopBackOff (stuck, above).
        Some("Failed") => Readiness::Failed,
        _ => Readiness::Pending,
    };
    let reason = match readiness {
        Readiness::Ready => None,
        Readiness::Stuck => condition_message(&typed),
        // What kubevirt's VMI conditions say, as run's readiness watch reads a failure.
        Readiness::Failed => vmi.and_then(|v| unmet_condition_message(v, None)),
        Readiness::Pending => vmi.and_then(|v| unmet_condition_message(v, Some("Ready"))),
    };
    (readiness, reason)
}

/// The message of the first VMI condition (of type `wanted`, when given) that is not True.
fn unmet_condition_message(vmi: &DynamicObject, wanted: Option<&str>) -> Option<String> {
    vmi.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .filter(|c| wanted.is_none_or(|w| c.get("type").and_then(|t| t.as_str()) == Some(w)))
        .filter(|c| c.get("status").and_then(|s| s.as_str()) != Some("True"))
        .filter_map(|c| c.get("message")?.as_str())
        .find(|m| !m.trim().is_empty())
        .map(String::from)
}

/// The VMI's condition `wanted` as a bool.
fn condition_status(vmi: &DynamicObject, wanted: &str) -> Option<bool> {
    vmi.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(wanted))
        .and_then(|c| c.get("status")?.as_str())
        .map(|status| status == "True")
}

/// Joins VMs with their VMIs (same namespace and name) and groups them by run id; runs are
/// sorted by id (runs without an id last), VMs by namespace then name.
pub fn assemble(vms: &[DynamicObject], vmis: &[DynamicObject]) -> Vec<RunStatus> {
    let key = |o: &DynamicObject| {
        (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    };
    let vmis: BTreeMap<(String, String), &DynamicObject> =
        vmis.iter().map(|vmi| (key(vmi), vmi)).collect();
    // `None` sorts first in a BTreeMap; map it to a key that sorts last instead.
    let mut runs: BTreeMap<(bool, String), Vec<VmStatus>> = BTreeMap::new();
    for vm in vms {
        let (namespace, name) = key(vm);
        let vmi = vmis.get(&(namespace.clone(), name.clone()));
        let run_id = label(vm, labels::RUN_ID);
        let (readiness, reason) = judge(vm.data.get("status"), vmi.copied());
        runs.entry((run_id.is_none(), run_id.unwrap_or_default()))
            .or_default()
            .push(VmStatus {
                workload: label(vm, labels::COMPONENT),
                role: label(vm, labels::ROLE),
                printable_status: status_str(vm, "printableStatus"),
                vmi_phase: vmi.and_then(|v| status_str(v, "phase")),
                node: vmi.and_then(|v| status_str(v, "nodeName")),
                ready: vmi.and_then(|v| ready_condition(v)),
                created_at: vm.metadata.creation_timestamp.as_ref().map(|t| t.0),
                readiness,
                reason,
                namespace,
                name,
            });
    }
    runs.into_iter()
        .map(|((no_id, id), mut vms)| {
            vms.sort_by(|a, b| {
                a.namespace
                    .cmp(&b.namespace)
                    .then_with(|| crate::model::natural_cmp(&a.name, &b.name))
            });
            RunStatus {
                run_id: (!no_id).then_some(id),
                vms,
            }
        })
        .collect()
}

/// Reads the runs in `scope` from the cluster.
pub async fn collect(ctx: &ApiContext, scope: &Scope) -> Result<Vec<RunStatus>> {
    let vms = list_kind(ctx, scope, ManagedKind::VirtualMachine).await?;
    let vmis = list_kind(ctx, scope, ManagedKind::VirtualMachineInstance).await?;
    Ok(assemble(&vms, &vmis))
}

/// The `status` fields [`assemble`] reads; everything else of a listed object is dropped as
/// each page arrives.
const KEPT_STATUS_FIELDS: [&str; 4] = ["printableStatus", "phase", "nodeName", "conditions"];

/// Lists `kind` in `scope`, keeping of each object only what [`assemble`] reads (name,
/// namespace, labels, creation time and the status fields it shows), each object once.
async fn list_kind(
    ctx: &ApiContext,
    scope: &Scope,
    kind: ManagedKind,
) -> Result<Vec<DynamicObject>> {
    list_in_scope_reduced(ctx, scope, kind, slim).await
}

/// `object` reduced to what `status` shows.
fn slim(object: DynamicObject) -> DynamicObject {
    let meta = object.metadata;
    let status: serde_json::Map<String, serde_json::Value> = object
        .data
        .get("status")
        .and_then(|s| s.as_object())
        .map(|s| {
            s.iter()
                .filter(|(k, _)| KEPT_STATUS_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    DynamicObject {
        types: None,
        metadata: kube::api::ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            labels: meta.labels,
            creation_timestamp: meta.creation_timestamp,
            ..Default::default()
        },
        data: serde_json::json!({ "status": status }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RUN_A: &str = "11111111-1111-4111-8111-111111111111";
    const RUN_B: &str = "22222222-2222-4222-8222-222222222222";

    fn object(
        kind: &str,
        name: &str,
        run: &str,
        role: Option<&str>,
        status: serde_json::Value,
    ) -> DynamicObject {
        let mut labels = json!({
            labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            labels::COMPONENT: "cpu",
            labels::RUN_ID: run,
        });
        if let Some(role) = role {
            labels[labels::ROLE] = json!(role);
        }
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": "virtwork",
                "labels": labels,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn vms_are_joined_with_their_vmis_and_grouped_by_run() {
        let vms = vec![
            object(
                "VirtualMachine",
                "virtwork-cpu-1",
                RUN_B,
                None,
                json!({"printableStatus": "Running"}),
            ),
            object(
                "VirtualMachine",
                "virtwork-net-server-0",
                RUN_A,
                Some("server"),
                json!({"printableStatus": "ErrorUnschedulable"}),
            ),
            object(
                "VirtualMachine",
                "virtwork-cpu-0",
                RUN_B,
                None,
                json!({"printableStatus": "Running"}),
            ),
            object("VirtualMachine", "legacy", "", None, json!({})),
        ];
        let vmis = vec![object(
            "VirtualMachineInstance",
            "virtwork-cpu-0",
            RUN_B,
            None,
            json!({"phase": "Running", "nodeName": "worker-1",
                   "conditions": [{"type": "Ready", "status": "False"}]}),
        )];
        let runs = assemble(&vms, &vmis);
        // What the listing keeps of each object is all assemble needs.
        let slimmed = |objects: &[DynamicObject]| -> Vec<DynamicObject> {
            objects.iter().cloned().map(slim).collect()
        };
        assert_eq!(assemble(&slimmed(&vms), &slimmed(&vmis)), runs);
        let ids: Vec<_> = runs.iter().map(|r| r.run_id.clone()).collect();
        assert_eq!(ids, vec![Some(RUN_A.into()), Some(RUN_B.into()), None]);
        let b = &runs[1];
        let names: Vec<_> = b.vms.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["virtwork-cpu-0", "virtwork-cpu-1"]);
        assert_eq!(b.vms[0].vmi_phase.as_deref(), Some("Running"));
        assert_eq!(b.vms[0].node.as_deref(), Some("worker-1"));
        assert_eq!(b.vms[0].ready, Some(false));
        assert_eq!(b.vms[1].vmi_phase, None);
        assert_eq!(b.vms[1].ready, None);
        let a = &runs[0].vms[0];
        assert_eq!(a.role.as_deref(), Some("server"));
        assert_eq!(a.workload.as_deref(), Some("cpu"));
        assert_eq!(a.printable_status.as_deref(), Some("ErrorUnschedulable"));
        assert_eq!(a.created_at, Some("2026-01-01T00:00:00Z".parse().unwrap()));
    }
}
