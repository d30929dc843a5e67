//! The one error type of virtwork and its mapping to process exit codes.
//!
//! Every failure a user can meet is a variant here. The variant decides the exit code:
//! 2 for bad input found before any cluster call, 1 for runtime failures, 130 for an
//! interrupt. Messages are one line and name the offending input.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input (flags, env, YAML, params, catalog, key files) detected before any cluster call.
    #[error("{0}")]
    Input(String),

    /// A Kubernetes API call failed; `context` says what we were doing.
    #[error("{context}: {source}")]
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
