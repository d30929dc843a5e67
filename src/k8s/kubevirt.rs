//! Typed KubeVirt and CDI resources (VirtualMachine, VirtualMachineInstance, DataVolume) with
//! field names exactly as in KubeVirt's OpenAPI schema.
