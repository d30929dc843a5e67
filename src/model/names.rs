//! Names and identities: DNS-1123 labels, container image references, Linux user names and
//! run ids.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Serialize, Serializer};
use uuid::Uuid;

use super::Invalid;

/// A DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a
/// letter or digit. What Kubernetes requires of namespace names and of every object name and
/// label value built from one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DnsLabel(String);

impl DnsLabel {
    /// The longest label Kubernetes accepts.
    pub const MAX_LEN: usize = 63;

    /// Whether `text` is a DNS-1123 label. The one check of the rule in this program; name
    /// builders that only need a yes/no (generated VM, Service and disk names) call it too.
    pub fn is_valid(text: &str) -> bool {
        let bytes = text.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= Self::MAX_LEN
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `text` is a DNS-1123 subdomain, Kubernetes' rule for most object names (DataVolumes,
/// PVCs, StorageClasses): at most 253 characters of lowercase letters, digits, '-' and '.',
/// each dot-separated part non-empty and starting and ending with a letter or digit. The
/// parts have no length limit of their own (unlike the labels of a DNS host name).
pub fn is_dns_subdomain(text: &str) -> bool {
    let part_ok = |part: &str| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    text.len() <= DNS_SUBDOMAIN_MAX_LEN && text.split('.').all(part_ok)
}

/// The longest DNS-1123 subdomain Kubernetes accepts as an object name.
pub const DNS_SUBDOMAIN_MAX_LEN: usize = 253;

impl FromStr for DnsLabel {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if Self::is_valid(text) {
            Ok(DnsLabel(text.to_string()))
        } else {
            Err(Invalid::Expected(
                "expected a DNS-1123 label (at most 63 lowercase letters, digits and '-', \
                 starting and ending with a letter or digit)"
                    .into(),
            ))
        }
    }
}

impl Deref for DnsLabel {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DnsLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for DnsLabel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A container image reference (`quay.io/containerdisks/fedora:42`): non-empty, no whitespace
/// or control characters. The registry resolves the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef(String);

impl ImageRef {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ImageRef {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Err(Invalid::Expected(
                "expected a container image reference such as quay.io/containerdisks/fedora:42"
                    .into(),
            ))
        } else {
            Ok(ImageRef(text.to_string()))
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A portable Linux login name: a lowercase letter or '_', then lowercase letters, digits,
/// '_' or '-', at most 32 characters. It reaches the guest's cloud-init `users` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserName(String);

impl UserName {
    /// The longest name `useradd` accepts everywhere.
    pub const MAX_LEN: usize = 32;

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(super) const EXPECTED: &'static str = "expected a Linux user name (at most 32 lowercase \
         letters, digits, '_' or '-', starting with a letter or '_')";

    fn is_valid(text: &str) -> bool {
        let mut bytes = text.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
        first_ok
            && text.len() <= Self::MAX_LEN
            && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    }
}

impl FromStr for UserName {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if Self::is_valid(text) {
            Ok(UserName(text.to_string()))
        } else {
            Err(Invalid::Expected(Self::EXPECTED.into()))
        }
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of one `run` (a UUID v4): the `virtwork/run-id` label of every object it creates and
/// the key of its audit record. Parsed only from the hyphenated form users copy from output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(Uuid);

impl RunId {
    /// A fresh random id.
    pub fn new_v4() -> Self {
        RunId(Uuid::new_v4())
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }

    /// The first 6 hex digits of the id: the part of every generated name that keeps two runs
    /// apart in one namespace (`virtwork-cpu-3f9a1c-0`), short enough for the 63-character
    /// name limit and the start of what `virtwork status` prints as the run id.
    pub fn name_tag(&self) -> String {
        self.0.simple().to_string()[..Self::NAME_TAG_LEN].to_string()
    }

    /// Length of [`RunId::name_tag`].
    pub const NAME_TAG_LEN: usize = 6;
}

impl From<Uuid> for RunId {
    fn from(uuid: Uuid) -> Self {
        RunId(uuid)
    }
}

impl FromStr for RunId {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        match Uuid::parse_str(text) {
            // 36 characters: the hyphenated form only, as printed by `run` and `audit list`.
            Ok(uuid) if text.len() == 36 => Ok(RunId(uuid)),
            _ => Err(Invalid::Expected(
                "expected a run id (UUID) such as 0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f".into(),
            )),
        }
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl Serialize for RunId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Orders names as people read them: runs of digits by value, so `cpu-2` comes before
/// `cpu-10` (a plain string order puts `cpu-10` first). Ties (`02` and `2`) fall back to the
/// plain order, so the order is total.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut left, mut right) = (chunks(a), chunks(b));
    loop {
        let order = match (left.next(), right.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if is_number(x) && is_number(y) => {
                // By value without parsing: numbers may be longer than any integer type.
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            (Some(x), Some(y)) => x.cmp(y),
        };
        if order.is_ne() {
            return order;
        }
    }
}

fn is_number(chunk: &str) -> bool {
    chunk.starts_with(|c: char| c.is_ascii_digit())
}

/// `cpu-10a` -> `cpu-`, `10`, `a`: alternating runs of digits and of anything else.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let digit = first.is_ascii_digit();
        let end = rest
            .find(|c: char| c.is_ascii_digit() != digit)
            .unwrap_or(rest.len());
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_naturally() {
        let mut names = vec![
            "virtwork-cpu-10",
            "virtwork-cpu-2",
            "virtwork-cpu-1",
            "virtwork-cpu-0",
            "virtwork-chaos-disk-0",
            "virtwork-cpu",
            "virtwork-network-server-0",
            "virtwork-network-client-11",
            "virtwork-network-client-3",
            "a99999999999999999999999",
            "a100000000000000000000000",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "a99999999999999999999999",
                "a100000000000000000000000",
                "virtwork-chaos-disk-0",
                "virtwork-cpu",
                "virtwork-cpu-0",
                "virtwork-cpu-1",
                "virtwork-cpu-2",
                "virtwork-cpu-10",
                "virtwork-network-client-3",
                "virtwork-network-client-11",
                "virtwork-network-server-0",
            ]
        );
        assert_eq!(natural_cmp("cpu-02", "cpu-2"), std::cmp::Ordering::Less);
        assert_eq!(natural_cmp("cpu-2", "cpu-2"), std::cmp::Ordering::Equal);
    }

    #[test]
    fn dns_labels() {
        for good in ["virtwork", "a-1", "a", &"a".repeat(63), " padded "] {
            assert!(good.parse::<DnsLabel>().is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "Bad Namespace",
            &"a".repeat(64),
        ] {
            let err = bad.parse::<DnsLabel>().unwrap_err();
            assert!(err.to_string().contains("DNS-1123"), "{bad:?}");
        }
        assert_eq!(&*"ns".parse::<DnsLabel>().unwrap(), "ns");
    }

    #[test]
    fn image_references() {
        assert!(
            "quay.io/containerdisks/fedora:42"
                .parse::<ImageRef>()
                .is_ok()
        );
        for bad in ["", "  ", "a b", "img\n:1"] {
            assert!(bad.parse::<ImageRef>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn user_names() {
        for good in ["virtwork", "virt_work-1", "_svc", &"a".repeat(32)] {
            assert!(good.parse::<UserName>().is_ok(), "{good:?}");
        }
        for bad in ["", "Root", "a b", "x;rm", "1abc", "-a", &"a".repeat(33)] {
            assert!(bad.parse::<UserName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_name_tag_is_the_first_six_hex_digits_of_the_run_id() {
        let id: RunId = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f".parse().unwrap();
        assert_eq!(id.name_tag(), "0b6c4a");
        let fresh = RunId::new_v4();
        assert!(fresh.to_string().starts_with(&fresh.name_tag()));
    }

    #[test]
    fn run_ids_are_hyphenated_uuids() {
        let id: RunId = "0B6C4A8E-3F1D-4D2A-9C7E-5A1B2C3D4E5F".parse().unwrap();
        assert_eq!(id.to_string(), "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f");
        for bad in [
            "1234",
            "latest",
            "0b6c4a8e3f1d4d2a9c7e5a1b2c3d4e5f",
            "{0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f}",
        ] {
            let err = bad.parse::<RunId>().unwrap_err();
            assert!(err.to_string().contains("UUID"), "{bad}");
        }
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f\""
        );
    }
}
