//! Guest OS families: which distribution conventions a payload is rendered for, and the
//! pure inference of the family from a containerdisk image name.
//!
//! A family decides package names, package-provided unit names and first-boot setup steps;
//! each workload keeps its per-family differences in one table (a `profile` function with
//! one `match` on [`GuestFamily`]), never in scattered conditionals. Must not: read
//! configuration or the environment (the caller resolves `auto` and logs the warning).

pub use crate::model::{GuestFamily, GuestOs};

/// What every payload installs whatever its workload, per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseProfile {
    /// The QEMU guest agent package (KubeVirt runs exec probes through the agent).
    pub guest_agent_package: &'static str,
    /// Its unit.
    pub guest_agent_unit: &'static str,
    /// The package that ships `mkfs.xfs`, installed by every payload with a data disk.
    pub xfs_package: &'static str,
    /// The environment file whose RPC filter the agent's unit passes to `qemu-ga`, on
    /// families whose agent forbids `guest-exec` by default (RHEL and its rebuilds ship
    /// `/etc/sysconfig/qemu-ga` with an allow-list or block-list); `None`: every command is
    /// allowed (Debian and Ubuntu ship no filter).
    pub rpc_filter_file: Option<&'static str>,
}

/// The per-family table of [`BaseProfile`].
pub fn base_profile(family: GuestFamily) -> BaseProfile {
    match family {
        GuestFamily::Fedora => BaseProfile {
            guest_agent_package: "qemu-guest-agent",
            guest_agent_unit: "qemu-guest-agent.service",
            xfs_package: "xfsprogs",
            rpc_filter_file: Some("/etc/sysconfig/qemu-ga"),
        },
        GuestFamily::Debian => BaseProfile {
            guest_agent_package: "qemu-guest-agent",
            guest_agent_unit: "qemu-guest-agent.service",
            xfs_package: "xfsprogs",
            rpc_filter_file: None,
        },
    }
}

impl GuestOs {
    /// The family for VMs booting `image`; `auto` infers it ([`infer_family`]).
    pub fn resolve(self, image: &str) -> Inference {
        match self {
            GuestOs::Family(family) => Inference {
                family,
                warning: None,
            },
            GuestOs::Auto => infer_family(image),
        }
    }
}

/// The result of resolving a family: the family, plus a warning when `auto` had to guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inference {
    pub family: GuestFamily,
    pub warning: Option<String>,
}

/// Distribution names (as words of an image repository path) and their family. A word
/// matches when it starts with the name, so `rhel9`, `almalinux`, `rockylinux` and
/// `centos-stream` are recognised.
const KNOWN: &[(&str, GuestFamily)] = &[
    ("fedora", GuestFamily::Fedora),
    ("centos", GuestFamily::Fedora),
    ("rhel", GuestFamily::Fedora),
    ("alma", GuestFamily::Fedora),
    ("rocky", GuestFamily::Fedora),
    ("debian", GuestFamily::Debian),
    ("ubuntu", GuestFamily::Debian),
];

/// Infers the family from a containerdisk image reference such as
/// `quay.io/containerdisks/debian:12`. Looks at the repository path (registry host, tag and
/// digest removed), last component first; an image naming no known distribution is taken as
/// `fedora` with a warning that says how to choose explicitly.
pub fn infer_family(image: &str) -> Inference {
    let repository = repository_path(image);
    // The last component names the image; earlier ones (e.g. `rhel9/...`) are a fallback.
    for component in repository.rsplit('/') {
        let lower = component.to_ascii_lowercase();
        for word in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
            if let Some((_, family)) = KNOWN.iter().find(|(name, _)| word.starts_with(name)) {
                return Inference {
                    family: *family,
                    warning: None,
                };
            }
        }
    }
    Inference {
        family: GuestFamily::Fedora,
        warning: Some(format!(
            "cannot tell the guest OS family from container disk image {image:?}; rendering payloads for fedora (an image whose repository name contains fedora, centos, rhel, alma, rocky, debian or ubuntu selects its family)"
        )),
    }
}

/// The repository path of an image reference: without a registry host (a first component
/// containing `.` or `:` or equal to `localhost`), tag or digest.
fn repository_path(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let without_host = match without_digest.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            rest
        }
        _ => without_digest,
    };
    // A tag follows the last ':' after the last '/'.
    let last_slash = without_host.rfind('/').map_or(0, |i| i + 1);
    match without_host[last_slash..].find(':') {
        Some(colon) => &without_host[..last_slash + colon],
        None => without_host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_path_strips_host_tag_and_digest() {
        assert_eq!(
            repository_path("quay.io/containerdisks/fedora:42"),
            "containerdisks/fedora"
        );
        assert_eq!(
            repository_path("localhost:5000/debian@sha256:abc"),
            "debian"
        );
        assert_eq!(repository_path("ubuntu"), "ubuntu");
        assert_eq!(repository_path("my.reg/x/y:1.0"), "x/y");
    }
}
