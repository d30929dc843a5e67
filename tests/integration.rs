//! The one binary for every integration test that needs no real guest or live cluster: each
//! `tests/<area>.rs` is a module of it, so the fake API server, the seeded clusters and the
//! binary helpers are compiled and linked once instead of once per area. Run one area with
//! `cargo test --test integration <area>::` (for example `churn::`).

// Each area uses a part of the shared support; what one does not use is not dead.
#![allow(dead_code, unused_imports)]

#[path = "support/binary.rs"]
mod binary;
mod seed;
mod support;
#[path = "support/test_config.rs"]
mod test_config;

mod audit;
mod catalog;
mod churn;
mod cleanup;
mod cli;
mod compat;
mod config;
mod connect;
mod density;
mod deploy;
mod disruption;
mod docs;
mod dry_run;
mod entrypoint;
mod fake_apiserver;
mod guest_payloads;
mod layers;
mod monitoring;
mod packaging;
mod pipes;
mod plan;
mod report;
mod run;
mod run_ids;
mod schema;
mod security;
mod status;
mod verify;
mod vm_shape;
mod workloads;
