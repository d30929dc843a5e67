//! Run ids as users type them: a whole id, or a prefix of at least 6 hex digits (every VM
//! name carries the first 6, `virtwork-cpu-3f9a1c-0`), and what such a prefix names among
//! the runs a command knows of.
//!
//! Owns: [`RunIdSelector`] (parsed once where the text enters), [`RunRef`] (the run a command
//! acts on once the selector is resolved) and the pure decision [`RunIdSelector::resolve`]
//! over candidate ids, with its [`Ambiguous`] outcome. Must not: list the cluster or read the
//! audit database (the commands gather the candidates and resolve once).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use super::{Invalid, RunId};

/// The run id a user gave: a whole id (resolved without looking anything up) or a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunIdSelector {
    Full(RunId),
    Prefix(RunIdPrefix),
}

/// At least [`RunIdPrefix::MIN_DIGITS`] and fewer than 32 hex digits: the start of a run id,
/// with or without its hyphens.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunIdPrefix {
    /// Lowercase hex digits, hyphens removed.
    digits: String,
}

impl RunIdPrefix {
    /// As many digits as the run tag in every generated name ([`RunId::NAME_TAG_LEN`]).
    pub const MIN_DIGITS: usize = RunId::NAME_TAG_LEN;

    /// Whether `id` begins with this prefix.
    pub fn matches(&self, id: &RunId) -> bool {
        id.as_uuid().simple().to_string().starts_with(&self.digits)
    }

    /// The hex digits alone (lowercase, no hyphens): how the audit database is searched.
    pub fn digits(&self) -> &str {
        &self.digits
    }
}

/// Shown hyphenated where a run id has its hyphens, so it reads as the start of one.
impl fmt::Display for RunIdPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.digits.chars().enumerate() {
            if matches!(i, 8 | 12 | 16 | 20) {
                f.write_str("-")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

const EXPECTED: &str = "expected a run id such as 0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f, or at \
    least its first 6 hex digits (the run tag in VM names, e.g. 0b6c4a)";

impl FromStr for RunIdSelector {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim().to_ascii_lowercase();
        if let Ok(id) = text.parse::<RunId>() {
            return Ok(RunIdSelector::Full(id));
        }
        let digits: String = text.chars().filter(|&c| c != '-').collect();
        let hex = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_hexdigit());
        let prefix = RunIdPrefix { digits };
        // Hyphens only where a run id has them: "0b6c4a8e-3f" is a start, "0b-6c4a" is not.
        let hyphens_in_place = !text.contains('-') || prefix.to_string() == text;
        match prefix.digits.len() {
            32 if hex && hyphens_in_place => Uuid::parse_str(&prefix.digits)
                .map(|uuid| RunIdSelector::Full(uuid.into()))
                .map_err(|_| Invalid::Expected(EXPECTED.into())),
            n if hex && hyphens_in_place && (RunIdPrefix::MIN_DIGITS..32).contains(&n) => {
                Ok(RunIdSelector::Prefix(prefix))
            }
            n if hex && hyphens_in_place && n < RunIdPrefix::MIN_DIGITS => Err(Invalid::Expected(
                format!("{EXPECTED}; {n} digits could name many runs"),
            )),
            _ => Err(Invalid::Expected(EXPECTED.into())),
        }
    }
}

impl fmt::Display for RunIdSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunIdSelector::Full(id) => fmt::Display::fmt(id, f),
            RunIdSelector::Prefix(prefix) => fmt::Display::fmt(prefix, f),
        }
    }
}

impl From<RunId> for RunIdSelector {
    fn from(id: RunId) -> Self {
        RunIdSelector::Full(id)
    }
}

/// The run a command acts on: a known id, or a prefix that matched no run, which then
/// matches nothing further on (as an unknown whole id does).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunRef {
    Id(RunId),
    Unmatched(RunIdPrefix),
}

impl RunRef {
    /// The id, when one was named or found.
    pub fn id(&self) -> Option<RunId> {
        match self {
            RunRef::Id(id) => Some(*id),
            RunRef::Unmatched(_) => None,
        }
    }
}

/// The label value and audit key: the hyphenated id, or the prefix as given.
impl fmt::Display for RunRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunRef::Id(id) => fmt::Display::fmt(id, f),
            RunRef::Unmatched(prefix) => fmt::Display::fmt(prefix, f),
        }
    }
}

/// A prefix that begins more than one known run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguous {
    pub prefix: RunIdPrefix,
    /// Sorted, each once.
    pub matches: Vec<RunId>,
}

impl Ambiguous {
    /// Most matches named in the message (the rest are counted).
    pub const SHOWN: usize = 10;

    /// The one-line refusal for the prefix given as `input` (`--run-id`, `audit show`).
    pub fn message(&self, input: &str) -> String {
        let shown: Vec<String> = self
            .matches
            .iter()
            .take(Self::SHOWN)
            .map(RunId::to_string)
            .collect();
        let more = match self.matches.len().saturating_sub(Self::SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "{input} {} is ambiguous: it begins {} runs ({}{more}); give more of its digits \
             or the whole id",
            self.prefix,
            self.matches.len(),
            shown.join(", ")
        )
    }
}

impl RunIdSelector {
    /// The run this selector names among `known`: a whole id is itself (known or not); a
    /// prefix is the one known id it begins, [`RunRef::Unmatched`] when it begins none, and
    /// [`Ambiguous`] when it begins several.
    pub fn resolve(&self, known: impl IntoIterator<Item = RunId>) -> Result<RunRef, Ambiguous> {
        let prefix = match self {
            RunIdSelector::Full(id) => return Ok(RunRef::Id(*id)),
            RunIdSelector::Prefix(prefix) => prefix,
        };
        let matches: BTreeSet<RunId> = known.into_iter().filter(|id| prefix.matches(id)).collect();
        let mut found = matches.iter();
        match (found.next(), found.next()) {
            (None, _) => Ok(RunRef::Unmatched(prefix.clone())),
            (Some(id), None) => Ok(RunRef::Id(*id)),
            _ => Err(Ambiguous {
                prefix: prefix.clone(),
                matches: matches.into_iter().collect(),
            }),
        }
    }

    /// The prefix, when resolving needs candidates (a whole id needs none).
    pub fn prefix(&self) -> Option<&RunIdPrefix> {
        match self {
            RunIdSelector::Full(_) => None,
            RunIdSelector::Prefix(prefix) => Some(prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3f9a1c2b-1111-4111-8111-111111111111";
    const B: &str = "3f9a1c2b-2222-4222-8222-222222222222";
    const C: &str = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";

    fn id(text: &str) -> RunId {
        text.parse().unwrap()
    }

    fn selector(text: &str) -> RunIdSelector {
        text.parse().unwrap()
    }

    #[test]
    fn a_whole_id_in_either_spelling_is_full_and_a_run_tag_is_a_prefix() {
        assert_eq!(selector(C), RunIdSelector::Full(id(C)));
        assert_eq!(selector(&C.to_uppercase()), RunIdSelector::Full(id(C)));
        assert_eq!(selector(&C.replace('-', "")), RunIdSelector::Full(id(C)));
        let tag = selector(" 0B6C4A ");
        assert_eq!(tag.to_string(), "0b6c4a");
        assert!(tag.prefix().unwrap().matches(&id(C)));
        // With or without the id's own hyphens, as long as they sit where the id has them.
        assert_eq!(selector("0b6c4a8e-3f1d"), selector("0b6c4a8e3f1d"));
        assert_eq!(selector("0b6c4a8e3f1d").to_string(), "0b6c4a8e-3f1d");
    }

    #[test]
    fn short_misplaced_or_non_hex_text_is_refused_with_the_accepted_form() {
        for bad in [
            "",
            "0b6c4",
            "0b6c4g",
            "0b-6c4a8e",
            "run-1",
            "0b6c4a8e--3f",
            &format!("{C}0"),
        ] {
            let Err(Invalid::Expected(reason)) = bad.parse::<RunIdSelector>() else {
                panic!("{bad:?} accepted");
            };
            assert!(reason.starts_with("expected a run id"), "{reason}");
            assert!(reason.contains("first 6 hex digits"), "{reason}");
        }
        let Err(Invalid::Expected(reason)) = "0b6c4".parse::<RunIdSelector>() else {
            panic!()
        };
        assert!(
            reason.ends_with("5 digits could name many runs"),
            "{reason}"
        );
    }

    #[test]
    fn a_prefix_resolves_to_the_one_run_it_begins_or_is_unmatched_or_ambiguous() {
        let known = [id(A), id(B), id(C)];
        assert_eq!(selector("0b6c4a").resolve(known), Ok(RunRef::Id(id(C))));
        assert_eq!(
            selector("3f9a1c2b1111").resolve(known),
            Ok(RunRef::Id(id(A)))
        );
        let unmatched = selector("abcdef").resolve(known).unwrap();
        assert_eq!(unmatched.to_string(), "abcdef");
        assert_eq!(unmatched.id(), None);
        let ambiguous = selector("3f9a1c").resolve(known).unwrap_err();
        assert_eq!(ambiguous.matches, vec![id(A), id(B)]);
        assert_eq!(
            ambiguous.message("--run-id"),
            format!(
                "--run-id 3f9a1c is ambiguous: it begins 2 runs ({A}, {B}); give more of its \
                 digits or the whole id"
            )
        );
        // The same id seen twice (cluster and audit database) is one match.
        assert_eq!(
            selector("0b6c4a").resolve([id(C), id(C)]),
            Ok(RunRef::Id(id(C)))
        );
    }

    #[test]
    fn a_whole_id_is_itself_whatever_is_known() {
        assert_eq!(selector(C).resolve([]), Ok(RunRef::Id(id(C))));
    }

    #[test]
    fn an_ambiguous_message_names_at_most_ten_matches() {
        let many: Vec<RunId> = (0..13)
            .map(|i| id(&format!("3f9a1c{i:02x}-0000-4000-8000-000000000000")))
            .collect();
        let message = selector("3f9a1c")
            .resolve(many)
            .unwrap_err()
            .message("--run-id");
        assert!(message.contains("it begins 13 runs"), "{message}");
        assert!(message.contains(" and 3 more)"), "{message}");
        assert_eq!(message.matches("3f9a1c0").count(), 10, "{message}");
    }
}
