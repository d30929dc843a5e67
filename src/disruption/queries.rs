//! The PromQL `disruption` sends besides verify's signal queries, and the reading of their
//! range answers: per namespace and batch of VM names, the summed vCPU counter (restarts
//! reset it), the node of `kubevirt_vmi_info`, and KubeVirt's migration start and end times;
//! per namespace, the scrape interval. Also the batches of the signal queries (names that
//! fit verify's name selector), the parsing of every range answer straight into samples (no
//! string per sample), and the threshold a profiled signal is held to at every sample (the
//! floor of the profile's lowest level: no moment of a healthy profile is below it).
//!
//! Pure. Must not: send anything.

use std::collections::BTreeMap;

use crate::signals::contract::{Check, LevelMapping};
use crate::signals::promql::Matchers;
use crate::verify::evaluate::RangeAnswer;

use super::evidence::MetricFacts;

/// Most VM names one query selects (the regex stays short and each answer small).
pub const NAMES_PER_QUERY: usize = 250;
/// Most samples per series a range query asks for.
pub const MAX_POINTS: u64 = 480;

/// Splits `items` (each with its VM name) into batches of at most [`NAMES_PER_QUERY`] whose
/// joined name selector stays within `max_chars`: a signal query whose names do not fit
/// reads the whole namespace instead, so every batch of a large fleet would evaluate and
/// return every VM of the namespace.
pub fn name_batches<T: Copy>(
    items: &[T],
    name: impl Fn(&T) -> &str,
    max_chars: usize,
) -> Vec<Vec<T>> {
    let mut batches: Vec<Vec<T>> = Vec::new();
    let mut chars = 0;
    for item in items {
        // The escaped name and its `|`.
        let len = name(item).len() + name(item).matches('.').count() + 1;
        match batches.last_mut() {
            Some(batch) if batch.len() < NAMES_PER_QUERY && chars + len <= max_chars + 1 => {
                batch.push(*item);
                chars += len;
            }
            _ => {
                batches.push(vec![*item]);
                chars = len;
            }
        }
    }
    batches
}

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
struct Doc<S> {
    status: String,
    #[serde(default = "Option::default")]
    data: Option<Data<S>>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(serde::Deserialize)]
struct Data<S> {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<S>,
}

/// A series with the labels `disruption` reads (the rest are skipped while parsing).
#[derive(serde::Deserialize)]
struct Series {
    #[serde(default)]
    metric: Kept,
    #[serde(default)]
    values: Samples,
}

#[derive(Default, serde::Deserialize)]
struct Kept {
    name: Option<String>,
    node: Option<String>,
    migration_name: Option<String>,
    status: Option<String>,
}

/// A series of a signal query: its VM's name and samples.
#[derive(serde::Deserialize)]
struct Named {
    #[serde(default)]
    metric: NameOnly,
    #[serde(default)]
    values: Samples,
}

#[derive(Default, serde::Deserialize)]
struct NameOnly {
    name: Option<String>,
}

/// A series' `values`, `[[time, "value"], …]`, read straight into (time, value) pairs with
/// non-finite values dropped: no string per sample (a fleet's answers hold hundreds of
/// thousands of samples; one `String` each was most of the command's peak memory).
#[derive(Default)]
struct Samples(Vec<(f64, f64)>);

/// One sample's value, parsed from its string without keeping it.
struct Number(Option<f64>);

impl<'de> serde::Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sample value as a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Number, E> {
                Ok(Number(v.parse::<f64>().ok().filter(|v| v.is_finite())))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

impl<'de> serde::Deserialize<'de> for Samples {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> serde::de::Visitor<'de> for Pairs {
            type Value = Samples;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of [time, \"value\"] pairs")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Samples, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some((t, Number(v))) = seq.next_element::<(f64, Number)>()? {
                    out.extend(v.map(|v| (t, v)));
                }
                out.shrink_to_fit();
                Ok(Samples(out))
            }
        }
        deserializer.deserialize_seq(Pairs)
    }
}

/// The series of a range answer, or Prometheus' rejection (`Err(Ok(why))`), or why the body
/// is not a range answer (`Err(Err(why))`).
fn range_series<S: serde::de::DeserializeOwned>(
    body: &str,
) -> Result<Vec<S>, Result<(String, String), String>> {
    let doc: Doc<S> = serde_json::from_str(body)
        .map_err(|e| Err(format!("the answer is not a Prometheus range answer: {e}")))?;
    if doc.status != "success" {
        let error = doc.error.unwrap_or(doc.status);
        return Err(Ok((doc.error_type.unwrap_or_default(), error)));
    }
    let data = doc.data.ok_or(Err("the answer has no data".to_string()))?;
    if data.result_type != "matrix" {
        return Err(Err(format!(
            "unexpected result type {:?} (expected matrix)",
            data.result_type
        )));
    }
    Ok(data.result)
}

/// Parses a `/api/v1/query_range` body keeping [`Kept`]'s labels.
pub fn parse_labelled(body: &str) -> Result<Labelled, String> {
    let result = match range_series::<Series>(body) {
        Ok(result) => result,
        Err(Ok((_, error))) => return Ok(Labelled::Rejected(error)),
        Err(Err(why)) => return Err(why),
    };
    Ok(Labelled::Series(
        result
            .into_iter()
            .map(|s| {
                let Kept {
                    name,
                    node,
                    migration_name,
                    status,
                } = s.metric;
                let labels = [
                    ("name", name),
                    ("node", node),
                    ("migration_name", migration_name),
                    ("status", status),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), v?)))
                .collect();
                (labels, s.values.0)
            })
            .collect(),
    ))
}

/// Parses the `/api/v1/query_range` body of a signal query into each VM's samples by its
/// `name` label, in time order, as verify's range parser does, without a string per sample.
pub fn parse_by_name(body: &str) -> Result<RangeAnswer, String> {
    let result = match range_series::<Named>(body) {
        Ok(result) => result,
        Err(Ok((error_type, error))) => return Ok(RangeAnswer::Rejected { error_type, error }),
        Err(Err(why)) => return Err(why),
    };
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for series in result {
        let Some(name) = series.metric.name else {
            continue;
        };
        let samples = out.entry(name).or_default();
        if samples.is_empty() {
            *samples = series.values.0;
        } else {
            samples.extend(series.values.0);
            samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    Ok(RangeAnswer::Series(out))
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

    #[test]
    fn signal_batches_keep_their_name_selector() {
        let names: Vec<String> = (0..1000)
            .map(|i| format!("virtwork-cpu-a1b2c3-{i}"))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let max = crate::signals::contract::NAME_SELECTOR_MAX_CHARS;
        let batches = name_batches(&refs, |n| n, max);
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 1000);
        for batch in &batches {
            let group = crate::signals::contract::SignalGroup {
                namespace: "ns".into(),
                signal: "vcpu-busy",
                mount: String::new(),
            };
            let query = crate::signals::contract::profile_range_query(
                &group,
                batch,
                crate::model::Window::DEFAULT,
                Some(15_000),
            );
            assert!(query.contains("name=~"), "{} names", batch.len());
        }
        assert_eq!(
            batches.len(),
            6,
            "{:?}",
            batches.iter().map(Vec::len).collect::<Vec<_>>()
        );
        let dotted = name_batches(&["a.b", "c"], |n| n, 5);
        assert_eq!(dotted, vec![vec!["a.b"], vec!["c"]]);
        assert_eq!(
            name_batches(&["ab", "cd"], |n| n, 5),
            vec![vec!["ab", "cd"]]
        );
    }

    #[test]
    fn signal_answers_read_as_verify_reads_them() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"name":"vm-1","namespace":"ns"},"values":[[10,"0.5"],[20,"NaN"],[30,"+Inf"],[40,"1e-1"]]},
            {"metric":{"namespace":"ns"},"values":[[10,"1"]]},
            {"metric":{"name":"vm-0"},"values":[[10,"0.25"],[20,"\u0031"]]}]}}"#;
        let ours = parse_by_name(body).unwrap();
        assert_eq!(
            ours,
            crate::verify::evaluate::parse_range_response(body).unwrap()
        );
        let RangeAnswer::Series(series) = ours else {
            panic!("{ours:?}")
        };
        assert_eq!(series["vm-1"], vec![(10.0, 0.5), (40.0, 0.1)]);
        assert_eq!(series["vm-0"], vec![(10.0, 0.25), (20.0, 1.0)]);
        let rejected = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            parse_by_name(rejected).unwrap(),
            crate::verify::evaluate::parse_range_response(rejected).unwrap()
        );
        assert!(
            parse_by_name(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
                .is_err()
        );
        assert!(parse_by_name("<html>").is_err());
    }
}
