//! The expected-signal contract: for each workload, which of KubeVirt's standard per-VMI
//! metrics must show its load, by which PromQL expression and above which threshold.
//!
//! Pure: [`checks`] turns what the cluster says about one VM ([`VmFacts`]: labels, the
//! `virtwork/signal-params` annotation, memory request) and the window into [`Check`]s;
//! [`alert_expression`] renders the same expressions over every VMI of a workload for the
//! shipped PrometheusRule, so verify and the alert cannot drift apart.
//!
//! Thresholds are lower bounds on the window's average (or maximum) derived from the
//! workload's params and the VM's size, and they account for the quiet gaps each payload
//! has (fio's sequential phase has no reads, the client loops sleep between rounds): a
//! signal whose guaranteed share of the window is zero is reported as not expected instead
//! of failing. Must not: query anything, or trust label values unescaped (see promql.rs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::promql::{Matchers, render_template};
use crate::model::{Window, parse_int};
use crate::profile_schedule::LoadProfile;

/// Annotation on each VirtualMachine with the params the contract needs (a JSON object),
/// so verify derives the same thresholds as the run that created the VM.
pub const SIGNAL_PARAMS_ANNOTATION: &str = "virtwork/signal-params";
/// Annotation with the digest ([`signals_digest`]) of the catalog entry's signals a run
/// used. Verify never reads a query from the cluster: it judges a catalog VM by the local
/// entry of the same name, and only when that entry's digest matches this one.
pub const SIGNALS_DIGEST_ANNOTATION: &str = "virtwork/signals-digest";

/// The digest of a catalog entry's signals as recorded at run time: `sha256:` and the hex
/// SHA-256 of their JSON (fields in declaration order, so the same list gives the same digest).
pub fn signals_digest(signals: &[CustomSignal]) -> String {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_string(signals).expect("signals serialize");
    let hash = Sha256::digest(json.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// KubeVirt's disk name of the workloads' blank data disk (the series' `drive` label).
pub const DATA_DRIVE: &str = "datadisk";

/// Metric names the contract reads (the dashboard and the rules may use only these).
pub const METRICS: &[&str] = &[
    "kubevirt_vmi_vcpu_seconds_total",
    "kubevirt_vmi_memory_available_bytes",
    "kubevirt_vmi_memory_usable_bytes",
    "kubevirt_vmi_storage_write_traffic_bytes_total",
    "kubevirt_vmi_storage_read_traffic_bytes_total",
    "kubevirt_vmi_storage_iops_write_total",
    "kubevirt_vmi_storage_iops_read_total",
    "kubevirt_vmi_network_receive_bytes_total",
    "kubevirt_vmi_network_transmit_bytes_total",
    "kubevirt_vmi_network_receive_packets_total",
    "kubevirt_vmi_network_transmit_packets_total",
    "kubevirt_vmi_filesystem_used_bytes",
    "kubevirt_vmi_filesystem_capacity_bytes",
    // One series per VMI with its phase (virt-controller): the alert's list of running VMIs.
    "kubevirt_vmi_info",
];

/// What a signal's value measures (for display).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Busy fraction of each vCPU (1.0 = every vCPU fully busy).
    VcpuFraction,
    /// A fraction of a capacity (guest memory, filesystem size).
    Ratio,
    BytesPerSecond,
    OpsPerSecond,
    PacketsPerSecond,
    /// Number of series: the VMI reports the metric at all.
    Series,
    /// A catalog entry's own signal.
    Custom,
}

/// A number for a table cell: `decimals` places in the usual range, scientific notation
/// beyond it (a value of 1e308 stays a short cell), and NaN/±Inf spelled as Prometheus does.
pub fn bounded_number(value: f64, decimals: usize) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if value.abs() >= 1e6 {
        format!("{value:.3e}")
    } else {
        format!("{value:.decimals$}")
    }
}

impl Unit {
    /// The value formatted for a table cell (out-of-range values in scientific notation).
    pub fn format(self, value: f64) -> String {
        match self {
            Unit::VcpuFraction => format!("{} vCPU", bounded_number(value, 2)),
            Unit::Ratio if (value * 100.0).is_finite() || !value.is_finite() => {
                format!("{}%", bounded_number(value * 100.0, 1))
            }
            Unit::Ratio => format!("{} (fraction)", bounded_number(value, 1)),
            Unit::BytesPerSecond => {
                let mib = value / 1_048_576.0;
                if mib.abs() >= 0.1 || !mib.is_finite() {
                    format!("{} MiB/s", bounded_number(mib, 1))
                } else {
                    format!("{} KiB/s", bounded_number(value / 1024.0, 1))
                }
            }
            Unit::OpsPerSecond => format!("{} op/s", bounded_number(value, 1)),
            Unit::PacketsPerSecond => format!("{} pkt/s", bounded_number(value, 1)),
            Unit::Series => format!("{} series", bounded_number(value, 0)),
            Unit::Custom if value != 0.0 && value.abs() < 1e-3 => format!("{value:.3e}"),
            Unit::Custom => {
                let text = bounded_number(value, 3);
                if text.contains('.') && !text.contains('e') {
                    text.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    text
                }
            }
        }
    }
}

/// A signal a catalog entry declares in its `workload.yaml` (`signals:`); its VMs carry only
/// the digest of the list ([`SIGNALS_DIGEST_ANNOTATION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomSignal {
    /// Lowercase letters, digits and '-'.
    pub name: String,
    /// A PromQL template with `{{namespace}}`, `{{name}}` and optionally `{{window}}`.
    pub query: String,
    /// The query's value must be at least this.
    pub threshold: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What the cluster says about one VM, as verify needs it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VmFacts {
    pub namespace: String,
    pub name: String,
    /// `app.kubernetes.io/component`.
    pub workload: String,
    /// `virtwork/role`.
    pub role: Option<String>,
    /// The memory request of the VM, in bytes.
    pub memory_bytes: Option<u64>,
    /// From [`SIGNAL_PARAMS_ANNOTATION`]; missing keys take the workload's defaults.
    pub params: BTreeMap<String, String>,
    /// The local catalog entry's signals (never a query read from the cluster).
    pub custom: Vec<CustomSignal>,
    /// The load profile the run recorded in the params (None: steady).
    pub profile: Option<LoadProfile>,
}

/// One expected signal of one VM, ready to query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub signal: String,
    pub description: String,
    pub query: String,
    /// The value must be at least this; None when the window cannot contain the signal.
    pub threshold: Option<f64>,
    pub unit: Unit,
    /// Why the signal is not expected, or a caveat worth showing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The series whose presence, age and scrape interval verify checks (None for catalog
    /// signals, whose queries may read anything).
    #[serde(skip)]
    pub series: Option<String>,
    /// The same series as a scrape that overwrote `namespace` stores them (the VMI's
    /// namespace moved to `exported_namespace`), to say so when the signal is missing.
    #[serde(skip)]
    pub relabelled: Option<String>,
    /// The group this check is queried with (built-in signals): every VM of the namespace
    /// with the same signal and mount shares one query.
    #[serde(skip)]
    pub group: Option<SignalGroup>,
    /// The signal follows the VM's load profile: judged phase by phase over time instead of
    /// against one threshold.
    #[serde(skip)]
    pub profile: Option<ProfiledCheck>,
}

/// The share of a profile's amplitude a phase may read above its level (a phase reads its
/// level within a few percent once settled; half the amplitude let a low phase pass
/// half-way to the high level).
pub const CEILING_SHARE: f64 = 0.3;

/// How a profiled signal's value relates to the profile's level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LevelMapping {
    /// The signal reads `idle + per_level * level` at full effect (a cap, such as an IOPS or
    /// bitrate limit, may be reached only in part, which the floor allows for).
    Absolute { idle: f64, per_level: f64 },
    /// No fixed factor between level and signal (pgbench's transactions per second and the
    /// disk operations they cause): the factor is measured from the phases at the highest
    /// level and the other phases are judged against it.
    Relative,
}

/// A signal judged by the load profile: the profile, how levels map to values, and the
/// longest pause the payload takes inside a phase (its loop keeps pausing between runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProfiledCheck {
    pub profile: LoadProfile,
    pub mapping: LevelMapping,
    pub quiet_gap_secs: f64,
}

impl ProfiledCheck {
    /// The value at `level` at full effect (in the Relative mapping, with `factor` per level).
    pub fn nominal(&self, level: u32, factor: f64) -> f64 {
        match self.mapping {
            LevelMapping::Absolute { idle, per_level } => idle + per_level * f64::from(level),
            LevelMapping::Relative => factor * f64::from(level),
        }
    }

    /// The least a phase at `level` must average when `active` of its judged seconds are
    /// guaranteed to carry load: half of the level's share above idle, as the steady floors
    /// are (None: level 0, where no load runs and nothing is owed).
    pub fn floor(&self, level: u32, factor: f64, active: f64) -> Option<f64> {
        let idle = self.nominal(0, factor);
        (level > 0)
            .then(|| idle + 0.5 * (self.nominal(level, factor) - idle) * active.clamp(0.0, 1.0))
    }

    /// The most a phase at `level` may average: its value at full effect plus
    /// [`CEILING_SHARE`] of the profile's amplitude, so a phase stuck at a higher level, or
    /// half-way to it, fails.
    pub fn ceiling(&self, level: u32, factor: f64) -> f64 {
        let levels = self.profile.levels();
        let amplitude = self.nominal(levels.high, factor) - self.nominal(levels.low, factor);
        self.nominal(level, factor) + CEILING_SHARE * amplitude
    }
}

/// Built-in checks that one query answers for every VM at once (one value per VM name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SignalGroup {
    pub namespace: String,
    pub signal: &'static str,
    pub mount: String,
}

/// The queries of a [`SignalGroup`]: the signal's expression over the whole namespace, its
/// primary series there, and those series as a namespace-overwriting scrape stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupQueries {
    pub value: String,
    pub series: String,
    pub relabelled: String,
}

/// The grouped queries of `group` over `window` (the same expressions as each VM's
/// [`Check`], over `namespace` alone instead of one VM's name).
pub fn group_queries(group: &SignalGroup, window: Window, step_ms: Option<u64>) -> GroupQueries {
    let def = WORKLOADS
        .iter()
        .flat_map(|w| builtin_signals(w).iter())
        .find(|d| d.name == group.signal)
        .expect("groups are made of built-in signals");
    let m = Matchers::default().with("namespace", &group.namespace);
    let moved = Matchers::default().with("exported_namespace", &group.namespace);
    GroupQueries {
        value: expression_stepped(def, &m, window, &group.mount, step_ms),
        series: primary_series(def, &m, &group.mount),
        relabelled: primary_series(def, &moved, &group.mount),
    }
}

/// Longest list of VM names a profile range query selects by name (the names joined);
/// beyond it the query reads the whole namespace and the answer is filtered by name.
pub const NAME_SELECTOR_MAX_CHARS: usize = 4_000;

/// The range query of a profiled group: the signal's expression with each sample covering
/// `rate_window`, over the `names` of the namespace (VM names are DNS names: only `.` is a
/// regex metacharacter, and it is escaped).
pub fn profile_range_query(
    group: &SignalGroup,
    names: &[&str],
    rate_window: Window,
    step_ms: Option<u64>,
) -> String {
    let def = WORKLOADS
        .iter()
        .flat_map(|w| builtin_signals(w).iter())
        .find(|d| d.name == group.signal)
        .expect("groups are made of built-in signals");
    let alternatives = names
        .iter()
        .map(|n| n.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    let mut m = Matchers::default().with("namespace", &group.namespace);
    if alternatives.len() <= NAME_SELECTOR_MAX_CHARS {
        m = m.with_op("name", "=~", &alternatives);
    }
    expression_stepped(def, &m, rate_window, &group.mount, step_ms)
}

/// One built-in signal: name, what it shows, and how to write its query.
#[derive(Debug, Clone, Copy)]
pub struct SignalDef {
    pub name: &'static str,
    pub description: &'static str,
    pub unit: Unit,
    /// KubeVirt release that introduced the metrics it reads (for the docs).
    pub kubevirt_since: &'static str,
}

const VCPU_BUSY: SignalDef = SignalDef {
    name: "vcpu-busy",
    description: "vCPU time per second divided by the VMI's vCPU count",
    unit: Unit::VcpuFraction,
    kubevirt_since: "v1.0.0 (kubevirt_vmi_vcpu_seconds_total; kubevirt_vmi_vcpu_seconds before; values 1000x too high until v1.5, which a lower bound tolerates)",
};
const MEMORY_USED: SignalDef = SignalDef {
    name: "memory-used",
    description: "highest guest memory in use (available - usable) over the window, as a fraction of guest memory",
    unit: Unit::Ratio,
    kubevirt_since: "available: v0.20 (2019, renamed from kubevirt_vm_); usable: ≈v0.40 (2021, kubevirt/kubevirt#5128); needs the virtio balloon statistics (on by default)",
};
const DISK_WRITE: SignalDef = SignalDef {
    name: "disk-write",
    description: "write traffic on the data disk",
    unit: Unit::BytesPerSecond,
    kubevirt_since: "v0.20 (2019)",
};
const DISK_READ: SignalDef = SignalDef {
    name: "disk-read",
    description: "read traffic on the data disk",
    unit: Unit::BytesPerSecond,
    kubevirt_since: "v0.20 (2019)",
};
const DISK_IOPS: SignalDef = SignalDef {
    name: "disk-iops",
    description: "read plus write operations on the data disk",
    unit: Unit::OpsPerSecond,
    kubevirt_since: "v0.20 (2019)",
};
const DISK_WRITE_IOPS: SignalDef = SignalDef {
    name: "disk-write-iops",
    description: "write operations on the data disk",
    unit: Unit::OpsPerSecond,
    kubevirt_since: "v0.20 (2019)",
};
const NET_RX: SignalDef = SignalDef {
    name: "net-rx",
    description: "bytes received on the VMI's interfaces",
    unit: Unit::BytesPerSecond,
    kubevirt_since: "≈v0.32 (2020, split out of kubevirt_vmi_network_traffic_bytes_total)",
};
const NET_TX: SignalDef = SignalDef {
    name: "net-tx",
    description: "bytes transmitted on the VMI's interfaces",
    unit: Unit::BytesPerSecond,
    kubevirt_since: "≈v0.32 (2020)",
};
const NET_RX_PACKETS: SignalDef = SignalDef {
    name: "net-rx-packets",
    description: "packets received on the VMI's interfaces",
    unit: Unit::PacketsPerSecond,
    kubevirt_since: "≈v0.32 (2020)",
};
const NET_TX_PACKETS: SignalDef = SignalDef {
    name: "net-tx-packets",
    description: "packets transmitted on the VMI's interfaces",
    unit: Unit::PacketsPerSecond,
    kubevirt_since: "≈v0.32 (2020)",
};
const FS_FILL: SignalDef = SignalDef {
    name: "fs-fill",
    description: "highest used fraction of the data filesystem over the window (guest agent)",
    unit: Unit::Ratio,
    kubevirt_since: "≈v0.56 (2022, kubevirt/kubevirt#7814); labels disk_name, mount_point, file_system_type; needs qemu-guest-agent in the guest",
};
const NET_REPORTING: SignalDef = SignalDef {
    name: "net-reporting",
    description: "the VMI's interface counters reach Prometheus (netem acts inside the guest: delay and loss are not visible in host counters)",
    unit: Unit::Series,
    kubevirt_since: "≈v0.32 (2020)",
};
const VCPU_REPORTING: SignalDef = SignalDef {
    name: "vcpu-reporting",
    description: "the VMI's vCPU counters reach Prometheus (signals and killed guest processes are not visible from the host)",
    unit: Unit::Series,
    kubevirt_since: "v1.0.0",
};

/// Memory an idle guest already uses, as a fraction of its memory (kernel, systemd,
/// cloud-init leftovers): loads must show above it.
const IDLE_MEMORY_RATIO: f64 = 0.15;
/// Floors that clearly separate a loaded resource from an idle one.
const DISK_BYTES_FLOOR: f64 = 1_048_576.0;
const DB_BYTES_FLOOR: f64 = 262_144.0;
const DISK_IOPS_FLOOR: f64 = 10.0;
const DB_IOPS_FLOOR: f64 = 5.0;
const NET_BYTES_FLOOR: f64 = 1_048_576.0;
const NET_PACKETS_FLOOR: f64 = 50.0;
/// Seconds the payloads sleep between load phases. The payload scripts format these very
/// constants into their loops (a test reads them back), so the quiet gaps the thresholds
/// allow for are the ones the guests really have.
pub const FIO_PAUSE_SECS: u32 = 10;
pub const PGBENCH_PAUSE_SECS: u32 = 10;
pub const IPERF_PAUSE_SECS: u32 = 10;
/// tps: after every netperf round and HTTP window.
pub const TPS_ROUND_PAUSE_SECS: u32 = 2;
/// tps: after each cycle (which ends with a round pause, so the quiet gap is both).
pub const TPS_CYCLE_PAUSE_SECS: u32 = 30;

/// Bytes of pgbench data per unit of scale factor (pgbench's own sizing, ~15 MiB).
const PGBENCH_BYTES_PER_SCALE: u64 = 15 * 1_048_576;

/// The built-in signals of `workload`, for the docs and the rules.
pub fn builtin_signals(workload: &str) -> &'static [SignalDef] {
    match workload {
        "cpu" => &[VCPU_BUSY],
        "memory" => &[MEMORY_USED],
        "disk" => &[DISK_WRITE, DISK_READ, DISK_IOPS],
        "database" => &[DISK_WRITE, DISK_WRITE_IOPS, DISK_READ],
        "network" => &[NET_RX, NET_TX],
        "tps" => &[NET_RX_PACKETS, NET_TX_PACKETS],
        "chaos-disk" => &[FS_FILL],
        "chaos-network" => &[NET_REPORTING],
        "chaos-process" => &[VCPU_REPORTING],
        _ => &[],
    }
}

/// The params of `workload` its signals depend on, with their defaults (kept in step with
/// the workloads' schemas by a test).
pub fn signal_param_defaults(workload: &str) -> &'static [(&'static str, &'static str)] {
    match workload {
        "cpu" => &[("cpu-load-percent", "100")],
        "memory" => &[("memory-percent", "80")],
        "disk" => &[("rwmixread", "70"), ("runtime", "300")],
        "database" => &[("scale-factor", "50"), ("duration", "300")],
        "network" => &[("test-duration", "60")],
        // Not read by the thresholds (the quiet gap is the fixed pauses), recorded so a
        // metrics fixture can follow the client's rounds.
        "tps" => &[("iterations", "30"), ("duration", "60")],
        "chaos-disk" => &[
            ("mount", "/mnt/data"),
            ("fill-percent", "90"),
            ("fill-sleep", "60"),
            ("release-sleep", "30"),
        ],
        _ => &[],
    }
}

/// The subset of a workload's resolved params recorded in [`SIGNAL_PARAMS_ANNOTATION`].
/// Only the keys the contract reads: other params (catalog ones may be anything) stay off
/// the cluster's metadata.
pub fn signal_params<'a>(
    workload: &str,
    resolved: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    let wanted = signal_param_defaults(workload);
    resolved
        .into_iter()
        .filter(|(k, _)| wanted.iter().any(|(w, _)| w == k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn param<'a>(facts: &'a VmFacts, key: &str) -> &'a str {
    facts
        .params
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| {
            signal_param_defaults(&facts.workload)
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .unwrap_or("")
        })
}

fn int_param(facts: &VmFacts, key: &str) -> f64 {
    parse_int(param(facts, key)).unwrap_or(0) as f64
}

/// The PromQL expression of a built-in signal over the series matching `m` (one VMI, or all
/// VMIs of a workload), one value per (namespace, name).
pub fn expression(def: &SignalDef, m: &Matchers, window: Window, mount: &str) -> String {
    expression_stepped(def, m, window, mount, None)
}

/// The subquery resolution of `step_ms` as PromQL writes it after the range's colon: empty
/// (Prometheus' default, its rule evaluation interval) for None, else whole milliseconds,
/// at least one (a zero step is a query error).
pub fn subquery_step(step_ms: Option<u64>) -> String {
    step_ms.map_or_else(String::new, |ms| format!("{}ms", ms.max(1)))
}

/// [`expression`] with every subquery at `step_ms` (memory-used and fs-fill take the
/// maximum of a ratio over the window through a subquery). verify passes the scrape
/// interval it measured: the default step, the rule evaluation interval (30 s on
/// kube-prometheus and OpenShift), would leave a short window without a step, or a step
/// between the samples that matter. None (the default) is for rules, which Prometheus
/// evaluates at that interval anyway.
pub fn expression_stepped(
    def: &SignalDef,
    m: &Matchers,
    window: Window,
    mount: &str,
    step_ms: Option<u64>,
) -> String {
    let w = window;
    let step = subquery_step(step_ms);
    let drive = m.clone().with("drive", DATA_DRIVE);
    let by = "sum by (namespace, name)";
    match def.name {
        "vcpu-busy" => format!(
            "{by} (rate(kubevirt_vmi_vcpu_seconds_total{{{m}}}[{w}])) / count by (namespace, name) (count by (namespace, name, id) (kubevirt_vmi_vcpu_seconds_total{{{m}}}))"
        ),
        "memory-used" => format!(
            "max by (namespace, name) (max_over_time(((kubevirt_vmi_memory_available_bytes{{{m}}} - kubevirt_vmi_memory_usable_bytes{{{m}}}) / kubevirt_vmi_memory_available_bytes{{{m}}})[{w}:{step}]))"
        ),
        "disk-write" => {
            format!("{by} (rate(kubevirt_vmi_storage_write_traffic_bytes_total{{{drive}}}[{w}]))")
        }
        "disk-read" => {
            format!("{by} (rate(kubevirt_vmi_storage_read_traffic_bytes_total{{{drive}}}[{w}]))")
        }
        "disk-iops" => format!(
            "{by} (rate(kubevirt_vmi_storage_iops_write_total{{{drive}}}[{w}])) + {by} (rate(kubevirt_vmi_storage_iops_read_total{{{drive}}}[{w}]))"
        ),
        "disk-write-iops" => {
            format!("{by} (rate(kubevirt_vmi_storage_iops_write_total{{{drive}}}[{w}]))")
        }
        "net-rx" => format!("{by} (rate(kubevirt_vmi_network_receive_bytes_total{{{m}}}[{w}]))"),
        "net-tx" => format!("{by} (rate(kubevirt_vmi_network_transmit_bytes_total{{{m}}}[{w}]))"),
        "net-rx-packets" => {
            format!("{by} (rate(kubevirt_vmi_network_receive_packets_total{{{m}}}[{w}]))")
        }
        "net-tx-packets" => {
            format!("{by} (rate(kubevirt_vmi_network_transmit_packets_total{{{m}}}[{w}]))")
        }
        "fs-fill" => {
            let fs = m.clone().with("mount_point", mount);
            format!(
                "max by (namespace, name) (max_over_time((kubevirt_vmi_filesystem_used_bytes{{{fs}}} / kubevirt_vmi_filesystem_capacity_bytes{{{fs}}})[{w}:{step}]))"
            )
        }
        "net-reporting" => format!(
            "count by (namespace, name) (kubevirt_vmi_network_transmit_packets_total{{{m}}})"
        ),
        "vcpu-reporting" => {
            format!("count by (namespace, name) (kubevirt_vmi_vcpu_seconds_total{{{m}}})")
        }
        other => unreachable!("no expression for signal {other}"),
    }
}

/// The metric a built-in signal reads first (its presence stands for the signal's), with
/// the extra matchers the signal's expression adds.
fn primary_series(def: &SignalDef, m: &Matchers, mount: &str) -> String {
    let drive = || m.clone().with("drive", DATA_DRIVE);
    match def.name {
        "vcpu-busy" | "vcpu-reporting" => format!("kubevirt_vmi_vcpu_seconds_total{{{m}}}"),
        "memory-used" => format!("kubevirt_vmi_memory_available_bytes{{{m}}}"),
        "disk-write" => format!(
            "kubevirt_vmi_storage_write_traffic_bytes_total{{{}}}",
            drive()
        ),
        "disk-read" => format!(
            "kubevirt_vmi_storage_read_traffic_bytes_total{{{}}}",
            drive()
        ),
        "disk-iops" | "disk-write-iops" => {
            format!("kubevirt_vmi_storage_iops_write_total{{{}}}", drive())
        }
        "net-rx" => format!("kubevirt_vmi_network_receive_bytes_total{{{m}}}"),
        "net-tx" => format!("kubevirt_vmi_network_transmit_bytes_total{{{m}}}"),
        "net-rx-packets" => format!("kubevirt_vmi_network_receive_packets_total{{{m}}}"),
        "net-tx-packets" | "net-reporting" => {
            format!("kubevirt_vmi_network_transmit_packets_total{{{m}}}")
        }
        "fs-fill" => format!(
            "kubevirt_vmi_filesystem_used_bytes{{{}}}",
            m.clone().with("mount_point", mount)
        ),
        other => unreachable!("no series for signal {other}"),
    }
}

/// A floor averaged over a window of which only `active` seconds are guaranteed to carry
/// the load; None when the window may fall entirely in a quiet gap.
fn averaged(floor: f64, window: Window, quiet_gap_secs: f64) -> Option<f64> {
    let total = window.as_secs() as f64;
    let active = total - quiet_gap_secs;
    (active > 0.0).then(|| floor * active / total)
}

/// A threshold, or why the signal is not expected (a note).
type Threshold = (Option<f64>, Option<String>);

/// Not expected: the window may fall entirely into a pause of `gap` seconds.
fn too_short(window: Window, gap: f64, why: &str) -> Threshold {
    (
        None,
        Some(format!(
            "not expected in a {window} window: {why}; use --window longer than {}s",
            gap as u64
        )),
    )
}

/// `floor` averaged over the window, or not expected when the window may fall into a pause.
fn averaged_or_too_short(floor: f64, window: Window, gap: f64, why: &str) -> Threshold {
    match averaged(floor, window, gap) {
        Some(t) => (Some(t), None),
        None => too_short(window, gap, why),
    }
}

/// The threshold of a built-in signal for this VM and window (None: not expected in it),
/// plus a note explaining a None.
fn threshold(def: &SignalDef, facts: &VmFacts, window: Window) -> Threshold {
    match (facts.workload.as_str(), def.name) {
        (_, "vcpu-busy") => {
            let load = int_param(facts, "cpu-load-percent").clamp(1.0, 100.0);
            (Some(0.5 * load / 100.0), None)
        }
        (_, "memory-used") => {
            let percent = int_param(facts, "memory-percent").clamp(1.0, 100.0);
            (
                Some((IDLE_MEMORY_RATIO + 0.5 * percent / 100.0).min(0.9)),
                None,
            )
        }
        ("disk", name) => disk_threshold(name, facts, window),
        ("database", name) => database_threshold(name, facts, window),
        (_, "net-rx" | "net-tx") => averaged_or_too_short(
            NET_BYTES_FLOOR,
            window,
            f64::from(IPERF_PAUSE_SECS),
            "the iperf3 client pauses between tests",
        ),
        (_, "net-rx-packets" | "net-tx-packets") => averaged_or_too_short(
            NET_PACKETS_FLOOR,
            window,
            f64::from(TPS_ROUND_PAUSE_SECS + TPS_CYCLE_PAUSE_SECS),
            "the tps client rests between cycles (a round pause, then the cycle pause)",
        ),
        (_, "fs-fill") => {
            let release = int_param(facts, "release-sleep");
            let fill = int_param(facts, "fill-percent").clamp(1.0, 100.0);
            if (window.as_secs() as f64) <= release {
                return too_short(
                    window,
                    release,
                    "the disk stays released for release-sleep seconds",
                );
            }
            (
                Some(0.9 * fill / 100.0),
                Some("guest-agent filesystem data refreshes less often than the scrape; allow a few minutes".into()),
            )
        }
        (_, "net-reporting" | "vcpu-reporting") => (Some(1.0), None),
        (_, other) => unreachable!("no threshold for signal {other}"),
    }
}

/// The disk workload's signals. fio loops: mixed job (runtime), pause, sequential write
/// (runtime), pause.
fn disk_threshold(name: &str, facts: &VmFacts, window: Window) -> Threshold {
    let runtime = int_param(facts, "runtime");
    let rwmixread = int_param(facts, "rwmixread");
    // Two jobs, each followed by a pause: the longest stretch without both kinds of I/O.
    let fio_pauses = 2.0 * f64::from(FIO_PAUSE_SECS);
    let (floor, gap, why) = match name {
        "disk-read" if rwmixread <= 0.0 => {
            return (None, Some("rwmixread is 0: the payload never reads".into()));
        }
        "disk-read" => (
            DISK_BYTES_FLOOR,
            runtime + fio_pauses,
            "reads happen only in the mixed fio job",
        ),
        "disk-write" if rwmixread >= 100.0 => (
            DISK_BYTES_FLOOR,
            runtime + fio_pauses,
            "with rwmixread 100 writes happen only in the sequential job",
        ),
        "disk-write" => (DISK_BYTES_FLOOR, fio_pauses, "fio pauses between jobs"),
        _ => (DISK_IOPS_FLOOR, fio_pauses, "fio pauses between jobs"),
    };
    averaged_or_too_short(floor, window, gap, why)
}

/// The database workload's disk signals; reads only when the data outgrows the page cache.
fn database_threshold(name: &str, facts: &VmFacts, window: Window) -> Threshold {
    if name == "disk-read" {
        let data = int_param(facts, "scale-factor") * PGBENCH_BYTES_PER_SCALE as f64;
        let cache = facts.memory_bytes.unwrap_or(0) as f64 / 2.0;
        if facts.memory_bytes.is_none() || data <= cache {
            return (
                None,
                Some(
                    "the pgbench data fits in the guest's page cache, so reads stay off the disk"
                        .into(),
                ),
            );
        }
    }
    let floor = if name == "disk-write-iops" {
        DB_IOPS_FLOOR
    } else {
        DB_BYTES_FLOOR
    };
    averaged_or_too_short(
        floor,
        window,
        f64::from(PGBENCH_PAUSE_SECS),
        "pgbench pauses between runs",
    )
}

/// Bytes per second of one Mbit/s, the network profile's level unit.
const BYTES_PER_MBIT: f64 = 125_000.0;

/// The signal of a profiled VM that follows its level (the one its level script drives
/// directly), with how level maps to value and the payload's quiet gap inside a phase.
/// None for the workload's other signals (and for roles the profile does not drive).
fn profiled_signal(
    workload: &str,
    role: Option<&str>,
    signal: &str,
) -> Option<(LevelMapping, f64)> {
    let absolute = |idle, per_level| LevelMapping::Absolute { idle, per_level };
    match (workload, role, signal) {
        ("cpu", _, "vcpu-busy") => Some((absolute(0.0, 0.01), 0.0)),
        ("memory", _, "memory-used") => Some((
            absolute(IDLE_MEMORY_RATIO, (1.0 - IDLE_MEMORY_RATIO) / 100.0),
            0.0,
        )),
        ("disk", _, "disk-iops") => Some((absolute(0.0, 1.0), 2.0 * f64::from(FIO_PAUSE_SECS))),
        ("network", Some("client"), "net-rx" | "net-tx") => {
            Some((absolute(0.0, BYTES_PER_MBIT), f64::from(IPERF_PAUSE_SECS)))
        }
        ("database", _, "disk-write-iops") => {
            Some((LevelMapping::Relative, f64::from(PGBENCH_PAUSE_SECS)))
        }
        _ => None,
    }
}

/// The workloads whose profiles verify judges, and the signal it judges them by.
pub fn profiled_signal_name(workload: &str) -> Option<&'static str> {
    match workload {
        "cpu" => Some("vcpu-busy"),
        "memory" => Some("memory-used"),
        "disk" => Some("disk-iops"),
        "network" => Some("net-rx and net-tx (clients)"),
        "database" => Some("disk-write-iops"),
        _ => None,
    }
}

/// A check of a profiled VM: the driven signal judged by the profile; the network server's
/// traffic (the sum of its clients' profiles, not in step with any one) held to the floor of
/// the low level; the workload's other signals not expected, since the profile drives them
/// too but without a fixed relation to its level.
fn profiled(mut check: Check, facts: &VmFacts, profile: LoadProfile, window: Window) -> Check {
    if let Some((mapping, quiet_gap_secs)) =
        profiled_signal(&facts.workload, facts.role.as_deref(), &check.signal)
    {
        check.threshold = Some(0.0);
        check.note = Some(format!(
            "judged by its load profile ({})",
            profile.describe()
        ));
        check.profile = Some(ProfiledCheck {
            profile,
            mapping,
            quiet_gap_secs,
        });
        return check;
    }
    let low = profile.levels().low;
    (check.threshold, check.note) = match check.signal.as_str() {
        "net-rx" | "net-tx" if low == 0 => (
            None,
            Some("the clients' load profile goes down to level 0: no traffic is owed".into()),
        ),
        "net-rx" | "net-tx" => averaged_or_too_short(
            (0.5 * f64::from(low) * BYTES_PER_MBIT).min(NET_BYTES_FLOOR),
            window,
            f64::from(IPERF_PAUSE_SECS),
            "the iperf3 clients pause between tests",
        ),
        _ => (
            None,
            Some(format!(
                "follows the load profile without a fixed relation to its level: the profile is judged by {}",
                profiled_signal_name(&facts.workload).unwrap_or("another signal")
            )),
        ),
    };
    check
}

/// Every expected signal of one VM over `window`, built-ins first, then catalog signals.
pub fn checks(facts: &VmFacts, window: Window) -> Vec<Check> {
    checks_stepped(facts, window, None)
}

/// [`checks`] whose queries run their subqueries at `step_ms` (see [`expression_stepped`]).
pub fn checks_stepped(facts: &VmFacts, window: Window, step_ms: Option<u64>) -> Vec<Check> {
    let m = Matchers::vmi(&facts.namespace, &facts.name);
    let moved = Matchers::default()
        .with("exported_namespace", &facts.namespace)
        .with("name", &facts.name);
    let mount = param(facts, "mount");
    let mut out: Vec<Check> = builtin_signals(&facts.workload)
        .iter()
        .map(|def| {
            let (threshold, note) = threshold(def, facts, window);
            Check {
                signal: def.name.to_string(),
                description: def.description.to_string(),
                query: expression_stepped(def, &m, window, mount, step_ms),
                threshold,
                unit: def.unit,
                note,
                series: Some(primary_series(def, &m, mount)),
                relabelled: Some(primary_series(def, &moved, mount)),
                group: Some(SignalGroup {
                    namespace: facts.namespace.clone(),
                    signal: def.name,
                    mount: mount.to_string(),
                }),
                profile: None,
            }
        })
        .map(|check| match facts.profile {
            Some(profile) => profiled(check, facts, profile, window),
            None => check,
        })
        .collect();
    out.extend(facts.custom.iter().map(|custom| {
        Check {
            signal: custom.name.clone(),
            description: custom
                .description
                .clone()
                .unwrap_or_else(|| "catalog signal".into()),
            query: render_template(&custom.query, &facts.namespace, &facts.name, window),
            threshold: Some(custom.threshold),
            unit: Unit::Custom,
            note: None,
            series: None,
            relabelled: None,
            group: None,
            profile: None,
        }
    }));
    out
}

/// PromQL label name KubeVirt gives a VMI label on every per-VMI series
/// (`kubernetes_vmi_label_` + the key with `.`, `/` and `-` turned into `_`).
pub fn vmi_label(key: &str) -> String {
    format!("kubernetes_vmi_label_{}", key.replace(['.', '/', '-'], "_"))
}

/// How long a VMI's per-VMI series identify it as a virtwork VM of a workload after they
/// stop (the alert's memory of which running VMIs should show a signal).
pub const ALERT_MEMORY: &str = "1h";

/// `expr` with the VMI's namespace back in `namespace` when a scrape without honorLabels
/// moved it to `exported_namespace`.
fn own_namespace(expr: &str) -> String {
    format!("label_replace({expr}, \"namespace\", \"$1\", \"exported_namespace\", \"(.+)\")")
}

/// The names virtwork gives the VMs of `workload` (`virtwork-<workload>-<run tag>[-<role>]-<n>`,
/// and the untagged names of runs before the tag), as a PromQL regex: it finds a running VMI of
/// the workload even when none of its per-VMI series ever reached Prometheus.
pub fn vm_name_pattern(workload: &str) -> String {
    let roles = match workload {
        "network" | "tps" => "(server-|client-)?",
        _ => "",
    };
    let tag = crate::model::RunId::NAME_TAG_LEN;
    format!("virtwork-{workload}-([0-9a-f]{{{tag}}}-)?{roles}[0-9]+")
}

/// The expression of the shipped alert for one built-in signal: every RUNNING VMI of
/// `workload` (KubeVirt's `kubevirt_vmi_info`, joined with the VMIs whose per-VMI series
/// carried the workload's labels within [`ALERT_MEMORY`], or named as virtwork names them)
/// whose signal, computed as verify computes it with default params, is not both at its
/// threshold and backed by a current series. So it fires when the signal is low, absent or
/// stale, never for a stopped VM, and keys every VMI by its own namespace even when the
/// scrape moved it to `exported_namespace`.
pub fn alert_expression(workload: &str, def: &SignalDef, window: Window) -> Option<String> {
    let facts = VmFacts {
        workload: workload.to_string(),
        // Two GiB, the default VM size (only the database read decision depends on it).
        memory_bytes: Some(2 * 1024 * 1024 * 1024),
        ..VmFacts::default()
    };
    let (threshold, _) = threshold(def, &facts, window);
    let threshold = threshold?;
    let selector = workload_matchers(workload);
    let mount = param(&facts, "mount");
    // Grouped by exported_namespace too, so own_namespace can restore the VMI's namespace.
    let signal = expression(def, &selector, window, mount).replace(
        "by (namespace, name",
        "by (namespace, exported_namespace, name",
    );
    let current = primary_series(def, &selector, mount);
    let run = vmi_label(crate::labels::RUN_ID);
    let known = own_namespace(&format!(
        "last_over_time(kubevirt_vmi_vcpu_seconds_total{{{selector}}}[{ALERT_MEMORY}])"
    ));
    let named = own_namespace(&format!(
        "kubevirt_vmi_info{{name=~\"{}\"}}",
        vm_name_pattern(workload)
    ));
    let running = own_namespace("kubevirt_vmi_info{phase=~\"(?i)running\"}");
    // A VM following a load profile is below the steady threshold in its low phases by
    // design: the alert holds it to a current series only (verify judges its phases).
    let profiled = primary_series(
        def,
        &selector
            .clone()
            .with_op(&vmi_label(crate::labels::LOAD_PROFILE), "=~", ".+"),
        mount,
    );
    let healthy = format!(
        "{} and on (namespace, name) group by (namespace, name) ({}) or on (namespace, name) group by (namespace, name) ({})",
        own_namespace(&format!("({signal} >= {threshold})")),
        own_namespace(&current),
        own_namespace(&profiled)
    );
    Some(format!(
        "((group by (namespace, name, {run}) ({known}) or on (namespace, name) group by (namespace, name) ({named})) and on (namespace, name) {running}) unless on (namespace, name) ({healthy})"
    ))
}

/// Matchers selecting every virtwork VMI of `workload` by the VMI labels on its series.
pub fn workload_matchers(workload: &str) -> Matchers {
    Matchers::default()
        .with(
            &vmi_label(crate::labels::MANAGED_BY),
            crate::labels::MANAGED_BY_VALUE,
        )
        .with(&vmi_label(crate::labels::COMPONENT), workload)
}

/// Names of the built-in workloads with signals, in docs order.
pub const WORKLOADS: [&str; 9] = [
    "cpu",
    "memory",
    "disk",
    "database",
    "network",
    "tps",
    "chaos-disk",
    "chaos-network",
    "chaos-process",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(workload: &str) -> VmFacts {
        VmFacts {
            namespace: "virtwork".into(),
            name: format!("virtwork-{workload}-0"),
            workload: workload.into(),
            role: None,
            memory_bytes: Some(2 << 30),
            params: BTreeMap::new(),
            custom: Vec::new(),
            profile: None,
        }
    }

    fn window(text: &str) -> Window {
        Window::parse(text).unwrap()
    }

    #[test]
    fn cpu_threshold_follows_the_load_percent() {
        let c = checks(&facts("cpu"), Window::DEFAULT);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].signal, "vcpu-busy");
        assert_eq!(c[0].threshold, Some(0.5));
        assert!(
            c[0].query.contains(
                r#"kubevirt_vmi_vcpu_seconds_total{namespace="virtwork",name="virtwork-cpu-0"}[5m]"#
            ),
            "{}",
            c[0].query
        );
        let mut f = facts("cpu");
        f.params.insert("cpu-load-percent".into(), "40".into());
        assert_eq!(checks(&f, Window::DEFAULT)[0].threshold, Some(0.2));
    }

    #[test]
    fn memory_threshold_sits_above_idle() {
        let mut f = facts("memory");
        assert_eq!(checks(&f, Window::DEFAULT)[0].threshold, Some(0.55));
        f.params.insert("memory-percent".into(), "100".into());
        assert_eq!(checks(&f, Window::DEFAULT)[0].threshold, Some(0.65));
    }

    #[test]
    fn disk_reads_are_expected_only_when_the_window_spans_the_mixed_job() {
        let c = checks(&facts("disk"), Window::DEFAULT);
        let read = c.iter().find(|c| c.signal == "disk-read").unwrap();
        assert_eq!(read.threshold, None, "5m < 300s runtime + 20s of pauses");
        assert!(read.note.as_deref().unwrap().contains("longer than 320s"));
        let c = checks(&facts("disk"), window("10m"));
        let read = c.iter().find(|c| c.signal == "disk-read").unwrap();
        let expected = DISK_BYTES_FLOOR * 280.0 / 600.0;
        assert!((read.threshold.unwrap() - expected).abs() < 1e-6);
        let write = c.iter().find(|c| c.signal == "disk-write").unwrap();
        assert!((write.threshold.unwrap() - DISK_BYTES_FLOOR * 580.0 / 600.0).abs() < 1e-6);
        assert!(write.query.contains(r#"drive="datadisk""#));
        let mut f = facts("disk");
        f.params.insert("rwmixread".into(), "0".into());
        let read = checks(&f, window("1h"))
            .into_iter()
            .find(|c| c.signal == "disk-read")
            .unwrap();
        assert_eq!(read.threshold, None);
    }

    #[test]
    fn database_reads_depend_on_data_size_versus_memory() {
        let c = checks(&facts("database"), Window::DEFAULT);
        assert_eq!(
            c.iter()
                .find(|c| c.signal == "disk-read")
                .unwrap()
                .threshold,
            None
        );
        let mut f = facts("database");
        f.params.insert("scale-factor".into(), "1000".into());
        let read = checks(&f, Window::DEFAULT)
            .into_iter()
            .find(|c| c.signal == "disk-read")
            .unwrap();
        assert!(read.threshold.is_some());
    }

    #[test]
    fn chaos_disk_uses_the_mount_and_needs_a_window_longer_than_the_release() {
        let mut f = facts("chaos-disk");
        f.params.insert("mount".into(), "/srv/fill \"x\"".into());
        f.params.insert("release-sleep".into(), "1".into());
        let c = checks(&f, window("10s"));
        assert_eq!(c[0].threshold, Some(0.81));
        assert!(
            c[0].query.contains(r#"mount_point="/srv/fill \"x\"""#),
            "{}",
            c[0].query
        );
        f.params.insert("release-sleep".into(), "30".into());
        assert_eq!(checks(&f, window("10s"))[0].threshold, None);
    }

    #[test]
    fn short_windows_make_gapped_signals_unexpected_not_failed() {
        let c = checks(&facts("network"), window("10s"));
        assert!(c.iter().all(|c| c.threshold.is_none()));
        let c = checks(&facts("network"), window("20s"));
        assert!((c[0].threshold.unwrap() - NET_BYTES_FLOOR / 2.0).abs() < 1e-6);
    }

    #[test]
    fn catalog_signals_render_with_escaped_identity() {
        let mut f = facts("web");
        f.name = "vm\"1".into();
        f.custom.push(CustomSignal {
            name: "http-requests".into(),
            query: r#"sum(rate(kubevirt_vmi_network_receive_packets_total{namespace="{{namespace}}",name="{{name}}"}[{{window}}]))"#.into(),
            threshold: 3.0,
            description: None,
        });
        let c = checks(&f, window("2m"));
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].query,
            r#"sum(rate(kubevirt_vmi_network_receive_packets_total{namespace="virtwork",name="vm\"1"}[2m]))"#
        );
        assert_eq!(c[0].threshold, Some(3.0));
    }

    #[test]
    fn out_of_range_values_format_as_short_cells() {
        assert_eq!(Unit::Ratio.format(1e308), "1.000e308 (fraction)");
        assert_eq!(Unit::Ratio.format(0.5), "50.0%");
        assert_eq!(Unit::Ratio.format(f64::NAN), "NaN%");
        assert_eq!(Unit::Custom.format(1e308), "1.000e308");
        assert_eq!(Unit::Custom.format(2048.0), "2048");
        assert_eq!(Unit::Custom.format(0.25), "0.25");
        assert_eq!(Unit::Custom.format(1e-9), "1.000e-9");
        assert_eq!(Unit::VcpuFraction.format(f64::INFINITY), "+Inf vCPU");
        assert_eq!(Unit::BytesPerSecond.format(1e308), "9.537e301 MiB/s");
        assert_eq!(Unit::BytesPerSecond.format(-f64::INFINITY), "-Inf MiB/s");
        assert_eq!(Unit::OpsPerSecond.format(12.0), "12.0 op/s");
        for unit in [
            Unit::VcpuFraction,
            Unit::Ratio,
            Unit::BytesPerSecond,
            Unit::Custom,
        ] {
            assert!(
                unit.format(f64::MAX).len() < 24,
                "{unit:?}: {}",
                unit.format(f64::MAX)
            );
        }
    }

    #[test]
    fn the_signals_digest_follows_the_signals() {
        let a = CustomSignal {
            name: "s".into(),
            query: "vector(1)".into(),
            threshold: 1.0,
            description: None,
        };
        let mut b = a.clone();
        let one = |s: &CustomSignal| signals_digest(std::slice::from_ref(s));
        assert_eq!(one(&a), one(&b));
        assert!(one(&a).starts_with("sha256:"));
        assert_eq!(one(&a).len(), 7 + 64);
        b.threshold = 0.0;
        assert_ne!(one(&a), one(&b));
        assert_ne!(signals_digest(&[]), signals_digest(&[a]));
    }

    /// The `sleep` arguments of a payload script, in order.
    fn sleeps(script: &str) -> Vec<String> {
        script
            .lines()
            .filter_map(|l| l.trim().strip_prefix("sleep "))
            .map(|s| s.trim().to_string())
            .collect()
    }

    fn gap_in_note(facts: &VmFacts, signal: &str, window: Window) -> Option<u64> {
        let c = checks(facts, window)
            .into_iter()
            .find(|c| c.signal == signal)?;
        let note = c.note?;
        let digits: String = note
            .rsplit("longer than ")
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }

    #[test]
    fn quiet_gaps_are_the_payloads_own_pauses() {
        use crate::workloads::{chaos_disk, database, disk, network, scripts::DataMount, tps};
        let size = crate::workloads::params::parse_file_size("10M").unwrap();
        // tps: after each round, and the cycle pause after the last round's pause.
        let tps_sleeps = sleeps(&tps::client_script("ns", "30", "60", size));
        let round = TPS_ROUND_PAUSE_SECS.to_string();
        let cycle = TPS_CYCLE_PAUSE_SECS.to_string();
        assert_eq!(
            tps_sleeps.iter().filter(|s| **s != "1").collect::<Vec<_>>(),
            vec![&round, &round, &cycle],
            "the tps client sleeps (1 s only after a failed transfer)"
        );
        let tps_gap = (TPS_ROUND_PAUSE_SECS + TPS_CYCLE_PAUSE_SECS) as u64;
        assert_eq!(
            gap_in_note(&facts("tps"), "net-rx-packets", window("30s")),
            Some(tps_gap)
        );
        assert!(checks(&facts("tps"), window("33s"))[0].threshold.is_some());
        // network, disk, database: one pause per loop (disk: one per job).
        let iperf = sleeps(&network::client_script("ns", "60", "4"));
        assert_eq!(iperf, vec![IPERF_PAUSE_SECS.to_string()]);
        assert_eq!(
            gap_in_note(&facts("network"), "net-rx", window("10s")),
            Some(IPERF_PAUSE_SECS as u64)
        );
        let fio = sleeps(&disk::load_script(&DataMount::new("s", "/mnt/data")));
        assert_eq!(fio, vec![FIO_PAUSE_SECS.to_string(); 2]);
        assert_eq!(
            gap_in_note(&facts("disk"), "disk-write", window("20s")),
            Some(2 * FIO_PAUSE_SECS as u64)
        );
        assert_eq!(
            sleeps(&database::bench_script("4", "300")),
            vec![PGBENCH_PAUSE_SECS.to_string()]
        );
        assert_eq!(
            gap_in_note(&facts("database"), "disk-write", window("10s")),
            Some(PGBENCH_PAUSE_SECS as u64)
        );
        // chaos-disk: full for fill-sleep, released for release-sleep, both recorded params.
        let chaos = chaos_disk::chaos_script(&DataMount::new("s", "/mnt/data"), "90", "45", "20");
        assert_eq!(
            sleeps(&chaos),
            vec!["\"$FILL_SLEEP\"", "\"$RELEASE_SLEEP\""]
        );
        assert!(chaos.contains("FILL_SLEEP=45") && chaos.contains("RELEASE_SLEEP=20"));
        let mut f = facts("chaos-disk");
        f.params.insert("release-sleep".into(), "20".into());
        assert_eq!(gap_in_note(&f, "fs-fill", window("20s")), Some(20));
        assert!(checks(&f, window("21s"))[0].threshold.is_some());
        let recorded: Vec<&str> = signal_param_defaults("chaos-disk")
            .iter()
            .map(|(k, _)| *k)
            .collect();
        assert!(recorded.contains(&"fill-sleep") && recorded.contains(&"release-sleep"));
    }

    #[test]
    fn only_contract_params_are_recorded() {
        let resolved = [("cpu-load-percent", "60"), ("cpu-method", "fft")];
        let got = signal_params("cpu", resolved.iter().copied());
        assert_eq!(
            got,
            BTreeMap::from([("cpu-load-percent".to_string(), "60".to_string())])
        );
        assert!(signal_params("my-entry", [("password", "hunter2")]).is_empty());
    }

    #[test]
    fn a_profiled_vm_is_judged_by_its_driven_signal() {
        let profile = LoadProfile::step(
            crate::profile_schedule::Levels {
                low: 100,
                high: 2000,
            },
            600,
            50,
        )
        .unwrap();
        let f = VmFacts {
            profile: Some(profile),
            ..facts("disk")
        };
        let all = checks(&f, window("10m"));
        let iops = all.iter().find(|c| c.signal == "disk-iops").unwrap();
        let driven = iops.profile.expect("disk-iops follows the profile");
        assert_eq!(driven.nominal(2000, 0.0), 2000.0);
        assert_eq!(driven.floor(2000, 0.0, 1.0), Some(1000.0));
        assert_eq!(driven.floor(0, 0.0, 1.0), None);
        assert_eq!(driven.ceiling(100, 0.0), 100.0 + 0.3 * 1900.0);
        for other in all.iter().filter(|c| c.signal != "disk-iops") {
            assert_eq!(other.threshold, None, "{other:?}");
            assert!(
                other
                    .note
                    .as_deref()
                    .unwrap()
                    .contains("judged by disk-iops")
            );
        }
        // The network server carries every client's profile at once: held to the low
        // level's floor, not judged phase by phase.
        let server = VmFacts {
            role: Some("server".into()),
            profile: Some(profile),
            ..facts("network")
        };
        for c in checks(&server, window("10m")) {
            assert!(c.profile.is_none() && c.threshold.is_some(), "{c:?}");
        }
    }

    #[test]
    fn alert_expressions_reuse_the_verify_expression() {
        let def = &builtin_signals("cpu")[0];
        let alert = alert_expression("cpu", def, Window::DEFAULT).unwrap();
        let signal = expression(def, &workload_matchers("cpu"), Window::DEFAULT, "").replace(
            "by (namespace, name",
            "by (namespace, exported_namespace, name",
        );
        assert!(alert.contains(&format!("({signal} >= 0.5)")), "{alert}");
        assert!(alert.contains(r#"kubernetes_vmi_label_app_kubernetes_io_component="cpu""#));
        assert!(
            alert.contains(r#"kubevirt_vmi_info{phase=~"(?i)running"}"#),
            "{alert}"
        );
        assert!(
            alert.contains(r#"kubevirt_vmi_info{name=~"virtwork-cpu-([0-9a-f]{6}-)?[0-9]+"}"#),
            "{alert}"
        );
        assert!(alert.contains("group by (namespace, name, kubernetes_vmi_label_virtwork_run_id)"));
        assert_eq!(
            vm_name_pattern("tps"),
            "virtwork-tps-([0-9a-f]{6}-)?(server-|client-)?[0-9]+"
        );
    }

    #[test]
    fn recorded_param_defaults_match_the_workload_schemas() {
        let registry = crate::workloads::Registry::builtin();
        for workload in WORKLOADS {
            let schema = registry.schema(workload).unwrap();
            for (key, default) in signal_param_defaults(workload) {
                let def = schema
                    .get(key)
                    .unwrap_or_else(|| panic!("{workload} has no param {key}"));
                assert_eq!(def.default, *default, "{workload}.{key}");
            }
        }
    }

    #[test]
    fn every_query_names_only_contract_metrics() {
        for workload in WORKLOADS {
            for c in checks(&facts(workload), window("1h")) {
                for word in c
                    .query
                    .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                {
                    if word.starts_with("kubevirt_vmi_") {
                        assert!(METRICS.contains(&word), "{word} in {}", c.query);
                    }
                }
            }
        }
    }
}
