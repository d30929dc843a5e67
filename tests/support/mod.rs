//! Shared integration-test support. The centrepiece is the fake Kubernetes API server
//! ([`apiserver::FakeApiServer`]): real HTTP(S) with kube-apiserver wire semantics, simulated
//! KubeVirt/CDI controllers, fault injection and a request log. Include it from an
//! integration test with `mod support;` (see docs/fake-apiserver.md).
//!
//! Quick start (sync test spawning the binary):
//! ```ignore
//! let server = support::FakeApiServer::start(support::Options::default());
//! server.write_kubeconfig(dir.path().join("kubeconfig"))?;
//! // run `virtwork --kubeconfig <that file> ...`, then assert on server state:
//! assert_eq!(server.objects("virtualmachines", Some("virtwork")).len(), 3);
//! assert_eq!(server.count("create", "virtualmachines"), 3);
//! ```
//! Async tests get a client with `server.client().await` (a `kube::Client`; kube 5 retries
//! 429/503/504 itself) or `server.client_without_retries().await` to see raw answers.
//!
//! Public API of the handle: `start(Options)`, `url()`, `write_kubeconfig(path)`,
//! `kubeconfig_yaml(ns)`, `client()`, `client_without_retries()`, `kube_config()`, `request_log()` / `clear_request_log()`, `counters()` /
//! `count(verb, resource)`, `objects(resource, ns)`, `get(resource, ns, name)`,
//! `insert(object)`, `remove(..)`, `events()`, `resource_version()`, `compact()`,
//! `set_faults(Faults)` / `update_faults(|f| ..)`, `set_controllers(ControllerOptions)`,
//! `set_virtualization_installed(bool)`, `set_schema(..)`, `schema_violations()`,
//! `inflight()`, `wait_until(timeout, |server| ..)`. Dropping the handle stops the server.
#![allow(dead_code, unused_imports)]

pub mod apiserver;
pub mod names;
pub mod process;
pub mod prometheus;
pub mod promstub;
pub mod proxy;
pub mod schema;

pub use apiserver::{
    AccessAttributes, AfterCommit, ApiError, Authorizer, Backend, ControllerOptions, Denial,
    EndlessList, EventType, FakeApiServer, FaultAction, Faults, Options, RequestRecord, SchemaMode,
    SchemaReport, SchemaValidator, SchemaViolation, ScriptedFault, StoreEvent,
};
