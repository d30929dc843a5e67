//! `verify --alerts`: which alerts Prometheus evaluated as firing for the run's VMs during
//! the window (its `ALERTS` series, keyed by the VMs' `namespace` and `name` labels), when
//! they fired and for how long, and whether `--expect-alert` / `--forbid-alert` hold.
//!
//! Pure: the query (one per namespace), reading its answer, the expectations, the report.
//! Must not: query anything (commands/verify.rs sends the queries).

use std::collections::BTreeMap;

use serde::Serialize;

use super::evaluate::FACT_LABEL;
use crate::model::Window;
use crate::signals::promql::Matchers;

/// What the user asked to check about alerts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertChecks {
    /// `--alerts`: report the alerts (also implied by the two lists).
    pub report: bool,
    /// `--expect-alert`: must have fired for at least one of the VMs in the window.
    pub expect: Vec<String>,
    /// `--forbid-alert`: must not have fired for any of them.
    pub forbid: Vec<String>,
}

impl AlertChecks {
    pub fn wanted(&self) -> bool {
        self.report || !self.expect.is_empty() || !self.forbid.is_empty()
    }
}

/// One alert that fired for one VM during the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FiredAlert {
    pub alertname: String,
    pub namespace: String,
    pub name: String,
    /// Unix time of the first and the last evaluation that saw it firing in the window.
    pub first_firing: f64,
    pub last_firing: f64,
    /// Seconds it was firing in the window: the subquery steps that saw it firing times the
    /// step (resolved gaps between firings are not counted).
    pub firing_seconds: f64,
    /// Whether it fires at query time.
    pub firing_now: bool,
}

/// The subquery step: fine enough to see a short firing, coarse enough for long windows.
pub fn step_secs(window: Window) -> u64 {
    (window.as_secs() / 250).max(1)
}

/// The query for the VMs `names` of `namespace`: per firing alert series, the first and
/// last firing evaluation in the window, how many subquery steps saw it firing and whether
/// it fires now, each named by [`FACT_LABEL`] as `part|alertname|namespace|name`. A resolved
/// alert's series ends with a stale marker, so the steps of a gap do not see it.
pub fn alerts_query(namespace: &str, names: &[&str], window: Window) -> String {
    let pattern = names
        .iter()
        .map(|n| n.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    let m = Matchers::default()
        .with("alertstate", "firing")
        .with("namespace", namespace)
        .with_op("name", "=~", &pattern);
    let firing = format!("ALERTS{{{m}}}");
    let step = step_secs(window);
    let parts = [
        (
            "first",
            format!("min_over_time(timestamp({firing})[{window}:{step}s])"),
        ),
        (
            "last",
            format!("max_over_time(timestamp({firing})[{window}:{step}s])"),
        ),
        (
            "steps",
            format!("count_over_time(timestamp({firing})[{window}:{step}s])"),
        ),
        ("now", format!("timestamp({firing})")),
    ];
    parts
        .iter()
        .map(|(part, expr)| {
            format!(
                "label_join(label_replace({expr}, \"virtwork_part\", \"{part}\", \"\", \"\"), \"{FACT_LABEL}\", \"|\", \"virtwork_part\", \"alertname\", \"namespace\", \"name\")"
            )
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Reads an [`alerts_query`] answer (its facts) into the alerts that fired, sorted.
pub fn fired_alerts(facts: &BTreeMap<String, f64>, window: Window) -> Vec<FiredAlert> {
    let mut by_alert: BTreeMap<(String, String, String), [Option<f64>; 4]> = BTreeMap::new();
    for (key, value) in facts {
        let mut fields = key.splitn(4, '|');
        let (Some(part), Some(alert), Some(ns), Some(name)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let slot = match part {
            "first" => 0,
            "last" => 1,
            "now" => 2,
            "steps" => 3,
            _ => continue,
        };
        by_alert
            .entry((alert.to_string(), ns.to_string(), name.to_string()))
            .or_default()[slot] = Some(*value);
    }
    let step = step_secs(window) as f64;
    by_alert
        .into_iter()
        .filter_map(
            |((alertname, namespace, name), [first, last, now, steps])| {
                let first = first.or(now)?;
                let last = last.or(now).unwrap_or(first);
                let span = (last - first).max(0.0) + step;
                // Never more than the span from the first to the last firing step.
                let firing_seconds = steps.map_or(span, |n| (n * step).min(span));
                Some(FiredAlert {
                    alertname,
                    namespace,
                    name,
                    first_firing: first,
                    last_firing: last,
                    firing_seconds,
                    firing_now: now.is_some(),
                })
            },
        )
        .collect()
}

/// One `--expect-alert` / `--forbid-alert` and whether it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectation {
    pub alert: String,
    /// `fire` or `not_fire`.
    pub expected: &'static str,
    pub met: bool,
    /// The VMs it fired for.
    pub fired_for: Vec<String>,
}

/// Whether polling again could change the expectations' outcome: an expected alert has not
/// fired yet and no forbidden one has (which no wait can undo).
pub fn worth_waiting(expectations: &[Expectation]) -> bool {
    let forbidden_fired = expectations
        .iter()
        .any(|e| e.expected == "not_fire" && !e.met);
    let expected_missing = expectations.iter().any(|e| e.expected == "fire" && !e.met);
    expected_missing && !forbidden_fired
}

/// Judges the expectations against the alerts that fired.
pub fn expectations(checks: &AlertChecks, fired: &[FiredAlert]) -> Vec<Expectation> {
    let fired_for = |alert: &str| -> Vec<String> {
        fired
            .iter()
            .filter(|f| f.alertname == alert)
            .map(|f| format!("{}/{}", f.namespace, f.name))
            .collect()
    };
    let expect = checks.expect.iter().map(|a| {
        let vms = fired_for(a);
        Expectation {
            alert: a.clone(),
            expected: "fire",
            met: !vms.is_empty(),
            fired_for: vms,
        }
    });
    let forbid = checks.forbid.iter().map(|a| {
        let vms = fired_for(a);
        Expectation {
            alert: a.clone(),
            expected: "not_fire",
            met: vms.is_empty(),
            fired_for: vms,
        }
    });
    expect.chain(forbid).collect()
}

/// The one-line failure of the first unmet expectation (and how many more); `waited` is
/// the `--timeout` verify waited for an expected alert (with `--wait`).
pub fn expectation_failure(
    expectations: &[Expectation],
    window: Window,
    waited: Option<std::time::Duration>,
) -> Option<String> {
    let unmet: Vec<&Expectation> = expectations.iter().filter(|e| !e.met).collect();
    let first = unmet.first()?;
    let until = waited.map_or(String::new(), |t| {
        format!(" by the end of --timeout {}s", t.as_secs())
    });
    let what = match first.expected {
        "fire" => format!(
            "expected alert {} did not fire for any of the VMs in the {window} window{until}",
            first.alert
        ),
        _ => format!(
            "forbidden alert {} fired for {}",
            first.alert,
            first.fired_for.join(", ")
        ),
    };
    let more = match unmet.len() {
        1 => String::new(),
        n => format!(" (and {} more unmet alert expectation(s))", n - 1),
    };
    Some(format!("{what}{more}"))
}

fn clock(unix: f64) -> String {
    jiff::Timestamp::from_second(unix as i64)
        .map(|t| t.strftime("%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| format!("{unix:.0}"))
}

/// The text section: one row per fired alert and VM, then each expectation.
pub fn text_section(fired: &[FiredAlert], expectations: &[Expectation], window: Window) -> String {
    const HEADER: [&str; 5] = ["ALERT", "VM", "FIRST FIRING", "FIRING FOR", "NOW"];
    let mut out = String::new();
    if fired.is_empty() {
        out.push_str(&format!(
            "No alert fired for these VMs in the {window} window.\n"
        ));
    } else {
        let rows: Vec<[String; 5]> = fired
            .iter()
            .map(|f| {
                [
                    super::untrusted(&f.alertname),
                    super::untrusted(&format!("{}/{}", f.namespace, f.name)),
                    clock(f.first_firing),
                    format!("{:.0}s", f.firing_seconds),
                    if f.firing_now { "firing" } else { "resolved" }.to_string(),
                ]
            })
            .collect();
        out.push_str(&crate::table::columns(&HEADER, &rows, ""));
    }
    for e in expectations {
        let verdict = if e.met { "met" } else { "NOT MET" };
        let wanted = if e.expected == "fire" {
            "must fire"
        } else {
            "must not fire"
        };
        out.push_str(&format!(
            "alert {} {wanted}: {verdict}\n",
            super::untrusted(&e.alert)
        ));
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn waiting_helps_only_while_an_expected_alert_is_missing_and_no_forbidden_one_fired() {
        let e = |alert: &str, expected: &'static str, met: bool| Expectation {
            alert: alert.into(),
            expected,
            met,
            fired_for: Vec::new(),
        };
        assert!(worth_waiting(&[
            e("A", "fire", false),
            e("B", "not_fire", true)
        ]));
        assert!(!worth_waiting(&[
            e("A", "fire", true),
            e("B", "not_fire", true)
        ]));
        assert!(!worth_waiting(&[
            e("A", "fire", false),
            e("B", "not_fire", false)
        ]));
        assert!(!worth_waiting(&[]));
    }
    use super::*;

    fn window() -> Window {
        Window::from_secs(600).unwrap()
    }

    #[test]
    fn the_query_selects_firing_alerts_of_the_run_vms() {
        let q = alerts_query("virtwork", &["virtwork-cpu-0", "a.b"], window());
        assert!(
            q.contains(
                r#"ALERTS{alertstate="firing",namespace="virtwork",name=~"virtwork-cpu-0|a\\.b"}"#
            ),
            "{q}"
        );
        assert!(q.contains("[10m:2s]"), "{q}");
        assert_eq!(q.matches(" or ").count(), 3);
        assert!(q.contains("count_over_time(timestamp(ALERTS{"), "{q}");
    }

    #[test]
    fn answers_become_fired_alerts_with_their_times() {
        let facts = BTreeMap::from([
            ("first|CpuBusy|virtwork|virtwork-cpu-0".to_string(), 1000.0),
            ("last|CpuBusy|virtwork|virtwork-cpu-0".to_string(), 1100.0),
            ("now|CpuBusy|virtwork|virtwork-cpu-0".to_string(), 1102.0),
            ("first|Gone|virtwork|virtwork-cpu-1".to_string(), 900.0),
            ("last|Gone|virtwork|virtwork-cpu-1".to_string(), 960.0),
        ]);
        let mut facts = facts;
        // Firing at 20 of the 2 s steps from 1000 to 1100: 40 s, the resolved gap not counted.
        facts.insert("steps|CpuBusy|virtwork|virtwork-cpu-0".to_string(), 20.0);
        let fired = fired_alerts(&facts, window());
        assert_eq!(fired.len(), 2);
        assert_eq!(fired[0].alertname, "CpuBusy");
        assert!(fired[0].firing_now && (fired[0].firing_seconds - 40.0).abs() < 1e-9);
        assert!(!fired[1].firing_now && (fired[1].firing_seconds - 62.0).abs() < 1e-9);
        let checks = AlertChecks {
            report: true,
            expect: vec!["CpuBusy".into(), "Never".into()],
            forbid: vec!["Gone".into(), "Quiet".into()],
        };
        let e = expectations(&checks, &fired);
        assert_eq!(
            e.iter().map(|e| e.met).collect::<Vec<_>>(),
            vec![true, false, false, true]
        );
        let failure = expectation_failure(&e, window(), None).unwrap();
        assert!(
            failure.starts_with("expected alert Never did not fire"),
            "{failure}"
        );
        let waited =
            expectation_failure(&e, window(), Some(std::time::Duration::from_secs(90))).unwrap();
        assert!(
            waited.contains("in the 10m window by the end of --timeout 90s"),
            "{waited}"
        );
        assert!(
            failure.ends_with("(and 1 more unmet alert expectation(s))"),
            "{failure}"
        );
        let text = text_section(&fired, &e, window());
        assert!(text.contains("alert Gone must not fire: NOT MET"), "{text}");
        assert!(text.lines().next().unwrap().starts_with("ALERT"), "{text}");
        assert!(expectation_failure(&e[..1], window(), None).is_none());
    }
}
