//! The enumerated choices: log and output formats, dry-run modes, readiness conditions.
//!
//! Each is a clap `ValueEnum` (so flags list and complete their values, and help documents
//! them) and parses from env/YAML text through the same names, case-insensitively.

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::Invalid;

/// Parses `text` as one of `T`'s value names (any case), naming them all when it is none.
fn choice<T: ValueEnum>(text: &str) -> Result<T, Invalid> {
    T::from_str(text.trim(), true).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        Invalid::Expected(format!("expected one of {}", names.join(", ")))
    })
}

/// The value name of `value` (what the flag and the variables accept).
fn name<T: ValueEnum>(value: &T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

macro_rules! text_form {
    ($($ty:ty),*) => {$(
        impl FromStr for $ty {
            type Err = Invalid;
            fn from_str(text: &str) -> Result<Self, Invalid> {
                choice(text)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&name(self))
            }
        }
    )*};
}

text_form!(
    LogFormat,
    OutputFormat,
    OutputChoice,
    DryRunMode,
    ReadyCondition,
    EvictionStrategy,
    ColorChoice,
    AllowRestarts
);

impl ReadyCondition {
    /// What a VM that has not met this condition is not, for "not <phrase>" messages.
    pub fn unmet_phrase(self) -> &'static str {
        match self {
            ReadyCondition::Running => "running",
            ReadyCondition::Ready => "ready",
            ReadyCondition::AgentConnected => "agent-connected",
            ReadyCondition::Workload => "running its workload (readiness probe not passing)",
        }
    }
}

/// Format of the logs on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Format of the product on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
    /// The JSON document written as YAML.
    Yaml,
}

impl OutputFormat {
    /// Whether the result is a machine-readable document (JSON or YAML), not text.
    pub fn is_document(self) -> bool {
        !matches!(self, OutputFormat::Text)
    }
}

/// `--output` as given: a format, or `wide`, text with one row per object where a command
/// has such a view (`status`: one row per VM instead of one line per run). Commands without
/// a wider view print their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputChoice {
    #[default]
    Text,
    /// Text, one row per object (status: per VM)
    Wide,
    Json,
    /// The JSON document written as YAML
    Yaml,
}

impl OutputChoice {
    /// The format of the result: `wide` is text.
    pub fn format(self) -> OutputFormat {
        match self {
            OutputChoice::Text | OutputChoice::Wide => OutputFormat::Text,
            OutputChoice::Json => OutputFormat::Json,
            OutputChoice::Yaml => OutputFormat::Yaml,
        }
    }

    /// Whether the wider text view was asked for.
    pub fn is_wide(self) -> bool {
        self == OutputChoice::Wide
    }
}

/// `--color`: whether log lines carry ANSI colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal and `NO_COLOR` is not set
    #[default]
    Auto,
    /// Always colour, even into a pipe or with `NO_COLOR`
    Always,
    /// Never colour
    Never,
}

impl ColorChoice {
    /// Whether to write ANSI escapes: `no_color` is a non-empty `NO_COLOR` (no-color.org),
    /// which only `--color always` overrides; `tty` is whether stderr is a terminal.
    pub fn use_ansi(self, no_color: bool, tty: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        }
    }
}

/// How `run --dry-run` goes: locally, or through the API server without persisting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DryRunMode {
    /// Render every object locally; no cluster is contacted
    Client,
    /// Submit every object with dryRun=All; nothing is persisted
    Server,
}

/// What "ready" means for a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadyCondition {
    /// The VMI reached phase Running
    #[default]
    Running,
    /// The VMI reports condition Ready=True
    Ready,
    /// The VMI reports condition AgentConnected=True (guest agent up)
    AgentConnected,
    /// Every workload unit is active in the guest: the VMI's readiness probe (an HTTP GET of
    /// the guest's own unit check, not through the guest agent) passes, i.e. condition Ready=True
    Workload,
}

/// Which VMs `virtwork disruption` lets restart within the budget (`--allow-restarts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllowRestarts {
    /// No VM may restart: every restart is beyond the budget
    #[default]
    None,
    /// Only VMs that cannot live-migrate may restart (their VMI says LiveMigratable=False)
    NonMigratable,
}

/// What KubeVirt does with a VM whose node is drained (`spec.template.spec.evictionStrategy`).
/// KubeVirt's own `External` is not offered: it blocks the eviction until an outside
/// controller acts, which nothing does for virtwork's VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionStrategy {
    /// Per VM: none on a single-node cluster; otherwise live-migrate when it can,
    /// live-migrate-if-possible when its storage decides, none when it cannot
    #[default]
    Auto,
    /// Migrate on eviction; a VM that cannot migrate blocks the drain
    #[value(alias = "livemigrate")]
    LiveMigrate,
    /// Migrate when the VM can, otherwise shut it down (it restarts on another node)
    #[value(alias = "livemigrateifpossible")]
    LiveMigrateIfPossible,
    /// Shut the VM down on eviction (it restarts on another node)
    None,
}

impl EvictionStrategy {
    /// KubeVirt's spelling; `None` for `auto`, which is decided per VM.
    pub fn kubevirt_name(self) -> Option<&'static str> {
        match self {
            EvictionStrategy::Auto => Option::None,
            EvictionStrategy::LiveMigrate => Some("LiveMigrate"),
            EvictionStrategy::LiveMigrateIfPossible => Some("LiveMigrateIfPossible"),
            EvictionStrategy::None => Some("None"),
        }
    }
}

/// Go's `strconv.ParseBool` words, the forms the Go tool's flags took after `=`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A switch flag (`--audit`, `--no-wait`) as given: bare, or with the Go tool's
/// `=true|false`, which is still accepted but legacy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    Bare,
    /// `--flag=<bool>`.
    Valued(bool),
}

impl Switch {
    /// Whether the switch is on: bare, or `=true`.
    pub fn is_on(self) -> bool {
        matches!(self, Switch::Bare | Switch::Valued(true))
    }
}

impl FromStr for Switch {
    type Err = Invalid;

    /// The empty text is the bare flag (clap's missing value).
    fn from_str(text: &str) -> Result<Self, Invalid> {
        match text.trim() {
            "" => Ok(Switch::Bare),
            word => go_bool(word).map(Switch::Valued).ok_or_else(|| {
                Invalid::Expected("expected no value (or the legacy =true / =false)".into())
            }),
        }
    }
}

/// `run --dry-run[=client|server]` as given, also in the Go tool's `=true|false` form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRunFlag {
    Mode(DryRunMode),
    /// Legacy `--dry-run=<bool>`: true is `client`, false is off.
    Valued(bool),
}

impl DryRunFlag {
    /// The mode asked for; `None`: off.
    pub fn mode(self) -> Option<DryRunMode> {
        match self {
            DryRunFlag::Mode(mode) => Some(mode),
            DryRunFlag::Valued(true) => Some(DryRunMode::Client),
            DryRunFlag::Valued(false) => None,
        }
    }
}

impl FromStr for DryRunFlag {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        if let Ok(mode) = text.parse::<DryRunMode>() {
            return Ok(DryRunFlag::Mode(mode));
        }
        go_bool(text.trim()).map(DryRunFlag::Valued).ok_or_else(|| {
            Invalid::Expected("expected one of client, server (or the legacy true, false)".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_and_dry_run_take_the_go_boolean_forms() {
        assert_eq!("".parse(), Ok(Switch::Bare));
        assert_eq!("false".parse(), Ok(Switch::Valued(false)));
        assert_eq!("T".parse(), Ok(Switch::Valued(true)));
        assert!("yes".parse::<Switch>().is_err());
        assert!(!Switch::Valued(false).is_on() && Switch::Bare.is_on());
        assert_eq!(
            "server".parse::<DryRunFlag>().unwrap().mode(),
            Some(DryRunMode::Server)
        );
        assert_eq!(
            "true".parse::<DryRunFlag>().unwrap().mode(),
            Some(DryRunMode::Client)
        );
        assert_eq!("0".parse::<DryRunFlag>().unwrap().mode(), None);
        assert!("maybe".parse::<DryRunFlag>().is_err());
    }

    #[test]
    fn choices_parse_any_case_and_print_their_value_name() {
        assert_eq!(
            "Agent-Connected".parse::<ReadyCondition>(),
            Ok(ReadyCondition::AgentConnected)
        );
        assert_eq!(
            ReadyCondition::AgentConnected.to_string(),
            "agent-connected"
        );
        assert_eq!(" JSON ".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!(DryRunMode::Server.to_string(), "server");
        assert_eq!(
            "LiveMigrate".parse::<EvictionStrategy>(),
            Ok(EvictionStrategy::LiveMigrate)
        );
        assert_eq!(
            "live-migrate-if-possible".parse::<EvictionStrategy>(),
            Ok(EvictionStrategy::LiveMigrateIfPossible)
        );
        assert_eq!(EvictionStrategy::None.kubevirt_name(), Some("None"));
        assert_eq!(
            "External"
                .parse::<EvictionStrategy>()
                .unwrap_err()
                .to_string(),
            "expected one of auto, live-migrate, live-migrate-if-possible, none"
        );
        assert_eq!(
            "xml".parse::<OutputFormat>().unwrap_err().to_string(),
            "expected one of text, json, yaml"
        );
        assert_eq!(
            "xml".parse::<OutputChoice>().unwrap_err().to_string(),
            "expected one of text, wide, json, yaml"
        );
        assert_eq!("WIDE".parse::<OutputChoice>(), Ok(OutputChoice::Wide));
        assert_eq!(OutputChoice::Wide.format(), OutputFormat::Text);
        assert_eq!(OutputChoice::Yaml.format(), OutputFormat::Yaml);
        assert_eq!(
            "up".parse::<ReadyCondition>().unwrap_err().to_string(),
            "expected one of running, ready, agent-connected, workload"
        );
    }
}
