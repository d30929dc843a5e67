//! Typed KubeVirt and CDI resources (VirtualMachine, VirtualMachineInstance, DataVolume) with
//! field names exactly as in KubeVirt's OpenAPI schema.
//!
//! Hand-written rather than generated: we need a small, exact subset, and every field we
//! emit must validate against `v1.VirtualMachine` with unknown fields rejected. So:
//! serialization writes only what was set (every optional field skips `None`/empty) and always
//! writes the fixed `apiVersion`/`kind`; deserialization is lenient (every field defaults,
//! unknown server fields are ignored) so objects read back from a real cluster always parse.
//! Quantities are `k8s_openapi` [`Quantity`] strings, passed through unparsed.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

/// `kubevirt.io/v1`, the API version of VirtualMachine and VirtualMachineInstance.
pub const KUBEVIRT_API_VERSION: &str = "kubevirt.io/v1";
/// `cdi.kubevirt.io/v1beta1`, the API version of DataVolume.
pub const CDI_API_VERSION: &str = "cdi.kubevirt.io/v1beta1";

/// Implements `kube::Resource` for a namespaced custom resource type with fixed GVK.
macro_rules! namespaced_resource {
    ($ty:ty, $group:literal, $version:literal, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(concat!($group, "/", $version))
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// Serializes a top-level object with its fixed `apiVersion` and `kind` first, so a value
/// can never be sent or printed with a wrong or missing type header.
fn serialize_object<S, Spec, Status>(
    serializer: S,
    name: &'static str,
    api_version: &str,
    kind: &str,
    metadata: &ObjectMeta,
    spec: Option<&Spec>,
    status: Option<&Status>,
) -> Result<S::Ok, S::Error>
where
    S: Serializer,
    Spec: Serialize,
    Status: Serialize,
{
    let mut object = serializer.serialize_struct(name, 5)?;
    object.serialize_field("apiVersion", api_version)?;
    object.serialize_field("kind", kind)?;
    object.serialize_field("metadata", metadata)?;
    match spec {
        Some(spec) => object.serialize_field("spec", spec)?,
        None => object.skip_field("spec")?,
    }
    match status {
        Some(status) => object.serialize_field("status", status)?,
        None => object.skip_field("status")?,
    }
    object.end()
}

// ---------------------------------------------------------------------------------------------
// VirtualMachine
// ---------------------------------------------------------------------------------------------

/// `kubevirt.io/v1` VirtualMachine (`v1.VirtualMachine`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct VirtualMachine {
    pub metadata: ObjectMeta,
    pub spec: VirtualMachineSpec,
    pub status: Option<VirtualMachineStatus>,
}
namespaced_resource!(
    VirtualMachine,
    "kubevirt.io",
    "v1",
    "VirtualMachine",
    "virtualmachines"
);

impl Serialize for VirtualMachine {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            serializer,
            "VirtualMachine",
            KUBEVIRT_API_VERSION,
            "VirtualMachine",
            &self.metadata,
            Some(&self.spec),
            self.status.as_ref(),
        )
    }
}

/// `v1.VirtualMachineSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// `Always`, `Halted`, `Manual`, `RerunOnFailure` or `Once`; virtwork sets `Always`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<String>,
    pub template: VirtualMachineInstanceTemplateSpec,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub data_volume_templates: Vec<DataVolumeTemplateSpec>,
}

/// `v1.VirtualMachineInstanceTemplateSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct VirtualMachineInstanceTemplateSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<VirtualMachineInstanceSpec>,
}

/// `v1.VirtualMachineInstanceSpec` (the subset virtwork sets).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineInstanceSpec {
    pub domain: DomainSpec,
    /// Decides the VMI's Ready condition (and so Service endpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// What a node drain does to the VMI: `LiveMigrate`, `LiveMigrateIfPossible`, `None` or
    /// `External`; unset, the cluster's default (KubeVirt CR `spec.configuration.evictionStrategy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Seconds the guest gets to shut down (ACPI power button) before KubeVirt destroys it,
    /// at a stop, restart or eviction; unset, KubeVirt's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Network>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

/// `v1.Probe`: an exec probe runs its command in the guest through the QEMU guest agent; an
/// `httpGet` one is run by the kubelet against the virt-launcher pod, whose network binding
/// forwards it to the guest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Probe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<k8s_openapi::api::core::v1::ExecAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<k8s_openapi::api::core::v1::HTTPGetAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
}

/// `v1.DomainSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DomainSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    pub devices: Devices,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// `v1.CPU`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Cpu {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
}

/// `v1.Devices`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Devices {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
}

/// `v1.Disk`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Disk {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Visible in the guest as `/dev/disk/by-id/virtio-<serial>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
}

/// `v1.DiskTarget`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DiskTarget {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

/// `v1.Interface`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Interface {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masquerade: Option<InterfaceMasquerade>,
}

/// `v1.InterfaceMasquerade`: an empty object (`masquerade: {}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InterfaceMasquerade {}

/// `v1.ResourceRequirements`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
}

/// `v1.Network`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Network {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodNetwork>,
}

/// `v1.PodNetwork`: an empty object (`pod: {}`) for the default pod network.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PodNetwork {}

/// `v1.Volume`: exactly one of the sources is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDiskSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitNoCloudSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeVolumeSource>,
}

/// `v1.ContainerDiskSource`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ContainerDiskSource {
    pub image: String,
}

/// `v1.CloudInitNoCloudSource`. The user-data Secret field is `secretRef` in JSON (Go name
/// `UserDataSecretRef`); `userDataSecretRef` is rejected by the API server.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct CloudInitNoCloudSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// `v1.DataVolumeSource`: a VM volume backed by a DataVolume of the same namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolumeVolumeSource {
    pub name: String,
}

/// `v1.DataVolumeTemplateSpec`: a DataVolume KubeVirt creates (and owns) for the VM.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolumeTemplateSpec {
    pub metadata: ObjectMeta,
    pub spec: DataVolumeSpec,
}

/// `v1.VirtualMachineStatus` (the subset virtwork reads).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A KubeVirt/CDI status condition (`v1.VirtualMachineCondition`,
/// `v1.VirtualMachineInstanceCondition`, `v1beta1.DataVolumeCondition` share this shape).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<String>,
}

impl Condition {
    /// Whether this condition has `status: "True"`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

// ---------------------------------------------------------------------------------------------
// VirtualMachineInstance
// ---------------------------------------------------------------------------------------------

/// `kubevirt.io/v1` VirtualMachineInstance. virtwork only reads these (readiness, status);
/// the spec is kept as raw JSON so nothing the server sends is lost.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct VirtualMachineInstance {
    pub metadata: ObjectMeta,
    pub spec: Option<serde_json::Value>,
    pub status: Option<VirtualMachineInstanceStatus>,
}
namespaced_resource!(
    VirtualMachineInstance,
    "kubevirt.io",
    "v1",
    "VirtualMachineInstance",
    "virtualmachineinstances"
);

impl Serialize for VirtualMachineInstance {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            serializer,
            "VirtualMachineInstance",
            KUBEVIRT_API_VERSION,
            "VirtualMachineInstance",
            &self.metadata,
            self.spec.as_ref(),
            self.status.as_ref(),
        )
    }
}

/// `v1.VirtualMachineInstanceStatus` (the subset virtwork reads).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineInstanceStatus {
    /// `Pending`, `Scheduling`, `Scheduled`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<VirtualMachineInstanceNetworkInterface>,
}

impl VirtualMachineInstanceStatus {
    /// The condition of `type_`, if the server reported it.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// `v1.VirtualMachineInstanceNetworkInterface` (the subset virtwork reads).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineInstanceNetworkInterface {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// VirtualMachineInstanceMigration
// ---------------------------------------------------------------------------------------------

/// `kubevirt.io/v1` VirtualMachineInstanceMigration: a request to live-migrate one VMI
/// (what `virtwork churn` creates, labelled so cleanup finds it).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct VirtualMachineInstanceMigration {
    pub metadata: ObjectMeta,
    pub spec: VirtualMachineInstanceMigrationSpec,
    pub status: Option<VirtualMachineInstanceMigrationStatus>,
}
namespaced_resource!(
    VirtualMachineInstanceMigration,
    "kubevirt.io",
    "v1",
    "VirtualMachineInstanceMigration",
    "virtualmachineinstancemigrations"
);

impl Serialize for VirtualMachineInstanceMigration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            serializer,
            "VirtualMachineInstanceMigration",
            KUBEVIRT_API_VERSION,
            "VirtualMachineInstanceMigration",
            &self.metadata,
            Some(&self.spec),
            self.status.as_ref(),
        )
    }
}

/// `v1.VirtualMachineInstanceMigrationSpec` (the subset virtwork sends).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationSpec {
    /// The VMI to migrate (same namespace).
    pub vmi_name: String,
}

/// `v1.VirtualMachineInstanceMigrationStatus` (the subset virtwork reads).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationStatus {
    /// `Pending`, `Scheduling`, `Scheduled`, `PreparingTarget`, `TargetReady`, `Running`,
    /// `Succeeded`, `Failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// DataVolume (CDI)
// ---------------------------------------------------------------------------------------------

/// `cdi.kubevirt.io/v1beta1` DataVolume.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolume {
    pub metadata: ObjectMeta,
    pub spec: DataVolumeSpec,
    pub status: Option<DataVolumeStatus>,
}
namespaced_resource!(
    DataVolume,
    "cdi.kubevirt.io",
    "v1beta1",
    "DataVolume",
    "datavolumes"
);

impl Serialize for DataVolume {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            serializer,
            "DataVolume",
            CDI_API_VERSION,
            "DataVolume",
            &self.metadata,
            Some(&self.spec),
            self.status.as_ref(),
        )
    }
}

/// `v1beta1.DataVolumeSpec` (the subset virtwork sets).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolumeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<DataVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
}

/// `v1beta1.DataVolumeSource`: virtwork only creates blank disks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolumeSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blank: Option<DataVolumeBlankImage>,
}

/// `v1beta1.DataVolumeBlankImage`: an empty object (`blank: {}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DataVolumeBlankImage {}

/// `v1beta1.StorageSpec`: size and optionally the class, access mode and volume mode. What is
/// left out CDI fills in from the class's StorageProfile (containerized-data-importer
/// pkg/controller/datavolume/util.go, renderPvcSpecVolumeModeAndAccessModesAndStorageClass).
/// Without a class CDI uses the virtualization default class, else the Kubernetes default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct StorageSpec {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    /// `Filesystem` or `Block`; `None`: the StorageProfile's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<StorageResources>,
}

/// `k8s.io.api.core.v1.VolumeResourceRequirements` as used under `storage.resources`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StorageResources {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// `v1beta1.DataVolumeStatus` (the subset virtwork reads).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DataVolumeStatus {
    /// e.g. `Pending`, `PVCBound`, `ImportInProgress`, `Succeeded`, `Failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// e.g. `45.5%` or `N/A`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_serializes_type_header_and_omits_unset_fields() {
        let vm = VirtualMachine {
            metadata: ObjectMeta {
                name: Some("vm-a".into()),
                ..Default::default()
            },
            spec: VirtualMachineSpec {
                run_strategy: Some("Always".into()),
                ..Default::default()
            },
            status: None,
        };
        let json = serde_json::to_value(&vm).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": "vm-a"},
                "spec": {"runStrategy": "Always", "template": {}},
            })
        );
    }

    #[test]
    fn empty_marker_objects_serialize_as_empty_maps() {
        let json = serde_json::to_value(Interface {
            name: "default".into(),
            masquerade: Some(InterfaceMasquerade {}),
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "default", "masquerade": {}})
        );
        let json = serde_json::to_value(DataVolumeSource {
            blank: Some(DataVolumeBlankImage {}),
        })
        .unwrap();
        assert_eq!(json, serde_json::json!({"blank": {}}));
    }

    #[test]
    fn server_objects_with_unknown_fields_deserialize() {
        let vm: VirtualMachine = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm-a", "uid": "1", "generation": 3},
            "spec": {"runStrategy": "Always", "instancetype": {"name": "x"},
                     "template": {"spec": {"domain": {"devices": {}, "firmware": {"uuid": "u"}}}}},
            "status": {"printableStatus": "Running", "ready": true, "created": true,
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastProbeTime": null}],
                       "volumeSnapshotStatuses": []}
        }))
        .unwrap();
        let status = vm.status.unwrap();
        assert_eq!(status.printable_status.as_deref(), Some("Running"));
        assert!(status.conditions[0].is_true());

        let vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vm-a"},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running", "nodeName": "n1",
                       "interfaces": [{"name": "default", "ipAddress": "10.0.0.5",
                                       "infoSource": "domain"}],
                       "conditions": [{"type": "AgentConnected", "status": "True"}],
                       "guestOSInfo": {}}
        }))
        .unwrap();
        let status = vmi.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.node_name.as_deref(), Some("n1"));
        assert!(status.condition("AgentConnected").unwrap().is_true());
        assert_eq!(status.interfaces[0].ip_address.as_deref(), Some("10.0.0.5"));

        let dv: DataVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d"},
            "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}},
            "status": {"phase": "Succeeded", "progress": "100.0%", "claimName": "d"}
        }))
        .unwrap();
        assert_eq!(dv.status.unwrap().phase.as_deref(), Some("Succeeded"));
        assert_eq!(
            serde_json::to_value(&dv.spec).unwrap(),
            serde_json::json!({"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}})
        );
    }

    #[test]
    fn resource_metadata_matches_the_served_apis() {
        assert_eq!(VirtualMachine::api_version(&()), KUBEVIRT_API_VERSION);
        assert_eq!(VirtualMachine::plural(&()), "virtualmachines");
        assert_eq!(
            VirtualMachineInstance::plural(&()),
            "virtualmachineinstances"
        );
        assert_eq!(DataVolume::api_version(&()), CDI_API_VERSION);
        assert_eq!(DataVolume::plural(&()), "datavolumes");
        let dv = DataVolume::default();
        let json = serde_json::to_value(&dv).unwrap();
        assert_eq!(json["apiVersion"], CDI_API_VERSION);
        assert_eq!(json["kind"], "DataVolume");
    }
}
