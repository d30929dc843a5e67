//! The shape of the VMs a run creates, tried against the fake API server the way a real
//! cluster treats them: node drains (each VM's eviction strategy, KubeVirt's eviction
//! decision and live migration), Service endpoints under every `--ready-condition`, and the
//! inputs a cluster would refuse, refused before the first request.

use crate::binary;
use crate::support;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, Instant};

use binary::Env;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::names::tagged;
use support::{ControllerOptions, FakeApiServer, Options};

const NS: &str = "virtwork";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
}

fn node(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": {},
        "status": { "allocatable": { "cpu": cpu, "memory": memory, "pods": "250" } },
    })
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `name` as the run that created the VMs in `NS` named it (untagged while it has created
/// none, so a lookup before then finds nothing).
fn tagged_in(server: &FakeApiServer, name: &str) -> String {
    let vms = server.objects("virtualmachines", Some(NS));
    match vms
        .first()
        .map(|vm| str_at(vm, "/metadata/labels/virtwork~1run-id"))
    {
        Some(run_id) if !run_id.is_empty() => tagged(name, run_id),
        _ => name.to_string(),
    }
}

/// VMI name → (uid, node) of every Running VMI in the namespace.
fn running_vmis(server: &FakeApiServer) -> BTreeMap<String, (String, String)> {
    server
        .objects("virtualmachineinstances", Some(NS))
        .iter()
        .filter(|v| str_at(v, "/status/phase") == "Running")
        .map(|v| {
            (
                str_at(v, "/metadata/name").to_string(),
                (
                    str_at(v, "/metadata/uid").to_string(),
                    str_at(v, "/status/nodeName").to_string(),
                ),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Shutdown grace
// ---------------------------------------------------------------------------------------------

/// component label → `terminationGracePeriodSeconds` of every VM the server holds.
fn graces(server: &FakeApiServer) -> BTreeMap<String, u64> {
    server
        .objects("virtualmachines", Some(NS))
        .iter()
        .map(|vm| {
            let grace = vm
                .pointer("/spec/template/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_u64)
                .unwrap_or_else(|| panic!("{} has no grace", str_at(vm, "/metadata/name")));
            (
                str_at(vm, "/metadata/labels/app.kubernetes.io~1component").to_string(),
                grace,
            )
        })
        .collect()
}

/// The VMs a run creates carry their shutdown grace: 120 s with data disks, 30 s otherwise,
/// and a YAML `workloads.<name>.termination-grace-period` reaches exactly its workload's VMs;
/// a data-disk workload given less than 60 s runs with a warning.
#[test]
fn created_vms_carry_their_shutdown_grace_and_yaml_overrides_reach_them() {
    let server = cluster_of(&["node-a"]);
    let env = Env::for_subcommand(&server, "run");
    assert_success(&env.run(&["--no-wait"]));
    let expected = |overrides: &[(&str, u64)]| -> BTreeMap<String, u64> {
        [
            ("chaos-disk", 120),
            ("chaos-network", 30),
            ("chaos-process", 30),
            ("cpu", 30),
            ("database", 120),
            ("disk", 120),
            ("memory", 30),
            ("network", 30),
            ("tps", 30),
        ]
        .into_iter()
        .map(|(k, v)| {
            let v = overrides
                .iter()
                .find(|(o, _)| *o == k)
                .map_or(v, |(_, g)| *g);
            (k.to_string(), v)
        })
        .collect()
    };
    assert_eq!(graces(&server), expected(&[]));

    let server = cluster_of(&["node-a"]);
    let env = Env::for_subcommand(&server, "run");
    let config = env.dir.path().join("virtwork.yaml");
    std::fs::write(
        &config,
        "workloads:\n  memory:\n    termination-grace-period: 45\n  \
         database:\n    termination-grace-period: 20\n",
    )
    .unwrap();
    let out = env.run(&[
        "--config",
        config.to_str().unwrap(),
        "--workloads",
        "cpu,memory,database,disk",
        "--no-wait",
    ]);
    assert_success(&out);
    let mut want = expected(&[("memory", 45), ("database", 20)]);
    want.retain(|k, _| ["cpu", "memory", "database", "disk"].contains(&k.as_str()));
    assert_eq!(graces(&server), want);
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l.contains("WARN")
            && l.contains("termination-grace-period 20 s for workload \"database\"")
            && l.contains("give it at least 60 s")),
        "{err}"
    );
    assert!(!err.contains("for workload \"memory\" (workloads"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Node drains
// ---------------------------------------------------------------------------------------------

/// How a drain went: completed (no launcher Pod left on the node) or not by the deadline,
/// with the messages of the evictions refused on the way.
struct Drain {
    completed: bool,
    refusals: Vec<String>,
}

/// What `kubectl drain <node> --pod-selector kubevirt.io=virt-launcher` does: cordon the
/// node, then evict every launcher Pod on it, retrying those refused with 429, until none
/// is left.
async fn drain(client: kube::Client, node: &str, within: Duration) -> Drain {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
        )
        .await
        .expect("cordon");
    let on_node = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .labels("kubevirt.io=virt-launcher");
    let deadline = Instant::now() + within;
    let mut refusals = Vec::new();
    loop {
        let pods = Api::<Pod>::all(client.clone())
            .list(&on_node)
            .await
            .expect("list pods");
        if pods.items.is_empty() {
            return Drain {
                completed: true,
                refusals,
            };
        }
        if Instant::now() >= deadline {
            return Drain {
                completed: false,
                refusals,
            };
        }
        for pod in pods.items {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            match Api::<Pod>::namespaced(client.clone(), &ns)
                .evict(&name, &EvictParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 429 => {
                    if !refusals.contains(&status.message) {
                        refusals.push(status.message)
                    }
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(other) => panic!("evicting {ns}/{name}: {other}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn uncordon(client: kube::Client, node: &str) {
    Api::<Node>::all(client)
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "unschedulable": false } })),
        )
        .await
        .expect("uncordon");
}

/// A cluster with `nodes` nodes whose KubeVirt defaults to `LiveMigrate` (OpenShift
/// Virtualization's default), so a VM that cannot migrate and sets no strategy of its own
/// would block every drain.
fn cluster_of(nodes: &[&str]) -> FakeApiServer {
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            cluster_eviction_strategy: Some("LiveMigrate".into()),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    for name in nodes {
        server.insert(node(name, "32", "128Gi"));
    }
    server
}

fn two_node_cluster() -> FakeApiServer {
    cluster_of(&["node-a", "node-b"])
}

/// The fake's default class `standard` with the StorageProfile of OpenShift
/// Virtualization's Ceph RBD class: ReadWriteMany Block first.
fn with_rwx_profile(server: &FakeApiServer) {
    server.insert(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "StorageProfile",
        "metadata": { "name": "standard" },
        "spec": {},
        "status": { "storageClass": "standard", "claimPropertySets": [
            { "accessModes": ["ReadWriteMany"], "volumeMode": "Block" },
            { "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem" },
        ] },
    }));
}

fn strategy_of(vm: &Value) -> &str {
    str_at(vm, "/spec/template/spec/evictionStrategy")
}

fn has_data_disk(vm: &Value) -> bool {
    vm.pointer("/spec/dataVolumeTemplates")
        .is_some_and(|t| t.as_array().is_some_and(|t| !t.is_empty()))
}

/// Three nodes, the default class's StorageProfile giving ReadWriteMany: every node drains in
/// turn under a fleet of every workload, and every VM, the data-disk ones included, is
/// live-migrated (its VMI keeps its identity) rather than restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_drain_in_turn_and_data_disk_vms_on_rwx_storage_migrate() {
    let nodes = ["node-a", "node-b", "node-c"];
    let server = cluster_of(&nodes);
    with_rwx_profile(&server);
    let env = Env::for_subcommand(&server, "run");
    assert_success(&env.run(&["--timeout", "120"]));
    let vms = server.objects("virtualmachines", Some(NS));
    assert_eq!(vms.len(), 11, "every built-in workload");
    // auto on several nodes: migratable shapes LiveMigrate; data-disk VMs, whose access
    // mode the StorageProfile decides, LiveMigrateIfPossible.
    for vm in &vms {
        let expected = if has_data_disk(vm) {
            "LiveMigrateIfPossible"
        } else {
            "LiveMigrate"
        };
        assert_eq!(
            strategy_of(vm),
            expected,
            "{}",
            str_at(vm, "/metadata/name")
        );
    }
    assert!(vms.iter().any(has_data_disk));
    let client = server.client_without_retries().await;
    for drained in nodes {
        let before = running_vmis(&server);
        let outcome = drain(client.clone(), drained, Duration::from_secs(20)).await;
        assert!(
            outcome.completed,
            "draining {drained} did not complete; refusals: {:?}",
            outcome.refusals
        );
        let settled = server.wait_until(Duration::from_secs(20), |s| {
            let now = running_vmis(s);
            now.len() == 11 && now.values().all(|(_, node)| node != drained)
        });
        assert!(
            settled,
            "after draining {drained}: {:?}",
            running_vmis(&server)
        );
        let after = running_vmis(&server);
        for (vmi, (uid, node)) in &before {
            if node == drained {
                assert_eq!(&after[vmi].0, uid, "{vmi} was restarted, not migrated");
            }
        }
        uncordon(client.clone(), drained).await;
    }
}

/// One schedulable node (Single Node OpenShift): `auto` gives every VM `None`, so a drain
/// completes (each VM shuts down and starts again once the node is back); with
/// `--eviction-strategy live-migrate` the run warns, and the drain cannot complete: every
/// eviction triggers an evacuation whose migration has no target node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_cluster_drains_under_a_fleet_of_every_workload() {
    let server = cluster_of(&["sno"]);
    with_rwx_profile(&server);
    let env = Env::for_subcommand(&server, "run");
    assert_success(&env.run(&["--timeout", "120"]));
    let vms = server.objects("virtualmachines", Some(NS));
    assert_eq!(vms.len(), 11);
    for vm in &vms {
        assert_eq!(strategy_of(vm), "None", "{}", str_at(vm, "/metadata/name"));
    }
    let client = server.client_without_retries().await;
    let outcome = drain(client.clone(), "sno", Duration::from_secs(20)).await;
    assert!(
        outcome.completed && outcome.refusals.is_empty(),
        "refusals: {:?}",
        outcome.refusals
    );
    uncordon(client.clone(), "sno").await;
    let back = server.wait_until(Duration::from_secs(20), |s| running_vmis(s).len() == 11);
    assert!(back, "{:?}", running_vmis(&server));

    let server = cluster_of(&["sno"]);
    let env = Env::for_subcommand(&server, "run");
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--eviction-strategy",
        "live-migrate",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    assert!(
        stderr(&out).contains(
            "eviction-strategy of workload \"cpu\" migrates, but the cluster has one schedulable node"
        ),
        "{}",
        stderr(&out)
    );
    let client = server.client_without_retries().await;
    let outcome = drain(client, "sno", Duration::from_secs(2)).await;
    assert!(!outcome.completed);
    assert!(
        outcome
            .refusals
            .iter()
            .any(|m| m.contains("Eviction triggered evacuation")),
        "{:?}",
        outcome.refusals
    );
}

/// A control-plane node as most clusters taint it: the scheduler places no virt-launcher
/// Pod there (virtwork's VMs tolerate no taint).
fn control_plane(name: &str) -> Value {
    let mut cp = node(name, "64", "256Gi");
    cp["spec"]["taints"] =
        json!([{ "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }]);
    cp
}

/// Three tainted control-plane nodes and one worker: only the worker can take VMs, so `auto`
/// applies the single-node rules (every VM `None`) and draining the worker completes; the
/// tainted nodes' room does not count when preflight checks that a VM fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tainted_control_plane_nodes_do_not_count_as_room_for_vms() {
    let server = cluster_of(&["worker"]);
    for name in ["cp-0", "cp-1", "cp-2"] {
        server.insert(control_plane(name));
    }
    with_rwx_profile(&server);
    let env = Env::for_subcommand(&server, "run");
    assert_success(&env.run(&["--timeout", "120"]));
    let vms = server.objects("virtualmachines", Some(NS));
    assert_eq!(vms.len(), 11);
    for vm in &vms {
        assert_eq!(strategy_of(vm), "None", "{}", str_at(vm, "/metadata/name"));
    }
    let placed = running_vmis(&server);
    assert!(
        placed.len() == 11 && placed.values().all(|(_, node)| node == "worker"),
        "{placed:?}"
    );
    let client = server.client_without_retries().await;
    let outcome = drain(client.clone(), "worker", Duration::from_secs(20)).await;
    assert!(
        outcome.completed && outcome.refusals.is_empty(),
        "refusals: {:?}",
        outcome.refusals
    );
    uncordon(client, "worker").await;
    let back = server.wait_until(Duration::from_secs(20), |s| {
        let now = running_vmis(s);
        now.len() == 11 && now.values().all(|(_, node)| node == "worker")
    });
    assert!(back, "{:?}", running_vmis(&server));

    // 200Gi fits a control-plane node's 256Gi but not the worker's 128Gi: refused, naming the
    // worker as the largest node, before any write.
    let server = cluster_of(&["worker"]);
    server.insert(control_plane("cp-0"));
    let env = Env::for_subcommand(&server, "run");
    let out = env.run(&["--workloads", "cpu", "--memory", "200Gi", "--timeout", "30"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("more than any node can allocate (the largest, worker, has 128.0Gi"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.count("create", "virtualmachines"), 0);

    // Every node tainted: preflight says so (the VMs would wait in Scheduling).
    let server = cluster_of(&[]);
    server.insert(control_plane("cp-0"));
    let env = Env::for_subcommand(&server, "run");
    let out = env.run(&["--workloads", "cpu", "--no-wait"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains(
            "no node can take the VMs: cp-0 (tainted node-role.kubernetes.io/control-plane:NoSchedule)"
        ),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_that_cannot_migrate_blocks_the_drain_when_told_to_live_migrate() {
    // What every data-disk VM did before it carried its own strategy: the cluster's
    // LiveMigrate applied, and KubeVirt refuses to evict a VM with a ReadWriteOnce disk.
    let server = two_node_cluster();
    let env = Env::for_subcommand(&server, "run");
    let out = env.run(&[
        "--workloads",
        "disk",
        "--eviction-strategy",
        "live-migrate",
        "--access-mode",
        "ReadWriteOnce",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("a node drain waits for them forever"),
        "{}",
        stderr(&out)
    );
    let vm = tagged_in(&server, "virtwork-disk-0");
    let node = running_vmis(&server)[&vm].1.clone();
    let client = server.client_without_retries().await;
    let outcome = drain(client, &node, Duration::from_secs(2)).await;
    assert!(!outcome.completed);
    assert!(
        outcome.refusals.iter().all(|m| m.contains(&format!(
            "VMI virtwork/{vm} is configured with an eviction strategy but is not live-migratable"
        ))) && !outcome.refusals.is_empty(),
        "{:?}",
        outcome.refusals
    );
}

// ---------------------------------------------------------------------------------------------
// Readiness and Service endpoints
// ---------------------------------------------------------------------------------------------

/// (ready, not ready) IPs of a Service's Endpoints, and the same from its EndpointSlice.
fn endpoint_ips(server: &FakeApiServer, service: &str) -> (Vec<String>, Vec<String>) {
    let Some(endpoints) = server.get("endpoints", NS, service) else {
        return (Vec::new(), Vec::new());
    };
    let ips = |key: &str| -> Vec<String> {
        endpoints["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s[key].as_array().cloned().unwrap_or_default())
            .map(|a| a["ip"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let (ready, not_ready) = (ips("addresses"), ips("notReadyAddresses"));
    let slice = server
        .get("endpointslices", NS, &format!("{service}-fake"))
        .expect("an EndpointSlice next to the Endpoints");
    let slice_ready: Vec<String> = slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["conditions"]["ready"] == true)
        .map(|e| e["addresses"][0].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(slice_ready, ready, "EndpointSlice and Endpoints agree");
    (ready, not_ready)
}

fn server_ip(server: &FakeApiServer) -> String {
    server
        .get(
            "virtualmachineinstances",
            NS,
            &tagged_in(server, "virtwork-network-server-0"),
        )
        .map(|vmi| str_at(&vmi, "/status/interfaces/0/ipAddress").to_string())
        .unwrap_or_default()
}

#[test]
fn the_server_service_reaches_its_vm_under_every_ready_condition() {
    for condition in ["running", "ready", "agent-connected"] {
        // The image stands for a guest whose workload unit never starts: a probe would never
        // pass. Without one, the launcher Pod is Ready once the VM runs.
        let server = FakeApiServer::start(Options::default());
        let env = Env::for_subcommand(&server, "run");
        assert_success(&env.run(&[
            "--workloads",
            "network",
            "--ready-condition",
            condition,
            "--container-disk-image",
            "quay.io/example/rhel-brokenunit:9",
            "--guest-os",
            "fedora",
            "--timeout",
            "60",
        ]));
        let vm = server
            .get(
                "virtualmachines",
                NS,
                &tagged_in(&server, "virtwork-network-server-0"),
            )
            .unwrap();
        assert!(
            vm.pointer("/spec/template/spec/readinessProbe").is_none(),
            "{condition}: no probe unless asked for"
        );
        let reached = server.wait_until(Duration::from_secs(10), |s| {
            endpoint_ips(s, &tagged_in(s, "virtwork-iperf3-server")).0 == [server_ip(s)]
        });
        assert!(
            reached,
            "{condition}: {:?}",
            server.get(
                "endpoints",
                NS,
                &tagged_in(&server, "virtwork-iperf3-server")
            )
        );
    }
}

#[test]
fn with_workload_readiness_the_service_waits_for_the_probe() {
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            workload_ready_delay: Duration::from_millis(1500),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let env = Env::for_subcommand(&server, "run");
    let child = env
        .command(&[
            "--workloads",
            "network",
            "--ready-condition",
            "workload",
            "--timeout",
            "60",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Running but the probe has not passed: the server is a not-ready endpoint.
    let not_ready = server.wait_until(Duration::from_secs(10), |s| {
        let ip = server_ip(s);
        !ip.is_empty()
            && endpoint_ips(s, &tagged_in(s, "virtwork-iperf3-server")) == (vec![], vec![ip])
    });
    assert!(
        not_ready,
        "{:?}",
        server.get(
            "endpoints",
            NS,
            &tagged_in(&server, "virtwork-iperf3-server")
        )
    );
    assert_success(&child.wait_with_output().unwrap());
    let ip = server_ip(&server);
    assert_eq!(
        endpoint_ips(&server, &tagged_in(&server, "virtwork-iperf3-server")),
        (vec![ip], vec![])
    );
    let vm = server
        .get(
            "virtualmachines",
            NS,
            &tagged_in(&server, "virtwork-network-server-0"),
        )
        .unwrap();
    assert!(
        vm.pointer("/spec/template/spec/readinessProbe/httpGet")
            .is_some()
    );
}

// ---------------------------------------------------------------------------------------------
// Inputs the cluster would refuse
// ---------------------------------------------------------------------------------------------

#[test]
fn sizes_below_the_clusters_minimums_are_refused_before_any_request() {
    let server = FakeApiServer::start(Options::default());
    let env = Env::for_subcommand(&server, "run");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("virtwork.yaml");
    std::fs::write(&config, "workloads:\n  cpu:\n    memory: 512Ki\n").unwrap();
    let config = config.to_string_lossy().into_owned();
    // (arguments, environment, the error expected)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (
            &["--workloads", "cpu", "--memory", "999999"],
            &[],
            "invalid value \"999999\" for --memory: expected at least 1M (KubeVirt refuses a VM with less memory)",
        ),
        (
            &["--workloads", "cpu"],
            &[("VIRTWORK_MEMORY", "0.5M")],
            "invalid value \"0.5M\" for VIRTWORK_MEMORY: expected at least 1M",
        ),
        (
            &["--workloads", "disk", "--disk-size", "1M"],
            &[],
            "invalid value \"1M\" for --disk-size: expected at least 1Mi (CDI aligns disk images to 1Mi",
        ),
        (
            &["--config", &config, "--workloads", "cpu"],
            &[],
            "invalid value \"512Ki\" for workloads.cpu.memory in",
        ),
    ];
    for (args, vars, expected) in cases {
        let mut command = env.command(args);
        command.envs(vars.iter().copied());
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        server.request_log().is_empty(),
        "{:#?}",
        server.request_log()
    );
}

#[test]
fn a_vm_larger_than_every_node_is_refused_by_preflight_naming_the_largest_node() {
    let server = FakeApiServer::start(Options::default());
    server.insert(node("small", "4", "16Gi"));
    server.insert(node("large", "16", "64Gi"));
    let mut cordoned = node("huge", "64", "512Gi");
    cordoned["spec"]["unschedulable"] = json!(true);
    server.insert(cordoned);
    let env = Env::for_subcommand(&server, "run");
    let out = env.run(&["--workloads", "cpu,memory", "--memory", "100Gi"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("preflight failed, nothing was created"),
        "{err}"
    );
    assert!(
        err.contains(
            "workload \"cpu\" asks for 100Gi of memory and 2 CPU cores per VM, more than any node can allocate (the largest, large, has 64.0Gi and 16 CPUs allocatable)"
        ),
        "{err}"
    );
    assert!(err.contains("workload \"memory\" asks for"), "{err}");
    let writes = server
        .request_log()
        .into_iter()
        .filter(|r| r.committed && r.resource != "selfsubjectaccessreviews")
        .count();
    assert_eq!(writes, 0);
    // What fits a node is created.
    assert_success(&env.run(&["--workloads", "cpu", "--memory", "60Gi", "--no-wait"]));
}

/// The real `kubectl drain` (cordon, evict every launcher Pod, retry the 429s every 5 s, wait
/// for the Pods to go) completes against a fleet of every workload.
#[test]
fn kubectl_drain_completes_under_a_fleet_of_every_workload() {
    let kubectl_found = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !kubectl_found {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_KUBECTL").as_deref() != Ok("1"),
            "kubectl required (VIRTWORK_REQUIRE_KUBECTL=1) but not found"
        );
        eprintln!("SKIPPED: kubectl not installed");
        return;
    }
    let server = two_node_cluster();
    let env = Env::for_subcommand(&server, "run");
    assert_success(&env.run(&["--timeout", "120"]));
    let node_a = running_vmis(&server)
        .values()
        .filter(|(_, node)| node == "node-a")
        .count();
    assert!(node_a > 0, "{:?}", running_vmis(&server));
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args([
            "drain",
            "node-a",
            "--pod-selector",
            "kubevirt.io=virt-launcher",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout",
            "90s",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("node/node-a drained"), "{stdout}\n{stderr}");
    // kubectl used the Eviction API, and KubeVirt's answers are what it retried on.
    let evictions = server
        .request_log()
        .into_iter()
        .filter(|r| r.path.ends_with("/eviction"))
        .count();
    assert!(
        evictions >= node_a,
        "{evictions} evictions for {node_a} pods"
    );
    assert!(stderr.contains("Eviction triggered evacuation"), "{stderr}");
    let settled = server.wait_until(Duration::from_secs(20), |s| {
        let now = running_vmis(s);
        now.len() == 11 && now.values().all(|(_, node)| node == "node-b")
    });
    assert!(settled, "{:?}", running_vmis(&server));
}
