//! virtwork: creates VMs on OpenShift Virtualization / KubeVirt running continuous workloads.
//!
//! Data flows one way: input (cli, env, YAML) -> per-command settings ([`config`]) ->
//! [`plan`] -> cluster ([`k8s`]) -> report. Values are parsed once, at the edge, into the
//! types of [`model`]. The binary in main.rs only parses arguments, dispatches and maps
//! errors to exit codes.

pub mod audit;
pub mod churn;
pub mod cli;
pub(crate) mod cloudinit;
pub mod commands;
pub mod config;
pub mod disruption;
pub mod error;
pub mod html;
pub mod htmlreport;
pub mod k8s;
pub mod kubevirt;
pub(crate) mod labels;
pub(crate) mod logging;
pub mod model;
pub mod plan;
pub mod profile_schedule;
pub mod render;
// Public for tests/docs.rs, which checks each document against docs/output-json.md.
pub mod report;
pub mod signals;
pub(crate) mod table;
pub mod terminal;
pub mod usage;
pub mod verify;
pub mod workloads;
pub(crate) mod yaml;
