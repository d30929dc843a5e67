//! The one error type of virtwork and its mapping to process exit codes.
//!
//! Every failure a user can meet is a variant here. The variant decides the exit code:
//! 2 for bad input found before any cluster call, 1 for runtime failures, 130 for an
//! interrupt. Messages are one line and name the offending input. [`Outcome`] is the one
//! reading of a command's result as success, failure or cancellation, shared by the audit
//! record's status and the run summary's.

use std::path::PathBuf;

use crate::terminal::{MESSAGE_CHARS, safe};

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input (flags, env, YAML, params, catalog, key files) detected before any cluster call.
    #[error("{0}")]
    Input(String),

    /// A Kubernetes API call failed; `context` says what we were doing.
    #[error("{context}: {}", kube_text(source))]
    Kube {
        context: String,
        #[source]
        source: Box<kube::Error>,
    },

    /// A file could not be read or written.
    #[error("{context} {}: {source}", path.display())]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The audit database could not be opened or written when that was fatal.
    #[error("audit database: {0}")]
    Audit(String),

    /// Any other runtime failure (readiness, partial cleanup, preflight findings).
    #[error("{0}")]
    Runtime(String),

    /// The user interrupted the command (SIGINT/SIGTERM).
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// Convenience constructor for bad input.
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }

    /// Convenience constructor for runtime failures.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }

    /// Wraps a kube error with what we were doing.
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// The process exit code for this error: 2 input, 1 runtime, 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Interrupted => 130,
            Error::Kube { .. } | Error::Io { .. } | Error::Audit(_) | Error::Runtime(_) => 1,
        }
    }

    /// Whether this is a write to stdout whose reader went away (`virtwork ... | head -1`):
    /// not a failure of the command, so it exits 0 without a message.
    pub fn is_closed_stdout(&self) -> bool {
        matches!(
            self,
            Error::Io { path, source, .. }
                if path.as_os_str() == "stdout"
                    && source.kind() == std::io::ErrorKind::BrokenPipe
        )
    }
}

/// How a command (or one of its steps) ended, judged from its result: an interrupt is
/// `Cancelled`, any other error `Failed`. The audit record's status and the run summary's
/// `status` are both this value, so they cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failed,
    Cancelled,
}

impl Outcome {
    /// The outcome of `result`.
    pub fn of<T>(result: &Result<T>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(Error::Interrupted) => Outcome::Cancelled,
            Err(_) => Outcome::Failed,
        }
    }

    /// As stored and printed: `success`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// The text of a failed API call, one line, safe for a terminal. A 403 becomes one line
/// naming who may not do what where, and the command that checks it; another API Status is
/// its message (escaped and capped: an admission webhook or a hostile server writes it),
/// reason and code; a transport failure is its whole cause chain, saying when it was the
/// server's certificate.
pub fn kube_text(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.code == 403 => {
            forbidden_text(&safe(&status.message, MESSAGE_CHARS))
        }
        kube::Error::Api(status) => {
            let reason = match status.reason.as_str() {
                "" => String::new(),
                reason => format!(" ({})", safe(reason, 64)),
            };
            format!(
                "{}{reason}: HTTP {}",
                safe(&status.message, MESSAGE_CHARS),
                status.code
            )
        }
        kube::Error::Service(cause) => transport_text(cause.as_ref()),
        kube::Error::HyperError(cause) => transport_text(cause),
        other => safe(&chain_text(other), MESSAGE_CHARS),
    }
}

/// An error and its causes joined by `: `, each cause once (transport errors hide the useful
/// part, such as "certificate unknown", several sources deep).
pub fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut current = err.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

/// A failure below HTTP, named by what failed: the server's certificate, the TLS handshake,
/// or the cause chain as it is.
fn transport_text(err: &(dyn std::error::Error + 'static)) -> String {
    let chain = chain_text(err);
    let lower = chain.to_ascii_lowercase();
    let text = if lower.contains("certificate") || lower.contains("unknownissuer") {
        format!(
            "TLS: the server's certificate was not accepted ({chain}); check the cluster's \
             certificate-authority data in the kubeconfig and that the server URL uses a name \
             the certificate is for"
        )
    } else if lower.contains("tls") || lower.contains("handshake") {
        format!("TLS handshake failed ({chain})")
    } else {
        chain
    };
    safe(&text, MESSAGE_CHARS)
}

/// `forbidden: User "u" cannot create virtualmachines.kubevirt.io in namespace ns (RBAC);
/// check with `oc auth can-i create virtualmachines.kubevirt.io -n ns``, from the API
/// server's RBAC message; a message in another shape is kept whole with a general hint.
fn forbidden_text(message: &str) -> String {
    match parse_rbac_denial(message) {
        Some(denial) => {
            let resource = if denial.group.is_empty() {
                denial.resource.to_string()
            } else {
                format!("{}.{}", denial.resource, denial.group)
            };
            let (place, flag) = match denial.namespace {
                Some(ns) => (format!("in namespace {ns}"), format!(" -n {ns}")),
                None => ("at the cluster scope".to_string(), String::new()),
            };
            format!(
                "forbidden: {} cannot {} {resource} {place} (RBAC: the account lacks this \
                 permission); check with `oc auth can-i {} {resource}{flag}` (or kubectl) and \
                 see docs/deployment.md#rbac",
                denial.who, denial.verb, denial.verb
            )
        }
        None => format!(
            "forbidden: {message} (RBAC or admission); list what the account may do with \
             `oc auth can-i --list` (or kubectl)"
        ),
    }
}

/// The parts of kube-apiserver's RBAC denial: `<what> is forbidden: User "u" cannot <verb>
/// resource "<res>" in API group "<g>" in the namespace "<ns>"` (or `at the cluster scope`).
struct RbacDenial<'a> {
    who: &'a str,
    verb: &'a str,
    resource: &'a str,
    group: &'a str,
    namespace: Option<&'a str>,
}

fn parse_rbac_denial(message: &str) -> Option<RbacDenial<'_>> {
    let (_, rest) = message.split_once(" is forbidden: ")?;
    let (who, rest) = rest.split_once(" cannot ")?;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let (resource, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(" in API group \"")?;
    let (group, rest) = rest.split_once('"')?;
    let namespace = match rest.strip_prefix(" in the namespace \"") {
        Some(ns) => Some(ns.split_once('"')?.0),
        None => None,
    };
    Some(RbacDenial {
        who,
        verb,
        resource,
        group,
        namespace,
    })
}

#[cfg(test)]
mod forbidden_tests {
    use super::*;

    #[test]
    fn rbac_denials_read_as_one_actionable_line() {
        let namespaced = "virtualmachines.kubevirt.io is forbidden: User \"system:serviceaccount:virtwork-system:virtwork\" cannot create resource \"virtualmachines\" in API group \"kubevirt.io\" in the namespace \"team-a\"";
        assert_eq!(
            forbidden_text(namespaced),
            "forbidden: User \"system:serviceaccount:virtwork-system:virtwork\" cannot create virtualmachines.kubevirt.io in namespace team-a (RBAC: the account lacks this permission); check with `oc auth can-i create virtualmachines.kubevirt.io -n team-a` (or kubectl) and see docs/deployment.md#rbac"
        );
        let cluster = "namespaces is forbidden: User \"u\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope";
        assert!(forbidden_text(cluster).contains("cannot list namespaces at the cluster scope"));
        assert!(forbidden_text(cluster).contains("`oc auth can-i list namespaces`"));
        let other = "admission webhook \"x\" denied the request";
        assert!(forbidden_text(other).contains("denied the request (RBAC or admission)"));
    }

    #[test]
    fn a_server_message_is_escaped_and_capped() {
        let status = kube::core::Status::failure(
            &format!(
                "denied \u{1b}]52;c;ZWNobyBoaQ==\u{7}{}",
                "x".repeat(50_000_000)
            ),
            "Invalid",
        )
        .with_code(422);
        let text = kube_text(&kube::Error::Api(status.boxed()));
        assert!(text.starts_with("denied \\u{1b}]52;c;"), "{}", &text[..40]);
        assert!(!text.contains('\u{1b}'));
        assert!(text.chars().count() < MESSAGE_CHARS + 40, "{}", text.len());
        assert!(
            text.ends_with("… (Invalid): HTTP 422"),
            "{}",
            &text[text.len() - 40..]
        );
    }

    #[test]
    fn a_certificate_failure_says_so() {
        #[derive(Debug)]
        struct Connect(std::io::Error);
        impl std::fmt::Display for Connect {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error (Connect)")
            }
        }
        impl std::error::Error for Connect {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let cause = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let err = kube::Error::Service(Box::new(Connect(cause)));
        let text = kube_text(&err);
        assert!(
            text.starts_with("TLS: the server's certificate was not accepted (client error (Connect): invalid peer certificate: UnknownIssuer)"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_is_cancelled_and_any_other_error_failed() {
        assert_eq!(Outcome::of(&Ok(())), Outcome::Success);
        assert_eq!(
            Outcome::of::<()>(&Err(Error::Interrupted)),
            Outcome::Cancelled
        );
        assert_eq!(
            Outcome::of::<()>(&Err(Error::runtime("x"))),
            Outcome::Failed
        );
        assert_eq!(Outcome::of::<()>(&Err(Error::input("x"))), Outcome::Failed);
        assert_eq!(Outcome::Cancelled.as_str(), "cancelled");
    }
}
