//! `virtwork verify`'s Prometheus flags → [`PrometheusTarget`]: where verify looks and which
//! token, if any, it may send to a `--prometheus` URL. Reads `--prometheus-token-file`
//! (regular files only, size-capped, never blocking on a FIFO).
//!
//! The rules: a user-given URL gets no token unless `--prometheus-token-file` or
//! `--prometheus-use-cluster-token` names one; no token goes over plain http unless
//! `--prometheus-allow-http-token` says so; a URL with userinfo is refused (it would be
//! neither sent nor safe to show). Must not: show a token or a URL's userinfo.

use std::path::Path;

use super::settings::{PrometheusCredential, PrometheusTarget};
use crate::cli::VerifyArgs;
use crate::error::{Error, Result};
use crate::model::Secret;
use crate::verify::prometheus::{display_url, is_valid_bearer_token};

/// The largest token file read (64 KiB): service-account and OIDC tokens are a few KiB.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// The Prometheus flags of a command that reads Prometheus (`verify`, `disruption`).
pub struct PrometheusFlags<'a> {
    pub prometheus: Option<&'a http::Uri>,
    pub prometheus_token_file: Option<&'a Path>,
    pub prometheus_use_cluster_token: bool,
    pub prometheus_allow_http_token: bool,
}

impl<'a> From<&'a VerifyArgs> for PrometheusFlags<'a> {
    fn from(args: &'a VerifyArgs) -> Self {
        PrometheusFlags {
            prometheus: args.prometheus.as_ref(),
            prometheus_token_file: args.prometheus_token_file.as_deref(),
            prometheus_use_cluster_token: args.prometheus_use_cluster_token,
            prometheus_allow_http_token: args.prometheus_allow_http_token,
        }
    }
}

impl<'a> From<&'a crate::cli::DisruptionArgs> for PrometheusFlags<'a> {
    fn from(args: &'a crate::cli::DisruptionArgs) -> Self {
        PrometheusFlags {
            prometheus: args.prometheus.as_ref(),
            prometheus_token_file: args.prometheus_token_file.as_deref(),
            prometheus_use_cluster_token: args.prometheus_use_cluster_token,
            prometheus_allow_http_token: args.prometheus_allow_http_token,
        }
    }
}

/// The Prometheus target of `args`; a warning about the token file's permissions, if any,
/// is pushed onto `notices`.
pub fn target<'a>(
    args: impl Into<PrometheusFlags<'a>>,
    notices: &mut Vec<String>,
) -> Result<PrometheusTarget> {
    let args: PrometheusFlags<'a> = args.into();
    let Some(url) = args.prometheus else {
        return Ok(PrometheusTarget::Discover);
    };
    if url.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(Error::input(format!(
            "--prometheus {}: credentials in the URL (user:password@) are not accepted: they \
             would not be sent and could show up in logs; pass a bearer token with \
             --prometheus-token-file",
            display_url(url)
        )));
    }
    let (credential, flag) = match (
        args.prometheus_token_file,
        args.prometheus_use_cluster_token,
    ) {
        (Some(path), _) => {
            let (token, warning) = read_token_file(path)?;
            notices.extend(warning);
            (
                PrometheusCredential::Token(token),
                "--prometheus-token-file",
            )
        }
        (None, true) => (
            PrometheusCredential::ClusterToken,
            "--prometheus-use-cluster-token",
        ),
        (None, false) => {
            return Ok(PrometheusTarget::Url {
                url: url.clone(),
                credential: PrometheusCredential::None,
            });
        }
    };
    if url.scheme_str() == Some("http") && !args.prometheus_allow_http_token {
        return Err(Error::input(format!(
            "{flag}: refusing to send a bearer token over plain http to {}; use an https:// \
             URL, or add --prometheus-allow-http-token to send it anyway",
            display_url(url)
        )));
    }
    Ok(PrometheusTarget::Url {
        url: url.clone(),
        credential,
    })
}

/// The bearer token in `path` (one token on one line) and a warning when group or others
/// may read the file, as OpenSSH warns about key files. The bounded, non-blocking read is the
/// one `--config` uses.
fn read_token_file(path: &Path) -> Result<(Secret, Option<String>)> {
    use std::os::unix::fs::PermissionsExt;
    let name = format!("--prometheus-token-file {}", path.display());
    const FORM: &str = "expected a regular file holding one bearer token on one line";
    let text = super::read_regular_file(path, MAX_TOKEN_FILE_BYTES)
        .map_err(|reason| Error::input(format!("{name}: {reason}; {FORM}")))?;
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(Error::input(format!("{name}: {FORM}")));
    }
    if !is_valid_bearer_token(token) {
        return Err(Error::input(format!(
            "{name}: the token contains a control or non-ASCII character; {FORM}"
        )));
    }
    // Only a warning hangs on the mode, so reading it again by path is enough.
    let mode = std::fs::metadata(path).map_or(0, |meta| meta.permissions().mode() & 0o777);
    let warning = (mode & 0o044 != 0).then(|| {
        format!(
            "{name} is readable by group or others (mode {mode:04o}); a bearer token should be \
             readable by you only: chmod 600 {}",
            path.display()
        )
    });
    Ok((Secret::new(token), warning))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content: &[u8], mode: u32) -> Result<(Secret, Option<String>)> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        read_token_file(&path)
    }

    #[test]
    fn a_private_token_file_is_read_without_warning() {
        let (token, warning) = read(b"abc.def-123\n", 0o600).unwrap();
        assert_eq!(token.expose(), "abc.def-123");
        assert_eq!(warning, None);
    }

    #[test]
    fn a_world_readable_token_file_warns_like_ssh() {
        let (_, warning) = read(b"abc", 0o644).unwrap();
        let warning = warning.unwrap();
        assert!(
            warning.contains("mode 0644") && warning.contains("chmod 600"),
            "{warning}"
        );
    }

    #[test]
    fn control_characters_oversize_and_devices_are_refused() {
        let e = read(b"abc\x07def", 0o600).unwrap_err().to_string();
        assert!(e.contains("control or non-ASCII"), "{e}");
        let big = vec![b'a'; MAX_TOKEN_FILE_BYTES as usize + 1];
        let e = read(&big, 0o600).unwrap_err().to_string();
        assert!(e.contains("larger than 64 KiB"), "{e}");
        let e = read_token_file(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
