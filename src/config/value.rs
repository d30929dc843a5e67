//! Where a value came from ([`Source`]) and how text becomes a typed value ([`KeyValue`]).
//!
//! Every source hands text (or, from YAML, a list of text) to [`KeyValue`]; the model types'
//! `FromStr` decides, and a rejection becomes the one-line message naming the input as the user
//! spelled it: `invalid value "two" for cpu_cores in ./f.yaml: expected a whole number of at
//! least 1`. Credential-holding types never put the rejected text in the message.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::model::{
    AccessMode, Burst, CpuCores, DnsLabel, DryRunMode, GuestOs, ImageRef, Invalid, LogFormat,
    Minimum, OutputChoice, OutputFormat, PublicKey, Qps, Quantity, ReadyCondition, Secret, SshUser,
    StorageClassName, TimeoutSecs, VmConcurrency, VmCount, VolumeMode,
};

/// The input that supplied a value, as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag (`--cpu-cores`).
    Flag(&'static str),
    /// An environment variable (`VIRTWORK_CPU_CORES`).
    Env(&'static str),
    /// A key of the YAML file, spelled as in the file (`cpu_cores`, `workloads.cpu.memory`).
    File { key: String, file: String },
    /// The built-in default.
    Default(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => f.write_str(flag),
            Source::Env(name) => f.write_str(name),
            Source::File { key, file } => write!(f, "{key} in {file}"),
            Source::Default(key) => write!(f, "the built-in default of {key}"),
        }
    }
}

/// A value with the input that supplied it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: Source) -> Self {
        Sourced { value, source }
    }
}

/// A value as a source holds it: text (flags, env, YAML scalars) or a YAML list.
#[derive(Debug, Clone, Copy)]
pub enum Raw<'a> {
    Text(&'a str),
    List(&'a [String]),
}

/// A type a configuration key can hold: how it is read from text and from a YAML list.
pub trait KeyValue: Sized {
    /// Whether blanks separate items of a text list too (names), not only commas: the Go
    /// tool read `VIRTWORK_WORKLOADS="cpu memory"`. False where an item holds blanks (an SSH
    /// key line).
    const BLANK_SEPARATED: bool = false;

    /// Parses one text value; the error names `source`.
    fn from_text(text: &str, source: &Source) -> Result<Self>;

    /// Parses a YAML list; only list-valued keys accept one.
    fn from_list(items: &[String], source: &Source) -> Result<Self> {
        let _ = items;
        Err(Error::input(format!(
            "invalid value for {source}: expected a single value, got a list"
        )))
    }

    fn from_raw(raw: Raw<'_>, source: &Source) -> Result<Self> {
        match raw {
            Raw::Text(text) => Self::from_text(text, source),
            Raw::List(items) => Self::from_list(items, source),
        }
    }
}

/// The one-line input error for `text` rejected as `why`.
pub fn rejected(why: &Invalid, source: &Source, text: &str) -> Error {
    Error::input(why.message(&source.to_string(), text))
}

/// Refuses a quantity below what the cluster accepts for its use, naming the input:
/// `invalid value "512K" for --memory: expected at least 1M (KubeVirt refuses ...)`.
pub fn check_minimum(value: &Quantity, minimum: &Minimum, source: &Source) -> Result<()> {
    if !value.is_below(minimum) {
        return Ok(());
    }
    Err(rejected(
        &Invalid::Expected(format!(
            "expected at least {} ({})",
            minimum.text, minimum.why
        )),
        source,
        value.as_str(),
    ))
}

/// Model types are read through their `FromStr`.
macro_rules! read_by_from_str {
    ($($ty:ty),* $(,)?) => {$(
        impl KeyValue for $ty {
            fn from_text(text: &str, source: &Source) -> Result<Self> {
                text.parse::<$ty>().map_err(|why| rejected(&why, source, text))
            }
        }
    )*};
}

read_by_from_str!(
    AccessMode,
    VolumeMode,
    Burst,
    CpuCores,
    GuestOs,
    ImageRef,
    LogFormat,
    OutputFormat,
    OutputChoice,
    PublicKey,
    Qps,
    Quantity,
    ReadyCondition,
    Secret,
    SshUser,
    StorageClassName,
    TimeoutSecs,
    VmConcurrency,
    VmCount,
);

// Boot-storm control (`--max-starting`, `--ramp`).
read_by_from_str!(crate::model::MaxStarting, crate::model::Ramp);

// Node drains (`--eviction-strategy`).
read_by_from_str!(crate::model::EvictionStrategy);
// Giving up on stuck VMs (`--fail-fast`).
read_by_from_str!(crate::model::FailFast);
// `virtwork churn`.
read_by_from_str!(
    crate::model::ChurnRate,
    crate::model::Share,
    crate::model::ChurnActions,
    crate::model::ChurnSeed,
);

/// Catalog entry names, also listed with blanks.
impl KeyValue for DnsLabel {
    const BLANK_SEPARATED: bool = true;

    fn from_text(text: &str, source: &Source) -> Result<Self> {
        text.parse::<DnsLabel>()
            .map_err(|why| rejected(&why, source, text))
    }
}

/// Free text (workload names before they are checked against the registry, `--params`);
/// in a list, blanks separate items like commas (the only list of text is names).
impl KeyValue for String {
    const BLANK_SEPARATED: bool = true;

    fn from_text(text: &str, _: &Source) -> Result<Self> {
        Ok(text.trim().to_string())
    }
}

/// A path; an empty one is kept so each key can say what "empty" means for it.
impl KeyValue for PathBuf {
    fn from_text(text: &str, _: &Source) -> Result<Self> {
        Ok(PathBuf::from(text.trim()))
    }
}

/// The usual words, any case: `true/false`, `t/f`, `1/0`, `yes/no`, `on/off`.
impl KeyValue for bool {
    fn from_text(text: &str, source: &Source) -> Result<Self> {
        bool_word(text).ok_or_else(|| {
            rejected(
                &Invalid::Expected("expected true or false".into()),
                source,
                text,
            )
        })
    }
}

/// `dry-run` in env and YAML: `client` or `server`, or a boolean (true = `client`).
impl KeyValue for Option<DryRunMode> {
    fn from_text(text: &str, source: &Source) -> Result<Self> {
        if let Ok(mode) = text.parse::<DryRunMode>() {
            return Ok(Some(mode));
        }
        match bool_word(text) {
            Some(true) => Ok(Some(DryRunMode::Client)),
            Some(false) => Ok(None),
            None => Err(rejected(
                &Invalid::Expected("expected one of true, false, client, server".into()),
                source,
                text,
            )),
        }
    }
}

/// A comma-separated list in text (for names, blanks separate too), or a YAML list; items
/// trimmed, empty items dropped.
impl<T: KeyValue> KeyValue for Vec<T> {
    fn from_text(text: &str, source: &Source) -> Result<Self> {
        text.split(|c: char| c == ',' || (T::BLANK_SEPARATED && c.is_whitespace()))
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| T::from_text(item, source))
            .collect()
    }

    fn from_list(items: &[String], source: &Source) -> Result<Self> {
        items
            .iter()
            .map(|item| item.trim())
            .filter(|item| !item.is_empty())
            .map(|item| T::from_text(item, source))
            .collect()
    }
}

fn bool_word(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "yes" | "on" => Some(true),
        "false" | "f" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &'static str) -> Source {
        Source::Env(name)
    }

    #[test]
    fn sources_read_as_the_user_spelled_them() {
        let file = Source::File {
            key: "cpu_cores".into(),
            file: "./f.yaml".into(),
        };
        assert_eq!(file.to_string(), "cpu_cores in ./f.yaml");
        assert_eq!(Source::Flag("--cpu-cores").to_string(), "--cpu-cores");
        let err = CpuCores::from_text("two", &file).unwrap_err().to_string();
        assert_eq!(
            err,
            r#"invalid value "two" for cpu_cores in ./f.yaml: expected a whole number of at least 1"#
        );
    }

    #[test]
    fn booleans_accept_the_usual_words_only() {
        for yes in ["true", "TRUE", "t", "1", "yes", "On"] {
            assert_eq!(bool_word(yes), Some(true), "{yes}");
        }
        for no in ["false", "F", "0", "no", "off"] {
            assert_eq!(bool_word(no), Some(false), "{no}");
        }
        for bad in ["", "maybe", "2", "y"] {
            assert_eq!(bool_word(bad), None, "{bad}");
        }
        let err = bool::from_text("maybe", &env("VIRTWORK_AUDIT")).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid value "maybe" for VIRTWORK_AUDIT: expected true or false"#
        );
    }

    #[test]
    fn dry_run_takes_a_mode_or_a_boolean() {
        let read = |text| Option::<DryRunMode>::from_text(text, &env("VIRTWORK_DRY_RUN"));
        assert_eq!(read("server").unwrap(), Some(DryRunMode::Server));
        assert_eq!(read("yes").unwrap(), Some(DryRunMode::Client));
        assert_eq!(read("off").unwrap(), None);
        assert!(
            read("perhaps")
                .unwrap_err()
                .to_string()
                .contains("client, server")
        );
    }

    #[test]
    fn name_lists_split_on_blanks_too_but_key_lists_do_not() {
        let names = Vec::<DnsLabel>::from_text("a b,\tc , d", &env("VIRTWORK_FROM_CATALOG"));
        let names: Vec<String> = names.unwrap().iter().map(|n| n.to_string()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let keys = Vec::<PublicKey>::from_text(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 a@b",
            &env("VIRTWORK_SSH_AUTHORIZED_KEYS"),
        );
        assert_eq!(keys.unwrap().len(), 1);
    }

    #[test]
    fn lists_split_on_commas_and_drop_empty_items() {
        let names = Vec::<DnsLabel>::from_text(" a, ,b,", &env("VIRTWORK_FROM_CATALOG")).unwrap();
        assert_eq!(
            names.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let err = Vec::<DnsLabel>::from_text("ok,../etc", &env("VIRTWORK_FROM_CATALOG"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(r#"invalid value "../etc" for VIRTWORK_FROM_CATALOG"#),
            "{err}"
        );
        let single = Quantity::from_list(&["1Gi".into()], &env("VIRTWORK_MEMORY")).unwrap_err();
        assert_eq!(
            single.to_string(),
            "invalid value for VIRTWORK_MEMORY: expected a single value, got a list"
        );
    }
}
