//! The guest OS choice: a distribution family, or `auto` (inferred from the image name by
//! the workloads layer, which owns the inference table).

use std::fmt;
use std::str::FromStr;

use super::Invalid;

/// The distribution family a guest payload is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum GuestFamily {
    /// Fedora, CentOS Stream, RHEL, AlmaLinux, Rocky Linux: dnf, RPM package names.
    #[default]
    Fedora,
    /// Debian and Ubuntu: apt, Debian package names.
    Debian,
}

impl GuestFamily {
    /// Every family, in a fixed order (tests and docs iterate over it).
    pub const ALL: [GuestFamily; 2] = [GuestFamily::Fedora, GuestFamily::Debian];

    /// The lowercase name used on the command line and in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestFamily::Fedora => "fedora",
            GuestFamily::Debian => "debian",
        }
    }
}

impl fmt::Display for GuestFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user asked for (`guest-os`): a family, or `auto` (infer it from the image name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestOs {
    #[default]
    Auto,
    Family(GuestFamily),
}

impl GuestOs {
    /// Accepted spellings, for error messages.
    pub const ACCEPTED: &'static str = "auto, fedora or debian";

    /// Parses `auto`, `fedora` or `debian` (any case, surrounding blanks ignored).
    pub fn parse(value: &str) -> Option<GuestOs> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(GuestOs::Auto),
            "fedora" => Some(GuestOs::Family(GuestFamily::Fedora)),
            "debian" => Some(GuestOs::Family(GuestFamily::Debian)),
            _ => None,
        }
    }
}

impl FromStr for GuestOs {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        GuestOs::parse(text)
            .ok_or_else(|| Invalid::Expected(format!("expected {}", GuestOs::ACCEPTED)))
    }
}

impl fmt::Display for GuestOs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuestOs::Auto => f.write_str("auto"),
            GuestOs::Family(family) => family.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_os_parses_its_three_names_and_prints_them_back() {
        for text in ["auto", "fedora", "debian"] {
            assert_eq!(text.parse::<GuestOs>().unwrap().to_string(), text);
        }
        assert_eq!(
            " Debian ".parse::<GuestOs>(),
            Ok(GuestOs::Family(GuestFamily::Debian))
        );
        assert_eq!(
            "ubuntu".parse::<GuestOs>().unwrap_err().to_string(),
            "expected auto, fedora or debian"
        );
    }
}
