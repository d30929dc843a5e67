//! Dependencies point down only: every `crate::<module>` path in `src/` (outside test modules)
//! must name a module on a lower line of the layer order documented in docs/architecture.md.
//!
//! The order is read from the document itself, so the documentation and the check cannot
//! drift: moving a module means editing the documented order, in review, next to the code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- layer-order -->";

/// The documented layers, top first; each line's modules are peers.
fn documented_layers() -> Vec<Vec<String>> {
    let doc = fs::read_to_string("docs/architecture.md").expect("read docs/architecture.md");
    let after = doc
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("docs/architecture.md lacks the {MARKER} block"))
        .1;
    let block = after
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a ```text block after the layer-order marker")
        .0;
    block
        .lines()
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .filter(|layer: &Vec<String>| !layer.is_empty())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under src/ belongs to (`src/k8s/apply.rs` -> `k8s`).
fn owning_module(path: &Path) -> String {
    let relative = path.strip_prefix("src").unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_string_lossy().trim_end_matches(".rs").to_string()
}

/// The code of `source` without its `#[cfg(test)]` items (tests may reach anywhere).
fn without_tests(source: &str) -> &str {
    source
        .find("#[cfg(test)]")
        .map_or(source, |at| &source[..at])
}

/// Every top-level module named after `crate::`, including `use crate::{a::X, b::Y}` groups.
fn crate_references(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            // Nested braces (`a::{X, Y}`) only hold items of `a`; top-level names start a
            // segment after `{` or `,` at depth 0.
            let mut depth = 0;
            let mut start = true;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        let name = ident(&inner[i..]);
                        if !name.is_empty() && name != "self" {
                            found.insert(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

#[test]
fn every_module_uses_only_lower_layers() {
    let layers = documented_layers();
    let rank: BTreeMap<String, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (m.clone(), i)))
        .collect();
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let module = owning_module(file);
        if module == "main" || module == "lib" {
            continue;
        }
        let Some(&own) = rank.get(&module) else {
            unplaced.insert(module);
            continue;
        };
        let source = fs::read_to_string(file).unwrap();
        for used in crate_references(without_tests(&source)) {
            if used == module {
                continue;
            }
            match rank.get(&used) {
                Some(&theirs) if theirs > own => {}
                Some(_) => violations.push(format!(
                    "{} ({module}) uses crate::{used}, which is not below it",
                    file.display()
                )),
                None => {
                    unplaced.insert(used);
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules missing from the layer order in docs/architecture.md: {unplaced:?}"
    );
    assert!(
        violations.is_empty(),
        "upward or sideways imports (fix the code, or move the module in the documented \
         order if the design changed):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_layer_order_names_every_module_of_the_crate_once() {
    let layers = documented_layers();
    let mut seen = BTreeSet::new();
    for module in layers.iter().flatten() {
        assert!(seen.insert(module.clone()), "{module} is listed twice");
    }
    let lib = fs::read_to_string("src/lib.rs").unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))
        })
        .map(|rest| rest.trim_end_matches(';').to_string())
        .collect();
    assert_eq!(
        declared, seen,
        "src/lib.rs modules and the documented layer order differ"
    );
}

#[test]
fn references_are_found_in_paths_and_use_groups() {
    let code = "use crate::model::{A, B};\nuse crate::{k8s::client::X, plan, labels::{self, Y}};\n\
                fn f() { crate::error::Error::x(); }";
    let found: Vec<String> = crate_references(code).into_iter().collect();
    assert_eq!(found, ["error", "k8s", "labels", "model", "plan"]);
}

// --- Function length -------------------------------------------------------------------------
//
// Orchestration that grows past a screen hides its steps in section comments; splitting it into
// functions whose names say what each step does keeps every step readable and testable. A
// function may stay longer only with a `// long: <reason>` comment right above it (above its
// doc comment and attributes too), so the exception is visible in review.

/// Longest function body, in lines from the `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// The source with comments, string and character literals blanked to spaces (newlines kept),
/// so braces and `fn` inside them do not count.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if !ident_before && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            // A raw string: r"..", r#".."#, br#".."#.
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            chars.get(start + hashes) == Some(&'"')
        } {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            let body = start + hashes + 1;
            let mut end = body;
            while end < chars.len() {
                if chars[end] == '"'
                    && chars[end + 1..].iter().take_while(|&&h| h == '#').count() >= hashes
                {
                    break;
                }
                end += 1;
            }
            let stop = (end + 1 + hashes).min(chars.len());
            for &ch in &chars[i..stop] {
                out.push(blank(ch));
            }
            i = stop;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{7b}'.
            let end = (i + 2..chars.len())
                .find(|&j| chars[j] == '\'' && j > i + 2)
                .unwrap_or(i + 2);
            for _ in i..=end {
                out.push(' ');
            }
            i = end + 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Byte ranges of `#[cfg(test)]` items (test modules) in blanked `code`.
fn test_items(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        if let Some(end) = item_end(code, at + "#[cfg(test)]".len()) {
            ranges.push((at, end));
        }
    }
    ranges
}

/// The end (after the closing brace or semicolon) of the item starting at `from` in blanked
/// `code`: the first `{` or `;` outside parentheses and brackets, then its matching brace.
fn item_end(code: &str, from: usize) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut depth = 0i32;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return Some(i + 1),
            b'{' if depth == 0 => {
                let mut braces = 0i32;
                for (j, &b) in bytes.iter().enumerate().skip(i) {
                    match b {
                        b'{' => braces += 1,
                        b'}' => {
                            braces -= 1;
                            if braces == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                }
                return None;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// One function with a body: where it is and how long it is.
#[derive(Debug)]
struct FnSpan {
    name: String,
    /// 1-based line of the `fn` keyword.
    line: usize,
    lines: usize,
    /// The `// long: <reason>` above it, if any.
    justification: Option<String>,
}

/// Every function with a body in `source`, outside `#[cfg(test)]` items.
fn functions(source: &str) -> Vec<FnSpan> {
    let code = code_only(source);
    let tests = test_items(&code);
    let source_lines: Vec<&str> = source.lines().collect();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn") {
        let before_ok = at == 0 || !is_ident(bytes[at - 1]);
        let after = &code[at + 2..];
        let name: String = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let space_after = after.starts_with(char::is_whitespace);
        if !before_ok || !space_after || name.is_empty() {
            continue;
        }
        if tests.iter().any(|&(start, end)| at >= start && at < end) {
            continue;
        }
        let Some(end) = item_end(&code, at) else {
            continue;
        };
        if !code[..end].ends_with('}') {
            continue; // a declaration without a body
        }
        let line = line_of(at);
        let lines = line_of(end - 1) - line + 1;
        found.push(FnSpan {
            name,
            line,
            lines,
            justification: justification(&source_lines, line),
        });
    }
    found
}

/// The `// long: <reason>` comment in the block of comments and attributes right above the
/// line `fn_line` (1-based).
fn justification(lines: &[&str], fn_line: usize) -> Option<String> {
    lines[..fn_line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .find_map(|l| l.strip_prefix("// long:"))
        .map(|reason| reason.trim().to_string())
}

#[test]
fn no_function_is_longer_than_a_screen_without_a_stated_reason() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    let mut count = 0;
    let mut too_long = Vec::new();
    let mut weak = Vec::new();
    for file in &files {
        let source = fs::read_to_string(file).unwrap();
        for f in functions(&source) {
            count += 1;
            let at = format!(
                "{}:{} fn {} ({} lines)",
                file.display(),
                f.line,
                f.name,
                f.lines
            );
            match &f.justification {
                _ if f.lines <= MAX_FN_LINES => {}
                None => too_long.push(at),
                // A reason is a sentence, not a token.
                Some(reason) if reason.split_whitespace().count() < 4 => {
                    weak.push(format!("{at}: `// long: {reason}`"))
                }
                Some(_) => {}
            }
        }
    }
    // src/ holds some 850 functions with a body outside tests; far fewer means the scanner
    // broke (and would pass for want of anything to check).
    assert!(
        count > 700,
        "found only {count} functions in src/: the scanner is broken"
    );
    assert!(
        too_long.is_empty(),
        "functions longer than {MAX_FN_LINES} lines: split them into named steps, or state why \
         not in a `// long: <reason>` comment right above:\n{}",
        too_long.join("\n")
    );
    assert!(
        weak.is_empty(),
        "a `// long:` reason must say why in words:\n{}",
        weak.join("\n")
    );
}

#[test]
fn the_scanner_measures_bodies_and_ignores_tests_comments_and_literals() {
    let body = "    step();\n".repeat(85);
    let source = format!(
        "fn short() {{ let s = \"}}\"; let r = r#\"{{\"#; let c = '{{'; }}\n\
         // long: one flat table of every flag, a line each\n\
         #[allow(unused)]\n\
         pub fn justified() {{\n{body}}}\n\
         /// A doc comment that mentions fn fake() {{\n\
         async fn long<'a>(x: &'a str) -> &'a str {{ /* }} */\n{body}    x\n}}\n\
         trait T {{\n    fn declared(&self);\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body}    }}\n}}\n"
    );
    let found: Vec<(String, usize, Option<String>)> = functions(&source)
        .into_iter()
        .map(|f| (f.name, f.lines, f.justification))
        .collect();
    assert_eq!(
        found,
        [
            ("short".to_string(), 1, None),
            (
                "justified".to_string(),
                87,
                Some("one flat table of every flag, a line each".to_string())
            ),
            ("long".to_string(), 88, None),
        ]
    );
}
