//! What verify (and disruption, whose VMI and migration listings are [`Listed`] too) reads
//! of a listed VirtualMachine and VirtualMachineInstance, and nothing more: name, namespace,
//! uid, creation time, labels, virtwork's own annotations, the memory request (VMs) and the
//! phase (VMIs; the creation time bounds a load profile's clock). Deserialized straight from
//! each list page, so verify never holds a fleet's full specs and statuses (a `DynamicObject`
//! of 1,250 VMs is tens of MiB of JSON trees). Must not: read or keep any other field, talk
//! to the cluster.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use crate::signals::contract::{SIGNAL_PARAMS_ANNOTATION, SIGNALS_DIGEST_ANNOTATION};

/// A listed object: its slim metadata, and the part of its spec (`P`) and status (`S`)
/// verify reads (`IgnoredAny` for none).
#[derive(Debug, Clone, Deserialize)]
pub struct Listed<P, S> {
    #[serde(default, deserialize_with = "slim_metadata")]
    pub metadata: ObjectMeta,
    #[serde(default = "Option::default")]
    pub spec: Option<P>,
    #[serde(default = "Option::default")]
    pub status: Option<S>,
}

/// A listed VirtualMachine.
pub type ListedVm = Listed<VmSpec, IgnoredAny>;
/// A listed VirtualMachineInstance.
pub type ListedVmi = Listed<IgnoredAny, VmiStatus>;

/// The metadata kept: name, namespace, uid, creation time, labels and the annotations verify reads (not
/// managedFields, owner references or other annotations, which can be large).
#[derive(Deserialize)]
struct SlimMetadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    #[serde(rename = "creationTimestamp")]
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

fn slim_metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let slim = SlimMetadata::deserialize(deserializer)?;
    let kept = [SIGNAL_PARAMS_ANNOTATION, SIGNALS_DIGEST_ANNOTATION];
    let annotations = slim.annotations.map(|all| {
        all.into_iter()
            .filter(|(key, _)| kept.contains(&key.as_str()))
            .collect()
    });
    Ok(ObjectMeta {
        name: slim.name,
        namespace: slim.namespace,
        uid: slim.uid,
        creation_timestamp: slim.creation_timestamp,
        labels: slim.labels,
        annotations,
        ..Default::default()
    })
}

/// `spec.template.spec.domain` of a VM, as far as its memory goes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VmSpec {
    template: Option<Template>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Template {
    spec: Option<TemplateSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct TemplateSpec {
    domain: Option<Domain>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Domain {
    resources: Option<Resources>,
    memory: Option<Memory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Resources {
    requests: Option<Requests>,
}

/// Quantities are kept as JSON values: a malformed one is ignored, not a failed list.
#[derive(Debug, Clone, Default, Deserialize)]
struct Requests {
    memory: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Memory {
    guest: Option<serde_json::Value>,
}

impl VmSpec {
    /// The memory the VM asks for (`resources.requests.memory`, else `memory.guest`) as
    /// written, when it is a string.
    pub fn memory_text(&self) -> Option<&str> {
        let domain = self.template.as_ref()?.spec.as_ref()?.domain.as_ref()?;
        let requested = domain
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.memory.as_ref())
            .and_then(|m| m.as_str());
        requested.or_else(|| domain.memory.as_ref()?.guest.as_ref()?.as_str())
    }
}

/// A VMI's status, as far as its phase goes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VmiStatus {
    phase: Option<serde_json::Value>,
}

impl VmiStatus {
    pub fn phase(&self) -> Option<&str> {
        self.phase.as_ref()?.as_str()
    }
}

impl<P: Clone, S: Clone> kube::Resource for Listed<P, S> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vm_keeps_only_what_verify_reads() {
        let vm: ListedVm = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {
                "name": "vm", "namespace": "ns", "labels": {"a": "b"},
                "annotations": {
                    "virtwork/signal-params": "{}",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                },
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"template": {"spec": {"domain": {
                "resources": {"requests": {"memory": "2Gi", "cpu": "1"}},
                "devices": {"disks": []},
            }}}},
            "status": {"printableStatus": "Running"},
        }))
        .unwrap();
        assert_eq!(vm.metadata.name.as_deref(), Some("vm"));
        assert_eq!(vm.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(vm.metadata.labels.as_ref().unwrap()["a"], "b");
        let annotations = vm.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["virtwork/signal-params"]
        );
        assert!(vm.metadata.managed_fields.is_none());
        assert_eq!(vm.spec.unwrap().memory_text(), Some("2Gi"));
    }

    #[test]
    fn memory_falls_back_to_the_guest_size_and_tolerates_odd_values() {
        let spec = |domain: serde_json::Value| -> VmSpec {
            serde_json::from_value(json!({"template": {"spec": {"domain": domain}}})).unwrap()
        };
        assert_eq!(
            spec(json!({"memory": {"guest": "1Gi"}})).memory_text(),
            Some("1Gi")
        );
        assert_eq!(
            spec(json!({"resources": {"requests": {"memory": 5}}, "memory": {"guest": "1Gi"}}))
                .memory_text(),
            Some("1Gi")
        );
        assert_eq!(spec(json!({"resources": null})).memory_text(), None);
        assert_eq!(VmSpec::default().memory_text(), None);
    }

    #[test]
    fn a_vmi_keeps_its_phase() {
        let vmi: ListedVmi = serde_json::from_value(json!({
            "metadata": {"name": "vm", "namespace": "ns"},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running", "interfaces": [{"ipAddress": "10.0.0.1"}]},
        }))
        .unwrap();
        assert_eq!(vmi.status.unwrap().phase(), Some("Running"));
        let bare: ListedVmi = serde_json::from_value(json!({"metadata": {}})).unwrap();
        assert!(bare.status.is_none());
    }
}
