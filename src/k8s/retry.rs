//! Which API failures are worth retrying, how long to wait, and the retry loop itself.
//!
//! Sans-IO core: [`classify`] maps a `kube::Error` to a [`Failure`] by status code and
//! reason (never by message text), [`Backoff`] computes full-jitter exponential delays
//! (200 ms·2^n capped at 10 s), and [`RetryPolicy::decide`] says "wait this long" or "give
//! up" from the failure, the attempt number, the clock and the deadline. All three are
//! plain functions with unit tests. [`retry`] is the thin async loop around them that also
//! stops when the command is cancelled (Ctrl-C), and bounds every attempt by
//! [`RetryPolicy::attempt_budget`] ([`ATTEMPT_TIMEOUT`], never past the command's deadline):
//! a server that accepts the connection and never answers costs one attempt, not forever.
//! Cancellation starts no new attempt and cuts backoff sleeps short, but a request already
//! sent gets up to [`IN_FLIGHT_GRACE`] to answer: the server may have acted on it, and a run
//! that drops the answer reports fewer objects than it left on the cluster.
//!
//! Retried: 429 (waiting at least the server's `retryAfterSeconds`; the `Retry-After`
//! header additionally pauses every request in client.rs), 500/502/503/504, reasons
//! `ServerTimeout`/`Timeout`/`TooManyRequests`/`InternalError`/`ServiceUnavailable`, and
//! transport failures (connection refused/reset/aborted, broken pipe, unexpected EOF,
//! timeouts, a connection closed before the response). Everything else — 400/401/403/404/
//! 409/422, TLS and configuration errors — fails immediately with the server's message.
//! A create whose retry meets AlreadyExists is resolved by the caller (apply.rs), which can
//! tell our own lost response from another run's object.

use std::error::Error as StdError;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What kind of failure an API call met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Worth another attempt; `retry_after` is the server's requested minimum wait.
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// 409 AlreadyExists (only meaningful for creates).
    AlreadyExists,
    /// 404 NotFound.
    NotFound,
    /// Anything else: retrying cannot help.
    Permanent,
}

/// HTTP codes the API server uses for transient conditions.
const TRANSIENT_CODES: [u16; 5] = [429, 500, 502, 503, 504];
/// `Status.reason` values that mean "try again".
const TRANSIENT_REASONS: [&str; 5] = [
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "InternalError",
    "ServiceUnavailable",
];

/// Classifies a kube error by status code/reason or by the transport error inside it.
pub fn classify(err: &kube::Error) -> Failure {
    match err {
        kube::Error::Api(status) => {
            if status.is_already_exists() {
                return Failure::AlreadyExists;
            }
            if status.is_not_found() {
                return Failure::NotFound;
            }
            // A client error (4xx other than 429) is final whatever its reason says; for
            // other codes a transient reason is enough (client-go decides by reason too).
            let client_error = (400..500).contains(&status.code) && status.code != 429;
            if TRANSIENT_CODES.contains(&status.code)
                || (!client_error && TRANSIENT_REASONS.contains(&status.reason.as_str()))
            {
                let retry_after = status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s)));
                let reason = if status.reason.is_empty() {
                    format!("HTTP {}", status.code)
                } else {
                    format!("HTTP {} {}", status.code, status.reason)
                };
                return Failure::Transient {
                    reason,
                    retry_after,
                };
            }
            Failure::Permanent
        }
        kube::Error::HyperError(e) => classify_transport(e),
        kube::Error::Service(e) => classify_transport(e.as_ref()),
        kube::Error::ReadEvents(e) => {
            if is_transient_io(e.kind()) {
                Failure::Transient {
                    reason: format!("reading the response: {}", e.kind()),
                    retry_after: None,
                }
            } else {
                Failure::Permanent
            }
        }
        _ => Failure::Permanent,
    }
}

fn is_transient_io(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        kind,
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | NotConnected
            | BrokenPipe
            | UnexpectedEof
            | TimedOut
            | Interrupted
    )
}

/// Walks an error's source chain looking for a transient I/O or HTTP-connection cause.
fn classify_transport(err: &(dyn StdError + 'static)) -> Failure {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && is_transient_io(io.kind())
        {
            return Failure::Transient {
                reason: format!("connection error: {}", io.kind()),
                retry_after: None,
            };
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_closed() || h.is_canceled() || h.is_timeout())
        {
            return Failure::Transient {
                reason: format!("connection error: {h}"),
                retry_after: None,
            };
        }
        current = e.source();
    }
    Failure::Permanent
}

/// Full-jitter exponential backoff: attempt n waits a uniform random time in
/// `[0, min(cap, base·2^n)]` (AWS "full jitter": de-synchronises many retrying workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The ceiling of attempt `attempt`'s delay (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The delay for attempt `attempt` given a uniform random number `unit` in [0, 1).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        self.ceiling(attempt).mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Sleep this long, then try again.
    RetryAfter(Duration),
    /// Stop: the failure is permanent, or the deadline leaves no room for another attempt.
    GiveUp,
}

/// Longest one request attempt may take (connect, credentials, response and body) when the
/// command's deadline is further away. The API server answers ordinary requests in
/// milliseconds and ends its own handlers after 60 s; 30 s leaves room for a slow link or an
/// exec credential plugin while a silent connection is abandoned and retried in time.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Backoff plus deadlines: retry transient failures until `deadline`, and never let one
/// attempt run longer than `attempt_timeout` or past `attempt_deadline` (the command's
/// deadline; `deadline` may be earlier when only a short retry window is wanted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub backoff: Backoff,
    /// No retry is scheduled past this instant.
    pub deadline: Instant,
    /// No attempt runs past this instant.
    pub attempt_deadline: Instant,
    /// Longest single attempt.
    pub attempt_timeout: Duration,
}

impl RetryPolicy {
    /// The default backoff and [`ATTEMPT_TIMEOUT`], everything bounded by `deadline`.
    pub fn until(deadline: Instant) -> Self {
        RetryPolicy {
            backoff: Backoff::default(),
            deadline,
            attempt_deadline: deadline,
            attempt_timeout: ATTEMPT_TIMEOUT,
        }
    }

    /// The same policy retrying only until `retry_until` (attempts keep their bound).
    pub fn retrying_until(self, retry_until: Instant) -> Self {
        RetryPolicy {
            deadline: retry_until.min(self.deadline),
            ..self
        }
    }

    /// How long an attempt starting at `now` may take; None when the command's deadline has
    /// already passed.
    pub fn attempt_budget(&self, now: Instant) -> Option<Duration> {
        let left = self.attempt_deadline.checked_duration_since(now)?;
        (!left.is_zero()).then(|| left.min(self.attempt_timeout))
    }

    /// Decides after `attempt` (0-based) failed with `failure` at time `now`.
    pub fn decide(&self, failure: &Failure, attempt: u32, now: Instant, unit: f64) -> Decision {
        let Failure::Transient { retry_after, .. } = failure else {
            return Decision::GiveUp;
        };
        let jittered = self.backoff.delay(attempt, unit);
        let delay = retry_after.map_or(jittered, |server| server.max(jittered));
        if now + delay >= self.deadline {
            return Decision::GiveUp;
        }
        Decision::RetryAfter(delay)
    }
}

/// The error of an attempt abandoned after `after` without a complete response (or of one
/// never started because the deadline had passed): a transient transport failure.
/// `attempt_bound` is the policy's longest attempt: an attempt given less (`after` below it)
/// was cut short by the command's `--timeout`, and the message says so, since the request may
/// never have left the `--qps` queue (a large cleanup at the default rate queues deletes for
/// minutes).
pub fn timed_out(after: Duration, attempt_bound: Duration) -> kube::Error {
    let message = if after.is_zero() {
        "the command's --timeout ran out before the request could be sent".to_string()
    } else if after < attempt_bound {
        format!(
            "no complete response from the API server within {:.1}s, when the command's --timeout ran out",
            after.as_secs_f64()
        )
    } else {
        format!(
            "no complete response from the API server within {:.1}s",
            after.as_secs_f64()
        )
    };
    kube::Error::Service(Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        message,
    )))
}

/// Why [`retry`] stopped without a result.
#[derive(Debug)]
pub enum RetryError {
    /// The command was cancelled (Ctrl-C / SIGTERM) before or between attempts.
    Cancelled,
    /// The last attempt's error; `attempts` is how many were made, `transient` whether we
    /// stopped only because of the deadline.
    Failed {
        error: kube::Error,
        attempts: u32,
        transient: bool,
    },
}

impl RetryError {
    /// Converts into the crate error, with `context` naming the object and the action.
    pub fn into_error(self, context: impl Into<String>) -> crate::error::Error {
        match self {
            RetryError::Cancelled => crate::error::Error::Interrupted,
            RetryError::Failed {
                error,
                attempts,
                transient,
            } => {
                let context = context.into();
                if transient && attempts > 1 {
                    crate::error::Error::kube(
                        format!(
                            "{context} (the command's --timeout ran out after {attempts} attempts; the last one failed with)"
                        ),
                        error,
                    )
                } else {
                    crate::error::Error::kube(context, error)
                }
            }
        }
    }

    /// The classification of the final error (None when cancelled).
    pub fn failure(&self) -> Option<Failure> {
        match self {
            RetryError::Cancelled => None,
            RetryError::Failed { error, .. } => Some(classify(error)),
        }
    }
}

/// At most one retry notice on stderr per this long, however many requests retry at once.
pub const RETRY_NOTICE_EVERY: Duration = Duration::from_secs(10);

/// When the last retry notice was printed (process-wide: concurrent requests share a wave).
static LAST_RETRY_NOTICE: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// Whether a retry at `now` opens a new wave: none announced yet, or the last notice is at
/// least `every` old.
pub fn notice_due(last: Option<Instant>, now: Instant, every: Duration) -> bool {
    last.is_none_or(|last| now.saturating_duration_since(last) >= every)
}

/// Whether a retry happening now may print its notice (the first of a wave does; the
/// process shares the waves).
pub fn retry_notice_due() -> bool {
    let now = Instant::now();
    let mut last = LAST_RETRY_NOTICE.lock().unwrap_or_else(|e| e.into_inner());
    if !notice_due(*last, now, RETRY_NOTICE_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

/// One warning per wave of retries, so a flaky server is visible without a line per request.
fn announce_retry_wave(what: &str, reason: &str, deadline: Instant) {
    let now = Instant::now();
    if !retry_notice_due() {
        return;
    }
    tracing::warn!(
        "API requests are failing transiently ({what}: {reason}); retrying for up to {}s more",
        deadline.saturating_duration_since(now).as_secs()
    );
}

/// How long a request already on the wire may still answer after cancellation.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_secs(5);

/// Runs `attempt` until it succeeds, fails permanently, the policy's deadline leaves no room
/// for another try, or `cancel` fires (checked before each attempt and during sleeps). A
/// request in flight when `cancel` fires keeps up to [`IN_FLIGHT_GRACE`]: its success is
/// returned (the caller records what now exists), anything else ends as `Cancelled`.
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    what: &str,
    mut attempt: F,
) -> Result<T, RetryError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut n: u32 = 0;
    loop {
        if cancel.is_cancelled() {
            return Err(RetryError::Cancelled);
        }
        let Some(budget) = policy.attempt_budget(Instant::now()) else {
            return Err(RetryError::Failed {
                error: timed_out(Duration::ZERO, policy.attempt_timeout),
                attempts: n.max(1),
                transient: true,
            });
        };
        let in_flight = tokio::time::timeout(budget, attempt());
        tokio::pin!(in_flight);
        let outcome = tokio::select! {
            biased;
            outcome = &mut in_flight => outcome.unwrap_or_else(|_| {
                Err(timed_out(budget, policy.attempt_timeout))
            }),
            () = cancel.cancelled() => {
                return match tokio::time::timeout(IN_FLIGHT_GRACE, in_flight).await {
                    Ok(Ok(Ok(value))) => Ok(value),
                    _ => Err(RetryError::Cancelled),
                };
            }
        };
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        // An attempt that failed as the stop arrived (the request gate refuses to send once
        // the command is stopping, and answers before the cancellation branch is polled) is
        // the interrupt, not a failure of the request.
        if cancel.is_cancelled() {
            return Err(RetryError::Cancelled);
        }
        let failure = classify(&error);
        match policy.decide(&failure, n, Instant::now(), fastrand::f64()) {
            Decision::GiveUp => {
                return Err(RetryError::Failed {
                    error,
                    attempts: n + 1,
                    transient: matches!(failure, Failure::Transient { .. }),
                });
            }
            Decision::RetryAfter(delay) => {
                if let Failure::Transient { reason, .. } = &failure {
                    tracing::debug!(
                        what,
                        attempt = n + 1,
                        reason = reason.as_str(),
                        delay_ms = delay.as_millis() as u64,
                        "retrying API request"
                    );
                    announce_retry_wave(what, reason, policy.deadline);
                }
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return Err(RetryError::Cancelled),
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
        n = n.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_cut_by_the_deadline_say_it_was_the_timeout() {
        let error = RetryError::Failed {
            error: timed_out(Duration::from_millis(300), Duration::from_secs(30)),
            attempts: 6,
            transient: true,
        }
        .into_error("listing VMs in virtwork")
        .to_string();
        assert!(
            error.starts_with(
                "listing VMs in virtwork (the command's --timeout ran out after 6 attempts"
            ),
            "{error}"
        );
        assert!(
            error.contains("when the command's --timeout ran out"),
            "{error}"
        );
    }
    use kube::core::Status;

    #[test]
    fn retry_notices_come_once_per_wave() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        assert!(notice_due(None, t0, every));
        assert!(!notice_due(Some(t0), t0 + Duration::from_secs(9), every));
        assert!(notice_due(Some(t0), t0 + every, every));
    }
    use kube::core::response::StatusDetails;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: reason.to_string(),
            message: format!("server says {reason}"),
            ..Default::default()
        }))
    }

    #[test]
    fn transient_status_codes_and_reasons_are_retried() {
        for (code, reason) in [
            (429, "TooManyRequests"),
            (500, "InternalError"),
            (502, ""),
            (503, "ServiceUnavailable"),
            (504, "Timeout"),
            (504, ""),
            (500, ""),
        ] {
            assert!(
                matches!(classify(&api(code, reason)), Failure::Transient { .. }),
                "{code} {reason}"
            );
        }
        // A reason alone is enough for non-client-error codes...
        assert!(matches!(
            classify(&api(520, "ServerTimeout")),
            Failure::Transient { .. }
        ));
        // ...but a 4xx stays final whatever its reason claims.
        assert_eq!(classify(&api(403, "InternalError")), Failure::Permanent);
    }

    #[test]
    fn permanent_statuses_are_not_retried() {
        for (code, reason) in [
            (400, "BadRequest"),
            (401, "Unauthorized"),
            (403, "Forbidden"),
            (409, "Conflict"),
            (422, "Invalid"),
            (405, "MethodNotAllowed"),
        ] {
            assert_eq!(classify(&api(code, reason)), Failure::Permanent, "{code}");
        }
        assert_eq!(classify(&api(404, "NotFound")), Failure::NotFound);
        assert_eq!(classify(&api(409, "AlreadyExists")), Failure::AlreadyExists);
    }

    #[test]
    fn server_retry_after_seconds_are_kept() {
        let err = kube::Error::Api(Box::new(Status {
            code: 429,
            reason: "TooManyRequests".into(),
            details: Some(
                serde_json::from_value::<StatusDetails>(
                    serde_json::json!({"retryAfterSeconds": 3}),
                )
                .unwrap(),
            ),
            ..Default::default()
        }));
        let Failure::Transient { retry_after, .. } = classify(&err) else {
            panic!("429 must be transient");
        };
        assert_eq!(retry_after, Some(Duration::from_secs(3)));
    }

    #[test]
    fn transport_errors_are_classified_by_their_io_cause() {
        for kind in [
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::UnexpectedEof,
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::BrokenPipe,
        ] {
            // Wrapped twice, as hyper-util wraps connect errors.
            #[derive(Debug)]
            struct Wrapper(std::io::Error);
            impl std::fmt::Display for Wrapper {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("client error")
                }
            }
            impl StdError for Wrapper {
                fn source(&self) -> Option<&(dyn StdError + 'static)> {
                    Some(&self.0)
                }
            }
            let err = kube::Error::Service(Box::new(Wrapper(std::io::Error::from(kind))));
            assert!(
                matches!(classify(&err), Failure::Transient { .. }),
                "{kind:?}"
            );
        }
        let other = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate",
        )));
        assert_eq!(classify(&other), Failure::Permanent);
    }

    #[test]
    fn backoff_doubles_from_200ms_and_caps_at_10s() {
        let b = Backoff::default();
        assert_eq!(b.ceiling(0), Duration::from_millis(200));
        assert_eq!(b.ceiling(1), Duration::from_millis(400));
        assert_eq!(b.ceiling(5), Duration::from_millis(6400));
        assert_eq!(b.ceiling(6), Duration::from_secs(10));
        assert_eq!(b.ceiling(200), Duration::from_secs(10));
        assert_eq!(b.delay(3, 0.0), Duration::ZERO);
        assert_eq!(b.delay(3, 0.5), Duration::from_millis(800));
        assert!(b.delay(3, 0.999_999) <= Duration::from_millis(1600));
    }

    #[test]
    fn decide_respects_deadline_retry_after_and_permanence() {
        let now = Instant::now();
        let policy = RetryPolicy::until(now + Duration::from_secs(5));
        let transient = Failure::Transient {
            reason: "HTTP 503".into(),
            retry_after: None,
        };
        assert_eq!(
            policy.decide(&transient, 1, now, 0.5),
            Decision::RetryAfter(Duration::from_millis(200))
        );
        let throttled = Failure::Transient {
            reason: "HTTP 429".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            policy.decide(&throttled, 0, now, 0.5),
            Decision::RetryAfter(Duration::from_secs(2))
        );
        // No room left before the deadline.
        assert_eq!(
            policy.decide(&throttled, 0, now + Duration::from_secs(4), 0.5),
            Decision::GiveUp
        );
        for failure in [
            Failure::Permanent,
            Failure::NotFound,
            Failure::AlreadyExists,
        ] {
            assert_eq!(policy.decide(&failure, 0, now, 0.5), Decision::GiveUp);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_loop_retries_transient_then_succeeds() {
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(60));
        let cancel = CancellationToken::new();
        let mut calls = 0;
        let result = retry(&policy, &cancel, "test", || {
            calls += 1;
            let n = calls;
            async move {
                if n < 4 {
                    Err(api(503, "ServiceUnavailable"))
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(result, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_loop_stops_on_permanent_error_and_deadline() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(60));
        let mut calls = 0;
        let err = retry(&policy, &cancel, "test", || {
            calls += 1;
            async { Err::<(), _>(api(403, "Forbidden")) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 1);
        assert!(matches!(
            err,
            RetryError::Failed {
                attempts: 1,
                transient: false,
                ..
            }
        ));

        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(30));
        let start = Instant::now();
        let err = retry(&policy, &cancel, "test", || async {
            Err::<(), _>(api(500, "InternalError"))
        })
        .await
        .unwrap_err();
        assert!(matches!(
            err,
            RetryError::Failed {
                transient: true,
                ..
            }
        ));
        assert!(Instant::now() <= start + Duration::from_secs(30));
    }

    #[test]
    fn attempts_are_bounded_by_the_attempt_timeout_and_the_command_deadline() {
        let now = Instant::now();
        let policy = RetryPolicy::until(now + Duration::from_secs(100));
        assert_eq!(policy.attempt_budget(now), Some(ATTEMPT_TIMEOUT));
        assert_eq!(
            policy.attempt_budget(now + Duration::from_secs(90)),
            Some(Duration::from_secs(10))
        );
        assert_eq!(policy.attempt_budget(now + Duration::from_secs(100)), None);
        assert_eq!(policy.attempt_budget(now + Duration::from_secs(101)), None);
        // A short retry window keeps the attempt bound of the command.
        let reach = policy.retrying_until(now + Duration::from_secs(3));
        assert_eq!(reach.deadline, now + Duration::from_secs(3));
        assert_eq!(reach.attempt_budget(now), Some(ATTEMPT_TIMEOUT));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_never_completes_is_abandoned_at_the_deadline() {
        let cancel = CancellationToken::new();
        let start = Instant::now();
        let policy = RetryPolicy::until(start + Duration::from_secs(5));
        let mut calls = 0;
        let err = retry(&policy, &cancel, "test", || {
            calls += 1;
            std::future::pending::<Result<(), kube::Error>>()
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 1);
        assert_eq!(Instant::now(), start + Duration::from_secs(5));
        let RetryError::Failed {
            error, transient, ..
        } = err
        else {
            panic!("expected a failure");
        };
        assert!(transient);
        assert!(matches!(classify(&error), Failure::Transient { .. }));
        assert!(
            error
                .to_string()
                .contains("within 5.0s, when the command's --timeout ran out"),
            "the deadline, not the API server, ended the attempt: {error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_past_its_own_bound_blames_the_api_server() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + ATTEMPT_TIMEOUT);
        let err = retry(&policy, &cancel, "test", || {
            std::future::pending::<Result<(), kube::Error>>()
        })
        .await
        .unwrap_err();
        let RetryError::Failed { error, .. } = err else {
            panic!("expected a failure");
        };
        assert!(
            error
                .to_string()
                .contains("no complete response from the API server within 30.0s"),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_attempt_is_retried_while_the_deadline_allows() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(120));
        let mut calls = 0;
        let value = retry(&policy, &cancel, "test", || {
            calls += 1;
            let n = calls;
            async move {
                if n == 1 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, kube::Error>(n)
            }
        })
        .await
        .unwrap();
        assert_eq!(value, 2);
    }

    /// Cancels `cancel` after `delay` (of the test's paused clock).
    fn cancel_after(cancel: &CancellationToken, delay: Duration) {
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            trigger.cancel();
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_at_cancellation_may_still_answer() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(3600));
        cancel_after(&cancel, Duration::from_millis(10));
        let value = retry(&policy, &cancel, "test", || async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok::<_, kube::Error>(7)
        })
        .await
        .unwrap();
        assert_eq!(value, 7, "the answer that arrived within the grace is kept");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_at_cancellation_is_dropped_after_the_grace() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(3600));
        cancel_after(&cancel, Duration::from_millis(10));
        let started = Instant::now();
        let err = retry(&policy, &cancel, "test", || async {
            tokio::time::sleep(Duration::from_secs(20)).await;
            Ok::<_, kube::Error>(7)
        })
        .await
        .unwrap_err();
        assert!(matches!(err, RetryError::Cancelled));
        assert!(started.elapsed() < Duration::from_millis(10) + IN_FLIGHT_GRACE * 2);
        assert!(started.elapsed() >= IN_FLIGHT_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_in_flight_at_cancellation_is_not_retried() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(3600));
        cancel_after(&cancel, Duration::from_millis(10));
        let mut calls = 0;
        let err = retry(&policy, &cancel, "test", || {
            calls += 1;
            async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err::<(), _>(api(503, ""))
            }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, RetryError::Cancelled));
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_caused_by_the_stop_itself_is_the_interrupt() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy::until(Instant::now() + Duration::from_secs(3600));
        // The attempt sees the stop first and fails at once with a permanent error, as a
        // request refused by the stopping gate does.
        let err = retry(&policy, &cancel, "test", || {
            cancel.cancel();
            async { Err::<(), _>(api(403, "Forbidden")) }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, RetryError::Cancelled), "{err:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_interrupts_backoff() {
        let cancel = CancellationToken::new();
        let policy = RetryPolicy {
            backoff: Backoff {
                base: Duration::from_secs(5),
                cap: Duration::from_secs(5),
            },
            ..RetryPolicy::until(Instant::now() + Duration::from_secs(3600))
        };
        cancel_after(&cancel, Duration::from_millis(10));
        let err = retry(&policy, &cancel, "test", || async {
            Err::<(), _>(api(503, ""))
        })
        .await
        .unwrap_err();
        assert!(matches!(err, RetryError::Cancelled));
    }
}
