//! The monitoring kit in deploy/monitoring/: the PrometheusRule and the Grafana dashboard
//! are exactly what src/verify/kit.rs generates from the signal contract (so the alert uses
//! verify's expressions), `promtool check rules` accepts the rules, `promtool test rules`
//! proves the alert fires for a VM whose signal is flat and not for loaded ones, and the
//! dashboard references only metrics the contract uses. docs/workloads.md's signal section
//! is generated the same way. Regenerate with `VIRTWORK_UPDATE_DOCS=1 cargo test --test
//! monitoring`. promtool tests skip without it (fail under VIRTWORK_REQUIRE_PROMETHEUS=1).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use virtwork::signals::contract::{METRICS, builtin_signals};
use virtwork::verify::kit::{self, ALERT};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn updating() -> bool {
    std::env::var("VIRTWORK_UPDATE_DOCS").as_deref() == Ok("1")
}

/// Compares (or rewrites) a generated file.
fn check_generated(relative: &str, wanted: &str) {
    let path = repo().join(relative);
    if updating() {
        std::fs::write(&path, wanted).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == wanted,
        "{relative} differs from what src/verify/kit.rs generates; regenerate with \
         VIRTWORK_UPDATE_DOCS=1 cargo test --test integration monitoring::"
    );
}

#[test]
fn shipped_rule_and_dashboard_are_generated_from_the_contract() {
    check_generated(
        "deploy/monitoring/prometheusrule.yaml",
        &kit::prometheus_rule_yaml(),
    );
    check_generated(
        "deploy/monitoring/grafana-dashboard.json",
        &kit::grafana_dashboard_json(),
    );
}

#[test]
fn workloads_md_lists_each_workloads_signals_from_the_contract() {
    let path = repo().join("docs/workloads.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = "<!-- BEGIN GENERATED signals -->\n";
    let end = "<!-- END GENERATED signals -->";
    let start = doc
        .find(begin)
        .expect("docs/workloads.md has the generated signals markers")
        + begin.len();
    let len = doc[start..].find(end).expect("end marker");
    let wanted = format!("\n{}\n", kit::signals_markdown().trim_end());
    if updating() {
        let updated = format!("{}{}{}", &doc[..start], wanted, &doc[start + len..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        doc[start..start + len] == wanted,
        "docs/workloads.md's signal section is stale; regenerate with VIRTWORK_UPDATE_DOCS=1 cargo test --test integration monitoring::"
    );
}

/// The rule groups (`spec`) of the shipped PrometheusRule, as a plain Prometheus rule file.
fn rule_file(dir: &Path) -> PathBuf {
    let text =
        std::fs::read_to_string(repo().join("deploy/monitoring/prometheusrule.yaml")).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(doc["kind"].as_str(), Some("PrometheusRule"));
    let path = dir.join("rules.yaml");
    std::fs::write(&path, serde_yaml::to_string(&doc["spec"]).unwrap()).unwrap();
    path
}

#[test]
fn promtool_accepts_the_shipped_rules() {
    let Some(promtool) = support::prometheus::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rules = rule_file(dir.path());
    let out = Command::new(promtool)
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = kit::alert_rules().len();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("SUCCESS: {expected} rules found"))
    );
}

const RUN: &str = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";

/// Where a VMI's series say it lives: its own namespace, or (a scrape without honorLabels)
/// virt-handler's with the VMI's in `exported_namespace`.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Own,
    Relabelled,
}

impl Place {
    fn labels(self) -> &'static str {
        match self {
            Place::Own => "namespace=\"virtwork\"",
            Place::Relabelled => "namespace=\"kubevirt\",exported_namespace=\"virtwork\"",
        }
    }
}

/// Input series of one VMI as KubeVirt exports them, in promtool's expanding notation:
/// two vCPU counters (`vcpu` values), `extra` metrics, and `kubevirt_vmi_info` with phase
/// running (`info` values; virt-controller exports it, without the VMI's labels).
fn vmi_series(
    name: &str,
    workload: &str,
    place: Place,
    vcpu: &str,
    info: &str,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    vmi_series_labelled(name, workload, place, vcpu, info, extra, "")
}

/// [`vmi_series`] with more VMI labels on the per-VMI series (`,key="value"...`).
fn vmi_series_labelled(
    name: &str,
    workload: &str,
    place: Place,
    vcpu: &str,
    info: &str,
    extra: &[(&str, &str)],
    vmi_labels: &str,
) -> Vec<(String, String)> {
    let own = place.labels();
    let labels = format!(
        "{own},name=\"{name}\",kubernetes_vmi_label_app_kubernetes_io_managed_by=\"virtwork\",kubernetes_vmi_label_app_kubernetes_io_component=\"{workload}\",kubernetes_vmi_label_virtwork_run_id=\"{RUN}\"{vmi_labels}"
    );
    let mut out = vec![(
        format!("kubevirt_vmi_info{{{own},name=\"{name}\",phase=\"running\",os=\"linux\"}}"),
        info.to_string(),
    )];
    if !vcpu.is_empty() {
        for id in ["0", "1"] {
            out.push((
                format!("kubevirt_vmi_vcpu_seconds_total{{{labels},id=\"{id}\"}}"),
                vcpu.to_string(),
            ));
        }
    }
    for (metric, values) in extra {
        let (name, more) = metric.split_once('|').unwrap_or((metric, ""));
        let sep = if more.is_empty() { "" } else { "," };
        out.push((format!("{name}{{{labels}{sep}{more}}}"), values.to_string()));
    }
    out
}

/// One alert promtool must see firing: its labels and annotations as the rule renders them.
fn expected_alert(
    name: &str,
    workload: &str,
    signal: &str,
    description: &str,
    run: bool,
) -> String {
    let run_label = if run {
        format!("              kubernetes_vmi_label_virtwork_run_id: {RUN}\n")
    } else {
        String::new()
    };
    format!(
        "          - exp_labels:\n              severity: warning\n              virtwork_workload: {workload}\n              virtwork_signal: {signal}\n              namespace: virtwork\n              name: {name}\n{run_label}            exp_annotations:\n              summary: {}\n              description: {}\n              runbook_url: {}\n",
        q(&format!(
            "virtwork VM virtwork/{name} ({workload}): signal {signal} missing for 10m"
        )),
        q(&format!(
            "The running {workload} VM virtwork/{name} (run {}) should show {description} in KubeVirt's per-VMI metrics, but it is absent, stale or below the expected level. Check with `virtwork verify --namespace virtwork`.",
            if run { RUN } else { "" }
        )),
        q(kit::RUNBOOK),
    )
}

/// Runs `promtool test rules` on the shipped rules with `series` and the alert checks.
fn promtool_test(promtool: &Path, series: &[(String, String)], checks: &str) {
    let dir = tempfile::tempdir().unwrap();
    let rules = rule_file(dir.path());
    let mut input = String::new();
    for (name, values) in series {
        input.push_str(&format!(
            "      - series: '{name}'\n        values: '{values}'\n"
        ));
    }
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    alert_rule_test:\n{checks}",
        rules.display()
    );
    let test_path = dir.path().join("test.yaml");
    std::fs::write(&test_path, &test).unwrap();
    let out = Command::new(promtool)
        .arg("test")
        .arg("rules")
        .arg(&test_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const VCPU: &str = "vCPU time per second divided by the VMI's vCPU count";

#[test]
fn promtool_proves_the_alert_fires_for_the_flat_vm_only() {
    let Some(promtool) = support::prometheus::tool("promtool") else {
        return;
    };
    // One-minute samples for 30 minutes: two loaded cpu VMs, one flat cpu VM (its counters
    // stand still), a loaded memory VM and a loaded network pair member.
    let running = "1x30";
    let mut series = Vec::new();
    series.extend(vmi_series(
        "virtwork-cpu-0",
        "cpu",
        Place::Own,
        "0+58x30",
        running,
        &[],
    ));
    series.extend(vmi_series(
        "virtwork-cpu-1",
        "cpu",
        Place::Own,
        "0+0x30",
        running,
        &[],
    ));
    series.extend(vmi_series(
        "virtwork-cpu-2",
        "cpu",
        Place::Own,
        "0+50x30",
        running,
        &[],
    ));
    series.extend(vmi_series(
        "virtwork-memory-0",
        "memory",
        Place::Own,
        "0+30x30",
        running,
        &[
            ("kubevirt_vmi_memory_available_bytes", "2000000000x30"),
            ("kubevirt_vmi_memory_usable_bytes", "400000000x30"),
        ],
    ));
    series.extend(vmi_series(
        "virtwork-network-server-0",
        "network",
        Place::Own,
        "0+10x30",
        running,
        &[
            (
                "kubevirt_vmi_network_receive_bytes_total|interface=\"default\"",
                "0+6000000000x30",
            ),
            (
                "kubevirt_vmi_network_transmit_bytes_total|interface=\"default\"",
                "0+6000000000x30",
            ),
        ],
    ));
    let checks = format!(
        "      - eval_time: 8m\n        alertname: {ALERT}\n        exp_alerts: []\n      - eval_time: 20m\n        alertname: {ALERT}\n        exp_alerts:\n{}",
        expected_alert("virtwork-cpu-1", "cpu", "vcpu-busy", VCPU, true)
    );
    promtool_test(&promtool, &series, &checks);
}

#[test]
fn promtool_proves_the_alert_fires_for_absent_stale_and_relabelled_running_vms_only() {
    let Some(promtool) = support::prometheus::tool("promtool") else {
        return;
    };
    let running = "1x40";
    let mut series = Vec::new();
    // Loaded, for contrast: never alerts.
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-0",
        "cpu",
        Place::Own,
        "0+58x40",
        running,
        &[],
    ));
    // Absent: running, but no per-VMI series ever reached Prometheus (known by its name alone,
    // as a run names its VMs: workload, run tag, index).
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-1",
        "cpu",
        Place::Own,
        "",
        running,
        &[],
    ));
    // Stale: loaded for 10 minutes, then its series stop while the VMI keeps running.
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-2",
        "cpu",
        Place::Own,
        "0+58x10 stale",
        running,
        &[],
    ));
    // Relabelled: the scrape moved its namespace to exported_namespace; flat.
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-3",
        "cpu",
        Place::Relabelled,
        "0+0x40",
        running,
        &[],
    ));
    // Relabelled and loaded: no alert.
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-4",
        "cpu",
        Place::Relabelled,
        "0+58x40",
        running,
        &[],
    ));
    // Stopped after 5 minutes (flat until then): no running VMI, no alert.
    series.extend(vmi_series(
        "virtwork-cpu-0b6c4a-5",
        "cpu",
        Place::Own,
        "0+0x5 stale",
        "1x5 stale",
        &[],
    ));
    // Following a load profile, in a long low phase: below the steady threshold by design,
    // no alert while its series are current...
    let profiled = ",kubernetes_vmi_label_virtwork_load_profile=\"step\"";
    series.extend(vmi_series_labelled(
        "virtwork-cpu-0b6c4a-6",
        "cpu",
        Place::Own,
        "0+6x40",
        running,
        &[],
        profiled,
    ));
    // ...but when they stop, it alerts like any VM.
    series.extend(vmi_series_labelled(
        "virtwork-cpu-0b6c4a-7",
        "cpu",
        Place::Own,
        "0+6x10 stale",
        running,
        &[],
        profiled,
    ));
    // chaos-process only checks the VMI reports: stale series make it fire too.
    series.extend(vmi_series(
        "virtwork-chaos-process-0b6c4a-0",
        "chaos-process",
        Place::Own,
        "0+5x10 stale",
        running,
        &[],
    ));
    let mut fired = String::new();
    for (name, run) in [
        ("virtwork-cpu-0b6c4a-1", false),
        ("virtwork-cpu-0b6c4a-2", true),
        ("virtwork-cpu-0b6c4a-3", true),
        ("virtwork-cpu-0b6c4a-7", true),
    ] {
        fired.push_str(&expected_alert(name, "cpu", "vcpu-busy", VCPU, run));
    }
    fired.push_str(&expected_alert(
        "virtwork-chaos-process-0b6c4a-0",
        "chaos-process",
        "vcpu-reporting",
        "the VMI's vCPU counters reach Prometheus (signals and killed guest processes are not visible from the host)",
        true,
    ));
    let checks =
        format!("      - eval_time: 30m\n        alertname: {ALERT}\n        exp_alerts:\n{fired}");
    promtool_test(&promtool, &series, &checks);
}

/// A YAML double-quoted scalar (JSON string syntax).
fn q(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if (k == "expr" || k == "definition")
                    && let Some(s) = v.as_str()
                {
                    out.push(s.to_string());
                }
                exprs(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn dashboard_parses_and_uses_only_contract_metrics() {
    let text =
        std::fs::read_to_string(repo().join("deploy/monitoring/grafana-dashboard.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut found = Vec::new();
    exprs(&doc, &mut found);
    assert!(!found.is_empty());
    for expr in &found {
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("kubevirt_") {
                assert!(
                    METRICS.contains(&word),
                    "dashboard uses {word}, which the contract does not"
                );
            }
        }
    }
    // One panel per built-in signal, and the run id is a dashboard variable.
    let panels: Vec<&Value> = doc["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "timeseries")
        .collect();
    let expected: usize = virtwork::signals::contract::WORKLOADS
        .iter()
        .map(|w| builtin_signals(w).len())
        .sum();
    assert_eq!(panels.len(), expected);
    let vars: Vec<&str> = doc["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(vars.contains(&"run_id"));
    assert!(panels.iter().all(|p| {
        p["targets"][0]["expr"]
            .as_str()
            .unwrap()
            .contains("kubernetes_vmi_label_virtwork_run_id=~\"$run_id\"")
    }));
}
