//! Typed KubeVirt and CDI resources (VirtualMachine, VirtualMachineInstance, DataVolume) with
//! field names exactly as in KubeVirt's OpenAPI schema.
//!
//! Hand-written rather than generated: we need a small, exact subset, and every field we
//! emit must validate against `v1.VirtualMachine` with unknown fields rejected.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};

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

/// `kubevirt.io/v1` VirtualMachine. (Spec/status fields are filled in by the plan work.)
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachine {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
namespaced_resource!(
    VirtualMachine,
    "kubevirt.io",
    "v1",
    "VirtualMachine",
    "virtualmachines"
);
