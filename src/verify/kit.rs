//! The monitoring kit shipped in deploy/monitoring/, generated from the contract so the
//! alert and the dashboard use exactly verify's expressions: a PrometheusRule whose alert
//! fires when a running virtwork VM's expected signal has been low, absent or stale for 10
//! minutes (starting from KubeVirt's `kubevirt_vmi_info`, which exists for every VMI, not
//! from the signal's own series), and a Grafana dashboard with each workload's signals by
//! run id.
//!
//! Pure text generation; tests/monitoring.rs checks the shipped files equal this output
//! (regenerate with `VIRTWORK_UPDATE_DOCS=1 cargo test --test integration monitoring::`).

use serde_json::{Value, json};

use crate::labels;
use crate::model::Window;
use crate::signals::contract::{
    SignalDef, WORKLOADS, alert_expression, builtin_signals, expression, vmi_label,
};
use crate::signals::promql::Matchers;

/// Name of the alert (one rule per workload and signal, told apart by labels).
pub const ALERT: &str = "VirtworkExpectedSignalMissing";
/// How long a signal must be missing before the alert fires.
pub const ALERT_FOR: &str = "10m";
/// Window of the alert's and the dashboard's rate queries (verify's default).
pub const KIT_WINDOW: Window = Window::DEFAULT;
/// The runbook (the `runbook_url` annotation; point it at your copy of the docs).
pub const RUNBOOK: &str = "docs/deployment.md#runbook-virtworkexpectedsignalmissing";

/// Every (workload, signal) the alert covers: those expected with default params in
/// [`KIT_WINDOW`].
pub fn alert_rules() -> Vec<(&'static str, &'static SignalDef, String)> {
    let mut out = Vec::new();
    for workload in WORKLOADS {
        for def in builtin_signals(workload) {
            if let Some(expr) = alert_expression(workload, def, KIT_WINDOW) {
                out.push((workload, def, expr));
            }
        }
    }
    out
}

/// The PrometheusRule (deploy/monitoring/prometheusrule.yaml).
pub fn prometheus_rule_yaml() -> String {
    let rules: Vec<Value> = alert_rules()
        .into_iter()
        .map(|(workload, def, expr)| {
            json!({
                "alert": ALERT,
                "expr": expr,
                "for": ALERT_FOR,
                "labels": {
                    "severity": "warning",
                    "virtwork_workload": workload,
                    "virtwork_signal": def.name,
                },
                "annotations": {
                    "summary": format!(
                        "virtwork VM {{{{ $labels.namespace }}}}/{{{{ $labels.name }}}} ({workload}): signal {} missing for {ALERT_FOR}",
                        def.name
                    ),
                    "description": format!(
                        "The running {workload} VM {{{{ $labels.namespace }}}}/{{{{ $labels.name }}}} (run {{{{ $labels.{} }}}}) should show {} in KubeVirt's per-VMI metrics, but it is absent, stale or below the expected level. Check with `virtwork verify --namespace {{{{ $labels.namespace }}}}`.",
                        vmi_label(labels::RUN_ID),
                        def.description
                    ),
                    "runbook_url": RUNBOOK,
                },
            })
        })
        .collect();
    let doc = json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "virtwork-expected-signals",
            "labels": {
                "app.kubernetes.io/name": "virtwork",
                "app.kubernetes.io/part-of": "virtwork",
            },
        },
        "spec": {
            "groups": [{
                "name": "virtwork-expected-signals",
                "rules": rules,
            }],
        },
    });
    let yaml = serde_yaml::to_string(&doc).expect("a JSON value serializes as YAML");
    format!(
        "# Generated from src/signals/contract.rs: the same expressions `virtwork verify` queries.\n\
         # Regenerate with `VIRTWORK_UPDATE_DOCS=1 cargo test --test integration monitoring::`; do not edit.\n{yaml}"
    )
}

/// The Grafana dashboard (deploy/monitoring/grafana-dashboard.json).
pub fn grafana_dashboard_json() -> String {
    let mut panels = Vec::new();
    let mut y = 0;
    for (index, workload) in WORKLOADS.iter().enumerate() {
        let defs = builtin_signals(workload);
        panels.push(json!({
            "type": "row",
            "title": format!("{workload}"),
            "collapsed": false,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "id": 100 + index,
            "panels": [],
        }));
        y += 1;
        for (i, def) in defs.iter().enumerate() {
            let m = Matchers::default()
                .with(&vmi_label(labels::MANAGED_BY), labels::MANAGED_BY_VALUE)
                .with(&vmi_label(labels::COMPONENT), workload)
                .with_op("namespace", "=~", "$namespace")
                .with_op(&vmi_label(labels::RUN_ID), "=~", "$run_id");
            let expr = expression(def, &m, KIT_WINDOW, "/mnt/data");
            let width = 24 / defs.len().max(1) as i64;
            panels.push(json!({
                "type": "timeseries",
                "title": format!("{workload}: {}", def.name),
                "description": def.description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": width, "x": width * i as i64, "y": y},
                "id": 1000 + index * 10 + i,
                "targets": [{
                    "refId": "A",
                    "expr": expr,
                    "legendFormat": "{{namespace}}/{{name}}",
                }],
                "fieldConfig": {"defaults": {"unit": grafana_unit(def)}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
            }));
        }
        y += 8;
    }
    let selector = format!(
        "kubevirt_vmi_vcpu_seconds_total{{{}=\"{}\"}}",
        vmi_label(labels::MANAGED_BY),
        labels::MANAGED_BY_VALUE
    );
    let variable = |name: &str, label: &str, query: String| {
        json!({
            "name": name,
            "label": label,
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": name},
            "definition": query,
            "includeAll": true,
            "multi": true,
            "allValue": ".*",
            "refresh": 2,
            "current": {"text": "All", "value": "$__all"},
        })
    };
    let doc = json!({
        "title": "virtwork: expected signals",
        "uid": "virtwork-expected-signals",
        "description": "Each virtwork workload's expected signal (the queries of `virtwork verify`), by run id. Generated from src/signals/contract.rs.",
        "tags": ["virtwork", "kubevirt"],
        "schemaVersion": 39,
        "version": 1,
        "editable": true,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
            variable("namespace", "Namespace", format!("label_values({selector}, namespace)")),
            variable("run_id", "Run id", format!("label_values({selector}, {})", vmi_label(labels::RUN_ID))),
        ]},
        "panels": panels,
    });
    serde_json::to_string_pretty(&doc).expect("JSON serializes") + "\n"
}

fn grafana_unit(def: &SignalDef) -> &'static str {
    use crate::signals::contract::Unit;
    match def.unit {
        Unit::Ratio => "percentunit",
        Unit::BytesPerSecond => "Bps",
        Unit::OpsPerSecond => "iops",
        Unit::PacketsPerSecond => "pps",
        Unit::VcpuFraction | Unit::Series | Unit::Custom => "short",
    }
}

/// The docs/workloads.md section listing each workload's signals and queries.
pub fn signals_markdown() -> String {
    use crate::signals::contract::{VmFacts, checks};
    let mut out = String::new();
    out.push_str("Queries as `virtwork verify` sends them for a VM `virtwork/virtwork-<workload>-0` with default params, 2Gi of memory and `--window 10m`. ");
    out.push_str("Thresholds are lower bounds; `verify` derives them per VM from the params its run recorded (in the audit database, else the VM's `virtwork/signal-params` annotation), its memory and the window.\n\n");
    for workload in WORKLOADS {
        out.push_str(&format!("#### `{workload}`\n\n"));
        out.push_str("| Signal | Shows | Threshold (defaults) | KubeVirt metrics since |\n|---|---|---|---|\n");
        let facts = VmFacts {
            namespace: "virtwork".into(),
            name: format!("virtwork-{workload}-0"),
            workload: workload.to_string(),
            memory_bytes: Some(2 << 30),
            ..VmFacts::default()
        };
        let window = Window::from_secs(600).expect("600 > 0");
        let list = checks(&facts, window);
        for (def, check) in builtin_signals(workload).iter().zip(&list) {
            let threshold = match check.threshold {
                Some(t) => format!(">= {}", check.unit.format(t)),
                None => format!("not expected: {}", check.note.as_deref().unwrap_or("")),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                def.name, def.description, threshold, def.kubevirt_since
            ));
        }
        out.push('\n');
        for check in &list {
            out.push_str(&format!(
                "`{}`:\n\n```promql\n{}\n```\n\n",
                check.signal, check.query
            ));
        }
    }
    out.trim_end().to_string() + "\n"
}
