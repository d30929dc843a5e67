//! The built-in defaults as the lowest configuration layer, written as the text a user would
//! type and parsed by the same parsers as every other source.
//!
//! Keys whose default depends on other values are resolved instead: `kubeconfig`
//! (`KUBECONFIG`, else in-cluster, else `~/.kube/config`), `catalog-dir` (`$HOME/...`),
//! `audit-db` (the XDG state directory, see `resolve::default_audit_db`),
//! `workloads` (every built-in unless catalog entries are asked for); `ssh-password`,
//! `ssh-authorized-keys`, `from-catalog`, `params`, `access-mode` and `volume-mode` (the
//! StorageClass's StorageProfile decides) have none.

use super::partial::Partial;
use super::value::{Raw, Source};
use crate::error::Result;

/// (key, default) in key-table spelling.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("namespace", "virtwork"),
    ("verbose", "false"),
    ("audit", "true"),
    ("log-format", "text"),
    ("output", "text"),
    ("qps", "50"),
    ("burst", "100"),
    ("container-disk-image", "quay.io/containerdisks/fedora:42"),
    ("guest-os", "auto"),
    ("disk-size", "10Gi"),
    ("eviction-strategy", "auto"),
    ("cpu-cores", "2"),
    ("memory", "2Gi"),
    ("wait-for-ready", "true"),
    ("timeout", "600"),
    ("ready-condition", "running"),
    ("fail-fast", "off"),
    ("dry-run", "false"),
    ("ssh-user", "virtwork"),
    ("vm-concurrency", "10"),
    ("vm-count", "1"),
    ("churn-duration", "10m"),
    ("churn-rate", "6/m"),
    ("churn-share", "100"),
    ("churn-actions", "restart,stop-start,migrate"),
];

/// Catalog directory below `$HOME` when none is configured.
pub const CATALOG_SUBDIR: &str = ".virtwork/catalog";

/// The defaults, parsed.
pub fn layer() -> Result<Partial> {
    let mut partial = Partial::default();
    for &(key, text) in DEFAULTS {
        partial.set(key, Raw::Text(text), Source::Default(key))?;
    }
    Ok(partial)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses() {
        let defaults = layer().unwrap();
        assert_eq!(defaults.memory.unwrap().value.as_str(), "2Gi");
        assert_eq!(defaults.dry_run.unwrap().value, None);
    }
}
