//! PromQL text: label-value escaping, per-VMI selectors and the `{{…}}` templates catalog entries use to declare their own signals.
//!
//! Pure string work, no I/O. Every value that reaches a query passes through
//! [`escape_label_value`], so a namespace, VMI name or mount path can never end the quoted
//! string it sits in. Must not: build queries by pasting unescaped input.

use std::fmt;

use crate::model::Window;

/// Escapes `value` for use inside a double-quoted PromQL string (Go string-literal rules):
/// backslash, double quote and control characters are escaped, everything else is kept.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// A list of `name="value"` matchers (`=` unless added with [`Matchers::with_op`]),
/// rendered in insertion order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matchers(Vec<(String, &'static str, String)>);

impl Matchers {
    /// The matchers of one VMI: KubeVirt labels every per-VMI series with `namespace` and
    /// `name` (the VMI's, which is the VM's name).
    pub fn vmi(namespace: &str, name: &str) -> Self {
        Matchers(vec![
            ("namespace".into(), "=", namespace.into()),
            ("name".into(), "=", name.into()),
        ])
    }

    /// Adds `name="value"`.
    pub fn with(self, name: &str, value: &str) -> Self {
        self.with_op(name, "=", value)
    }

    /// Adds `name<op>"value"` (`op` one of `=`, `!=`, `=~`, `!~`).
    pub fn with_op(mut self, name: &str, op: &'static str, value: &str) -> Self {
        self.0.push((name.to_string(), op, value.to_string()));
        self
    }

    /// The matchers without braces: `namespace="a",name="b"`.
    pub fn render(&self) -> String {
        self.0
            .iter()
            .map(|(k, op, v)| format!("{k}{op}\"{}\"", escape_label_value(v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for Matchers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Placeholder for the VMI's namespace in a signal template.
pub const NAMESPACE_PLACEHOLDER: &str = "namespace";
/// Placeholder for the VMI's name in a signal template.
pub const NAME_PLACEHOLDER: &str = "name";
/// Placeholder for the range window in a signal template.
pub const WINDOW_PLACEHOLDER: &str = "window";

/// Checks a catalog signal template: only `{{namespace}}`, `{{name}}` and `{{window}}`;
/// namespace and name both present, each directly inside double quotes (so the escaped
/// value stays one string); window inside `[...]`; quotes and brackets balanced.
pub fn validate_template(template: &str) -> Result<(), String> {
    if template.trim().is_empty() {
        return Err("query must not be empty".into());
    }
    let mut seen_namespace = false;
    let mut seen_name = false;
    let bytes = template.as_bytes();
    let mut i = 0;
    let mut stack: Vec<u8> = Vec::new();
    let mut in_string: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(quote) = in_string {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == quote {
                in_string = None;
            }
        } else {
            match c {
                b'"' | b'\'' | b'`' => in_string = Some(c),
                b'(' | b'[' | b'{' if !template[i..].starts_with("{{") => stack.push(c),
                b')' | b']' | b'}' if !template[i..].starts_with("}}") => {
                    let open = match c {
                        b')' => b'(',
                        b']' => b'[',
                        _ => b'{',
                    };
                    if stack.pop() != Some(open) {
                        return Err(format!("unbalanced {:?} at byte {i}", char::from(c)));
                    }
                }
                _ => {}
            }
        }
        if template[i..].starts_with("{{") {
            let end = template[i + 2..]
                .find("}}")
                .ok_or_else(|| format!("unterminated placeholder at byte {i}"))?;
            let key = &template[i + 2..i + 2 + end];
            let after = i + 2 + end + 2;
            let quoted = in_string == Some(b'"')
                && i > 0
                && bytes[i - 1] == b'"'
                && bytes.get(after) == Some(&b'"');
            let in_range = in_string.is_none() && stack.last() == Some(&b'[');
            check_placeholder(key, quoted, in_range)?;
            seen_namespace |= key == NAMESPACE_PLACEHOLDER;
            seen_name |= key == NAME_PLACEHOLDER;
            i = after;
            continue;
        }
        i += 1;
    }
    if in_string.is_some() {
        return Err("unterminated string literal".into());
    }
    if let Some(open) = stack.pop() {
        return Err(format!("unclosed {:?}", char::from(open)));
    }
    if !(seen_namespace && seen_name) {
        return Err(
            "query must select one VMI with namespace=\"{{namespace}}\" and name=\"{{name}}\""
                .into(),
        );
    }
    Ok(())
}

/// One placeholder of a template: namespace and name must be a whole double-quoted label
/// value (`quoted`), the window must stand inside a range selector (`in_range`).
fn check_placeholder(key: &str, quoted: bool, in_range: bool) -> Result<(), String> {
    match key {
        NAMESPACE_PLACEHOLDER | NAME_PLACEHOLDER if !quoted => Err(format!(
            "placeholder {{{{{key}}}}} must be a whole double-quoted label value, e.g. {key}=\"{{{{{key}}}}}\""
        )),
        NAMESPACE_PLACEHOLDER | NAME_PLACEHOLDER => Ok(()),
        WINDOW_PLACEHOLDER if !in_range => Err(
            "placeholder {{window}} must stand inside a range selector, e.g. [{{window}}]".into(),
        ),
        WINDOW_PLACEHOLDER => Ok(()),
        other => Err(format!(
            "unknown placeholder {{{{{other}}}}}; signal queries may use {{{{namespace}}}}, {{{{name}}}} and {{{{window}}}}"
        )),
    }
}

/// Renders a template checked by [`validate_template`]: namespace and name are escaped as
/// label values, the window is written in Prometheus' duration form.
pub fn render_template(template: &str, namespace: &str, name: &str, window: Window) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                match &after[..end] {
                    NAMESPACE_PLACEHOLDER => out.push_str(&escape_label_value(namespace)),
                    NAME_PLACEHOLDER => out.push_str(&escape_label_value(name)),
                    WINDOW_PLACEHOLDER => out.push_str(&window.to_string()),
                    other => {
                        out.push_str("{{");
                        out.push_str(other);
                        out.push_str("}}");
                    }
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Percent-encodes a query-string value (RFC 3986 unreserved characters stay).
pub fn url_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_cannot_leave_their_string() {
        assert_eq!(escape_label_value("virtwork-cpu-0"), "virtwork-cpu-0");
        assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label_value("x\ny\tz\u{1}"), "x\\ny\\tz\\x01");
        let m = Matchers::vmi("ns", "vm\"}) or vector(1) #");
        assert_eq!(m.render(), r#"namespace="ns",name="vm\"}) or vector(1) #""#);
        assert_eq!(
            Matchers::vmi("a", "b")
                .with("mount_point", "/mnt/my data")
                .to_string(),
            r#"namespace="a",name="b",mount_point="/mnt/my data""#
        );
    }

    #[test]
    fn templates_accept_quoted_identity_and_bracketed_window() {
        let t = r#"sum(rate(app_requests_total{namespace="{{namespace}}",name="{{name}}"}[{{window}}]))"#;
        validate_template(t).unwrap();
        let w = Window::parse("2m").unwrap();
        assert_eq!(
            render_template(t, "team-a", "vm\"x", w),
            r#"sum(rate(app_requests_total{namespace="team-a",name="vm\"x"}[2m]))"#
        );
    }

    #[test]
    fn templates_reject_unsafe_or_incomplete_forms() {
        let cases = [
            ("", "empty"),
            (r#"up{namespace="{{namespace}}"}"#, "name="),
            (
                r#"up{namespace={{namespace}},name="{{name}}"}"#,
                "double-quoted",
            ),
            (
                r#"up{namespace="x{{namespace}}",name="{{name}}"}"#,
                "double-quoted",
            ),
            (
                r#"up{namespace="{{namespace}}",name="{{name}}",x="{{secret}}"}"#,
                "unknown placeholder",
            ),
            (
                r#"rate(up{namespace="{{namespace}}",name="{{name}}"}[5m]) offset {{window}}"#,
                "range selector",
            ),
            (
                r#"rate(up{namespace="{{namespace}}",name="{{name}}"}[5m]"#,
                "unclosed",
            ),
            (
                r#"up{namespace="{{namespace}}",name="{{name}}"})"#,
                "unbalanced",
            ),
            (
                r#"up{namespace="{{namespace}}",name="{{name}}"} or vector("x)"#,
                "unterminated string",
            ),
        ];
        for (template, expected) in cases {
            let err = validate_template(template).unwrap_err();
            assert!(err.contains(expected), "{template:?}: {err}");
        }
    }

    #[test]
    fn url_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(
            url_encode("rate(x{a=\"b c\"}[5m])"),
            "rate%28x%7Ba%3D%22b%20c%22%7D%5B5m%5D%29"
        );
    }
}
