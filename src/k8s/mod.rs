//! Everything that talks to the Kubernetes API server, and the typed KubeVirt/CDI resources.

pub mod client;
pub mod kubevirt;
pub mod retry;
