//! The domain vocabulary: values parsed once from user input into types that cannot hold an
//! invalid value — names, quantities, counts, SSH access, run ids, windows and the enumerated
//! choices — and the words every layer shares about the objects virtwork manages (their
//! kinds, per-kind counts, what became of a namespace).
//!
//! A leaf module: it depends on std, serde, uuid, clap (for `ValueEnum`) and strsim only,
//! never on another module of this crate. Every `FromStr` here fails with an [`Invalid`]
//! whose text is the accepted form ("expected ..."), so the configuration layer (env, YAML)
//! and clap (`value_parser`) reject a bad value with the same one-line message,
//! `invalid value "x" for <input>: expected ...`. Types that can hold a credential never
//! echo the rejected text.
//!
//! Must not: read files, the environment or flags; know about the cluster, plans or commands.

mod choices;
mod churn;
mod counts;
mod duration;
mod guest;
mod names;
mod objects;
mod pacing;
mod quantity;
mod run_ref;
mod ssh;
mod storage;
mod suggest;
mod window;

pub use choices::{
    AllowRestarts, ColorChoice, DryRunFlag, DryRunMode, EvictionStrategy, LogFormat, OutputChoice,
    OutputFormat, ReadyCondition, Switch,
};
pub use churn::{ChurnAction, ChurnActions, ChurnRate, ChurnSeed, MAX_CHURN_RATE, Share};
pub use counts::{
    Burst, Count, CpuCores, MAX_BURST, MAX_QPS, MAX_TIMEOUT_SECS, MAX_VM_CONCURRENCY, MAX_VM_COUNT,
    Qps, TimeoutSecs, VmConcurrency, VmCount, parse_int,
};
pub use guest::{GuestFamily, GuestOs};
pub use names::{
    DNS_SUBDOMAIN_MAX_LEN, DnsLabel, ImageRef, RunId, UserName, is_dns_subdomain, natural_cmp,
};
pub use objects::{KindCounts, ManagedKind, NamespaceOutcome};
pub use pacing::{FailFast, MAX_STARTING, MaxStarting, Pacing, Ramp};
pub use quantity::{MAX_QUANTITY_TEXT_LEN, MIN_DISK_SIZE, MIN_VM_MEMORY, Minimum, Quantity};
pub use run_ref::{Ambiguous, RunIdPrefix, RunIdSelector, RunRef};
pub use ssh::{PublicKey, SSH_KEY_TYPES, Secret, SshAccess, SshUser};
pub use storage::{AccessMode, StorageClassName, VolumeMode};
pub use suggest::suggest;
pub use window::Window;

use std::fmt;

/// Why a text is not a valid value. The reason states the accepted form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Not of the accepted form; the reason starts with "expected".
    Expected(String),
    /// As [`Invalid::Expected`], for input that may hold a credential: the text is never shown.
    Concealed(String),
    /// A private key where a public key belongs; the text is never shown.
    PrivateKey,
}

impl Invalid {
    /// The one-line message for `text` given as `input` (`--memory`, `VIRTWORK_MEMORY`,
    /// `memory in ./f.yaml`). Concealed variants leave the text out.
    pub fn message(&self, input: &str, text: &str) -> String {
        match self {
            Invalid::Expected(reason) if looks_secret(text) => format!(
                "invalid value {SECRET_SHOWN} for {input}: {reason} (the value looks like key \
                 material or a token, so it is not shown)"
            ),
            Invalid::Expected(reason) => format!("invalid value {text:?} for {input}: {reason}"),
            Invalid::Concealed(reason) => format!("invalid value for {input}: {reason}"),
            Invalid::PrivateKey => {
                format!("{input} holds a private key; give the public key (the .pub file)")
            }
        }
    }
}

/// Shown instead of a value that looks like a secret.
pub const SECRET_SHOWN: &str = "<redacted>";

/// `text` as an error message quotes it (`"..."`, escaped), or [`SECRET_SHOWN`] when it looks
/// like a credential ([`looks_secret`]): every message that echoes what a user gave (a YAML
/// key, a workload param, a catalog param) quotes it through here.
pub fn shown(text: &str) -> String {
    if looks_secret(text) {
        SECRET_SHOWN.to_string()
    } else {
        format!("{text:?}")
    }
}

/// Whether `text` looks like a credential pasted into the wrong place, whatever the input: a
/// PEM block or part of one (a private key, `$(cat key)`), a JSON Web Token (Kubernetes
/// service-account tokens), an OpenShift `sha256~` token, or a multi-line value of some
/// length (a pasted file). Such a value is never echoed in an error.
pub fn looks_secret(text: &str) -> bool {
    let jwt = text.trim().starts_with("eyJ") && text.matches('.').count() >= 2;
    text.contains("PRIVATE KEY")
        || text.contains("-----BEGIN")
        || text.contains("-----END")
        || text.trim().starts_with("sha256~")
        || jwt
        || (text.contains('\n') && text.len() > 64)
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Expected(reason) | Invalid::Concealed(reason) => f.write_str(reason),
            Invalid::PrivateKey => f.write_str("holds a private key; give the public key"),
        }
    }
}

impl std::error::Error for Invalid {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_input_and_conceal_credentials() {
        let plain = Invalid::Expected("expected a whole number of at least 1".into());
        assert_eq!(
            plain.message("--cpu-cores", "two"),
            r#"invalid value "two" for --cpu-cores: expected a whole number of at least 1"#
        );
        let concealed = Invalid::Concealed("expected a password on one line".into());
        assert_eq!(
            concealed.message("--ssh-password", "hunter2\nx"),
            "invalid value for --ssh-password: expected a password on one line"
        );
        assert_eq!(
            Invalid::PrivateKey.message("VIRTWORK_SSH_AUTHORIZED_KEYS", "-----BEGIN"),
            "VIRTWORK_SSH_AUTHORIZED_KEYS holds a private key; give the public key (the .pub file)"
        );
    }

    #[test]
    fn a_secret_given_to_any_input_is_never_echoed() {
        let why = Invalid::Expected("expected a whole number of at least 1".into());
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----\n";
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl";
        for secret in [
            key,
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU PRIVATE KEY",
            jwt,
            "sha256~abcdefghijkl",
        ] {
            let message = why.message("VIRTWORK_VM_COUNT", secret);
            assert!(
                message.starts_with(
                    "invalid value <redacted> for VIRTWORK_VM_COUNT: expected a whole number"
                ),
                "{message}"
            );
            assert!(
                !message.contains("b3Bl")
                    && !message.contains("eyJ")
                    && !message.contains("abcdefghijkl"),
                "{message}"
            );
        }
        assert_eq!(
            why.message("--vm-count", "two"),
            r#"invalid value "two" for --vm-count: expected a whole number of at least 1"#
        );
    }
}
