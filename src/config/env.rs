//! The `VIRTWORK_*` environment as a configuration layer, plus the two other variables the
//! configuration reads (`KUBECONFIG`, `HOME`).
//!
//! The environment arrives as (name, value) pairs so tests drive it without touching the real
//! process environment. The last definition of a name wins and an empty value counts as unset.

use std::collections::BTreeMap;

use super::partial::{KEYS, Partial};
use super::value::{Raw, Source};
use crate::error::Result;

/// The process environment, as the configuration sees it.
#[derive(Debug, Clone, Default)]
pub struct EnvView {
    vars: BTreeMap<String, String>,
}

impl EnvView {
    pub fn new(env: &[(String, String)]) -> Self {
        let mut vars = BTreeMap::new();
        for (name, value) in env {
            vars.insert(name.clone(), value.clone());
        }
        EnvView { vars }
    }

    /// The value of `name`; empty counts as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Every configuration key set in the environment, parsed. Where a key has alias variables,
/// the canonical one wins.
pub fn layer(env: &EnvView) -> Result<Partial> {
    let mut partial = Partial::default();
    for spec in KEYS {
        let given = spec
            .env
            .iter()
            .find_map(|&name| env.get(name).map(|value| (name, value)));
        if let Some((name, value)) = given {
            partial.set(spec.key, Raw::Text(value), Source::Env(name))?;
        }
    }
    Ok(partial)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(pairs: &[(&str, &str)]) -> EnvView {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EnvView::new(&pairs)
    }

    #[test]
    fn aliases_are_named_as_given_and_empty_values_are_unset() {
        let partial = layer(&view(&[
            ("VIRTWORK_DATA_DISK_SIZE", "7Gi"),
            ("VIRTWORK_VERBOSE", ""),
        ]))
        .unwrap();
        assert_eq!(
            partial.disk_size.unwrap().source,
            Source::Env("VIRTWORK_DATA_DISK_SIZE")
        );
        assert!(partial.verbose.is_none());
        let both = layer(&view(&[
            ("VIRTWORK_DATA_DISK_SIZE", "7Gi"),
            ("VIRTWORK_DISK_SIZE", "8Gi"),
        ]))
        .unwrap();
        assert_eq!(both.disk_size.unwrap().value.as_str(), "8Gi");
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let err = layer(&view(&[("VIRTWORK_CPU_CORES", "abc")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            r#"invalid value "abc" for VIRTWORK_CPU_CORES: expected a whole number of at least 1"#
        );
    }
}
