//! Reading Prometheus' answers and judging them: the `/api/v1/query` JSON, the outcome of
//! one check, and what a service-proxy probe's answer says about the endpoint behind it.
//!
//! Pure functions over status codes and bodies; the HTTP shell is prometheus.rs.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::model::Window;
use crate::signals::contract::Check;

/// Label naming each part of a grouped query's answer.
pub const FACT_LABEL: &str = "virtwork_fact";

/// What an instant query returned.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryAnswer {
    /// The largest sample of the result vector (or the scalar); None when the vector is
    /// empty or every sample is NaN/±Inf (no data).
    Value(Option<f64>),
    /// A facts query's answer: each sample named by its [`FACT_LABEL`].
    Facts(BTreeMap<String, f64>),
    /// Prometheus rejected the query (`status: error`): the query itself is wrong.
    Rejected { error_type: String, error: String },
}

/// Parses a `/api/v1/query` response body (any HTTP status: Prometheus sends its error
/// document with 400/422/503). Err: not a Prometheus API answer at all.
pub fn parse_query_response(body: &str) -> Result<QueryAnswer, String> {
    match parse_vector_answer(body) {
        Some(answer) => Ok(answer),
        None => parse_any_answer(body),
    }
}

/// The common answer, a successful instant vector, read into small structs that keep only
/// each sample's [`FACT_LABEL`] and value (a grouped query's answer holds thousands of
/// samples, whose full JSON tree would be several times the body). None for any other
/// answer, which [`parse_any_answer`] reads alike.
fn parse_vector_answer(body: &str) -> Option<QueryAnswer> {
    #[derive(serde::Deserialize)]
    struct Document {
        status: Option<Value>,
        data: Option<Data>,
    }
    #[derive(serde::Deserialize)]
    struct Data {
        #[serde(rename = "resultType")]
        result_type: Option<Value>,
        result: Option<Vec<Sample>>,
    }
    #[derive(serde::Deserialize)]
    struct Sample {
        metric: Option<Labels>,
        value: Option<Vec<Value>>,
    }
    #[derive(serde::Deserialize)]
    struct Labels {
        virtwork_fact: Option<Value>,
    }
    let doc: Document = serde_json::from_str(body).ok()?;
    if doc.status?.as_str()? != "success" {
        return None;
    }
    let data = doc.data?;
    if data.result_type?.as_str()? != "vector" {
        return None;
    }
    let result = data.result?;
    let value_of =
        |s: &Sample| -> Option<f64> { s.value.as_ref()?.get(1)?.as_str()?.parse::<f64>().ok() };
    let fact_of = |s: &Sample| -> Option<(String, f64)> {
        let name = s.metric.as_ref()?.virtwork_fact.as_ref()?.as_str()?;
        Some((name.to_string(), value_of(s)?))
    };
    if !result.is_empty()
        && let Some(facts) = result.iter().map(fact_of).collect::<Option<_>>()
    {
        return Some(QueryAnswer::Facts(facts));
    }
    let largest = result
        .iter()
        .filter_map(value_of)
        .filter(|v| v.is_finite())
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        });
    Some(QueryAnswer::Value(largest))
}

/// Any `/api/v1/query` answer, read as a JSON tree.
fn parse_any_answer(body: &str) -> Result<QueryAnswer, String> {
    let doc: Value = serde_json::from_str(body).map_err(|_| {
        format!(
            "the answer is not Prometheus API JSON: {}",
            body.chars()
                .take(160)
                .collect::<String>()
                .replace('\n', " ")
        )
    })?;
    match doc.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            return Ok(QueryAnswer::Rejected {
                error_type: doc["errorType"].as_str().unwrap_or("").to_string(),
                error: doc["error"].as_str().unwrap_or("").to_string(),
            });
        }
        _ => return Err("the answer has no Prometheus \"status\" field".into()),
    }
    let data = &doc["data"];
    let sample = |pair: &Value| -> Option<f64> {
        pair.get(1)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    if let Some(facts) = facts_of(data) {
        return Ok(QueryAnswer::Facts(facts));
    }
    let value = match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .as_array()
            .ok_or("vector result is not a list")?
            .iter()
            .filter_map(|r| sample(&r["value"]))
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            }),
        Some("scalar") => sample(&data["result"]),
        Some(other) => {
            return Err(format!(
                "unexpected result type {other:?} (expected vector)"
            ));
        }
        None => return Err("the answer has no resultType".into()),
    };
    Ok(QueryAnswer::Value(value))
}

/// The samples of a vector whose every element carries [`FACT_LABEL`], by that label.
fn facts_of(data: &Value) -> Option<BTreeMap<String, f64>> {
    let result = data["result"].as_array().filter(|r| !r.is_empty())?;
    result
        .iter()
        .map(|r| {
            let name = r["metric"][FACT_LABEL].as_str()?;
            let value = r["value"].get(1)?.as_str()?.parse::<f64>().ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}

/// What a range query returned: each VM's samples (time, value; NaN and ±Inf dropped) by
/// its `name` label, or Prometheus' rejection.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeAnswer {
    Series(BTreeMap<String, Vec<(f64, f64)>>),
    Rejected { error_type: String, error: String },
}

#[derive(serde::Deserialize)]
struct RangeDocument {
    status: String,
    #[serde(default)]
    data: Option<RangeData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(serde::Deserialize)]
struct RangeData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<RangeSeries>,
}

#[derive(serde::Deserialize)]
struct RangeSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Parses a `/api/v1/query_range` response body (typed: a range answer holds many samples,
/// so no JSON tree is built). Err: not a Prometheus matrix answer.
pub fn parse_range_response(body: &str) -> Result<RangeAnswer, String> {
    let doc: RangeDocument = serde_json::from_str(body)
        .map_err(|e| format!("the answer is not a Prometheus range answer: {e}"))?;
    match doc.status.as_str() {
        "success" => {}
        "error" => {
            return Ok(RangeAnswer::Rejected {
                error_type: doc.error_type.unwrap_or_default(),
                error: doc.error.unwrap_or_default(),
            });
        }
        other => return Err(format!("unexpected status {other:?}")),
    }
    let data = doc.data.ok_or("the answer has no data")?;
    if data.result_type != "matrix" {
        return Err(format!(
            "unexpected result type {:?} (expected matrix)",
            data.result_type
        ));
    }
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for series in data.result {
        let Some(name) = series.metric.get("name") else {
            continue;
        };
        let samples = out.entry(name.clone()).or_default();
        samples.extend(series.values.iter().filter_map(|(t, v)| {
            let v = v.parse::<f64>().ok().filter(|v| v.is_finite())?;
            Some((*t, v))
        }));
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(RangeAnswer::Series(out))
}

/// What Prometheus knows about a signal's series, besides its value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeriesFacts {
    /// Seconds since the freshest sample; None when no sample is current (the series
    /// vanished from its target's scrape or the target is down: Prometheus marks it stale).
    pub age: Option<f64>,
    /// Samples in the fact window ([`fact_window`]).
    pub samples: Option<f64>,
    /// Seconds since the oldest sample seen in the fact window (more than the window when
    /// the series is older than it).
    pub span: Option<f64>,
    /// Series of this VM stored under `exported_namespace` (a scrape that overwrote
    /// `namespace`).
    pub relabelled: Option<f64>,
}

/// The range over which [`SeriesFacts`] are gathered: the window, but at least 5 minutes,
/// so the scrape interval is measured even for a window too short to hold two samples.
pub fn fact_window(window: Window) -> Window {
    Window::from_secs(window.as_secs().max(300)).expect("at least 300 s")
}

/// The query that gathers the [`SeriesFacts`] of every VM of a signal group at once (by VM
/// `name`, each sample named `part|name`): one query per namespace and signal, not per VM.
///
/// The oldest sample's age (`span`) takes a second query, [`group_oldest_query`]: this one
/// finds, per VM, the first step of the fact window's subquery at which its series
/// existed (`first`, from `time()`, cheap) and when it was evaluated (`now|`). Asking for
/// `timestamp()` at every step instead is what Prometheus answers slowly (seconds per
/// thousand series at a 1 s evaluation interval, growing with the series' samples).
pub fn group_facts_query(series: &str, relabelled: &str, window: Window) -> String {
    let f = fact_window(window);
    let part = |expr: String, name: &str| {
        format!(
            "label_join(label_replace({expr}, \"virtwork_part\", \"{name}\", \"\", \"\"), \"{FACT_LABEL}\", \"|\", \"virtwork_part\", \"name\")"
        )
    };
    [
        part(
            format!("time() - max by (name) (timestamp({series}))"),
            "age",
        ),
        part(
            format!("max by (name) (count_over_time({series}[{f}]))"),
            "samples",
        ),
        part(
            format!("min_over_time((time() + 0 * count by (name) ({series}))[{f}:])"),
            FIRST_PART,
        ),
        part(format!("count by (name) ({relabelled})"), "relabelled"),
        part("vector(time())".to_string(), NOW_PART),
    ]
    .join(" or ")
}

/// The facts part naming, per VM, the first subquery step at which its series existed.
const FIRST_PART: &str = "first";
/// The facts part carrying the time the facts query was evaluated at (no VM name).
const NOW_PART: &str = "now";

/// From a [`group_facts_query`]'s answer: when it was evaluated, and each VM's first step
/// (both in seconds since the epoch). None when it names no evaluation time.
pub fn first_steps(answer: &QueryAnswer) -> Option<(f64, BTreeMap<String, f64>)> {
    let QueryAnswer::Facts(facts) = answer else {
        return None;
    };
    let now = facts
        .get(&format!("{NOW_PART}|"))
        .copied()
        .filter(|v| v.is_finite())?;
    let firsts = facts
        .iter()
        .filter(|(_, v)| v.is_finite())
        .filter_map(|(key, v)| {
            let name = key.strip_prefix(FIRST_PART)?.strip_prefix('|')?;
            Some((name.to_string(), *v))
        })
        .collect();
    Some((now, firsts))
}

/// The query for the timestamp of each VM's oldest sample in the fact window, exactly as
/// `min_over_time(timestamp(series)[fact window:])` would find it, but asking for
/// `timestamp()` only at the steps where some VM's series first existed (`firsts`, from
/// [`first_steps`]): a timestamp only grows from one step to the next, so each VM's
/// minimum is the one at its first step. The earliest of those steps (every VM older than
/// the window shares it) is read alone; the later ones from one subquery spanning just
/// them. None when no VM has a first step.
pub fn group_oldest_query(series: &str, firsts: &BTreeMap<String, f64>) -> Option<String> {
    let mut steps: Vec<i64> = firsts
        .values()
        .map(|t| (t * 1000.0).round() as i64)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let at = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let (&earliest, later) = steps.split_first()?;
    let mut expression = format!("min by (name) (timestamp({series} @ {}))", at(earliest));
    if let (Some(&from), Some(&to)) = (later.first(), later.last()) {
        // The subquery's steps are the evaluation interval's multiples in [to - range, to]:
        // `from` and `to` are such multiples, the earliest step is not in it.
        expression = format!(
            "{expression} or min by (name) (min_over_time(timestamp({series})[{}ms:] @ {}))",
            to - from,
            at(to)
        );
    }
    Some(group_value_query(&expression))
}

/// [`group_oldest_query`] for a server that refuses the `@` modifier: the slow subquery.
pub fn group_oldest_fallback_query(series: &str, window: Window) -> String {
    let f = fact_window(window);
    group_value_query(&format!(
        "min by (name) (min_over_time(timestamp({series})[{f}:]))"
    ))
}

/// Sets each VM's `span` from its oldest sample's timestamp (an oldest-query's answer,
/// by name) and the time the facts were gathered at.
pub fn set_spans(
    facts: &mut BTreeMap<String, SeriesFacts>,
    now: f64,
    oldest: &BTreeMap<String, f64>,
) {
    for (name, timestamp) in oldest {
        facts.entry(name.clone()).or_default().span = Some(now - timestamp);
    }
}

/// A group's signal query made to name each VM's value by [`FACT_LABEL`].
pub fn group_value_query(expression: &str) -> String {
    format!("label_join({expression}, \"{FACT_LABEL}\", \"|\", \"name\")")
}

/// A [`group_value_query`]'s answer: each VM's value (finite ones; none: no data).
pub fn values_by_name(answer: &QueryAnswer) -> BTreeMap<String, f64> {
    match answer {
        QueryAnswer::Facts(facts) => facts
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// A [`group_facts_query`]'s answer: each VM's facts (VMs absent from it have none).
pub fn facts_by_name(answer: &QueryAnswer) -> BTreeMap<String, SeriesFacts> {
    let mut out: BTreeMap<String, SeriesFacts> = BTreeMap::new();
    let QueryAnswer::Facts(facts) = answer else {
        return out;
    };
    for (key, value) in facts.iter().filter(|(_, v)| v.is_finite()) {
        let Some((part, name)) = key.split_once('|') else {
            continue;
        };
        if part == NOW_PART {
            continue;
        }
        let f = out.entry(name.to_string()).or_default();
        match part {
            "age" => f.age = Some(*value),
            "samples" => f.samples = Some(*value),
            "relabelled" => f.relabelled = Some(*value),
            _ => {}
        }
    }
    out
}

impl SeriesFacts {
    /// The scrape interval the samples show: the time between the oldest and the newest
    /// sample of the fact window over their count. None with fewer than two samples.
    pub fn scrape_interval(&self, window: Window) -> Option<f64> {
        let samples = self.samples.filter(|n| *n >= 2.0)?;
        let since_oldest = self.span?.min(fact_window(window).as_secs() as f64);
        let covered = since_oldest - self.age.unwrap_or(0.0);
        (covered > 0.0).then(|| covered / (samples - 1.0))
    }

    /// Whether the series began inside the window (so a rate over it reads low).
    pub fn younger_than(&self, window: Window) -> bool {
        self.span.is_some_and(|span| span < window.as_secs() as f64)
    }
}

/// A sample older than this many scrape intervals (plus [`STALE_SLACK_SECS`] for the
/// query's own latency) is stale: at least one scrape went missing.
pub const STALE_INTERVALS: f64 = 2.0;
pub const STALE_SLACK_SECS: f64 = 1.0;
/// The shortest window, in scrape intervals, that holds the two samples a rate needs.
pub const MIN_WINDOW_INTERVALS: f64 = 2.0;

/// Whether the freshest sample is too old for the scrape interval (or there is none).
pub fn is_stale(facts: &SeriesFacts, window: Window) -> bool {
    match (facts.age, facts.scrape_interval(window)) {
        (None, _) => true,
        (Some(age), Some(interval)) => age > STALE_INTERVALS * interval + STALE_SLACK_SECS,
        (Some(_), None) => false,
    }
}

/// A per-vCPU busy fraction above this cannot be seconds per second: the counter counts
/// milliseconds (KubeVirt releases before kubevirt/kubevirt#13898 divided libvirt's
/// nanoseconds by 10^6).
pub const VCPU_MILLIS_ABOVE: f64 = 1.2;

/// Whether a vcpu-busy value shows a millisecond counter.
pub fn vcpu_counter_in_millis(observed: Option<f64>) -> bool {
    observed.is_some_and(|v| v > VCPU_MILLIS_ABOVE)
}

/// The verdict on a built-in check from its value and its series' facts; the note says
/// what the verdict rests on when it is not plain.
pub fn judge_series(
    check: &Check,
    observed: Option<f64>,
    facts: &SeriesFacts,
    window: Window,
) -> (Verdict, Option<String>) {
    if check.threshold.is_none() {
        return (Verdict::NotExpected, None);
    }
    if facts.samples.is_none_or(|n| n == 0.0) {
        let note = facts.relabelled.filter(|n| *n > 0.0).map(|_| {
            "its series are stored with the VM's namespace in exported_namespace: the scrape \
             overwrote the namespace label (set honorLabels: true on KubeVirt's ServiceMonitor)"
                .to_string()
        });
        return (Verdict::NoData, note);
    }
    if is_stale(facts, window) {
        let note = match (facts.age, facts.scrape_interval(window)) {
            (Some(age), Some(interval)) => format!(
                "the newest sample is {age:.0}s old although Prometheus scrapes it every {interval:.0}s"
            ),
            _ => "no current sample: the series stopped (Prometheus marked it stale)".to_string(),
        };
        return (Verdict::Stale, Some(note));
    }
    match judge(check, observed) {
        Verdict::Below | Verdict::NoData if facts.younger_than(window) => (
            Verdict::TooYoung,
            Some(format!(
                "the series is only {:.0}s old, younger than the {window} window: wait (--wait) or use a shorter --window",
                facts.span.unwrap_or(0.0)
            )),
        ),
        verdict => (verdict, None),
    }
}

/// The verdict on one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Observed at or above the threshold.
    Pass,
    /// Observed, but below the threshold.
    Below,
    /// No series: the signal does not reach Prometheus.
    NoData,
    /// The window cannot contain the signal (see the check's note); not a failure.
    NotExpected,
    /// The query failed (rejected by Prometheus, or unanswerable).
    Error,
    /// The VM's catalog signals cannot be judged: no local entry matches what the run
    /// recorded (nothing is queried).
    Unverifiable,
    /// The series were there in the window but are not now (or their newest sample is
    /// older than the scrape interval allows): a value over the window is no proof.
    Stale,
    /// The VM has no running VMI: whatever its series once showed, nothing loads it now.
    NotRunning,
    /// Below the threshold, but the series began inside the window, so the rate reads low.
    TooYoung,
    /// A profiled signal that does not follow its load profile (a phase off its level, or a
    /// shape flatter than the profile's).
    OffProfile,
}

impl Verdict {
    /// Whether this verdict makes verify fail.
    pub fn is_missing(self) -> bool {
        matches!(
            self,
            Verdict::Below
                | Verdict::NoData
                | Verdict::Error
                | Verdict::Unverifiable
                | Verdict::Stale
                | Verdict::NotRunning
                | Verdict::TooYoung
                | Verdict::OffProfile
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Below => "below",
            Verdict::NoData => "no data",
            Verdict::NotExpected => "not expected",
            Verdict::Error => "error",
            Verdict::Unverifiable => "unverifiable",
            Verdict::Stale => "stale",
            Verdict::NotRunning => "not running",
            Verdict::TooYoung => "too young",
            Verdict::OffProfile => "off profile",
        }
    }
}

/// Judges an observed value against a check.
pub fn judge(check: &Check, observed: Option<f64>) -> Verdict {
    match (check.threshold, observed) {
        (None, _) => Verdict::NotExpected,
        (Some(_), None) => Verdict::NoData,
        (Some(t), Some(v)) if v >= t => Verdict::Pass,
        (Some(_), Some(_)) => Verdict::Below,
    }
}

/// What a query through one candidate service proxy told us about that candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A Prometheus API answered.
    Found,
    /// The API server says the Service (or its namespace) does not exist.
    NoSuchService,
    /// The API server denied the proxy request (RBAC).
    Forbidden(String),
    /// The Service exists but nothing serves it (no ready endpoints, connection refused).
    Unavailable(String),
    /// The backend answered 401/403 itself: it wants credentials, which the API server
    /// never forwards through its proxy.
    BackendRefused(u16),
    /// Anything else (the message says what).
    Other(String),
}

/// Classifies a probe answer by HTTP status and body. A Kubernetes `Status` body comes
/// from the API server itself; anything else came from behind the proxy.
pub fn classify_probe(code: u16, body: &str) -> Probe {
    let status: Option<Value> = serde_json::from_str::<Value>(body)
        .ok()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"));
    let message = status
        .as_ref()
        .and_then(|s| s["message"].as_str())
        .unwrap_or("")
        .to_string();
    if (200..300).contains(&code) {
        return match parse_query_response(body) {
            Ok(_) => Probe::Found,
            Err(e) => Probe::Other(format!("HTTP {code}, but {e}")),
        };
    }
    match (code, status.is_some()) {
        (404, true) => Probe::NoSuchService,
        (403, true) => Probe::Forbidden(message),
        (401 | 403, false) => Probe::BackendRefused(code),
        (502..=504, _) => Probe::Unavailable(if message.is_empty() {
            format!("HTTP {code}")
        } else {
            message
        }),
        // Prometheus' own error document: it is there and answered.
        (400 | 422, false) if parse_query_response(body).is_ok() => Probe::Found,
        _ => Probe::Other(format!(
            "HTTP {code}: {}",
            if message.is_empty() {
                body.chars().take(160).collect::<String>()
            } else {
                message
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::contract::Unit;

    fn check(threshold: Option<f64>) -> Check {
        Check {
            signal: "s".into(),
            description: String::new(),
            query: "q".into(),
            threshold,
            unit: Unit::Ratio,
            note: None,
            series: None,
            relabelled: None,
            group: None,
            profile: None,
        }
    }

    #[test]
    fn vectors_give_their_largest_finite_sample() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"name":"a"},"value":[1700000000.1,"0.25"]},
            {"metric":{"name":"b"},"value":[1700000000.1,"NaN"]},
            {"metric":{"name":"c"},"value":[1700000000.1,"0.75"]}]}}"#;
        assert_eq!(
            parse_query_response(body).unwrap(),
            QueryAnswer::Value(Some(0.75))
        );
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(
            parse_query_response(empty).unwrap(),
            QueryAnswer::Value(None)
        );
        let nan = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
        assert_eq!(parse_query_response(nan).unwrap(), QueryAnswer::Value(None));
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        assert_eq!(
            parse_query_response(scalar).unwrap(),
            QueryAnswer::Value(Some(2.0))
        );
    }

    #[test]
    fn vector_answers_read_alike_in_small_structs_and_as_a_tree() {
        let bodies = [
            r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"name":"a"},"value":[1,"0.25"]},{"metric":{},"value":[1,"+Inf"]},
                {"metric":{"name":"c"},"value":[1,"0.75"]},{"value":[1]},{"metric":{"name":"d"}}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"virtwork_fact":"age|a","name":"a"},"value":[1,"0.5"]},
                {"metric":{"virtwork_fact":"now|"},"value":[1,"17"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"virtwork_fact":"age|a"},"value":[1,"0.5"]},
                {"metric":{"name":"b"},"value":[1,"3"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"virtwork_fact":7},"value":[1,"0.5"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        ];
        for body in bodies {
            assert_eq!(
                parse_vector_answer(body),
                Some(parse_any_answer(body).unwrap()),
                "{body}"
            );
        }
        let facts = parse_query_response(bodies[1]).unwrap();
        assert_eq!(
            facts,
            QueryAnswer::Facts(BTreeMap::from([
                ("age|a".to_string(), 0.5),
                ("now|".to_string(), 17.0)
            ]))
        );
        assert_eq!(
            parse_query_response(bodies[0]).unwrap(),
            QueryAnswer::Value(Some(0.75))
        );
        // Anything else is left to the tree: errors, scalars, odd shapes.
        for other in [
            r#"{"status":"error","errorType":"bad_data","error":"x"}"#,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":{"a":1}}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[1,2]}}"#,
            r#"[1]"#,
        ] {
            assert_eq!(parse_vector_answer(other), None, "{other}");
        }
        assert!(
            parse_query_response(
                r#"{"status":"success","data":{"resultType":"vector","result":{"a":1}}}"#
            )
            .unwrap_err()
            .contains("not a list")
        );
    }

    #[test]
    fn errors_and_foreign_bodies_are_told_apart() {
        let rejected =
            r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
        assert_eq!(
            parse_query_response(rejected).unwrap(),
            QueryAnswer::Rejected {
                error_type: "bad_data".into(),
                error: "parse error at char 5".into()
            }
        );
        assert!(
            parse_query_response("<html>login</html>")
                .unwrap_err()
                .contains("not Prometheus")
        );
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(parse_query_response(matrix).is_err());
    }

    #[test]
    fn verdicts() {
        assert_eq!(judge(&check(Some(0.5)), Some(0.5)), Verdict::Pass);
        assert_eq!(judge(&check(Some(0.5)), Some(0.49)), Verdict::Below);
        assert_eq!(judge(&check(Some(0.5)), None), Verdict::NoData);
        assert_eq!(judge(&check(None), None), Verdict::NotExpected);
        assert!(!Verdict::NotExpected.is_missing());
        assert!(Verdict::NoData.is_missing() && Verdict::Below.is_missing());
    }

    fn facts(age: Option<f64>, samples: f64, span: f64) -> SeriesFacts {
        SeriesFacts {
            age,
            samples: Some(samples),
            span: Some(span),
            relabelled: None,
        }
    }

    fn secs(n: u64) -> Window {
        Window::from_secs(n).unwrap()
    }

    #[test]
    fn group_answers_are_split_by_vm_name() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"virtwork_fact":"age|vm-a"},"value":[1,"0.4"]},
            {"metric":{"virtwork_fact":"samples|vm-a"},"value":[1,"301"]},
            {"metric":{"virtwork_fact":"first|vm-a"},"value":[1,"1700000000"]},
            {"metric":{"virtwork_fact":"now|"},"value":[1,"1700000300.5"]},
            {"metric":{"virtwork_fact":"samples|vm-b"},"value":[1,"20"]},
            {"metric":{"virtwork_fact":"relabelled|vm-c"},"value":[1,"2"]}]}}"#;
        let answer = parse_query_response(body).unwrap();
        let mut by_name = facts_by_name(&answer);
        assert!(!by_name.contains_key(""), "the evaluation time names no VM");
        let (now, firsts) = first_steps(&answer).unwrap();
        assert_eq!(now, 1700000300.5);
        assert_eq!(firsts, BTreeMap::from([("vm-a".to_string(), 1700000000.0)]));
        set_spans(
            &mut by_name,
            now,
            &BTreeMap::from([("vm-a".to_string(), 1699999970.5)]),
        );
        let a = by_name["vm-a"];
        assert_eq!(a, facts(Some(0.4), 301.0, 330.0));
        let interval = a.scrape_interval(secs(30)).unwrap();
        assert!(
            (interval - 299.6 / 300.0).abs() < 1e-9,
            "oldest to newest over 300 gaps: {interval}"
        );
        assert_eq!(by_name["vm-b"].age, None, "no current sample: stale");
        assert_eq!(by_name["vm-c"].relabelled, Some(2.0));
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(facts_by_name(&parse_query_response(empty).unwrap()).is_empty());
        let values = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"virtwork_fact":"vm-a","name":"vm-a"},"value":[1,"0.9"]},
            {"metric":{"virtwork_fact":"vm-b","name":"vm-b"},"value":[1,"NaN"]}]}}"#;
        let v = values_by_name(&parse_query_response(values).unwrap());
        assert_eq!(v, BTreeMap::from([("vm-a".to_string(), 0.9)]));
        let q = group_facts_query(
            r#"m{namespace="ns"}"#,
            r#"m{exported_namespace="ns"}"#,
            secs(30),
        );
        assert!(
            q.contains(r#"max by (name) (count_over_time(m{namespace="ns"}[5m]))"#),
            "{q}"
        );
        assert!(
            q.contains(r#"min_over_time((time() + 0 * count by (name) (m{namespace="ns"}))[5m:])"#),
            "{q}"
        );
        assert!(!q.contains("timestamp(m{namespace=\"ns\"})["), "{q}");
        assert!(
            q.contains(r#"count by (name) (m{exported_namespace="ns"})"#),
            "{q}"
        );
        assert_eq!(
            group_value_query("sum by (namespace, name) (x)"),
            r#"label_join(sum by (namespace, name) (x), "virtwork_fact", "|", "name")"#
        );
    }

    #[test]
    fn oldest_samples_are_read_only_at_each_vms_first_step() {
        let series = r#"m{namespace="ns"}"#;
        assert_eq!(group_oldest_query(series, &BTreeMap::new()), None);
        // Every VM older than the window: one instant read at the first step.
        let old = BTreeMap::from([
            ("a".to_string(), 1700000000.0),
            ("b".to_string(), 1700000000.0),
        ]);
        assert_eq!(
            group_oldest_query(series, &old).unwrap(),
            r#"label_join(min by (name) (timestamp(m{namespace="ns"} @ 1700000000.000)), "virtwork_fact", "|", "name")"#
        );
        // Younger VMs: a subquery from the second first step to the last, at the last.
        let mixed = BTreeMap::from([
            ("a".to_string(), 1700000000.0),
            ("b".to_string(), 1700000030.0),
            ("c".to_string(), 1700000047.5),
            ("d".to_string(), 1700000030.0),
        ]);
        let q = group_oldest_query(series, &mixed).unwrap();
        assert!(
            q.contains(r#"min by (name) (timestamp(m{namespace="ns"} @ 1700000000.000)) or min by (name) (min_over_time(timestamp(m{namespace="ns"})[17500ms:] @ 1700000047.500))"#),
            "{q}"
        );
        assert_eq!(
            group_oldest_fallback_query(series, secs(600)),
            r#"label_join(min by (name) (min_over_time(timestamp(m{namespace="ns"})[10m:])), "virtwork_fact", "|", "name")"#
        );
    }

    #[test]
    fn series_must_be_current_for_the_scrape_interval() {
        let c = check(Some(0.5));
        let w = secs(30);
        // Healthy: fresh sample, old enough series.
        assert_eq!(
            judge_series(&c, Some(0.9), &facts(Some(0.5), 301.0, 400.0), w).0,
            Verdict::Pass
        );
        // Stopped reporting: Prometheus marked it stale, or the newest sample is 3 scrapes old.
        let (v, note) = judge_series(&c, Some(0.9), &facts(None, 200.0, 400.0), w);
        assert_eq!(v, Verdict::Stale);
        assert!(note.unwrap().contains("stale"));
        // Scraped every ~30 s, newest sample 70 s old: 8 samples in the last 230 s.
        let (v, note) = judge_series(&c, Some(0.9), &facts(Some(70.0), 8.0, 400.0), w);
        let note = note.unwrap();
        assert_eq!(v, Verdict::Stale);
        assert!(
            note.contains("70s old") && note.contains("every 33s"),
            "{note}"
        );
        let fresh_enough = facts(Some(59.0), 9.0, 400.0);
        assert_eq!(
            judge_series(&c, Some(0.9), &fresh_enough, w).0,
            Verdict::Pass,
            "59 s < 2 x 30 s + 1 s"
        );
        // Never there.
        assert_eq!(
            judge_series(&c, None, &SeriesFacts::default(), w).0,
            Verdict::NoData
        );
        // Not expected stays not expected.
        assert_eq!(
            judge_series(&check(None), None, &SeriesFacts::default(), w).0,
            Verdict::NotExpected
        );
    }

    #[test]
    fn young_series_are_too_young_not_below() {
        let c = check(Some(0.5));
        let (v, note) = judge_series(&c, Some(0.2), &facts(Some(0.5), 11.0, 10.0), secs(30));
        assert_eq!(v, Verdict::TooYoung);
        assert!(note.unwrap().contains("only 10s old"));
        assert_eq!(
            judge_series(&c, Some(0.2), &facts(Some(0.5), 40.0, 40.0), secs(30)).0,
            Verdict::Below
        );
        assert_eq!(
            judge_series(&c, Some(0.9), &facts(Some(0.5), 11.0, 10.0), secs(30)).0,
            Verdict::Pass
        );
        assert_eq!(
            judge_series(&c, None, &facts(Some(0.5), 1.0, 0.5), secs(30)).0,
            Verdict::TooYoung
        );
    }

    #[test]
    fn relabelled_namespaces_are_named_when_data_is_missing() {
        let f = SeriesFacts {
            relabelled: Some(2.0),
            ..SeriesFacts::default()
        };
        let (v, note) = judge_series(&check(Some(0.5)), None, &f, secs(30));
        assert_eq!(v, Verdict::NoData);
        assert!(note.unwrap().contains("exported_namespace"));
    }

    #[test]
    fn vcpu_values_above_one_per_vcpu_are_milliseconds() {
        assert!(vcpu_counter_in_millis(Some(20.0)));
        assert!(!vcpu_counter_in_millis(Some(1.0)));
        assert!(!vcpu_counter_in_millis(None));
    }

    #[test]
    fn probes_separate_the_api_server_from_the_backend() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(classify_probe(200, ok), Probe::Found);
        let missing = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"services \"thanos-querier\" not found","reason":"NotFound","code":404}"#;
        assert_eq!(classify_probe(404, missing), Probe::NoSuchService);
        let denied = r#"{"kind":"Status","status":"Failure","message":"services \"prometheus-k8s\" is forbidden: cannot get resource \"services/proxy\"","reason":"Forbidden","code":403}"#;
        assert!(
            matches!(classify_probe(403, denied), Probe::Forbidden(m) if m.contains("services/proxy"))
        );
        assert_eq!(
            classify_probe(401, "Unauthorized\n"),
            Probe::BackendRefused(401)
        );
        let no_endpoints = r#"{"kind":"Status","status":"Failure","message":"no endpoints available for service \"prometheus-k8s:web\"","reason":"ServiceUnavailable","code":503}"#;
        assert!(
            matches!(classify_probe(503, no_endpoints), Probe::Unavailable(m) if m.contains("no endpoints"))
        );
        assert!(matches!(classify_probe(200, "<html/>"), Probe::Other(_)));
        assert!(matches!(
            classify_probe(404, "404 page not found"),
            Probe::Other(_)
        ));
    }
}
