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
    /// Samples in the fact range ([`fact_range`]).
    pub samples: Option<f64>,
    /// Seconds since the oldest sample seen in the fact range (more than the window when
    /// the series is older than it).
    pub span: Option<f64>,
    /// For a series that began inside the fact range: how many of its samples are not
    /// newer than that oldest sample seen (it is found at the first subquery step where the
    /// series existed, so the samples scraped between its birth and that step are counted
    /// in `samples` but lie before `span`). None for a series older than the range.
    pub before: Option<f64>,
    /// Series of this VM stored under `exported_namespace` (a scrape that overwrote
    /// `namespace`).
    pub relabelled: Option<f64>,
    /// The largest current value among the VM's series (for the vCPU counter: the busiest
    /// vCPU's total, which in seconds can never exceed the VMI's age).
    pub peak: Option<f64>,
}

/// The range over which [`SeriesFacts`] are gathered and the step of its subqueries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactRange {
    pub secs: u64,
    pub step_secs: u64,
}

/// The [`FactRange`] of a window: the window, but at least 5 minutes (so the scrape interval
/// is measured even for a window too short to hold two samples), plus two subquery steps, so
/// a series older than the window shows at the range's first step and is never taken for
/// one that began inside the window. The step (about a hundredth of the range) is explicit:
/// Prometheus' default, its evaluation interval, may be coarser than the window.
pub fn fact_range(window: Window) -> FactRange {
    let base = window.as_secs().max(300);
    let step_secs = base.div_ceil(100).max(1);
    FactRange {
        secs: base + 2 * step_secs,
        step_secs,
    }
}

/// The query that gathers the [`SeriesFacts`] of every VM of a signal group at once (by VM
/// `name`, each sample named `part|name`): one query per namespace and signal, not per VM.
///
/// The oldest sample's age (`span`) takes a second query, [`group_oldest_query`]: this one
/// finds, per VM, the first step of the fact range's subquery at which its series
/// existed (`first`, from `time()`, cheap) and when it was evaluated (`now|`). Asking for
/// `timestamp()` at every step instead is what Prometheus answers slowly (seconds per
/// thousand series at a 1 s evaluation interval, growing with the series' samples).
pub fn group_facts_query(series: &str, relabelled: &str, window: Window) -> String {
    let FactRange { secs, step_secs } = fact_range(window);
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
            format!("max by (name) (count_over_time({series}[{secs}s]))"),
            "samples",
        ),
        part(
            format!(
                "min_over_time((time() + (max by (name) (count_over_time({series}[{step_secs}s])) \
                 or 0 * count by (name) ({series})) / {BEFORE_SCALE})[{secs}s:{step_secs}s])"
            ),
            FIRST_PART,
        ),
        part(format!("max by (name) ({series})"), "peak"),
        part(format!("count by (name) ({relabelled})"), "relabelled"),
        part("vector(time())".to_string(), NOW_PART),
    ]
    .join(" or ")
}

/// The facts part naming, per VM, the first subquery step at which its series existed, and
/// in the fraction, the samples of the step before it (over [`BEFORE_SCALE`]): one value,
/// so that `min_over_time` keeps the count of the step it keeps (steps are whole seconds).
const FIRST_PART: &str = "first";
/// The scale of the sample count in the [`FIRST_PART`]'s fraction (a step holds fewer
/// samples than this).
const BEFORE_SCALE: f64 = 1e4;

/// A [`FIRST_PART`] value: the step (Unix seconds) and the samples up to it in its step.
fn split_first(value: f64) -> (f64, f64) {
    let step = value.trunc();
    (step, ((value - step) * BEFORE_SCALE).round())
}
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
            Some((name.to_string(), split_first(*v).0))
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
pub fn group_oldest_query(
    series: &str,
    firsts: &BTreeMap<String, f64>,
    window: Window,
) -> Option<String> {
    let mut steps: Vec<i64> = firsts
        .values()
        .map(|t| (t * 1000.0).round() as i64)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let at = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let (&earliest, later) = steps.split_first()?;
    let mut expression = format!("min by (name) (timestamp({series} @ {}))", at(earliest));
    match later {
        [] => {}
        // One later step: read there alone (a subquery spanning nothing would be `[0ms:]`,
        // which Prometheus refuses).
        [only] => {
            expression = format!(
                "{expression} or min by (name) (timestamp({series} @ {}))",
                at(*only)
            );
        }
        [from, .., to] => {
            // The subquery's steps are the fact range's step's multiples in [to - range, to]
            // (Prometheus aligns them so): `from` and `to` are such multiples, the earliest
            // step is not in it.
            let step = fact_range(window).step_secs;
            expression = format!(
                "{expression} or min by (name) (min_over_time(timestamp({series})[{}ms:{step}s] @ {}))",
                to - from,
                at(*to)
            );
        }
    }
    Some(group_value_query(&expression))
}

/// [`group_oldest_query`] for a server that refuses the `@` modifier: the slow subquery.
pub fn group_oldest_fallback_query(series: &str, window: Window) -> String {
    let FactRange { secs, step_secs } = fact_range(window);
    group_value_query(&format!(
        "min by (name) (min_over_time(timestamp({series})[{secs}s:{step_secs}s]))"
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

/// A [`group_facts_query`]'s answer for `window`: each VM's facts (VMs absent from it have
/// none).
pub fn facts_by_name(answer: &QueryAnswer, window: Window) -> BTreeMap<String, SeriesFacts> {
    let mut out: BTreeMap<String, SeriesFacts> = BTreeMap::new();
    let QueryAnswer::Facts(facts) = answer else {
        return out;
    };
    let range = fact_range(window);
    let range_start = facts
        .get(&format!("{NOW_PART}|"))
        .filter(|v| v.is_finite())
        .map(|now| now - range.secs as f64);
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
            "peak" => f.peak = Some(*value),
            // The series did not exist at the step before its first one, which the range
            // holds: every sample up to the first step lies in that step.
            FIRST_PART => {
                let (step, before) = split_first(*value);
                let young =
                    range_start.is_some_and(|start| step - range.step_secs as f64 >= start - 0.001);
                if young && before >= 1.0 {
                    f.before = Some(before);
                }
            }
            _ => {}
        }
    }
    out
}

impl SeriesFacts {
    /// The scrape interval this VM's series shows: the time between the oldest and the
    /// newest sample of the fact range over their count. None with fewer than two samples,
    /// or when the series is not current: a series that died after a few scrapes would
    /// spread them over the whole range.
    pub fn scrape_interval(&self, window: Window) -> Option<f64> {
        let age = self.age?;
        let samples = self.samples?;
        // The gaps between the oldest sample seen and the newest: counting the samples
        // before the oldest one seen would shorten a young series' interval by up to a
        // fact step's worth of scrapes (and let a too-short window through).
        let gaps = samples - self.before.unwrap_or(1.0);
        let since_oldest = self.span?.min(fact_range(window).secs as f64);
        let covered = since_oldest - age;
        (gaps >= 1.0 && covered > 0.0).then(|| covered / gaps)
    }

    /// Whether the series began inside the window (so a rate over it reads low). A series
    /// with samples but no oldest one is younger than the fact range's last step: young.
    pub fn younger_than(&self, window: Window) -> bool {
        match self.span {
            Some(span) => span < window.as_secs() as f64,
            None => self.samples.is_some_and(|n| n > 0.0),
        }
    }
}

/// The scrape interval of a fleet: the median of the intervals its current series show
/// (each VM counted once per signal). One series that died, restarted or began late cannot
/// move it; None when no series is current.
pub fn fleet_interval<'a>(
    facts: impl IntoIterator<Item = &'a SeriesFacts>,
    window: Window,
) -> Option<f64> {
    let mut intervals: Vec<f64> = facts
        .into_iter()
        .filter_map(|f| f.scrape_interval(window))
        .collect();
    if intervals.is_empty() {
        return None;
    }
    intervals.sort_by(f64::total_cmp);
    let mid = intervals.len() / 2;
    Some(match intervals.len() % 2 {
        1 => intervals[mid],
        _ => (intervals[mid - 1] + intervals[mid]) / 2.0,
    })
}

/// The subquery step for a measured scrape interval, in milliseconds: the interval itself
/// (each step then sees a new sample), or a 60th of the window while no interval is known;
/// never zero.
pub fn subquery_step_ms(interval: Option<f64>, window: Window) -> u64 {
    let secs = interval
        .filter(|i| i.is_finite() && *i > 0.0)
        .unwrap_or((window.as_secs() as f64 / 60.0).clamp(1.0, 30.0));
    ((secs * 1000.0).round() as u64).max(1)
}

/// A sample older than this many scrape intervals (plus [`STALE_SLACK_SECS`] for the
/// query's own latency) is stale: at least one scrape went missing.
pub const STALE_INTERVALS: f64 = 2.0;
pub const STALE_SLACK_SECS: f64 = 1.0;
/// The shortest window, in scrape intervals, that holds the two samples a rate needs.
pub const MIN_WINDOW_INTERVALS: f64 = 2.0;

/// What a verdict depends on beyond the VM's own answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Context {
    pub window: Window,
    /// The fleet's scrape interval ([`fleet_interval`]); None: each series' own.
    pub interval: Option<f64>,
    /// Seconds since the VM's VMI was created; None when unknown.
    pub vmi_age: Option<f64>,
}

impl Context {
    /// A context of `window` alone (each series' own interval, the VMI's age unknown).
    pub fn of(window: Window) -> Context {
        Context {
            window,
            interval: None,
            vmi_age: None,
        }
    }

    fn interval_of(&self, facts: &SeriesFacts) -> Option<f64> {
        self.interval.or_else(|| facts.scrape_interval(self.window))
    }
}

/// Whether the freshest sample is too old for the scrape interval (or there is none).
pub fn is_stale(facts: &SeriesFacts, ctx: &Context) -> bool {
    match (facts.age, ctx.interval_of(facts)) {
        (None, _) => true,
        (Some(age), Some(interval)) => age > STALE_INTERVALS * interval + STALE_SLACK_SECS,
        (Some(_), None) => false,
    }
}

/// A per-vCPU busy fraction above this cannot be seconds per second: the counter counts
/// milliseconds (KubeVirt releases before kubevirt/kubevirt#13898 divided libvirt's
/// nanoseconds by 10^6).
pub const VCPU_MILLIS_ABOVE: f64 = 1.2;

/// The unit of one VM's vCPU counter, decided from that VM's own series alone (during a
/// virt-handler rollout, VMs of one cluster count in both): milliseconds when its busy
/// fraction over the window, or its busiest vCPU's total over the VMI's age, exceeds what
/// seconds allow ([`VCPU_MILLIS_ABOVE`]). The second catches a nearly idle VM, whose rate
/// alone would pass for a busy one in seconds: its boot alone put seconds on the counter.
pub fn vcpu_counter_in_millis(
    observed: Option<f64>,
    peak: Option<f64>,
    vmi_age: Option<f64>,
) -> bool {
    let over_window = observed.is_some_and(|v| v > VCPU_MILLIS_ABOVE);
    let over_life = match (peak, vmi_age) {
        (Some(total), Some(age)) if age > 0.0 => total / age > VCPU_MILLIS_ABOVE,
        _ => false,
    };
    over_window || over_life
}

/// Whether a signal is a level over the window (the largest ratio in it, a count of
/// series) rather than a rate: a young series does not read low for a level.
fn is_level(check: &Check) -> bool {
    matches!(
        check.unit,
        crate::signals::contract::Unit::Ratio | crate::signals::contract::Unit::Series
    )
}

/// How long after its VMI's creation a guest may take to start its load (scheduling, image
/// pull, boot, cloud-init): a level below its threshold is youth only before this, and a
/// profile's clock of a VM older than this before the window started before the window, so
/// every phase of the window is judged (profile.rs).
pub const BOOT_ALLOWANCE_SECS: f64 = 600.0;

/// How old the VM is, for judging its youth: its VMI's age, else (unknown) its series' span,
/// which the VM's age can only exceed.
fn vm_age(facts: &SeriesFacts, ctx: &Context) -> Option<f64> {
    ctx.vmi_age.or(facts.span)
}

/// How long after its VMI's creation a level (memory in use, a filled disk, a count of
/// series) may still be short for youth. Shorter than [`BOOT_ALLOWANCE_SECS`], which bounds
/// when a profile's clock may have started: a level is in effect as soon as the payload
/// runs, which takes a KubeVirt guest a minute or two (our TCG guests, ten times slower,
/// 130-310 s), and a broken VM 8 minutes old must be told so, not to wait.
pub const LEVEL_START_ALLOWANCE_SECS: f64 = 300.0;

/// Whether the VM is young for a level: still within [`LEVEL_START_ALLOWANCE_SECS`]. Of
/// unknown age (no VMI age, no span): young, the benefit of the doubt.
fn young_for_a_level(facts: &SeriesFacts, ctx: &Context) -> bool {
    vm_age(facts, ctx).is_none_or(|age| age < LEVEL_START_ALLOWANCE_SECS)
}

/// Whether the series' youth explains a shortfall (its series began inside the window, which
/// the caller checks): for a level (the largest ratio in the window, a count of series),
/// the VM is still within its boot allowance, so its payload may not have reached the
/// level yet; an older VM has had its time, whatever its window. For a rate, its rate over
/// the seconds the series has existed instead of the whole window would pass. A VM whose
/// load is missing gets its own verdict, however young its series.
fn youth_explains(
    check: &Check,
    observed: Option<f64>,
    facts: &SeriesFacts,
    ctx: &Context,
) -> bool {
    let window = ctx.window.as_secs() as f64;
    if is_level(check) {
        return young_for_a_level(facts, ctx);
    }
    let (Some(threshold), Some(value)) = (check.threshold, observed) else {
        return true;
    };
    // Without an oldest sample (younger than one step of the fact range) the newest
    // sample's age is the least the series can have lived: its rate over that is the most
    // it can be, so youth is given the benefit of the doubt.
    let lived = facts.span.or(facts.age).unwrap_or(0.0).max(1.0);
    value * window / lived >= threshold
}

/// What a too-young verdict rests on: the VM's age (its VMI's) and, for a rate, how long
/// its series has existed.
fn too_young_note(check: &Check, facts: &SeriesFacts, ctx: &Context) -> String {
    let window = ctx.window;
    let age = match ctx.vmi_age {
        Some(age) if age < ctx.window.as_secs() as f64 => format!("the VM is only {age:.0}s old"),
        Some(age) => format!("the VM is {age:.0}s old"),
        None => "the VM's age is unknown".to_string(),
    };
    let why = if is_level(check) {
        format!(
            "a guest may take up to {LEVEL_START_ALLOWANCE_SECS:.0}s to boot and start its load, and its series began inside the {window} window"
        )
    } else {
        format!(
            "its series began {:.0}s ago, inside the {window} window, and its rate over that time would pass",
            facts.span.or(facts.age).unwrap_or(0.0)
        )
    };
    format!("{age}: {why}: wait (--wait) or use a shorter --window")
}

/// Why an old VM's level below its threshold is not youth, when its series began inside the
/// window (a young VM would have been given the benefit of the doubt).
fn past_youth_note(facts: &SeriesFacts, ctx: &Context) -> Option<String> {
    let age = vm_age(facts, ctx)?;
    Some(format!(
        "the VM is {age:.0}s old, past the {LEVEL_START_ALLOWANCE_SECS:.0}s a guest may take to boot and start its load: its series began inside the {} window, but youth does not explain the shortfall",
        ctx.window
    ))
}

/// The verdict on a built-in check from its value and its series' facts; the note says
/// what the verdict rests on when it is not plain.
pub fn judge_series(
    check: &Check,
    observed: Option<f64>,
    facts: &SeriesFacts,
    ctx: &Context,
) -> (Verdict, Option<String>) {
    let window = ctx.window;
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
    if is_stale(facts, ctx) {
        let note = match (facts.age, ctx.interval_of(facts)) {
            (Some(age), Some(interval)) => format!(
                "the newest sample is {age:.0}s old although Prometheus scrapes it every {interval:.0}s"
            ),
            _ => "no current sample: the series stopped (Prometheus marked it stale)".to_string(),
        };
        return (Verdict::Stale, Some(note));
    }
    match judge(check, observed) {
        Verdict::Below | Verdict::NoData
            if facts.younger_than(window) && youth_explains(check, observed, facts, ctx) =>
        {
            (Verdict::TooYoung, Some(too_young_note(check, facts, ctx)))
        }
        Verdict::Below if facts.younger_than(window) && is_level(check) => {
            (Verdict::Below, past_youth_note(facts, ctx))
        }
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
            peak: None,
            before: None,
        }
    }

    fn secs(n: u64) -> Window {
        Window::from_secs(n).unwrap()
    }

    #[test]
    fn a_young_series_interval_counts_only_the_samples_after_the_oldest_one_seen() {
        // Scraped every second since 1700000296.2; the fact range's steps are 3 s apart, so
        // its first step (…298) already holds 2 samples (…296.2 and …297.2), and the oldest
        // sample seen there is …297.2. 10 samples, newest 0.2 s old at …305.5.
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"virtwork_fact":"age|young"},"value":[1,"0.3"]},
            {"metric":{"virtwork_fact":"samples|young"},"value":[1,"10"]},
            {"metric":{"virtwork_fact":"first|young"},"value":[1,"1700000298.0002"]},
            {"metric":{"virtwork_fact":"age|old"},"value":[1,"0.5"]},
            {"metric":{"virtwork_fact":"samples|old"},"value":[1,"307"]},
            {"metric":{"virtwork_fact":"first|old"},"value":[1,"1699999998.0003"]},
            {"metric":{"virtwork_fact":"now|"},"value":[1,"1700000305.5"]}]}}"#;
        let answer = parse_query_response(body).unwrap();
        let mut by_name = facts_by_name(&answer, secs(1));
        let (now, firsts) = first_steps(&answer).unwrap();
        assert_eq!(firsts["young"], 1700000298.0, "the step, without the count");
        assert_eq!(firsts["old"], 1699999998.0);
        set_spans(
            &mut by_name,
            now,
            &BTreeMap::from([
                ("young".to_string(), 1700000297.2),
                ("old".to_string(), 1699999997.5),
            ]),
        );
        assert_eq!(by_name["young"].before, Some(2.0));
        assert_eq!(by_name["old"].before, None, "older than the range");
        let young = by_name["young"].scrape_interval(secs(1)).unwrap();
        assert!(
            (young - 1.0).abs() < 1e-6,
            "8 s from the oldest sample seen to the newest over 8 gaps: {young}"
        );
        let old = by_name["old"].scrape_interval(secs(1)).unwrap();
        assert!((old - 1.0).abs() < 0.01, "{old}");
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
        let mut by_name = facts_by_name(&answer, secs(30));
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
            (interval - 305.6 / 300.0).abs() < 1e-9,
            "oldest to newest of the 306 s fact range over 300 gaps: {interval}"
        );
        assert_eq!(by_name["vm-b"].age, None, "no current sample: stale");
        assert_eq!(by_name["vm-c"].relabelled, Some(2.0));
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(facts_by_name(&parse_query_response(empty).unwrap(), secs(30)).is_empty());
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
            q.contains(r#"max by (name) (count_over_time(m{namespace="ns"}[306s]))"#),
            "{q}"
        );
        // An explicit step: the default (the evaluation interval) may be coarser than the window.
        assert!(
            q.contains(
                r#"min_over_time((time() + (max by (name) (count_over_time(m{namespace="ns"}[3s])) or 0 * count by (name) (m{namespace="ns"})) / 10000)[306s:3s])"#
            ),
            "{q}"
        );
        assert!(q.contains(r#"max by (name) (m{namespace="ns"})"#), "{q}");
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
        let w = secs(600);
        assert_eq!(group_oldest_query(series, &BTreeMap::new(), w), None);
        // Every VM older than the window: one instant read at the first step.
        let old = BTreeMap::from([
            ("a".to_string(), 1700000000.0),
            ("b".to_string(), 1700000000.0),
        ]);
        assert_eq!(
            group_oldest_query(series, &old, w).unwrap(),
            r#"label_join(min by (name) (timestamp(m{namespace="ns"} @ 1700000000.000)), "virtwork_fact", "|", "name")"#
        );
        // Younger VMs: a subquery from the second first step to the last, at the last, at
        // the fact range's own step.
        let mixed = BTreeMap::from([
            ("a".to_string(), 1700000000.0),
            ("b".to_string(), 1700000030.0),
            ("c".to_string(), 1700000048.0),
            ("d".to_string(), 1700000030.0),
        ]);
        let q = group_oldest_query(series, &mixed, w).unwrap();
        assert!(
            q.contains(r#"min by (name) (timestamp(m{namespace="ns"} @ 1700000000.000)) or min by (name) (min_over_time(timestamp(m{namespace="ns"})[18000ms:6s] @ 1700000048.000))"#),
            "{q}"
        );
        // One younger step: read there alone, never as a subquery spanning nothing.
        let one = BTreeMap::from([
            ("a".to_string(), 1700000000.0),
            ("b".to_string(), 1700000030.0),
        ]);
        let q = group_oldest_query(series, &one, w).unwrap();
        assert!(!q.contains("[0ms:"), "{q}");
        assert!(
            q.contains(r#"or min by (name) (timestamp(m{namespace="ns"} @ 1700000030.000))"#),
            "{q}"
        );
        assert_eq!(
            group_oldest_fallback_query(series, w),
            r#"label_join(min by (name) (min_over_time(timestamp(m{namespace="ns"})[612s:6s])), "virtwork_fact", "|", "name")"#
        );
    }

    #[test]
    fn series_must_be_current_for_the_scrape_interval() {
        let c = check(Some(0.5));
        let w = Context::of(secs(30));
        // Healthy: fresh sample, old enough series.
        assert_eq!(
            judge_series(&c, Some(0.9), &facts(Some(0.5), 301.0, 400.0), &w).0,
            Verdict::Pass
        );
        // Stopped reporting: Prometheus marked it stale, or the newest sample is 3 scrapes old.
        let (v, note) = judge_series(&c, Some(0.9), &facts(None, 200.0, 400.0), &w);
        assert_eq!(v, Verdict::Stale);
        assert!(note.unwrap().contains("stale"));
        // Scraped every ~34 s, newest sample 70 s old: 8 samples in the last 236 s.
        let (v, note) = judge_series(&c, Some(0.9), &facts(Some(70.0), 8.0, 400.0), &w);
        let note = note.unwrap();
        assert_eq!(v, Verdict::Stale);
        assert!(
            note.contains("70s old") && note.contains("every 34s"),
            "{note}"
        );
        let fresh_enough = facts(Some(59.0), 9.0, 400.0);
        assert_eq!(
            judge_series(&c, Some(0.9), &fresh_enough, &w).0,
            Verdict::Pass,
            "59 s < 2 x 31 s + 1 s"
        );
        // The fleet's interval decides, not a series' own: a gap in one series cannot excuse
        // its newest sample being old.
        let fleet = Context {
            interval: Some(2.0),
            ..w
        };
        assert_eq!(
            judge_series(&c, Some(0.9), &fresh_enough, &fleet).0,
            Verdict::Stale
        );
        // Never there.
        assert_eq!(
            judge_series(&c, None, &SeriesFacts::default(), &w).0,
            Verdict::NoData
        );
        // Not expected stays not expected.
        assert_eq!(
            judge_series(&check(None), None, &SeriesFacts::default(), &w).0,
            Verdict::NotExpected
        );
    }

    #[test]
    fn the_fleet_interval_ignores_dead_and_young_outliers() {
        let w = secs(30);
        let healthy = facts(Some(0.5), 151.0, 400.0); // every 2 s
        // Died after three scrapes: no current sample, so no interval of its own.
        let dead = facts(None, 3.0, 300.0);
        assert_eq!(dead.scrape_interval(w), None);
        // A series with a long gap shows a long interval; the median ignores it.
        let gapped = facts(Some(1.0), 20.0, 400.0);
        let all = [healthy, healthy, dead, gapped, healthy];
        let interval = fleet_interval(&all, w).unwrap();
        assert!((interval - 2.033).abs() < 0.01, "{interval}");
        assert_eq!(fleet_interval(&[dead], w), None);
        // Subqueries step at the interval, never at zero.
        assert_eq!(subquery_step_ms(Some(2.0333), w), 2033);
        assert_eq!(subquery_step_ms(Some(0.0001), w), 1);
        assert_eq!(subquery_step_ms(None, secs(600)), 10_000);
        assert_eq!(subquery_step_ms(None, secs(5)), 1000);
    }

    fn rate_check(threshold: f64) -> Check {
        Check {
            unit: crate::signals::contract::Unit::VcpuFraction,
            ..check(Some(threshold))
        }
    }

    #[test]
    fn young_series_are_too_young_only_when_youth_explains_the_shortfall() {
        let c = rate_check(0.5);
        let w = Context::of(secs(30));
        // 10 s old at 0.2 over 30 s: 0.6 over its own 10 s, so youth explains it.
        let (v, note) = judge_series(&c, Some(0.2), &facts(Some(0.5), 11.0, 10.0), &w);
        assert_eq!(v, Verdict::TooYoung);
        let note = note.unwrap();
        assert!(note.contains("began 10s ago"), "{note}");
        assert!(note.contains("age is unknown"), "{note}");
        // 0.02 over its own 10 s is still idle: below, however young.
        assert_eq!(
            judge_series(&c, Some(0.02), &facts(Some(0.5), 11.0, 10.0), &w).0,
            Verdict::Below
        );
        assert_eq!(
            judge_series(&c, Some(0.2), &facts(Some(0.5), 40.0, 40.0), &w).0,
            Verdict::Below
        );
        assert_eq!(
            judge_series(&c, Some(0.9), &facts(Some(0.5), 11.0, 10.0), &w).0,
            Verdict::Pass
        );
        assert_eq!(
            judge_series(&c, None, &facts(Some(0.5), 1.0, 0.5), &w).0,
            Verdict::TooYoung
        );
        // A level (the largest ratio in the window): young only while the VM is within its
        // boot allowance, whatever the window.
        let level = check(Some(0.5));
        let at = |age: f64, window: u64| Context {
            vmi_age: Some(age),
            ..Context::of(secs(window))
        };
        let f = facts(Some(0.5), 11.0, 10.0);
        let (v, note) = judge_series(&level, Some(0.1), &f, &at(25.0, 30));
        assert_eq!(v, Verdict::TooYoung);
        let note = note.unwrap();
        assert!(note.contains("the VM is only 25s old"), "{note}");
        assert!(note.contains("300s"), "{note}");
        // The issue's case: a VM stuck at 5 % whose series began 282 s ago, inside every
        // window of 5 m or more. Young at 4 minutes (within the 300 s a level may take to
        // start), below at 8 minutes with the reason, whatever the window; never with the
        // series' span standing for the VM's age.
        let stuck = facts(Some(0.5), 141.0, 282.0);
        let (v, note) = judge_series(&level, Some(0.05), &stuck, &at(240.0, 300));
        assert_eq!(v, Verdict::TooYoung);
        assert!(note.unwrap().contains("the VM is only 240s old"));
        for window in [300, 600, 900, 3600] {
            let (v, note) = judge_series(&level, Some(0.05), &stuck, &at(480.0, window));
            assert_eq!(v, Verdict::Below, "window {window}");
            let note = note.unwrap();
            assert!(note.contains("480s old, past the 300s"), "{note}");
        }
        // An old VM whose level is missing altogether reads no data, not too young.
        assert_eq!(
            judge_series(&level, None, &stuck, &at(720.0, 600)).0,
            Verdict::NoData
        );
        // Of unknown VMI age, the series' span bounds the VM's: a span past the allowance is
        // old, a short one is given the benefit of the doubt.
        let (ancient, window) = (facts(Some(0.5), 400.0, 800.0), Context::of(secs(900)));
        assert_eq!(
            judge_series(&level, Some(0.05), &ancient, &window).0,
            Verdict::Below
        );
        let (v, note) = judge_series(&level, Some(0.05), &f, &w);
        assert_eq!(v, Verdict::TooYoung);
        assert!(note.unwrap().contains("age is unknown"));
        // A level past its threshold passes at any age.
        assert_eq!(
            judge_series(&level, Some(0.6), &stuck, &at(25.0, 600)).0,
            Verdict::Pass
        );
    }

    #[test]
    fn a_series_older_than_the_window_is_never_young() {
        // With a 30 s default subquery step the first step fell up to 30 s into a 5m window,
        // and an 8-minute-old VM read "only 282s old". The fact range now reaches two steps
        // before the window, so the oldest sample read there is older than the window.
        let w = secs(300);
        let range = fact_range(w);
        assert!(range.secs >= 300 + 2 * range.step_secs, "{range:?}");
        let first_step = range.secs - range.step_secs; // the range's first aligned step at worst
        let f = facts(Some(0.5), 150.0, first_step as f64);
        assert!(!f.younger_than(w));
    }

    #[test]
    fn relabelled_namespaces_are_named_when_data_is_missing() {
        let f = SeriesFacts {
            relabelled: Some(2.0),
            ..SeriesFacts::default()
        };
        let (v, note) = judge_series(&check(Some(0.5)), None, &f, &Context::of(secs(30)));
        assert_eq!(v, Verdict::NoData);
        assert!(note.unwrap().contains("exported_namespace"));
    }

    #[test]
    fn a_vcpu_counter_is_in_milliseconds_by_its_own_rate_or_lifetime() {
        assert!(vcpu_counter_in_millis(Some(20.0), None, None));
        assert!(!vcpu_counter_in_millis(Some(1.0), None, None));
        assert!(!vcpu_counter_in_millis(None, None, None));
        // Nearly idle (0.1 % of a vCPU reads 1.0 in milliseconds), but 8 s of boot in 600 s
        // of life read 8,600: more than seconds allow.
        assert!(vcpu_counter_in_millis(Some(1.0), Some(8600.0), Some(600.0)));
        // A busy VM in seconds: its busiest vCPU spent at most its life.
        assert!(!vcpu_counter_in_millis(
            Some(0.97),
            Some(590.0),
            Some(600.0)
        ));
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
