//! SSH access injected into every guest: the account, its password (a [`Secret`]) and its
//! authorized public keys.
//!
//! What a public key is, is decided here once: one line `<type> <base64> [comment]` with a
//! plain key type from [`SSH_KEY_TYPES`]. An `authorized_keys` options prefix (`from=...`,
//! `command=...`) is refused: options are sshd policy with their own quoting grammar, and a
//! `command=` would run in the guest's shell. Certificates (`*-cert-v01@openssh.com`) are
//! refused too: a user certificate does not belong in `authorized_keys`. cloud-init writes
//! exactly what this type accepts. Rejected keys and passwords are never echoed.

use std::fmt;
use std::str::FromStr;

use super::{Invalid, UserName};

/// The plain OpenSSH public key types accepted in `authorized_keys`.
pub const SSH_KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// The longest password accepted (`--ssh-password`).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// A value that must never reach logs, debug output, error messages or the audit database.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The plain value; call only where it is consumed (hashing).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A secret given as text: one line (a newline usually means a file was pasted). Kept as
/// given, surrounding spaces included: they may be part of a password.
impl FromStr for Secret {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        if text.contains(['\n', '\r', '\0']) {
            Err(Invalid::Concealed(
                "expected a password on one line (the value is not shown)".into(),
            ))
        } else if text.len() > MAX_PASSWORD_BYTES {
            // SHA-512 crypt hashes the password thousands of times: a 100 kB value took
            // minutes, so an unbounded one is a hang, not a stronger password.
            Err(Invalid::Concealed(format!(
                "expected a password of at most {MAX_PASSWORD_BYTES} bytes (the value is not shown)"
            )))
        } else {
            Ok(Secret(text.to_string()))
        }
    }
}

/// One OpenSSH public key line, `<type> <base64> [comment]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(String);

impl PublicKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn is_well_formed(line: &str) -> bool {
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return false;
        }
        let mut fields = line.split_whitespace();
        let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else {
            return false;
        };
        SSH_KEY_TYPES.contains(&kind)
            && blob.len() >= 16
            && blob
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    }
}

impl FromStr for PublicKey {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let line = text.trim();
        if line.contains("PRIVATE KEY") {
            return Err(Invalid::PrivateKey);
        }
        if Self::is_well_formed(line) {
            Ok(PublicKey(line.to_string()))
        } else {
            Err(Invalid::Concealed(format!(
                "expected one OpenSSH public key line \"<type> <base64> [comment]\" such as \
                 \"ssh-ed25519 AAAAC3Nz... user@host\", <type> one of {} (no options prefix, no \
                 certificate; the value is not shown)",
                SSH_KEY_TYPES.join(", ")
            )))
        }
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `ssh-user` setting: a user name, or `""` for no account at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshUser(pub Option<UserName>);

impl FromStr for SshUser {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        if text.trim().is_empty() {
            return Ok(SshUser(None));
        }
        text.parse()
            .map(|name| SshUser(Some(name)))
            .map_err(|_| Invalid::Expected(format!("{}, or \"\" for no user", UserName::EXPECTED)))
    }
}

/// SSH access injected into every guest through cloud-init.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SshAccess {
    /// `None`: no account is created.
    pub user: Option<UserName>,
    pub password: Option<Secret>,
    /// In the order given.
    pub authorized_keys: Vec<PublicKey>,
}

impl SshAccess {
    /// Whether any credential was configured (recorded in the audit DB instead of the
    /// credential).
    pub fn auth_configured(&self) -> bool {
        self.password.is_some() || !self.authorized_keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\n\
        b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
        -----END OPENSSH PRIVATE KEY-----\n";

    #[test]
    fn public_keys_have_one_form() {
        let good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx user@host";
        assert_eq!(good.parse::<PublicKey>().unwrap().as_str(), good);
        assert!(
            "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY="
                .parse::<PublicKey>()
                .is_ok()
        );
        for bad in [
            "hello",
            "ssh-ed25519",
            "ssh-ed25519 short",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5$$$",
            "ssh-foo AAAAC3NzaC1lZDI1NTE5AAAAIK0",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0 me\nruncmd",
            // One decision for options and certificates: both refused.
            "from=\"10.0.0.1\" ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB",
            "command=\"reboot\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx",
            "ssh-ed25519-cert-v01@openssh.com AAAAIHNzaC1lZDI1NTE5LWNlcnQ",
        ] {
            let err = bad.parse::<PublicKey>().unwrap_err();
            assert!(matches!(err, Invalid::Concealed(_)), "{bad}");
            let message = err.message("--ssh-key", bad);
            assert!(
                message.starts_with("invalid value for --ssh-key: expected"),
                "{message}"
            );
            assert!(!message.contains(&format!("{bad:?}")), "{message}");
        }
        assert_eq!(PEM.parse::<PublicKey>().unwrap_err(), Invalid::PrivateKey);
    }

    #[test]
    fn passwords_are_one_line_and_never_printed() {
        assert_eq!(" p w ".parse::<Secret>().unwrap().expose(), " p w ");
        let err = "hunter2\nsecond".parse::<Secret>().unwrap_err();
        assert!(
            !err.message("--ssh-password", "hunter2\nsecond")
                .contains("hunter2")
        );
        assert_eq!(
            format!("{:?}", Secret::new("hunter2")),
            "Secret(<redacted>)"
        );
    }

    #[test]
    fn an_empty_ssh_user_means_no_account() {
        assert_eq!("".parse::<SshUser>(), Ok(SshUser(None)));
        assert_eq!("ops".parse::<SshUser>().unwrap().0.unwrap().as_str(), "ops");
        let err = "Bad User".parse::<SshUser>().unwrap_err().to_string();
        assert!(
            err.contains("Linux user name") && err.ends_with("or \"\" for no user"),
            "{err}"
        );
    }
}
