//! The signal params a run records for each workload: on every VM (the
//! `virtwork/signal-params` annotation) and in the audit database (`workload_details`), and
//! read back by `virtwork verify`.
//!
//! Owns: which keys may be recorded — the keys the signal contract reads for the workload
//! (`signal_param_defaults`) and, for a workload with a load profile, the profile's keys —
//! and the one JSON form they are stored in. [`SignalParams`] can only be built through that
//! filter, so a param outside it (a catalog entry's `password`, say) is never written
//! anywhere, and text read back (from a database file or an annotation) keeps only those keys
//! too. Must not: hold anything but validated, non-secret workload params; do I/O.

use std::collections::BTreeMap;

use serde::Serialize;

use super::profile_driver::RECORDED_KEYS;
use crate::signals::contract::{profiled_signal_name, signal_param_defaults};

/// Longest recorded text accepted when reading it back (the recordable keys of any workload
/// take a few hundred bytes; a larger text was not written by a run).
pub const MAX_RECORDED_CHARS: usize = 4096;

/// A workload's recorded signal params: only recordable keys, by construction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SignalParams(BTreeMap<String, String>);

impl SignalParams {
    /// Whether `key` may be recorded for `workload`: a key its signal contract reads, or a
    /// load-profile key of a workload that can follow a profile.
    pub fn is_recordable(workload: &str, key: &str) -> bool {
        signal_param_defaults(workload)
            .iter()
            .any(|(k, _)| *k == key)
            || (profiled_signal_name(workload).is_some() && RECORDED_KEYS.contains(&key))
    }

    /// The recordable subset of `params` (resolved params, or params read back).
    pub fn recordable<'a>(
        workload: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> SignalParams {
        SignalParams(
            params
                .into_iter()
                .filter(|(k, _)| Self::is_recordable(workload, k))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Parses recorded text (a JSON object of strings), keeping the recordable keys. Err:
    /// why the text is unusable.
    pub fn parse(workload: &str, text: &str) -> std::result::Result<SignalParams, String> {
        if text.len() > MAX_RECORDED_CHARS {
            return Err(format!(
                "{} bytes, more than the {MAX_RECORDED_CHARS} a run records",
                text.len()
            ));
        }
        let map: BTreeMap<String, String> = serde_json::from_str(text)
            .map_err(|e| format!("not a JSON object of strings ({e})"))?;
        Ok(Self::recordable(
            workload,
            map.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ))
    }

    /// The JSON object the annotation and the database hold.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).expect("a string map serializes")
    }

    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    pub fn into_map(self) -> BTreeMap<String, String> {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::contract::WORKLOADS;

    /// Words that mark a credential in a param name.
    const CREDENTIAL_WORDS: [&str; 8] = [
        "pass", "secret", "token", "key", "cred", "auth", "ssh", "cert",
    ];

    #[test]
    fn no_recordable_key_of_any_built_in_names_a_credential() {
        for workload in WORKLOADS {
            let keys = signal_param_defaults(workload)
                .iter()
                .map(|(k, _)| *k)
                .chain(RECORDED_KEYS);
            for key in keys.filter(|k| SignalParams::is_recordable(workload, k)) {
                assert!(
                    !CREDENTIAL_WORDS.iter().any(|w| key.contains(w)),
                    "{workload}: recordable key {key:?} looks like a credential"
                );
            }
        }
    }

    #[test]
    fn only_the_keys_the_contract_reads_are_recorded() {
        let resolved = [
            ("cpu-load-percent", "30"),
            ("password", "hunter2"),
            ("ssh-key", "ssh-ed25519 AAAA"),
            ("profile", "step"),
        ];
        let recorded = SignalParams::recordable("cpu", resolved);
        assert_eq!(
            recorded.to_json(),
            r#"{"cpu-load-percent":"30","profile":"step"}"#
        );
        // A catalog entry records nothing, whatever its params are called.
        assert!(SignalParams::recordable("my-entry", resolved).is_empty());
        // tps follows no profile: its profile keys are not recorded.
        assert!(SignalParams::recordable("tps", [("profile", "step")]).is_empty());
    }

    #[test]
    fn text_read_back_keeps_the_recordable_keys_and_refuses_junk() {
        let read = SignalParams::parse("cpu", r#"{"cpu-load-percent":"30","token":"x"}"#);
        assert_eq!(
            read.unwrap().as_map().keys().collect::<Vec<_>>(),
            ["cpu-load-percent"]
        );
        assert!(
            SignalParams::parse("cpu", "[1]")
                .unwrap_err()
                .contains("JSON object")
        );
        let huge = format!(r#"{{"cpu-load-percent":"{}"}}"#, "9".repeat(5000));
        assert!(
            SignalParams::parse("cpu", &huge)
                .unwrap_err()
                .contains("4096")
        );
    }
}
