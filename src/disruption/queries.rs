//! The PromQL `disruption` sends besides verify's signal queries, and the reading of their
//! range answers: per namespace and batch of VM names, the summed vCPU counter (restarts
//! reset it), the node of `kubevirt_vmi_info`, and KubeVirt's migration start and end times;
//! per namespace, the scrape interval. Also the threshold a profiled signal is held to at
//! every sample (the floor of the profile's lowest level: no moment of a healthy profile
//! is below it).
//!
//! Pure. Must not: send anything.

use std::collections::BTreeMap;

use crate::signals::contract::{Check, LevelMapping};
use crate::signals::promql::Matchers;

use super::evidence::MetricFacts;

/// Most VM names one query selects (the regex stays short and each answer small).
pub const NAMES_PER_QUERY: usize = 250;
/// Most samples per series a range query asks for.
pub const MAX_POINTS: u64 = 480;

fn selector(namespace: &str, names: &[&str]) -> String {
    let alternatives = names
        .iter()
        .map(|n| n.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    Matchers::default()
        .with("namespace", namespace)
        .with_op("name", "=~", &alternatives)
        .render()
}

/// Windows over which the scrape interval is counted: a series younger than a window
/// inflates that window's estimate, so the smallest estimate of those with two samples wins.
pub const INTERVAL_WINDOWS: [u64; 3] = [10, 60, 300];

/// The most samples one series of the namespace's vCPU counter holds over `seconds`.
pub fn interval_query(namespace: &str, seconds: u64) -> String {
    let m = Matchers::default().with("namespace", namespace).render();
    format!("max(count_over_time(kubevirt_vmi_vcpu_seconds_total{{{m}}}[{seconds}s]))")
}

/// The scrape interval an [`interval_query`] over `seconds` answers.
pub fn interval_from_count(seconds: u64, count: Option<f64>) -> Option<f64> {
    count
        .filter(|c| *c >= 2.0)
        .map(|c| seconds as f64 / (c - 1.0))
}

/// The four evidence queries of a batch: vCPU sum, node, migration starts, migration ends.
pub fn evidence_queries(namespace: &str, names: &[&str]) -> [String; 4] {
    let s = selector(namespace, names);
    [
        format!("sum by (name, node) (kubevirt_vmi_vcpu_seconds_total{{{s}}})"),
        format!("max by (name, node) (kubevirt_vmi_info{{{s}}})"),
        format!("max by (name, migration_name) (kubevirt_vmi_migration_start_time_seconds{{{s}}})"),
        format!(
            "max by (name, migration_name, status) (kubevirt_vmi_migration_end_time_seconds{{{s}}})"
        ),
    ]
}

/// One series of a range answer: its kept labels and samples.
pub type LabelledSeries = (BTreeMap<String, String>, Vec<(f64, f64)>);

/// A range answer with the labels `disruption` reads, or Prometheus' rejection.
#[derive(Debug, Clone, PartialEq)]
pub enum Labelled {
    Series(Vec<LabelledSeries>),
    Rejected(String),
}

#[derive(serde::Deserialize)]
struct Doc {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(serde::Deserialize)]
struct Data {
    result: Vec<Series>,
}

#[derive(serde::Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

const KEPT_LABELS: [&str; 4] = ["name", "node", "migration_name", "status"];

/// Parses a `/api/v1/query_range` body keeping [`KEPT_LABELS`].
pub fn parse_labelled(body: &str) -> Result<Labelled, String> {
    let doc: Doc = serde_json::from_str(body)
        .map_err(|e| format!("the answer is not a Prometheus range answer: {e}"))?;
    if doc.status != "success" {
        return Ok(Labelled::Rejected(doc.error.unwrap_or(doc.status)));
    }
    let data = doc.data.ok_or("the answer has no data")?;
    Ok(Labelled::Series(
        data.result
            .into_iter()
            .map(|s| {
                let labels = s
                    .metric
                    .into_iter()
                    .filter(|(k, _)| KEPT_LABELS.contains(&k.as_str()))
                    .collect();
                let values = s
                    .values
                    .iter()
                    .filter_map(|(t, v)| {
                        Some((*t, v.parse::<f64>().ok().filter(|v| v.is_finite())?))
                    })
                    .collect();
                (labels, values)
            })
            .collect(),
    ))
}

/// Files the answers of a batch's vCPU, node, start and end queries into each VM's facts.
pub fn file_evidence(
    facts: &mut BTreeMap<String, MetricFacts>,
    vcpu: Labelled,
    nodes: Labelled,
    starts: Labelled,
    ends: Labelled,
) {
    let series = |answer: Labelled| match answer {
        Labelled::Series(s) => s,
        Labelled::Rejected(_) => Vec::new(),
    };
    let label = |l: &BTreeMap<String, String>, k: &str| l.get(k).cloned().unwrap_or_default();
    for (labels, values) in series(vcpu) {
        let f = facts.entry(label(&labels, "name")).or_default();
        f.vcpu.push((label(&labels, "node"), values));
    }
    for (labels, values) in series(nodes) {
        let f = facts.entry(label(&labels, "name")).or_default();
        let times = values.iter().map(|(t, _)| *t).collect();
        f.nodes.push((label(&labels, "node"), times));
    }
    for (labels, values) in series(starts) {
        let f = facts.entry(label(&labels, "name")).or_default();
        for (_, v) in values {
            let key = (label(&labels, "migration_name"), v);
            if !f.starts.contains(&key) {
                f.starts.push(key);
            }
        }
    }
    for (labels, values) in series(ends) {
        let f = facts.entry(label(&labels, "name")).or_default();
        for (_, v) in values {
            let key = (
                label(&labels, "migration_name"),
                v,
                label(&labels, "status"),
            );
            if !f.ends.contains(&key) {
                f.ends.push(key);
            }
        }
    }
}

/// What every sample of `check` must show: its threshold; for a profiled signal with a
/// fixed level mapping the floor of the profile's lowest level (its payload's pauses
/// discounted over `rate_window` seconds), else presence alone.
pub fn sample_threshold(check: &Check, rate_window: f64) -> Option<f64> {
    let Some(p) = &check.profile else {
        return check.threshold;
    };
    match p.mapping {
        LevelMapping::Absolute { .. } => {
            let active = 1.0 - p.quiet_gap_secs / rate_window.max(1.0);
            p.floor(p.profile.levels().low, 0.0, active)
        }
        LevelMapping::Relative => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_keep_node_and_migration_labels_and_each_migration_once() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"name":"vm-0","node":"n0","pod":"x"},"values":[[10,"1"],[20,"1"]]},
            {"metric":{"name":"vm-0","node":"n1"},"values":[[30,"1"]]}]}}"#;
        let starts = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"name":"vm-0","migration_name":"m1"},"values":[[25,"24"],[30,"24"]]}]}}"#;
        let mut facts = BTreeMap::new();
        file_evidence(
            &mut facts,
            Labelled::Rejected("no".into()),
            parse_labelled(body).unwrap(),
            parse_labelled(starts).unwrap(),
            Labelled::Rejected("no".into()),
        );
        let f = &facts["vm-0"];
        assert_eq!(
            f.nodes,
            vec![("n0".into(), vec![10.0, 20.0]), ("n1".into(), vec![30.0])]
        );
        assert_eq!(f.starts, vec![("m1".to_string(), 24.0)]);
        assert!(evidence_queries("ns", &["a.b", "c"])[0].contains(r#"name=~"a\\.b|c""#));
        assert_eq!(interval_from_count(300, Some(11.0)), Some(30.0));
        assert_eq!(interval_from_count(10, Some(1.0)), None);
    }
}
