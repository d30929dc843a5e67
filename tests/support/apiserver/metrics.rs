//! A KubeVirt per-VMI metrics endpoint (what virt-handler serves on `/metrics`), generated
//! from the store's Running VMIs: Prometheus text exposition with KubeVirt's metric names
//! and labels (`namespace`, `name`, `node`, `kubernetes_vmi_label_*` from the VMI labels,
//! plus `id`/`state`, `drive`, `interface`, `disk_name`/`mount_point`/`file_system_type`).
//!
//! Counters grow at rates that follow each VM's workload (its `app.kubernetes.io/component`
//! label, vCPU count, memory and the `virtwork/signal-params` annotation of the owning VM);
//! a VMI marked flat (`FakeApiServer::set_metrics_flat`) shows an idle guest (2% vCPU, every
//! other counter where it is, gauges at idle levels), as a VM whose load never started would
//! look. tps follows its payload's schedule (rounds, round pauses, the cycle pause); a VM with
//! a load profile recorded in its params follows the profile's level from its first scrape
//! (its clock), unless marked stuck at the high level (`set_profile_stuck_high`). Also as
//! real clusters go wrong: a VMI whose series vanish while it runs
//! (`set_metrics_hidden`), a vCPU counter in milliseconds as KubeVirt reported it before
//! kubevirt/kubevirt#13898 (`set_vcpu_millis`, or `set_vcpu_millis_for` one VMI, as during a
//! virt-handler rollout), and a scrape that overwrote `namespace`
//! (`set_namespace_relabelled`: the VMI's namespace in `exported_namespace`). Served through
//! the fake's service proxy (see proxy.rs); Prometheus scrapes it like virt-handler.
//!
//! Counters belong to one QEMU process: a VMI created anew starts them at zero, and so does a
//! VMI on a new node (a live migration's target is a new virt-launcher whose QEMU reports its
//! own vCPU time: virt-handler reads `vcpu.<n>.time` from libvirt's domain stats of the
//! process on its node, pkg/monitoring/metrics/virt-handler/domainstats/vcpu_metrics.go). The same endpoint also serves what virt-controller reports per VMI
//! (pkg/monitoring/metrics/virt-controller/vmistats_collector.go): `kubevirt_vmi_info`
//! (node, namespace, name, phase) and, from the VMI's `migrationState`,
//! `kubevirt_vmi_migration_start_time_seconds` and `kubevirt_vmi_migration_end_time_seconds`
//! (labels node, namespace, name, migration_name — the migration object's name, empty once
//! it is garbage-collected — and status on the end time).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Instant;

use serde_json::Value;

use super::resources;
use super::store::Store;

/// Mutable state of the endpoint: accumulated counters per VMI and which VMIs are flat.
#[derive(Debug, Default)]
pub struct MetricsState {
    pub flat: BTreeSet<(String, String)>,
    /// VMIs left out of the endpoint although running.
    pub hidden: BTreeSet<(String, String)>,
    /// Profiled VMIs that stay at their profile's high level.
    pub stuck_high: BTreeSet<(String, String)>,
    /// The vCPU counter advances in milliseconds.
    pub vcpu_millis: bool,
    /// VMIs whose vCPU counter advances in milliseconds (a node whose virt-handler is not
    /// yet upgraded, during a rollout).
    pub vcpu_millis_vmis: BTreeSet<(String, String)>,
    /// `namespace` holds virt-handler's namespace; the VMI's is in `exported_namespace`.
    pub namespace_relabelled: bool,
    counters: BTreeMap<(String, String), Counters>,
}

#[derive(Debug, Clone)]
struct Counters {
    /// The VMI these counters belong to.
    uid: String,
    /// The node its QEMU runs on (a migration starts a new one there).
    node: String,
    first_seen: Instant,
    last: Instant,
    vcpu_seconds: Vec<f64>,
    /// (read bytes, write bytes, read ops, write ops) per drive.
    drives: BTreeMap<String, [f64; 4]>,
    /// rx bytes, tx bytes, rx packets, tx packets.
    net: [f64; 4],
}

/// Per-second rates and levels of one VMI.
#[derive(Debug, Clone, Default)]
struct Load {
    vcpu_busy: f64,
    mem_used: f64,
    /// read B/s, write B/s, read op/s, write op/s on `datadisk`.
    data_disk: [f64; 4],
    /// rx B/s, tx B/s, rx pkt/s, tx pkt/s.
    net: [f64; 4],
    /// (mount point, used fraction while full, seconds full per cycle, seconds released).
    fill: Option<(String, f64, f64, f64)>,
}

const MIB: f64 = 1_048_576.0;

fn idle() -> Load {
    Load {
        vcpu_busy: 0.02,
        mem_used: 0.12,
        data_disk: [0.0; 4],
        net: [300.0, 300.0, 3.0, 3.0],
        fill: None,
    }
}

fn param(params: &BTreeMap<String, String>, key: &str, default: f64) -> f64 {
    params
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a healthy VM of `workload` shows, as virtwork's payloads load it.
fn load_for(workload: &str, params: &BTreeMap<String, String>) -> Load {
    let mut load = idle();
    match workload {
        "cpu" => load.vcpu_busy = 0.97 * param(params, "cpu-load-percent", 100.0) / 100.0,
        "memory" => {
            load.mem_used = 0.12 + 0.85 * param(params, "memory-percent", 80.0) / 100.0;
            load.vcpu_busy = 0.6;
        }
        "disk" => {
            let read = param(params, "rwmixread", 70.0) / 100.0;
            load.data_disk = [
                60.0 * MIB * read,
                60.0 * MIB * (1.0 - read) + 20.0 * MIB,
                900.0 * read,
                900.0 * (1.0 - read) + 300.0,
            ];
            load.vcpu_busy = 0.2;
        }
        "database" => {
            load.data_disk = [0.0, 6.0 * MIB, 0.0, 450.0];
            load.vcpu_busy = 0.5;
        }
        "network" => load.net = [110.0 * MIB, 110.0 * MIB, 80_000.0, 80_000.0],
        "tps" => load.net = [2.0 * MIB, 2.0 * MIB, 9_000.0, 9_000.0],
        // Packets flow only during rounds: see tps_active.
        "chaos-disk" => {
            let mount = params
                .get("mount")
                .cloned()
                .unwrap_or_else(|| "/mnt/data".into());
            let fill = param(params, "fill-percent", 90.0) / 100.0;
            load.fill = Some((mount, fill, 60.0, param(params, "release-sleep", 30.0)));
        }
        _ => {}
    }
    load
}

/// What a VM of `workload` shows at profile level `level` (the level's own unit: percent of
/// each CPU or of memory, IOPS, Mbit/s, pgbench transactions per second).
fn load_at_level(workload: &str, params: &BTreeMap<String, String>, level: f64) -> Load {
    let mut load = idle();
    match workload {
        "cpu" => load.vcpu_busy = (0.97 * level / 100.0).max(0.02),
        "memory" => {
            load.mem_used = 0.12 + 0.85 * level / 100.0;
            load.vcpu_busy = 0.6;
        }
        "disk" => {
            // fio's rate limit reached, 4 KiB blocks.
            let read = param(params, "rwmixread", 70.0) / 100.0;
            let ops = 0.98 * level;
            load.data_disk = [
                ops * read * 4096.0,
                ops * (1.0 - read) * 4096.0,
                ops * read,
                ops * (1.0 - read),
            ];
            load.vcpu_busy = 0.2;
        }
        // About three disk writes per transaction.
        "database" => load.data_disk = [0.0, 3.0 * level * 8192.0, 0.0, 3.0 * level],
        "network" => {
            let bytes = 0.95 * level * 125_000.0;
            load.net = [bytes, bytes, bytes / 1400.0, bytes / 1400.0];
        }
        _ => {}
    }
    load
}

/// Whether a tps client `age` seconds into its loop is inside a round: `2 * iterations`
/// rounds of `duration` seconds, each followed by the round pause, then the cycle pause
/// (the payload's own constants, as its script sleeps).
fn tps_active(params: &BTreeMap<String, String>, age: f64) -> bool {
    let round_pause = f64::from(virtwork::signals::contract::TPS_ROUND_PAUSE_SECS);
    let cycle_pause = f64::from(virtwork::signals::contract::TPS_CYCLE_PAUSE_SECS);
    let iterations = param(params, "iterations", 30.0);
    let duration = param(params, "duration", 60.0);
    let rounds = 2.0 * iterations * (duration + round_pause);
    let at = age % (rounds + cycle_pause);
    at < rounds && at % (duration + round_pause) < duration
}

fn quantity_bytes(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => MIB,
        "Gi" => 1024.0 * MIB,
        "Ti" => 1024.0 * 1024.0 * MIB,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        _ => return None,
    };
    Some(n * factor)
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// KubeVirt's rendering of a VMI label key as a metric label name.
fn vmi_label(key: &str) -> String {
    format!("kubernetes_vmi_label_{}", key.replace(['.', '/', '-'], "_"))
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

/// Renders a VMI's labels plus extra ones as a label set.
type RenderLabels<'a> = dyn Fn(&[(&str, String)]) -> String + 'a;

/// virt-controller's series of one VMI: `kubevirt_vmi_info` and its last migration's start
/// and end times (collectVMIInfo, collectVMIMigrationTime upstream).
fn controller_series(
    store: &Store,
    vmi: &Value,
    render_labels: &RenderLabels<'_>,
    push: &mut dyn FnMut(&str, String, f64),
) {
    let phase = vmi["status"]["phase"].as_str().unwrap_or("").to_lowercase();
    push("kubevirt_vmi_info", render_labels(&[("phase", phase)]), 1.0);
    let state = &vmi["status"]["migrationState"];
    let seconds = |key: &str| {
        state[key]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_second() as f64)
    };
    let uid = state["migrationUid"].as_str().unwrap_or("");
    let migrations = resources::lookup("virtualmachineinstancemigrations").expect("served");
    let name = store
        .objects
        .iter()
        .find(|((res, _, _), m)| {
            *res == migrations && !uid.is_empty() && m["metadata"]["uid"] == uid
        })
        .map(|((_, _, name), _)| name.clone())
        .unwrap_or_default();
    if let Some(start) = seconds("startTimestamp") {
        let labels = render_labels(&[("migration_name", name.clone())]);
        push("kubevirt_vmi_migration_start_time_seconds", labels, start);
    }
    if let Some(end) = seconds("endTimestamp") {
        let status = match (state["completed"] == true, state["failed"] == true) {
            (false, _) => "",
            (true, true) => "failed",
            (true, false) => "succeeded",
        };
        let labels = render_labels(&[("migration_name", name), ("status", status.to_string())]);
        push("kubevirt_vmi_migration_end_time_seconds", labels, end);
    }
}

/// Renders the endpoint's body at `now`, advancing every non-flat VMI's counters.
pub fn render(store: &Store, state: &mut MetricsState, now: Instant) -> String {
    let vmi_res = resources::lookup("virtualmachineinstances").expect("VMIs are served");
    let vm_res = resources::lookup("virtualmachines").expect("VMs are served");
    let mut families: Vec<Family> = [
        ("kubevirt_vmi_vcpu_seconds_total", "counter", "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor time)."),
        ("kubevirt_vmi_memory_available_bytes", "gauge", "Amount of usable memory as seen by the domain."),
        ("kubevirt_vmi_memory_usable_bytes", "gauge", "The amount of memory which can be reclaimed by balloon without pushing the guest system to swap."),
        ("kubevirt_vmi_memory_unused_bytes", "gauge", "The amount of memory left completely unused by the system."),
        ("kubevirt_vmi_memory_domain_bytes", "gauge", "The amount of memory in bytes allocated to the domain."),
        ("kubevirt_vmi_storage_read_traffic_bytes_total", "counter", "Total number of bytes read from storage."),
        ("kubevirt_vmi_storage_write_traffic_bytes_total", "counter", "Total number of written bytes."),
        ("kubevirt_vmi_storage_iops_read_total", "counter", "Total number of I/O read operations."),
        ("kubevirt_vmi_storage_iops_write_total", "counter", "Total number of I/O write operations."),
        ("kubevirt_vmi_network_receive_bytes_total", "counter", "Total network traffic received in bytes."),
        ("kubevirt_vmi_network_transmit_bytes_total", "counter", "Total network traffic transmitted in bytes."),
        ("kubevirt_vmi_network_receive_packets_total", "counter", "Total network traffic received packets."),
        ("kubevirt_vmi_network_transmit_packets_total", "counter", "Total network traffic transmitted packets."),
        ("kubevirt_vmi_filesystem_capacity_bytes", "gauge", "Total VM filesystem capacity in bytes."),
        ("kubevirt_vmi_filesystem_used_bytes", "gauge", "Used VM filesystem capacity in bytes."),
        ("kubevirt_vmi_info", "gauge", "Information about VirtualMachineInstances."),
        ("kubevirt_vmi_migration_start_time_seconds", "gauge", "The time at which the migration started."),
        ("kubevirt_vmi_migration_end_time_seconds", "gauge", "The time at which the migration ended."),
    ]
    .into_iter()
    .map(|(name, kind, help)| Family { name, kind, help, samples: Vec::new() })
    .collect();
    let mut push = |family: &str, labels: String, value: f64| {
        if let Some(f) = families.iter_mut().find(|f| f.name == family) {
            f.samples.push((labels, value));
        }
    };
    let mut live = BTreeSet::new();
    for ((res, ns, name), vmi) in &store.objects {
        if *res != vmi_res || vmi["status"]["phase"] != "Running" {
            continue;
        }
        let key = (ns.clone(), name.clone());
        live.insert(key.clone());
        if state.hidden.contains(&key) {
            continue;
        }
        let vm = store.objects.get(&(vm_res, ns.clone(), name.clone()));
        let params: BTreeMap<String, String> = vm
            .and_then(|vm| vm["metadata"]["annotations"]["virtwork/signal-params"].as_str())
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        let labels_obj = vmi["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let workload = labels_obj
            .get("app.kubernetes.io/component")
            .and_then(Value::as_str)
            .unwrap_or("");
        let flat = state.flat.contains(&key);
        let mut load = if flat {
            Load {
                net: [0.0; 4],
                ..idle()
            }
        } else {
            load_for(workload, &params)
        };
        let profile = virtwork::workloads::profile_driver::from_recorded(&params)
            .ok()
            .flatten();
        let domain = &vmi["spec"]["domain"];
        let vcpus = domain["cpu"]["cores"].as_u64().unwrap_or(1).max(1) as usize;
        let memory = domain["resources"]["requests"]["memory"]
            .as_str()
            .or_else(|| domain["memory"]["guest"].as_str())
            .and_then(quantity_bytes)
            .unwrap_or(1024.0 * MIB);
        let drives: Vec<String> = domain["devices"]["disks"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|d| d["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let interface = domain["devices"]["interfaces"][0]["name"]
            .as_str()
            .unwrap_or("default")
            .to_string();

        let uid = vmi["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let on = vmi["status"]["nodeName"].as_str().unwrap_or("").to_string();
        if state.counters.get(&key).is_some_and(|c| c.uid != uid) {
            state.counters.remove(&key);
        }
        // Migrated: the target's QEMU counts from zero; the guest (its profile clock) goes on.
        if let Some(c) = state.counters.get_mut(&key).filter(|c| c.node != on) {
            c.node = on.clone();
            c.vcpu_seconds.iter_mut().for_each(|v| *v = 0.0);
            c.drives.clear();
            c.net = [0.0; 4];
        }
        let counters = state
            .counters
            .entry(key.clone())
            .or_insert_with(|| Counters {
                uid: uid.clone(),
                node: on.clone(),
                first_seen: now,
                last: now,
                vcpu_seconds: vec![0.0; vcpus],
                drives: BTreeMap::new(),
                net: [0.0; 4],
            });
        let dt = now.saturating_duration_since(counters.last).as_secs_f64();
        counters.last = now;
        let age = now
            .saturating_duration_since(counters.first_seen)
            .as_secs_f64();
        if workload == "tps" && !flat && !tps_active(&params, age) {
            load.net = idle().net;
        }
        if let (Some(profile), false) = (profile, flat) {
            let level = match state.stuck_high.contains(&key) {
                true => profile.levels().high,
                false => profile.schedule().level_at(age as u64),
            };
            load = load_at_level(workload, &params, f64::from(level));
        }
        let millis = state.vcpu_millis || state.vcpu_millis_vmis.contains(&key);
        let vcpu_unit = if millis { 1000.0 } else { 1.0 };
        counters.vcpu_seconds.resize(vcpus, 0.0);
        for v in &mut counters.vcpu_seconds {
            *v += load.vcpu_busy * dt * vcpu_unit;
        }
        for drive in &drives {
            let rates = if drive == "datadisk" {
                load.data_disk
            } else if flat {
                [0.0; 4]
            } else {
                [2048.0, 8192.0, 0.5, 2.0]
            };
            let c = counters.drives.entry(drive.clone()).or_insert([0.0; 4]);
            for (total, rate) in c.iter_mut().zip(rates) {
                *total += rate * dt;
            }
        }
        for (total, rate) in counters.net.iter_mut().zip(load.net) {
            *total += rate * dt;
        }

        let mut base = vec![("name".to_string(), name.clone())];
        if state.namespace_relabelled {
            base.push(("exported_namespace".to_string(), ns.clone()));
            base.push(("namespace".to_string(), "kubevirt".to_string()));
        } else {
            base.push(("namespace".to_string(), ns.clone()));
        }
        base.extend([(
            "node".to_string(),
            vmi["status"]["nodeName"].as_str().unwrap_or("").to_string(),
        )]);
        for (k, v) in &labels_obj {
            base.push((vmi_label(k), v.as_str().unwrap_or("").to_string()));
        }
        let render_labels = |extra: &[(&str, String)]| {
            let mut all: Vec<(String, String)> = base.clone();
            all.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
            all.sort();
            let parts: Vec<String> = all
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        };
        controller_series(store, vmi, &render_labels, &mut push);
        let state_label = if load.vcpu_busy >= 0.5 {
            "running"
        } else {
            "blocked"
        };
        for (id, seconds) in counters.vcpu_seconds.iter().enumerate() {
            push(
                "kubevirt_vmi_vcpu_seconds_total",
                render_labels(&[("id", id.to_string()), ("state", state_label.to_string())]),
                *seconds,
            );
        }
        let used = load.mem_used.min(0.98);
        let plain = render_labels(&[]);
        push("kubevirt_vmi_memory_available_bytes", plain.clone(), memory);
        push(
            "kubevirt_vmi_memory_usable_bytes",
            plain.clone(),
            (memory * (1.0 - used)).round(),
        );
        push(
            "kubevirt_vmi_memory_unused_bytes",
            plain.clone(),
            (memory * (1.0 - used) * 0.8).round(),
        );
        push("kubevirt_vmi_memory_domain_bytes", plain, memory);
        for (drive, [rb, wb, ro, wo]) in &counters.drives {
            let l = render_labels(&[("drive", drive.clone())]);
            push(
                "kubevirt_vmi_storage_read_traffic_bytes_total",
                l.clone(),
                rb.floor(),
            );
            push(
                "kubevirt_vmi_storage_write_traffic_bytes_total",
                l.clone(),
                wb.floor(),
            );
            push(
                "kubevirt_vmi_storage_iops_read_total",
                l.clone(),
                ro.floor(),
            );
            push("kubevirt_vmi_storage_iops_write_total", l, wo.floor());
        }
        let net = render_labels(&[
            ("interface", interface.clone()),
            ("network", "default".into()),
        ]);
        let [rxb, txb, rxp, txp] = counters.net;
        push(
            "kubevirt_vmi_network_receive_bytes_total",
            net.clone(),
            rxb.floor(),
        );
        push(
            "kubevirt_vmi_network_transmit_bytes_total",
            net.clone(),
            txb.floor(),
        );
        push(
            "kubevirt_vmi_network_receive_packets_total",
            net.clone(),
            rxp.floor(),
        );
        push(
            "kubevirt_vmi_network_transmit_packets_total",
            net,
            txp.floor(),
        );
        let root = render_labels(&[
            ("disk_name", "vda4".into()),
            ("file_system_type", "xfs".into()),
            ("mount_point", "/".into()),
        ]);
        push(
            "kubevirt_vmi_filesystem_capacity_bytes",
            root.clone(),
            4.0 * 1024.0 * MIB,
        );
        push(
            "kubevirt_vmi_filesystem_used_bytes",
            root,
            1.6 * 1024.0 * MIB,
        );
        if workload == "chaos-disk" {
            let (mount, fill, full_secs, released_secs) =
                load_for(workload, &params).fill.expect("chaos-disk fills");
            let full_secs = param(&params, "fill-sleep", full_secs);
            let capacity = vm
                .and_then(|vm| {
                    vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["resources"]["requests"]
                        ["storage"]
                        .as_str()
                })
                .and_then(quantity_bytes)
                .unwrap_or(10.0 * 1024.0 * MIB);
            let full = !flat && age % (full_secs + released_secs) < full_secs;
            let fraction = if full { fill } else { 0.01 };
            let l = render_labels(&[
                ("disk_name", "vdc".into()),
                ("file_system_type", "xfs".into()),
                ("mount_point", mount),
            ]);
            push(
                "kubevirt_vmi_filesystem_capacity_bytes",
                l.clone(),
                capacity,
            );
            push(
                "kubevirt_vmi_filesystem_used_bytes",
                l,
                (capacity * fraction).round(),
            );
        }
    }
    state.counters.retain(|k, _| live.contains(k));
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (labels, value) in &f.samples {
            let _ = writeln!(out, "{}{labels} {value}", f.name);
        }
    }
    out
}
