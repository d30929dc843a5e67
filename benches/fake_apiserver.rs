//! Throughput of the fake API server (tests/support/apiserver) through the real kube client:
//! concurrent creates, label-selected lists over a large store, VMs from create to Running
//! through the simulated controllers, and cleanup with garbage collection. Tells test and
//! benchmark authors what the fixture itself costs. Prints figures; no assertions.
//!
//! Run: `cargo bench --bench fake_apiserver` (env `BENCH_VMS`, default 500). Under
//! `cargo test --all-targets` (no `--bench` argument) it does a small smoke run.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;
use support::{FakeApiServer, Options};

const CONCURRENCY: usize = 16;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let vms: usize = if full {
        std::env::var("BENCH_VMS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500)
    } else {
        20
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(vms));
}

fn report(what: &str, count: usize, took: Duration) {
    println!(
        "{what:<44} {count:>6} in {:>8.1} ms  ({:>8.0}/s)",
        took.as_secs_f64() * 1e3,
        count as f64 / took.as_secs_f64()
    );
}

async fn run(vms: usize) {
    let server = FakeApiServer::start(Options {
        namespaces: vec!["bench".into()],
        ..Default::default()
    });
    let client = server.client().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "bench");

    let secret_count = vms * 2;
    let start = Instant::now();
    stream::iter(0..secret_count)
        .for_each_concurrent(CONCURRENCY, |i| {
            let secrets = secrets.clone();
            async move {
                let s: Secret = serde_json::from_value(json!({
                    "metadata": { "name": format!("s-{i:05}"), "labels": { "run": if i % 2 == 0 { "a" } else { "b" } } },
                    "stringData": { "userdata": "#cloud-config\n" },
                }))
                .unwrap();
                secrets.create(&PostParams::default(), &s).await.expect("create secret");
            }
        })
        .await;
    report(
        "Secret creates (16 concurrent)",
        secret_count,
        start.elapsed(),
    );

    let lists = 50;
    let start = Instant::now();
    for _ in 0..lists {
        let l = secrets
            .list(&ListParams::default().labels("run=a"))
            .await
            .unwrap();
        assert_eq!(l.items.len(), secret_count / 2);
    }
    report(
        &format!("label-selected lists over {secret_count} Secrets"),
        lists,
        start.elapsed(),
    );

    let vm_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "bench",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
            "virtualmachines",
        ),
    );
    let start = Instant::now();
    stream::iter(0..vms)
        .for_each_concurrent(CONCURRENCY, |i| {
            let vm_api = vm_api.clone();
            async move {
                let vm: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "metadata": { "name": format!("vm-{i:05}"), "labels": { "run": "a" } },
                    "spec": {
                        "runStrategy": "Always",
                        "template": { "spec": { "domain": { "devices": {} }, "volumes": [
                            { "name": "containerdisk", "containerDisk": { "image": "quay.io/containerdisks/fedora:42" } },
                            { "name": "cloudinitdisk", "cloudInitNoCloud": { "secretRef": { "name": format!("s-{i:05}") } } },
                        ] } },
                    },
                }))
                .unwrap();
                vm_api.create(&PostParams::default(), &vm).await.expect("create VM");
            }
        })
        .await;
    let created = start.elapsed();
    report("VM creates (16 concurrent, schema-checked)", vms, created);
    let running = |s: &FakeApiServer| {
        s.objects("vm", Some("bench"))
            .iter()
            .filter(|v| v["status"]["printableStatus"] == "Running")
            .count()
            == vms
    };
    while !running(&server) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    report(
        "VMs created -> all Running (controllers)",
        vms,
        start.elapsed(),
    );

    let start = Instant::now();
    stream::iter(0..vms)
        .for_each_concurrent(CONCURRENCY, |i| {
            let vm_api = vm_api.clone();
            async move {
                vm_api
                    .delete(&format!("vm-{i:05}"), &DeleteParams::background())
                    .await
                    .expect("delete VM");
            }
        })
        .await;
    report("VM deletes answered", vms, start.elapsed());
    while !server.objects("vmi", Some("bench")).is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    report("VM deletes -> VMIs garbage-collected", vms, start.elapsed());
    let log = server.request_log();
    println!(
        "requests served: {}; store events: {}",
        log.len(),
        server.events().len()
    );
}
