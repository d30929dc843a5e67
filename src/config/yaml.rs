//! The YAML file given with `--config` as a configuration layer, plus its per-workload
//! sections (`workloads.<name>`), which refine the global values for one workload.
//!
//! Keys may be spelled with hyphens or underscores (`cpu-cores`, `cpu_cores`), in any case;
//! giving both spellings of one key is an error, and so is an unknown key (with a
//! "did you mean" hint). Values are named in errors as `<key as spelled> in <file>`.

use std::collections::BTreeMap;
use std::path::Path;

use super::partial::{KEYS, KeySpec, Partial};
use super::value::{KeyValue, Raw, Source};
use crate::error::{Error, Result};
use crate::model::{
    AccessMode, CpuCores, DnsLabel, EvictionStrategy, GuestOs, MIN_VM_MEMORY, Quantity,
    StorageClassName, VmCount, VolumeMode, suggest,
};
use crate::plan::WorkloadOverride;

/// Keys of a `workloads.<name>` section, canonical spelling.
pub const WORKLOAD_SECTION_KEYS: &[&str] = &[
    "enabled",
    "vm-count",
    "cpu-cores",
    "memory",
    "guest-os",
    "storage-class",
    "access-mode",
    "volume-mode",
    "eviction-strategy",
    "termination-grace-period",
    "params",
];

/// A key of the Go tool's example configuration that only its cleanup set internally:
/// accepted with a warning, so old files keep loading.
const IGNORED_KEY: &str = "cleanup-mode";

/// Top-level keys that exist but not in the file (they come from flags or the environment).
const NOT_IN_FILE: &[&str] = &["params"];

/// What the file sets.
#[derive(Debug, Default)]
pub struct FileLayer {
    pub partial: Partial,
    /// Per-workload sections keyed by workload name, already validated.
    pub sections: BTreeMap<String, WorkloadOverride>,
    /// Warnings about keys accepted without effect.
    pub notices: Vec<String>,
    /// The file as messages name it (empty without a file).
    pub shown: String,
}

/// Reads and parses the file at `path`.
pub fn load(path: &Path) -> Result<FileLayer> {
    let shown = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !matches!(ext.as_str(), "" | "yaml" | "yml" | "json") {
        return Err(Error::input(format!(
            "--config {shown}: unsupported file type \".{ext}\"; expected a YAML file (.yaml, .yml) or JSON (.json)"
        )));
    }
    let text = super::read_regular_file(path, super::MAX_CONFIG_BYTES)
        .map_err(|why| Error::input(format!("cannot read --config {shown}: {why}")))?;
    parse(&text, &shown)
}

/// Parses the text of a configuration file shown in messages as `file`.
pub fn parse(text: &str, file: &str) -> Result<FileLayer> {
    let mapping = top_level_mapping(text, file)?;
    let mut layer = FileLayer {
        shown: file.to_string(),
        ..FileLayer::default()
    };
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let accepted: Vec<&str> = KEYS
        .iter()
        .map(|spec| spec.key)
        .filter(|key| !NOT_IN_FILE.contains(key))
        .collect();
    for (key, value) in mapping {
        let spelled = key_text(&key, file)?;
        let hyphenated = hyphenated(&spelled);
        let spec = find_key(&hyphenated);
        let canonical = spec.map_or(hyphenated.as_str(), |s| s.key).to_string();
        if let Some(previous) = seen.insert(canonical.clone(), spelled.clone()) {
            return Err(Error::input(format!(
                "{file}: key \"{spelled}\" repeats \"{previous}\"; give it once"
            )));
        }
        if canonical == "workloads" {
            layer.sections = sections(value, file)?;
            continue;
        }
        if canonical == IGNORED_KEY {
            layer.notices.push(format!(
                "{spelled} in {file} has no effect (cleanup chooses its mode from --run-id and --dry-run); remove it"
            ));
            continue;
        }
        if NOT_IN_FILE.contains(&canonical.as_str()) {
            return Err(Error::input(format!(
                "{file}: \"{spelled}\" is not a top-level key; put params under workloads.<name>.params (e.g. \"workloads: {{cpu: {{params: {{cpu-load-percent: 50}}}}}}\")"
            )));
        }
        let Some(spec) = spec else {
            return Err(unknown_key(&spelled, file, "", &accepted));
        };
        let source = Source::File {
            key: spelled,
            file: file.to_string(),
        };
        set_value(&mut layer, spec, value, source)?;
    }
    Ok(layer)
}

/// The file's top-level mapping (an empty file is an empty mapping).
fn top_level_mapping(text: &str, file: &str) -> Result<serde_yaml::Mapping> {
    let document: serde_yaml::Value = serde_yaml::from_str(text).map_err(|err| {
        let place = err
            .location()
            .map(|l| format!(" at line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        let reason = err.to_string();
        let reason = reason.split(" at line ").next().unwrap_or(&reason);
        Error::input(format!(
            "--config {file}: not valid YAML{place}: {}",
            one_line(reason)
        ))
    })?;
    match document {
        serde_yaml::Value::Null => Ok(serde_yaml::Mapping::new()),
        serde_yaml::Value::Mapping(m) => Ok(m),
        _ => Err(Error::input(format!(
            "--config {file}: expected a mapping of keys (e.g. \"namespace: virtwork\") at the top level"
        ))),
    }
}

/// Sets key `spec` from its YAML value: nothing for null, a list from a sequence of plain
/// values, else one plain value.
fn set_value(
    layer: &mut FileLayer,
    spec: &KeySpec,
    value: serde_yaml::Value,
    source: Source,
) -> Result<()> {
    match value {
        serde_yaml::Value::Null => {}
        serde_yaml::Value::Sequence(items) => {
            let texts = items
                .iter()
                .map(|item| {
                    crate::yaml::scalar_text(item).ok_or_else(|| {
                        Error::input(format!(
                            "invalid value for {source}: list items must be plain values"
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            layer.partial.set(spec.key, Raw::List(&texts), source)?;
        }
        other => {
            let text = crate::yaml::scalar_text(&other).ok_or_else(|| {
                Error::input(format!(
                    "invalid value for {source}: expected a single value or a list, got a mapping"
                ))
            })?;
            layer.partial.set(spec.key, Raw::Text(&text), source)?;
        }
    }
    Ok(())
}

fn hyphenated(spelled: &str) -> String {
    spelled.to_ascii_lowercase().replace('_', "-")
}

fn find_key(hyphenated: &str) -> Option<&'static KeySpec> {
    KEYS.iter()
        .find(|spec| spec.key == hyphenated || spec.yaml_aliases.contains(&hyphenated))
}

fn key_text(key: &serde_yaml::Value, file: &str) -> Result<String> {
    match key {
        serde_yaml::Value::String(s) => Ok(s.clone()),
        serde_yaml::Value::Number(n) => Ok(n.to_string()),
        serde_yaml::Value::Bool(b) => Ok(b.to_string()),
        _ => Err(Error::input(format!(
            "{file}: keys must be plain strings such as \"namespace\""
        ))),
    }
}

fn unknown_key(spelled: &str, file: &str, section: &str, accepted: &[&str]) -> Error {
    let hint = match suggest(&hyphenated(spelled), accepted) {
        Some(s) => format!(" (did you mean \"{s}\"?)"),
        None => String::new(),
    };
    let key = crate::model::shown(&format!("{section}{spelled}"));
    Error::input(format!(
        "{file}: unknown key {key}{hint}; accepted keys: {}",
        accepted.join(", ")
    ))
}

fn sections(value: serde_yaml::Value, file: &str) -> Result<BTreeMap<String, WorkloadOverride>> {
    let mapping = match value {
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => {
            return Err(Error::input(format!(
                "invalid value for workloads in {file}: expected a mapping of workload name to settings (e.g. \"workloads: {{cpu: {{vm-count: 2}}}}\")"
            )));
        }
    };
    let mut sections = BTreeMap::new();
    for (name, section) in mapping {
        let name = key_text(&name, file)?;
        if !DnsLabel::is_valid(&name) {
            return Err(Error::input(format!(
                "invalid workload name {name:?} under workloads in {file}: expected a workload name such as \"cpu\""
            )));
        }
        let section = workload_section(&name, section, file)?;
        sections.insert(name, section);
    }
    Ok(sections)
}

fn workload_section(
    name: &str,
    section: serde_yaml::Value,
    file: &str,
) -> Result<WorkloadOverride> {
    let entries = match section {
        serde_yaml::Value::Null => serde_yaml::Mapping::new(),
        serde_yaml::Value::Mapping(m) => m,
        _ => {
            return Err(Error::input(format!(
                "invalid value for workloads.{name} in {file}: expected a mapping with keys {}",
                WORKLOAD_SECTION_KEYS.join(", ")
            )));
        }
    };
    let mut parsed = WorkloadOverride::default();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in entries {
        let spelled = key_text(&key, file)?;
        let canonical = hyphenated(&spelled);
        if let Some(previous) = seen.insert(canonical.clone(), spelled.clone()) {
            return Err(Error::input(format!(
                "{file}: key \"workloads.{name}.{spelled}\" repeats \"{previous}\"; give it once"
            )));
        }
        if matches!(value, serde_yaml::Value::Null) {
            continue;
        }
        let source = Source::File {
            key: format!("workloads.{name}.{spelled}"),
            file: file.to_string(),
        };
        if !set_section_key(&mut parsed, &canonical, value, &source)? {
            return Err(unknown_key(
                &spelled,
                file,
                &format!("workloads.{name}."),
                WORKLOAD_SECTION_KEYS,
            ));
        }
    }
    Ok(parsed)
}

/// Sets one key of a `workloads.<name>` section; `false` for a key sections do not have.
fn set_section_key(
    parsed: &mut WorkloadOverride,
    canonical: &str,
    value: serde_yaml::Value,
    source: &Source,
) -> Result<bool> {
    match canonical {
        "enabled" => parsed.enabled = Some(bool::from_text(&scalar(&value, source)?, source)?),
        "vm-count" => {
            let count = VmCount::from_text(&scalar(&value, source)?, source)?;
            parsed.vm_count = Some(count.get());
        }
        "cpu-cores" => {
            let cores = CpuCores::from_text(&scalar(&value, source)?, source)?;
            parsed.cpu_cores = Some(cores.get());
        }
        "memory" => {
            let memory = Quantity::from_text(&scalar(&value, source)?, source)?;
            super::value::check_minimum(&memory, &MIN_VM_MEMORY, source)?;
            parsed.memory = Some(memory);
        }
        "guest-os" => {
            parsed.guest_os = Some(GuestOs::from_text(&scalar(&value, source)?, source)?);
        }
        "storage-class" => {
            parsed.storage_class = Some(StorageClassName::from_text(
                &scalar(&value, source)?,
                source,
            )?);
        }
        "access-mode" => {
            parsed.access_mode = Some(AccessMode::from_text(&scalar(&value, source)?, source)?);
        }
        "volume-mode" => {
            parsed.volume_mode = Some(VolumeMode::from_text(&scalar(&value, source)?, source)?);
        }
        "eviction-strategy" => {
            parsed.eviction_strategy = Some(EvictionStrategy::from_text(
                &scalar(&value, source)?,
                source,
            )?);
        }
        "termination-grace-period" => {
            parsed.termination_grace_period =
                Some(grace_seconds(&scalar(&value, source)?, source)?);
        }
        "params" => parsed.params = params(value, source)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Longest shutdown grace accepted: an hour, past which a stuck guest would hold a node
/// drain or a cleanup for longer than anyone waits.
pub const MAX_GRACE_SECS: u32 = 3600;

/// A shutdown grace in whole seconds, 0 to [`MAX_GRACE_SECS`].
fn grace_seconds(text: &str, source: &Source) -> Result<u32> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|s| *s <= MAX_GRACE_SECS)
        .ok_or_else(|| {
            Error::input(format!(
                "invalid value {:?} for {source}: expected whole seconds from 0 to {MAX_GRACE_SECS} (e.g. 120)",
                one_line(text)
            ))
        })
}

fn scalar(value: &serde_yaml::Value, source: &Source) -> Result<String> {
    crate::yaml::scalar_text(value).ok_or_else(|| {
        Error::input(format!(
            "invalid value for {source}: expected a single value"
        ))
    })
}

fn params(value: serde_yaml::Value, source: &Source) -> Result<BTreeMap<String, String>> {
    let serde_yaml::Value::Mapping(entries) = value else {
        return Err(Error::input(format!(
            "invalid value for {source}: expected a mapping of param name to value (e.g. \"params: {{cpu-load-percent: 50}}\")"
        )));
    };
    let mut params = BTreeMap::new();
    for (key, value) in entries {
        let key = crate::yaml::scalar_text(&key).unwrap_or_default();
        if key.trim().is_empty() {
            return Err(Error::input(format!(
                "invalid key in {source}: param names must be non-empty strings"
            )));
        }
        let Some(text) = crate::yaml::scalar_text(&value) else {
            return Err(Error::input(format!(
                "invalid value for param {key:?} in {source}: expected a single value"
            )));
        };
        params.insert(key.trim().to_string(), text);
    }
    Ok(params)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_as_spelled_in_the_file() {
        let layer = parse("cpu_cores: 3\nData_Disk_Size: 5Gi\nmemory: ~\n", "f.yaml").unwrap();
        let cores = layer.partial.cpu_cores.unwrap();
        assert_eq!(cores.value.get(), 3);
        assert_eq!(cores.source.to_string(), "cpu_cores in f.yaml");
        assert_eq!(
            layer.partial.disk_size.unwrap().source.to_string(),
            "Data_Disk_Size in f.yaml"
        );
        assert!(layer.partial.memory.is_none(), "null means unset");
    }

    #[test]
    fn both_spellings_of_one_key_are_refused() {
        let err = parse("disk-size: 1Gi\ndata_disk_size: 2Gi\n", "f.yaml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "f.yaml: key \"data_disk_size\" repeats \"disk-size\"; give it once"
        );
    }

    #[test]
    fn unknown_keys_get_a_suggestion() {
        let err = parse("namespce: x\n", "f.yaml").unwrap_err().to_string();
        assert!(
            err.starts_with("f.yaml: unknown key \"namespce\" (did you mean \"namespace\"?)"),
            "{err}"
        );
        assert!(!err.contains("params"), "{err}");
    }
}
