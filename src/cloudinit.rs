//! Renders a cloud-config value to `#cloud-config` YAML: bootcmd, packages, write_files,
//! runcmd and the users/SSH block. Knows nothing of workloads.
//!
//! The SSH account arrives validated by type (user name, public keys); a password only ever
//! leaves as a SHA-512 crypt hash with a random salt. Rendered user-data larger than the
//! 1 MiB Secret limit is refused ([`check_userdata_size`], the one check of that limit).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::SshAccess;

/// Largest user-data we hand to a Secret (Kubernetes' 1 MiB object limit; the reference
/// accepted exactly 1 MiB).
pub const USERDATA_LIMIT_BYTES: usize = 1 << 20;

/// A file cloud-init writes before `runcmd` runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteFile {
    pub path: String,
    pub content: String,
    /// Octal mode as a string, e.g. `"0644"`.
    pub permissions: String,
}

impl WriteFile {
    /// A root-owned file with mode `permissions`.
    pub fn new(path: &str, content: impl Into<String>, permissions: &str) -> Self {
        WriteFile {
            path: path.to_string(),
            content: content.into(),
            permissions: permissions.to_string(),
        }
    }
}

/// The login account injected into every guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserAccount {
    pub name: String,
    /// SHA-512 crypt (`$6$...`) of the password; `None` locks the password.
    pub password_hash: Option<String>,
    pub ssh_authorized_keys: Vec<String>,
}

impl UserAccount {
    /// The account for `ssh`, or `None` when the user asked for no account or gave no way to
    /// log in (no password, no key): a `users` section replaces the image's default user, so
    /// an account nobody can use would only take that user away. The name and keys are
    /// already valid by type; the password is hashed here (random salt).
    pub fn from_ssh(ssh: &SshAccess) -> Result<Option<UserAccount>> {
        let Some(name) = &ssh.user else {
            return Ok(None);
        };
        if ssh.password.is_none() && ssh.authorized_keys.is_empty() {
            return Ok(None);
        }
        let password_hash = match &ssh.password {
            Some(password) => Some(hash_password(password.expose())?),
            None => None,
        };
        Ok(Some(UserAccount {
            name: name.to_string(),
            password_hash,
            ssh_authorized_keys: ssh.authorized_keys.iter().map(|k| k.to_string()).collect(),
        }))
    }
}

/// Refuses user-data over [`USERDATA_LIMIT_BYTES`]; `what` names the workload and role.
pub fn check_userdata_size(userdata: &str, what: &str) -> Result<()> {
    if userdata.len() > USERDATA_LIMIT_BYTES {
        return Err(Error::input(format!(
            "cloud-init user-data for {what} is {} bytes, over the {USERDATA_LIMIT_BYTES} byte \
             (1 MiB) limit of a Kubernetes Secret; shrink the workload's files or params",
            userdata.len()
        )));
    }
    Ok(())
}

/// SHA-512 crypt of `password` with a random 16-byte salt (`$6$rounds=5000$...`).
pub fn hash_password(password: &str) -> Result<String> {
    use sha_crypt::{PasswordHasher, ShaCrypt};
    let mut salt = [0u8; 12];
    getrandom::fill(&mut salt)
        .map_err(|e| Error::runtime(format!("generating a password salt: {e}")))?;
    ShaCrypt::SHA512
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::runtime(format!("hashing the SSH password: {e}")))
}

/// The cloud-config of one VM role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudConfig {
    /// Commands cloud-init runs early on every boot, before it installs `packages` (argv
    /// lists). Only for steps package installation depends on, e.g. enabling an archive
    /// component.
    pub bootcmd: Vec<Vec<String>>,
    pub packages: Vec<String>,
    pub write_files: Vec<WriteFile>,
    /// Commands as argv lists (no shell unless a command says `bash -c`).
    pub runcmd: Vec<Vec<String>>,
    pub user: Option<UserAccount>,
}

#[derive(Serialize)]
struct Document<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    bootcmd: &'a [Vec<String>],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    packages: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    runcmd: &'a [Vec<String>],
    #[serde(skip_serializing_if = "Option::is_none")]
    ssh_pwauth: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    users: Vec<UserDocument<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    write_files: &'a [WriteFile],
}

#[derive(Serialize)]
struct UserDocument<'a> {
    name: &'a str,
    sudo: &'static str,
    shell: &'static str,
    lock_passwd: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    passwd: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    ssh_authorized_keys: &'a [String],
}

impl CloudConfig {
    /// `#cloud-config\n` followed by the YAML document; exactly `#cloud-config\n` when empty.
    pub fn render(&self) -> String {
        let users: Vec<UserDocument<'_>> = self
            .user
            .iter()
            .map(|u| UserDocument {
                name: &u.name,
                sudo: "ALL=(ALL) NOPASSWD:ALL",
                shell: "/bin/bash",
                lock_passwd: u.password_hash.is_none(),
                passwd: u.password_hash.as_deref(),
                ssh_authorized_keys: &u.ssh_authorized_keys,
            })
            .collect();
        let has_password = self
            .user
            .as_ref()
            .is_some_and(|u| u.password_hash.is_some());
        let document = Document {
            bootcmd: &self.bootcmd,
            packages: &self.packages,
            runcmd: &self.runcmd,
            ssh_pwauth: has_password.then_some(true),
            users,
            write_files: &self.write_files,
        };
        let mut out = String::from("#cloud-config\n");
        if self.bootcmd.is_empty()
            && self.packages.is_empty()
            && self.runcmd.is_empty()
            && self.user.is_none()
            && self.write_files.is_empty()
        {
            return out;
        }
        // Serializing plain strings, lists and structs cannot fail.
        out.push_str(&serde_yaml::to_string(&document).unwrap_or_default());
        out
    }

    /// [`render`](Self::render), refusing user-data over [`USERDATA_LIMIT_BYTES`];
    /// `what` names the workload/role in the error.
    pub fn render_checked(&self, what: &str) -> Result<String> {
        let rendered = self.render();
        check_userdata_size(&rendered, what)?;
        Ok(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Secret;

    #[test]
    fn empty_config_is_only_the_header() {
        assert_eq!(CloudConfig::default().render(), "#cloud-config\n");
    }

    #[test]
    fn password_is_hashed_never_plain() {
        let ssh = SshAccess {
            user: Some("virtwork".parse().unwrap()),
            password: Some(Secret::new("hunter2-secret")),
            authorized_keys: vec![],
        };
        let cfg = CloudConfig {
            user: UserAccount::from_ssh(&ssh).unwrap(),
            ..Default::default()
        };
        let out = cfg.render();
        assert!(!out.contains("hunter2-secret"), "{out}");
        assert!(out.contains("passwd: $6$"), "{out}");
        assert!(out.contains("ssh_pwauth: true"));
        assert!(out.contains("lock_passwd: false"));
    }

    #[test]
    fn userdata_over_one_mib_is_refused_with_its_size() {
        let mut cfg = CloudConfig {
            write_files: vec![WriteFile::new(
                "/x",
                "a".repeat(USERDATA_LIMIT_BYTES - 200),
                "0644",
            )],
            ..Default::default()
        };
        assert!(cfg.render_checked("workload \"w\"").is_ok());
        cfg.write_files[0].content.push_str(&"a".repeat(400));
        let err = cfg.render_checked("workload \"w\"").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(
            msg.starts_with("cloud-init user-data for workload \"w\" is 10"),
            "{msg}"
        );
        assert!(msg.contains("over the 1048576 byte (1 MiB) limit"), "{msg}");
    }
}
