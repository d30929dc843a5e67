//! A failed API call as one line for a terminal: the server's message (escaped and capped),
//! its reason and HTTP code. Cleanup, churn and the namespace check report failures with it.
//!
//! Must not: decide whether a failure is retried or fatal (the retry policy does).

/// A kube error as one line, with the API status reason and code when there is one, safe
/// for a terminal (the message is escaped and capped; see [`crate::error::kube_text`]).
pub fn one_line(err: &kube::Error) -> String {
    let text = match err {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", crate::terminal::safe(&status.reason, 64))
            };
            let message = crate::terminal::safe(&status.message, crate::terminal::MESSAGE_CHARS);
            format!("{message}{reason}: HTTP {}", status.code)
        }
        other => crate::error::kube_text(other),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
