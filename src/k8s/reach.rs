//! The first contact of a command with the API server: fail at once when nothing is there,
//! keep trying (and say so on stderr) when the server is there but not answering well.
//!
//! Owns: the decision [`first_contact`] (pure: a refused connection, an unknown host, a TLS
//! or credential failure end the command at once; timeouts, resets and 5xx are worth another
//! try) and [`reach`], the thin loop around it that GETs `/version` until the command's
//! deadline. Must not: decide what a command does once the server answered; retry requests
//! after the first contact (that is `retry.rs`, where a refused connection can be a server
//! restarting behind its load balancer).

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::k8s::client::Cluster;
use crate::k8s::preflight::unreachable_error;
use crate::k8s::retry::{Decision, Failure, RetryPolicy, classify, retry_notice_due, timed_out};

/// What one failed first-contact attempt means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstContact {
    /// The server answered (any Status but 401 proves a Kubernetes API is there).
    Answered,
    /// Nothing to wait for: refused, unknown host, TLS, credentials, a bad URL.
    Fatal,
    /// Worth another try: the reason, for the notice on stderr.
    Retry(String),
}

/// Classifies the error of a `/version` request made before the server ever answered.
pub fn first_contact(error: &kube::Error) -> FirstContact {
    if let kube::Error::Api(status) = error
        && status.code != 401
        && !matches!(classify(error), Failure::Transient { .. })
    {
        return FirstContact::Answered;
    }
    if refused(error) {
        return FirstContact::Fatal;
    }
    match classify(error) {
        Failure::Transient { reason, .. } => FirstContact::Retry(reason),
        Failure::AlreadyExists | Failure::NotFound => FirstContact::Answered,
        Failure::Permanent => FirstContact::Fatal,
    }
}

/// Whether a connection was refused somewhere in the error's source chain: no server
/// listens at the address (or the proxy's), so waiting cannot help.
fn refused(error: &kube::Error) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// GETs `/version` until the server answers: a refused connection, an unknown host or a
/// credential failure fails at once with what to check; a transient failure is retried
/// within `policy`, announced on stderr at most once per [`RETRY_NOTICE_EVERY`].
///
/// [`RETRY_NOTICE_EVERY`]: crate::k8s::retry::RETRY_NOTICE_EVERY
pub async fn reach(
    cluster: &Cluster,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<()> {
    let mut attempt: u32 = 0;
    loop {
        if cancel.is_cancelled() {
            return Err(Error::Interrupted);
        }
        let error = match policy.attempt_budget(Instant::now()) {
            None => timed_out(Duration::ZERO, policy.attempt_timeout),
            Some(budget) => {
                let sent = tokio::time::timeout(budget, cluster.client.apiserver_version());
                let answer = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return Err(Error::Interrupted),
                    answer = sent => answer,
                };
                match answer {
                    Ok(Ok(_)) => return Ok(()),
                    Ok(Err(error)) => error,
                    Err(_) => timed_out(budget, policy.attempt_timeout),
                }
            }
        };
        let reason = match first_contact(&error) {
            FirstContact::Answered => return Ok(()),
            FirstContact::Fatal => return Err(unreachable_error(cluster, &error)),
            FirstContact::Retry(reason) => reason,
        };
        let failure = classify(&error);
        let delay = match policy.decide(&failure, attempt, Instant::now(), fastrand::f64()) {
            Decision::GiveUp => return Err(unreachable_error(cluster, &error)),
            Decision::RetryAfter(delay) => delay,
        };
        if retry_notice_due() {
            tracing::warn!(
                "{} is not answering ({reason}); trying again until the command's time limit \
                 (attempt {})",
                cluster.describe(),
                attempt + 2
            );
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Error::Interrupted),
            () = tokio::time::sleep(delay) => {}
        }
        attempt = attempt.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: reason.to_string(),
            ..Default::default()
        }))
    }

    fn io(kind: std::io::ErrorKind) -> kube::Error {
        kube::Error::Service(Box::new(std::io::Error::new(kind, "transport")))
    }

    #[test]
    fn nothing_listening_or_bad_credentials_end_the_first_contact_at_once() {
        assert_eq!(
            first_contact(&io(std::io::ErrorKind::ConnectionRefused)),
            FirstContact::Fatal
        );
        assert_eq!(
            first_contact(&api(401, "Unauthorized")),
            FirstContact::Fatal
        );
        // An unknown host: the resolver's error is no transient I/O kind.
        assert_eq!(
            first_contact(&io(std::io::ErrorKind::Other)),
            FirstContact::Fatal
        );
    }

    #[test]
    fn a_slow_or_overloaded_server_is_tried_again_and_any_other_answer_will_do() {
        assert!(matches!(
            first_contact(&io(std::io::ErrorKind::TimedOut)),
            FirstContact::Retry(_)
        ));
        assert!(matches!(
            first_contact(&api(503, "ServiceUnavailable")),
            FirstContact::Retry(_)
        ));
        assert_eq!(
            first_contact(&api(403, "Forbidden")),
            FirstContact::Answered
        );
        assert_eq!(first_contact(&api(404, "NotFound")), FirstContact::Answered);
    }
}
