//! Reading Prometheus' answers and judging them: the `/api/v1/query` JSON, the outcome of
//! one check, and what a service-proxy probe's answer says about the endpoint behind it.
//!
//! Pure functions over status codes and bodies; the HTTP shell is prometheus.rs.

use serde::Serialize;
use serde_json::Value;

use crate::signals::contract::Check;

/// What an instant query returned.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryAnswer {
    /// The largest sample of the result vector (or the scalar); None when the vector is
    /// empty or every sample is NaN/±Inf (no data).
    Value(Option<f64>),
    /// Prometheus rejected the query (`status: error`): the query itself is wrong.
    Rejected { error_type: String, error: String },
}

/// Parses a `/api/v1/query` response body (any HTTP status: Prometheus sends its error
/// document with 400/422/503). Err: not a Prometheus API answer at all.
pub fn parse_query_response(body: &str) -> Result<QueryAnswer, String> {
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
}

impl Verdict {
    /// Whether this verdict makes verify fail.
    pub fn is_missing(self) -> bool {
        matches!(
            self,
            Verdict::Below | Verdict::NoData | Verdict::Error | Verdict::Unverifiable
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
