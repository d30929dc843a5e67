//! Typed workload param schemas and their validation.
//!
//! Every param value a user types ends up inside a guest shell script or a systemd unit, so
//! each param has a type and, for strings, a strict rule (closed enum or narrow character
//! class). Nothing that fails these rules reaches a guest. Validation walks keys in sorted
//! order so the first error is deterministic, and every error is one line naming the
//! workload, the key, the value and the accepted form ([`Error::Input`], exit 2).

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::model::{parse_int, shown, suggest};

/// How a string (or list/dict element) value must look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrRule {
    /// One of a closed list of words.
    OneOf(&'static [&'static str]),
    /// One of a closed list of signal names (`SIGKILL`), also given without the prefix
    /// (`KILL`, any case) or as its Linux number (`9`); resolved to the listed name.
    Signal(&'static [&'static str]),
    /// A fio block size: bytes with optional `k`/`m` suffix, multiple of 512, 512..=64m.
    BlockSize,
    /// `<positive int><K|M|G>` (tps `file-size`), at most 1 TiB.
    FileSize,
    /// An absolute mount path of safe characters, not a system directory.
    MountPath,
    /// A decimal percentage 0..=100 with at most 4 decimals.
    Percent,
    /// The default for catalog strings: `[A-Za-z0-9._:/+,=@-]`, not starting with `-`.
    Token,
    /// `auto`, or `<host>:<port>` with an IPv4 address or DNS name and a port 1..=65535.
    ProbeTarget,
    /// Seconds, bare or with an `s`, `m` or `h` suffix, 10 s to 7 days (load profile timing).
    Duration,
}

/// The type of a param.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// A decimal integer within `min..=max`.
    Int { min: i64, max: i64 },
    /// A string following a rule.
    Str(StrRule),
    /// `true` or `false`, case-insensitive.
    Bool,
    /// `;`-separated non-empty elements, each following the rule.
    List(StrRule),
    /// `;`-separated `key=value` entries, key and value each following the rule.
    Dict(StrRule),
}

/// One declared param.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDef {
    pub key: String,
    pub kind: ParamType,
    /// Used when the user gives no (or an empty) value.
    pub default: String,
    pub description: String,
}

impl ParamDef {
    /// A bounded integer param.
    pub fn int(key: &str, default: i64, min: i64, max: i64, description: &str) -> Self {
        ParamDef {
            key: key.to_string(),
            kind: ParamType::Int { min, max },
            default: default.to_string(),
            description: description.to_string(),
        }
    }

    /// A string param following `rule`.
    pub fn string(key: &str, default: &str, rule: StrRule, description: &str) -> Self {
        ParamDef {
            key: key.to_string(),
            kind: ParamType::Str(rule),
            default: default.to_string(),
            description: description.to_string(),
        }
    }
}

/// The params a workload accepts, keyed and iterated in sorted order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamSchema {
    workload: String,
    defs: BTreeMap<String, ParamDef>,
}

impl ParamSchema {
    /// Builds the schema of `workload`. Duplicate keys keep the last definition.
    pub fn new(workload: &str, defs: Vec<ParamDef>) -> Self {
        ParamSchema {
            workload: workload.to_string(),
            defs: defs.into_iter().map(|d| (d.key.clone(), d)).collect(),
        }
    }

    /// The workload this schema belongs to (named in every error).
    pub fn workload(&self) -> &str {
        &self.workload
    }

    /// Declared params in key order.
    pub fn defs(&self) -> impl Iterator<Item = &ParamDef> {
        self.defs.values()
    }

    /// The definition of `key`, if declared.
    pub fn get(&self, key: &str) -> Option<&ParamDef> {
        self.defs.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// Validates `params` and returns every declared key with its effective value
    /// (user value when present and non-empty, else the default).
    pub fn resolve(&self, params: &BTreeMap<String, String>) -> Result<ResolvedParams> {
        validate_params(self, params)?;
        let values = self
            .defs
            .values()
            .map(|def| {
                let value = match params.get(&def.key) {
                    Some(v) if !v.is_empty() => v.clone(),
                    _ => def.default.clone(),
                };
                let value = match def.kind {
                    // One canonical spelling reaches the guest. An integer in decimal without
                    // leading zeros: guest bash reads `08` as bad octal and `010` as 8.
                    ParamType::Int { .. } => parse_int(&value).map_or(value, |n| n.to_string()),
                    ParamType::Bool => value.to_ascii_lowercase(),
                    ParamType::Str(StrRule::Signal(names)) => {
                        canonical_signal(names, &value).map_or(value, str::to_string)
                    }
                    _ => value,
                };
                (def.key.clone(), value)
            })
            .collect();
        Ok(ResolvedParams { values })
    }
}

/// Effective param values of one workload, all validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedParams {
    values: BTreeMap<String, String>,
}

impl ResolvedParams {
    /// The value of a declared key.
    ///
    /// # Panics
    /// When `key` is not declared by the schema: a programming error in a built-in
    /// workload, caught by its unit tests.
    pub fn str(&self, key: &str) -> &str {
        match self.values.get(key) {
            Some(v) => v,
            None => panic!("param {key:?} is not declared in the workload's schema"),
        }
    }

    /// The seconds of a declared duration key.
    ///
    /// # Panics
    /// When `key` is undeclared or not a duration (validation guarantees it is).
    pub fn seconds(&self, key: &str) -> u64 {
        crate::profile_schedule::parse_duration(self.str(key))
            .unwrap_or_else(|| panic!("param {key:?} is not a duration"))
    }

    /// The value of a declared integer key.
    ///
    /// # Panics
    /// When `key` is undeclared or not an integer (validation guarantees it is).
    pub fn int(&self, key: &str) -> i64 {
        parse_int(self.str(key)).unwrap_or_else(|| panic!("param {key:?} is not an integer"))
    }

    /// Every key with its value, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Checks user-given `params` against `schema`: unknown keys (with a did-you-mean hint)
/// and every value against its type, in sorted key order. An empty value means "use the
/// default" and is accepted for every type.
pub fn validate_params(schema: &ParamSchema, params: &BTreeMap<String, String>) -> Result<()> {
    let workload = schema.workload();
    for (key, value) in params {
        let Some(def) = schema.get(key) else {
            return Err(unknown_param(schema, key));
        };
        if value.is_empty() {
            continue;
        }
        if let Err(accepted) = check_value(def.kind, value) {
            let value = shown(value);
            return Err(Error::input(format!(
                "invalid params for workload {workload:?}: param {key:?} value {value}: {accepted}"
            )));
        }
    }
    Ok(())
}

fn unknown_param(schema: &ParamSchema, key: &str) -> Error {
    let workload = schema.workload();
    let shown_key = shown(key);
    if super::profile_keys::is_profile_key(key) {
        return Error::input(format!(
            "invalid params for workload {workload:?}: param {shown_key} sets a load profile, and workload {workload:?} does not support load profiles (see \"Load profiles\" in docs/workloads.md)"
        ));
    }
    if schema.is_empty() {
        return Error::input(format!(
            "invalid params for workload {workload:?}: unknown param {shown_key}: workload {workload:?} takes no params"
        ));
    }
    let known: Vec<&str> = schema.defs.keys().map(String::as_str).collect();
    let hint = match suggest(key, &known) {
        Some(s) => format!(" (did you mean {s:?}?)"),
        None => String::new(),
    };
    Error::input(format!(
        "invalid params for workload {workload:?}: unknown param {shown_key}{hint}; known params: {}",
        known.join(", ")
    ))
}

/// Checks one non-empty value against a type; `Err` carries the accepted form.
pub fn check_value(kind: ParamType, value: &str) -> std::result::Result<(), String> {
    match kind {
        ParamType::Int { min, max } => match parse_int(value) {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            _ if min == i64::MIN && max == i64::MAX => Err("must be an integer".to_string()),
            _ if max == i64::MAX => Err(format!("must be an integer of at least {min}")),
            _ => Err(format!("must be an integer from {min} to {max}")),
        },
        ParamType::Bool => {
            if value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false") {
                Ok(())
            } else {
                Err("must be \"true\" or \"false\"".to_string())
            }
        }
        ParamType::Str(rule) => check_str(rule, value),
        ParamType::List(rule) => {
            for (i, element) in value.split(';').enumerate() {
                if element.is_empty() {
                    return Err(format!(
                        "element {i} is empty; expected ';'-separated values, each {}",
                        rule.describe()
                    ));
                }
                check_str(rule, element)
                    .map_err(|accepted| format!("element {}: {accepted}", shown(element)))?;
            }
            Ok(())
        }
        ParamType::Dict(rule) => {
            for (i, entry) in value.split(';').enumerate() {
                if entry.is_empty() {
                    return Err(format!(
                        "entry {i} is empty; expected ';'-separated key=value entries"
                    ));
                }
                let Some((k, v)) = entry.split_once('=') else {
                    return Err(format!(
                        "entry {} must contain \"=\"; expected ';'-separated key=value entries",
                        shown(entry)
                    ));
                };
                for part in [k, v] {
                    check_str(rule, part)
                        .map_err(|accepted| format!("entry {}: {accepted}", shown(entry)))?;
                }
            }
            Ok(())
        }
    }
}

impl StrRule {
    /// The accepted form, for error messages.
    pub fn describe(self) -> String {
        match self {
            StrRule::OneOf(words) => format!("one of: {}", words.join(", ")),
            StrRule::Signal(names) => format!(
                "one of: {} (also without the SIG prefix, or as its number, e.g. KILL or 9)",
                names.join(", ")
            ),
            StrRule::BlockSize => "a block size in bytes with optional k or m suffix, a multiple of 512 from 512 to 64m (e.g. 4k, 128k, 1m)".to_string(),
            StrRule::FileSize => {
                "a positive whole number followed by K, M or G, at most 1 TiB (e.g. 10M)"
                    .to_string()
            }
            StrRule::MountPath => "an absolute path of letters, digits, '.', '_', '-' and '/' (e.g. /mnt/data) that is not a system directory".to_string(),
            StrRule::Percent => "a decimal percentage from 0 to 100 with at most 4 decimals (e.g. 5 or 0.5)".to_string(),
            StrRule::Token => "a non-empty value of letters, digits and . _ : / + , = @ - (no spaces, quotes or shell characters), not starting with '-'".to_string(),
            StrRule::Duration => crate::profile_schedule::DURATION_FORM.to_string(),
            StrRule::ProbeTarget => "\"auto\" or <host>:<port> with an IPv4 address or a DNS name and a port from 1 to 65535 (e.g. 10.0.0.5:5201 or my-svc.my-ns.svc.cluster.local:80)".to_string(),
        }
    }
}

const FILE_SIZE_FORM: &str =
    "invalid file-size format: must be a positive integer followed by K, M, or G (e.g. '10M')";

fn check_str(rule: StrRule, value: &str) -> std::result::Result<(), String> {
    let ok = match rule {
        StrRule::OneOf(words) => {
            if words.contains(&value) {
                true
            } else {
                let hint = match suggest(value, words) {
                    Some(s) => format!(" (did you mean {s:?}?)"),
                    None => String::new(),
                };
                return Err(format!("{}{hint}", rule.describe()));
            }
        }
        StrRule::Signal(names) => canonical_signal(names, value).is_some(),
        StrRule::BlockSize => block_size_bytes(value).is_some(),
        StrRule::FileSize => {
            return parse_file_size(value)
                .map(|_| ())
                .map_err(|detail| format!("{FILE_SIZE_FORM}{detail}"));
        }
        StrRule::MountPath => is_safe_mount_path(value),
        StrRule::Percent => is_percent(value),
        StrRule::Token => is_token(value),
        StrRule::ProbeTarget => value == "auto" || parse_probe_target(value).is_some(),
        StrRule::Duration => crate::profile_schedule::parse_duration(value).is_some(),
    };
    if ok { Ok(()) } else { Err(rule.describe()) }
}

/// Linux signal numbers of the signals a workload may name (the same on x86-64 and arm64).
const SIGNAL_NUMBERS: &[(u8, &str)] = &[
    (1, "SIGHUP"),
    (2, "SIGINT"),
    (3, "SIGQUIT"),
    (6, "SIGABRT"),
    (9, "SIGKILL"),
    (10, "SIGUSR1"),
    (12, "SIGUSR2"),
    (14, "SIGALRM"),
    (15, "SIGTERM"),
    (18, "SIGCONT"),
    (19, "SIGSTOP"),
];

/// The listed name `value` means: `SIGKILL`, `KILL` or `kill`, or `9`. `None` when it names
/// no signal of `names`.
pub fn canonical_signal(names: &[&'static str], value: &str) -> Option<&'static str> {
    let value = value.trim();
    let wanted = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let number: u8 = value.parse().ok()?;
        SIGNAL_NUMBERS
            .iter()
            .find(|(n, _)| *n == number)?
            .1
            .to_string()
    } else {
        let upper = value.to_ascii_uppercase();
        if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        }
    };
    names.iter().copied().find(|name| *name == wanted)
}

/// Bytes of a fio block size like `4k`, `128K`, `1m` or `4096`.
pub fn block_size_bytes(value: &str) -> Option<u64> {
    let (digits, unit) = match value.as_bytes().last()? {
        b'k' | b'K' => (&value[..value.len() - 1], 1024),
        b'm' | b'M' => (&value[..value.len() - 1], 1024 * 1024),
        _ => (value, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 9 {
        return None;
    }
    let bytes = digits.parse::<u64>().ok()? * unit;
    ((512..=64 * 1024 * 1024).contains(&bytes) && bytes % 512 == 0).then_some(bytes)
}

/// A tps file size: count and unit (`K`, `M`, `G`, upper-cased).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSize {
    pub count: u64,
    pub unit: char,
}

impl FileSize {
    /// Total bytes.
    pub fn bytes(self) -> u64 {
        self.count * self.unit_bytes()
    }

    /// Bytes per unit.
    pub fn unit_bytes(self) -> u64 {
        match self.unit {
            'K' => 1 << 10,
            'M' => 1 << 20,
            _ => 1 << 30,
        }
    }
}

impl fmt::Display for FileSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.count, self.unit)
    }
}

/// Largest accepted tps test file: 1 TiB.
const MAX_FILE_SIZE_BYTES: u64 = 1 << 40;

/// Parses `<positive int><K|M|G>` (suffix case-insensitive, surrounding spaces trimmed).
/// `Err` holds the reference's detail text, e.g. ` (unrecognized suffix "X")`.
pub fn parse_file_size(raw: &str) -> std::result::Result<FileSize, String> {
    let value = raw.trim();
    let Some(last) = value.chars().last() else {
        return Err(" (value is empty)".to_string());
    };
    let unit = last.to_ascii_uppercase();
    let digits = &value[..value.len() - last.len_utf8()];
    if !matches!(unit, 'K' | 'M' | 'G') {
        let suffix: String = value
            .chars()
            .rev()
            .take_while(|c| !c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(format!(" (unrecognized suffix {})", shown(&suffix)));
    }
    let Some(count) = parse_int(digits) else {
        return Err(format!(" ({} is not a valid integer)", shown(digits)));
    };
    if count <= 0 {
        return Err(" (value must be positive)".to_string());
    }
    let size = FileSize {
        count: count as u64,
        unit,
    };
    if size
        .count
        .checked_mul(size.unit_bytes())
        .is_none_or(|b| b > MAX_FILE_SIZE_BYTES)
    {
        return Err(" (value must be at most 1024G)".to_string());
    }
    Ok(size)
}

/// Directories a data disk must never be mounted on (or under).
const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
];
/// Directories that may hold a mount below them but are not mount points themselves.
const SYSTEM_ROOTS: &[&str] = &[
    "/", "/home", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var",
];

fn is_safe_mount_path(value: &str) -> bool {
    let chars_ok = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
    let trimmed = value
        .strip_suffix('/')
        .filter(|s| !s.is_empty())
        .unwrap_or(value);
    chars_ok
        && value.starts_with('/')
        && value.len() <= 255
        && !value.contains("//")
        && !value.split('/').any(|c| c == "." || c == "..")
        && !SYSTEM_ROOTS.contains(&trimmed)
        && !SYSTEM_DIRS
            .iter()
            .any(|d| trimmed == *d || trimmed.starts_with(&format!("{d}/")))
}

fn is_percent(value: &str) -> bool {
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    let frac_ok = !value.contains('.') || (!frac.is_empty() && frac.len() <= 4);
    if int.is_empty()
        || int.len() > 3
        || !frac_ok
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    value
        .parse::<f64>()
        .is_ok_and(|v| (0.0..=100.0).contains(&v))
}

/// Host and port of a `<host>:<port>` probe target: host an IPv4 address or a lowercase DNS
/// name (labels of letters, digits and '-', at most 253 characters), port 1..=65535.
pub fn parse_probe_target(value: &str) -> Option<(&str, u16)> {
    let (host, port) = value.rsplit_once(':')?;
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    let is_ipv4 = host.parse::<std::net::Ipv4Addr>().is_ok();
    let is_name = host.len() <= 253
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        });
    (is_ipv4 || is_name).then_some((host, port))
}

/// The safe default for catalog strings (see [`StrRule::Token`]).
pub fn is_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && !value.starts_with('-')
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'.' | b'_' | b':' | b'/' | b'+' | b',' | b'=' | b'@' | b'-'
                )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_size_errors_match_the_reference() {
        assert_eq!(parse_file_size(" 10m ").unwrap().bytes(), 10 << 20);
        assert_eq!(parse_file_size("3K").unwrap().bytes(), 3 << 10);
        assert_eq!(
            parse_file_size("10X").unwrap_err(),
            " (unrecognized suffix \"X\")"
        );
        assert_eq!(
            parse_file_size("2GB").unwrap_err(),
            " (unrecognized suffix \"GB\")"
        );
        assert_eq!(
            parse_file_size("1.5G").unwrap_err(),
            " (\"1.5\" is not a valid integer)"
        );
        assert_eq!(
            parse_file_size("0M").unwrap_err(),
            " (value must be positive)"
        );
        assert_eq!(
            parse_file_size("-5M").unwrap_err(),
            " (value must be positive)"
        );
        assert!(parse_file_size("M").is_err());
        assert!(parse_file_size("2000G").is_err());
    }

    #[test]
    fn block_sizes() {
        assert_eq!(block_size_bytes("4k"), Some(4096));
        assert_eq!(block_size_bytes("1m"), Some(1 << 20));
        assert_eq!(block_size_bytes("512"), Some(512));
        for bad in ["", "k", "4kb", "100", "1g", "65m", "-4k", "4 k", "4k;"] {
            assert_eq!(block_size_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn mount_paths() {
        for good in ["/mnt/data", "/data", "/var/lib/chaos", "/mnt/x_1.d/"] {
            assert!(is_safe_mount_path(good), "{good}");
        }
        for bad in [
            "mnt",
            "/",
            "/etc",
            "/usr/local",
            "/mnt/../etc",
            "/mnt//x",
            "/mnt/a b",
            "/mnt/$x",
            "/var",
            "/proc/1",
        ] {
            assert!(!is_safe_mount_path(bad), "{bad}");
        }
    }

    #[test]
    fn probe_targets() {
        assert_eq!(parse_probe_target("10.0.2.2:80"), Some(("10.0.2.2", 80)));
        assert_eq!(
            parse_probe_target("svc.ns.svc.cluster.local:5201"),
            Some(("svc.ns.svc.cluster.local", 5201))
        );
        for bad in [
            "",
            "auto:",
            "host",
            "host:0",
            "host:65536",
            ":80",
            "-a:80",
            "a..b:80",
            "A:80",
            "a b:80",
            "a;b:80",
            "$(x):80",
            "a:8 0",
            "[::1]:80",
        ] {
            assert_eq!(parse_probe_target(bad), None, "{bad}");
        }
        assert!(check_str(StrRule::ProbeTarget, "auto").is_ok());
    }

    #[test]
    fn percents() {
        for good in ["0", "5", "5.0", "0.25", "100", "100.0"] {
            assert!(is_percent(good), "{good}");
        }
        for bad in ["", "-1", "100.1", "5.", ".5", "1e2", "5%", "5.00001", "0x5"] {
            assert!(!is_percent(bad), "{bad}");
        }
    }
}
