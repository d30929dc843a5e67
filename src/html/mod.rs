//! HTML and SVG markup that cannot carry unescaped text: the one way virtwork writes a web
//! page.
//!
//! Owns: the [`Html`] type (markup), built only by [`el`] (an element whose tag and attribute
//! names are `&'static str` and whose attribute values are always escaped), [`Html::text`]
//! (escaped text) and [`Html::fragment`] (a `&'static str` of markup written in this
//! program, such as its style sheet). No function takes a runtime `String` as markup, so a
//! name, message or label from the cluster, the audit database or Prometheus can reach a page
//! only as escaped text: forgetting to escape does not compile. Escaping also shows control,
//! bidirectional-override and zero-width characters as `\u{..}` (as [`crate::terminal`]
//! does), so hostile text cannot hide or reorder what a reader sees. The charts ([`chart`])
//! are small SVG emitters on top. Must not: know what the page is about; fetch or reference
//! anything outside the page.

pub mod chart;

use std::fmt::Write as _;

/// Markup. Only [`el`], [`Html::text`] and [`Html::fragment`] make it, so every piece of
/// runtime text inside it went through [`escape_into`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    /// Nothing.
    pub fn new() -> Html {
        Html(String::new())
    }

    /// `text` as escaped character data (safe inside an element or an attribute value).
    pub fn text(text: &str) -> Html {
        let mut out = String::with_capacity(text.len());
        escape_into(&mut out, text);
        Html(out)
    }

    /// `text` escaped and cut to `max_chars` characters, the last one an ellipsis when cut:
    /// for messages of unbounded length from the cluster.
    pub fn text_capped(text: &str, max_chars: usize) -> Html {
        match text.char_indices().nth(max_chars.saturating_sub(1)) {
            Some((at, _)) if text.chars().count() > max_chars => {
                let mut cut = Html::text(&text[..at]);
                cut.0.push('…');
                cut
            }
            _ => Html::text(text),
        }
    }

    /// Markup written in this program (a style sheet, the doctype). Only a `'static` string
    /// is accepted, so nothing read at run time can be passed here.
    pub fn fragment(markup: &'static str) -> Html {
        Html(markup.to_string())
    }

    /// Appends `child`.
    pub fn push(&mut self, child: impl Into<Html>) {
        self.0.push_str(&child.into().0);
    }

    /// The markup as text, for writing out.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Element> for Html {
    fn from(element: Element) -> Html {
        element.close()
    }
}

impl<T: Into<Html>> FromIterator<T> for Html {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Html {
        let mut all = Html::new();
        for piece in iter {
            all.push(piece);
        }
        all
    }
}

/// An element being built: `el("td").attr("class", "num").text("12")`.
#[derive(Debug)]
pub struct Element {
    tag: &'static str,
    open: String,
    body: Html,
}

/// Elements without a closing tag.
const VOID: &[&str] = &["meta", "br", "hr", "img", "link", "col"];

/// Starts element `tag` (a name written in this program).
pub fn el(tag: &'static str) -> Element {
    debug_assert!(is_name(tag), "element name {tag:?}");
    let mut open = String::with_capacity(16);
    open.push('<');
    open.push_str(tag);
    Element {
        tag,
        open,
        body: Html::new(),
    }
}

impl Element {
    /// Adds attribute `name` (written in this program) with `value` escaped.
    pub fn attr(mut self, name: &'static str, value: impl AsRef<str>) -> Element {
        debug_assert!(is_name(name), "attribute name {name:?}");
        self.open.push(' ');
        self.open.push_str(name);
        self.open.push_str("=\"");
        escape_into(&mut self.open, value.as_ref());
        self.open.push('"');
        self
    }

    /// Adds a numeric attribute, with at most one decimal (coordinates need no more, and
    /// pages of thousands of marks stay small).
    pub fn num(mut self, name: &'static str, value: f64) -> Element {
        debug_assert!(is_name(name), "attribute name {name:?}");
        let _ = write!(self.open, " {name}=\"{}\"", number(value));
        self
    }

    /// Appends a child.
    pub fn child(mut self, child: impl Into<Html>) -> Element {
        self.body.push(child);
        self
    }

    /// Appends every child.
    pub fn children<T: Into<Html>>(mut self, children: impl IntoIterator<Item = T>) -> Element {
        for child in children {
            self.body.push(child);
        }
        self
    }

    /// Appends `text`, escaped.
    pub fn text(self, text: impl AsRef<str>) -> Element {
        self.child(Html::text(text.as_ref()))
    }

    fn close(mut self) -> Html {
        self.open.push('>');
        if VOID.contains(&self.tag) {
            return Html(self.open);
        }
        self.open.push_str(&self.body.0);
        self.open.push_str("</");
        self.open.push_str(self.tag);
        self.open.push('>');
        Html(self.open)
    }
}

/// A coordinate or measure as written in markup: whole numbers bare, others with one decimal.
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return "0".into();
    }
    let rounded = (value * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{}", rounded as i64)
    } else {
        format!("{rounded:.1}")
    }
}

/// Tag and attribute names: ASCII letters, digits and '-' (`aria-label`, `stroke-dasharray`).
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
}

/// Appends `text` escaped for HTML and SVG: the five markup characters as entities, and the
/// characters a reader would not see (controls other than line breaks and tabs, bidi
/// overrides, zero-width characters) as visible `\u{..}`.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if crate::terminal::needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        let hostile = "<script>alert('x')</script> & \"quoted\"";
        let page: Html = el("p").attr("title", hostile).text(hostile).into();
        assert_eq!(
            page.as_str(),
            "<p title=\"&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;\">\
             &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;</p>"
        );
    }

    #[test]
    fn invisible_and_reordering_characters_are_shown() {
        assert_eq!(
            Html::text("evil\u{202e}gpj.exe\u{1b}[2J\u{200b}").as_str(),
            "evil\\u{202e}gpj.exe\\u{1b}[2J\\u{200b}"
        );
        assert_eq!(Html::text("a\nb\tc").as_str(), "a\nb\tc");
    }

    #[test]
    fn nesting_void_elements_and_numbers() {
        let page: Html = el("div")
            .child(el("meta").attr("charset", "utf-8"))
            .child(
                el("rect")
                    .num("x", 1.25)
                    .num("y", 3.0)
                    .num("width", f64::NAN),
            )
            .into();
        assert_eq!(
            page.as_str(),
            "<div><meta charset=\"utf-8\"><rect x=\"1.3\" y=\"3\" width=\"0\"></rect></div>"
        );
    }

    #[test]
    fn capped_text_ends_in_an_ellipsis_only_when_cut() {
        assert_eq!(Html::text_capped("abcdef", 4).as_str(), "abc…");
        assert_eq!(Html::text_capped("abcd", 4).as_str(), "abcd");
        assert_eq!(Html::text_capped("<<<<<", 3).as_str(), "&lt;&lt;…");
    }
}
