//! Everything that talks to the Kubernetes API server, and the typed KubeVirt/CDI resources.

pub mod apply;
pub mod cleanup;
pub mod client;
pub mod kubevirt;
pub mod list;
pub mod namespace;
pub mod pacing;
pub mod preflight;
pub mod proxy;
pub mod ready;
pub mod retry;
pub mod status;
