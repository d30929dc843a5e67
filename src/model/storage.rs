//! Where data disks live: a StorageClass name and the access and volume modes of their volumes.

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::Invalid;

/// The name of a StorageClass: a DNS-1123 subdomain (at most 253 lowercase letters, digits,
/// '-' and '.', each dot-separated part starting and ending with a letter or digit).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageClassName(String);

impl StorageClassName {
    pub const MAX_LEN: usize = super::names::DNS_SUBDOMAIN_MAX_LEN;

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for StorageClassName {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if super::names::is_dns_subdomain(text) {
            Ok(StorageClassName(text.to_string()))
        } else {
            Err(Invalid::Expected(
                "expected a StorageClass name (lowercase letters, digits, '-' and '.', such as \
                 ocs-storagecluster-ceph-rbd-virtualization; `kubectl get storageclass` lists them)"
                    .into(),
            ))
        }
    }
}

impl fmt::Display for StorageClassName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the data disk volumes may be mounted. `ReadOnlyMany` is not offered: a data disk is
/// formatted and written by its guest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Default, Serialize, Deserialize,
)]
pub enum AccessMode {
    /// One node at a time (what most block storage offers)
    #[default]
    #[value(name = "ReadWriteOnce", alias = "rwo")]
    ReadWriteOnce,
    /// Many nodes at once: what live migration of a VM with data disks needs
    #[value(name = "ReadWriteMany", alias = "rwx")]
    ReadWriteMany,
    /// One pod at a time
    #[value(name = "ReadWriteOncePod", alias = "rwop")]
    ReadWriteOncePod,
}

impl AccessMode {
    /// The Kubernetes spelling (`ReadWriteOnce`).
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }
}

impl FromStr for AccessMode {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        <AccessMode as ValueEnum>::from_str(text.trim(), true).map_err(|_| {
            Invalid::Expected(
                "expected one of ReadWriteOnce, ReadWriteMany, ReadWriteOncePod (a data disk is \
                 written by its VM, so ReadOnlyMany cannot be used)"
                    .into(),
            )
        })
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a data disk's PersistentVolume is presented to the VM's pod: a file system holding a
/// `disk.img` (Filesystem) or the raw device (Block). The guest sees a raw virtio disk either
/// way (KubeVirt's converter gives libvirt a `file` or a `block` disk source), so the guest's
/// side does not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize, Deserialize)]
pub enum VolumeMode {
    /// A file system on the volume, the disk a `disk.img` file on it
    #[value(name = "Filesystem", alias = "fs")]
    Filesystem,
    /// The raw block device (what Ceph RBD classes offer for live migration)
    #[value(name = "Block")]
    Block,
}

impl VolumeMode {
    /// The Kubernetes spelling (`Filesystem`, `Block`).
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeMode::Filesystem => "Filesystem",
            VolumeMode::Block => "Block",
        }
    }
}

impl FromStr for VolumeMode {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        <VolumeMode as ValueEnum>::from_str(text.trim(), true).map_err(|_| {
            Invalid::Expected(
                "expected Filesystem or Block (leave it unset to let the StorageClass's \
                 StorageProfile decide)"
                    .into(),
            )
        })
    }
}

impl fmt::Display for VolumeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_class_names_are_dns_subdomains() {
        for good in ["standard", "ocs-storagecluster-ceph-rbd", "gp3.csi", "a"] {
            assert_eq!(good.parse::<StorageClassName>().unwrap().as_str(), good);
        }
        for bad in ["", "Fast", "a..b", "-x", "x-", "x y", &"a".repeat(254)] {
            assert!(bad.parse::<StorageClassName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn access_modes_take_kubernetes_spellings_and_short_forms() {
        assert_eq!("ReadWriteMany".parse(), Ok(AccessMode::ReadWriteMany));
        assert_eq!("rwx".parse(), Ok(AccessMode::ReadWriteMany));
        assert_eq!("readwriteonce".parse(), Ok(AccessMode::ReadWriteOnce));
        let err = "ReadOnlyMany"
            .parse::<AccessMode>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("ReadOnlyMany cannot be used"), "{err}");
    }

    #[test]
    fn volume_modes_take_kubernetes_spellings() {
        assert_eq!("Block".parse(), Ok(VolumeMode::Block));
        assert_eq!("filesystem".parse(), Ok(VolumeMode::Filesystem));
        assert_eq!(" block ".parse(), Ok(VolumeMode::Block));
        let err = "raw".parse::<VolumeMode>().unwrap_err().to_string();
        assert!(err.contains("expected Filesystem or Block"), "{err}");
    }
}
