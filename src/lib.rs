//! virtwork: creates VMs on OpenShift Virtualization / KubeVirt running continuous workloads.
//!
//! Data flows one way: input (cli) -> [`config::Config`] -> [`plan`] -> cluster ([`k8s`]) ->
//! report. The binary in main.rs only parses arguments, dispatches and maps errors to exit codes.

pub mod audit;
pub mod cli;
pub mod cloudinit;
pub mod commands;
pub mod config;
pub mod error;
pub mod k8s;
pub mod labels;
pub mod logging;
pub mod plan;
pub mod render;
pub mod report;
pub mod verify;
pub mod workloads;
