//! Everything that talks to the Kubernetes API server (the typed KubeVirt/CDI resources it
//! sends live in `crate::kubevirt`, below the plan).

pub mod apply;
pub mod churn;
pub mod cleanup;
pub mod client;
pub mod error_line;
pub mod follow;
pub mod list;
pub mod namespace;
pub mod pacing;
pub mod preflight;
pub mod proxy;
pub mod reach;
pub mod ready;
pub mod retry;
pub mod scope;
pub mod status;
