//! Label selectors (full `k8s.io/apimachinery/pkg/labels` syntax: `=`, `==`, `!=`, `in`,
//! `notin`, exists, `!key`) and the field selectors the fake server supports
//! (`metadata.name`, `metadata.namespace`, with `=`, `==`, `!=`).

use std::collections::BTreeSet;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter; errors in the apiserver's wording.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut p = Parser {
            chars: input.chars().collect(),
            pos: 0,
        };
        let mut requirements = Vec::new();
        p.skip_ws();
        if p.at_end() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(p.requirement()?);
            p.skip_ws();
            if p.at_end() {
                break;
            }
            if !p.eat(',') {
                return Err(format!(
                    "unable to parse requirement: found '{}', expected: ','",
                    p.rest()
                ));
            }
        }
        Ok(LabelSelector { requirements })
    }

    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether an object (its metadata.labels) matches.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn rest(&self) -> String {
        self.chars[self.pos..].iter().collect()
    }
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn eat_str(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        if self.chars[self.pos..].iter().take(n).copied().eq(s.chars()) {
            self.pos += n;
            true
        } else {
            false
        }
    }
    /// A key or value token: everything up to whitespace or an operator character.
    fn token(&mut self) -> String {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || matches!(c, ',' | '=' | '!' | '(' | ')') {
                break;
            }
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }
    fn requirement(&mut self) -> Result<Requirement, String> {
        self.skip_ws();
        if self.eat('!') {
            self.skip_ws();
            let key = self.token();
            validate_key(&key)?;
            return Ok(Requirement::DoesNotExist(key));
        }
        let key = self.token();
        validate_key(&key)?;
        self.skip_ws();
        if self.at_end() || self.peek() == Some(',') {
            return Ok(Requirement::Exists(key));
        }
        if self.eat_str("==") || self.eat('=') {
            let v = self.value()?;
            return Ok(Requirement::Equals(key, v));
        }
        if self.eat_str("!=") {
            let v = self.value()?;
            return Ok(Requirement::NotEquals(key, v));
        }
        let word = self.token();
        match word.as_str() {
            "in" => Ok(Requirement::In(key, self.set()?)),
            "notin" => Ok(Requirement::NotIn(key, self.set()?)),
            other => Err(format!(
                "unable to parse requirement: found '{other}', expected: in, notin, =, ==, !=, gt, lt"
            )),
        }
    }
    fn value(&mut self) -> Result<String, String> {
        self.skip_ws();
        let v = self.token();
        validate_value(&v)?;
        Ok(v)
    }
    fn set(&mut self) -> Result<BTreeSet<String>, String> {
        self.skip_ws();
        if !self.eat('(') {
            return Err(format!("found '{}', expected: '('", self.rest()));
        }
        let mut out = BTreeSet::new();
        loop {
            let v = self.value()?;
            out.insert(v);
            self.skip_ws();
            if self.eat(')') {
                return Ok(out);
            }
            if !self.eat(',') {
                return Err(format!("found '{}', expected: ',' or ')'", self.rest()));
            }
        }
    }
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A qualified label key: `[prefix/]name`.
pub fn valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            super::validation::is_dns1123_subdomain(prefix) && is_name_part(name)
        }
        None => is_name_part(key),
    }
}

/// A label value: empty, or ≤ 63 chars of alphanumerics, `-`, `_`, `.` starting and ending
/// alphanumeric.
pub fn valid_label_value(value: &str) -> bool {
    value.is_empty() || is_name_part(value)
}

fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("unable to parse requirement: found '', expected: identifier".into());
    }
    if valid_label_key(key) {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn validate_value(v: &str) -> Result<(), String> {
    if valid_label_value(v) {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label value: \"{v}\": at key: must be no more than 63 characters and consist of alphanumeric characters, '-', '_' or '.'"
        ))
    }
}

/// A parsed field selector over `metadata.name` / `metadata.namespace` / `spec.nodeName`
/// (what `kubectl drain` lists a node's Pods with).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, negate, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            // `type` is a Secret's selectable field (kubernetes pkg/registry/core/secret/
            // strategy.go, SelectableFields); other kinds do not have it, which the
            // store does not check (no test selects other kinds by it).
            if !matches!(
                field,
                "metadata.name" | "metadata.namespace" | "spec.nodeName" | "type"
            ) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), negate, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    pub fn matches_object(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, negate, value)| {
            let ptr = match field.as_str() {
                "metadata.name" => "/metadata/name",
                "spec.nodeName" => "/spec/nodeName",
                "type" => "/type",
                _ => "/metadata/namespace",
            };
            let actual = obj.pointer(ptr).and_then(Value::as_str).unwrap_or("");
            (actual == value) != *negate
        })
    }
}
