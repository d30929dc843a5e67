//! Dependencies point down only: every `crate::<module>` path in `src/` (outside test modules)
//! must name a module on a lower line of the layer order documented in docs/architecture.md.
//!
//! The order is read from the document itself, so the documentation and the check cannot
//! drift: moving a module means editing the documented order, in review, next to the code.
//!
//! Inside a room too, no two modules (files) may import each other, directly or around a loop;
//! and no function outside tests may grow past a screen without a stated reason.

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

// --- No two modules in a loop ----------------------------------------------------------------
//
// Modules that import each other, directly or around a loop, can be neither read, tested nor
// moved apart: each is half of the other. Edges run file to file: every `crate::`, `super::`
// and `self::` path in the code (comments, literals and test modules excepted, `use` groups
// expanded) names the deepest module file it reaches. A parent declaring and re-exporting its
// children is no edge: that is what a parent is for; a child using its parent's items is one.

/// The module path of a file under `src` (`src/k8s/cleanup/mod.rs` -> `k8s::cleanup`; the
/// crate root is the empty path).
fn module_of(path: &Path) -> Vec<String> {
    let relative = path.strip_prefix("src").unwrap_or(path);
    let mut segments: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
        segments.pop();
    }
    segments
}

/// Every path that starts with `crate::`, `super::` or `self::` in blanked `code`, as its
/// segments (leading keyword included), with `use` groups expanded into one path each.
fn written_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|k| chars[i..].iter().take(k.len()).copied().eq(k.chars()));
        let boundary = i == 0 || !(chars[i - 1].is_alphanumeric() || "_:".contains(chars[i - 1]));
        if starts && boundary {
            let (found, end) = path_tree(&chars, i);
            paths.extend(found);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    paths
}

/// The paths of the path tree starting at `i` (`a::b::{c, d::{e, self}}`), and where it ends.
fn path_tree(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let skip_ws = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut prefix = Vec::new();
    loop {
        i = skip_ws(i);
        if chars.get(i) == Some(&'{') {
            let mut all = Vec::new();
            i += 1;
            loop {
                i = skip_ws(i);
                match chars.get(i) {
                    None => return (all, i),
                    Some('}') => return (all, i + 1),
                    Some(',') => i += 1,
                    Some(_) => {
                        let (inner, end) = path_tree(chars, i);
                        all.extend(
                            inner
                                .into_iter()
                                .map(|tail| prefix.iter().cloned().chain(tail).collect::<Vec<_>>()),
                        );
                        i = if end > i { end } else { i + 1 };
                    }
                }
            }
        }
        let ident: String = chars[i..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if ident.is_empty() {
            return (vec![prefix], i);
        }
        i += ident.chars().count();
        prefix.push(ident);
        let after = skip_ws(i);
        if chars.get(after) == Some(&':') && chars.get(after + 1) == Some(&':') {
            i = after + 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

/// The module files `written` (from the file of module `here`) reaches, among `modules`.
fn reached(
    here: &[String],
    written: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let (first, rest) = written.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => here.to_vec(),
        _ => return None,
    };
    let mut rest = rest.iter().peekable();
    if first == "super" {
        base.pop();
        while rest.peek().is_some_and(|s| *s == "super") {
            rest.next();
            base.pop();
        }
    }
    let mut deepest = modules.contains(&base).then(|| base.clone());
    for segment in rest.filter(|s| *s != "self") {
        base.push(segment.clone());
        if modules.contains(&base) {
            deepest = Some(base.clone());
        } else {
            break;
        }
    }
    deepest
}

/// Module -> modules it imports, for `files` given as (path under src, source).
fn module_graph(files: &[(PathBuf, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(p, _)| module_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, source) in files {
        let here = module_of(path);
        let mut code = code_only(source);
        for (start, end) in test_items(&code.clone()) {
            code.replace_range(start..end, &" ".repeat(end - start));
        }
        let edges = graph.entry(here.join("::")).or_default();
        for written in written_paths(&code) {
            let Some(target) = reached(&here, &written, &modules) else {
                continue;
            };
            // Itself, or a parent naming its own children (declaring, re-exporting).
            if target.starts_with(&here) {
                continue;
            }
            edges.insert(target.join("::"));
        }
    }
    graph
}

/// The loops of `graph`: every strongly connected set of more than one module, each sorted.
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: finish order on the graph, then components on the reversed graph.
    fn finish<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<&'a str>,
        order: &mut Vec<&'a str>,
    ) {
        if !seen.insert(node) {
            return;
        }
        for next in graph.get(node).into_iter().flatten() {
            finish(next, graph, seen, order);
        }
        order.push(node);
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for node in graph.keys() {
        finish(node, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, tos) in graph {
        for to in tos {
            reversed.entry(to.as_str()).or_default().push(from.as_str());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut found = Vec::new();
    for &root in order.iter().rev() {
        if assigned.contains(root) {
            continue;
        }
        let mut component = Vec::new();
        let mut stack = vec![root];
        assigned.insert(root);
        while let Some(node) = stack.pop() {
            component.push(node.to_string());
            for &prev in reversed.get(node).into_iter().flatten() {
                if assigned.insert(prev) {
                    stack.push(prev);
                }
            }
        }
        if component.len() > 1 {
            component.sort();
            found.push(component);
        }
    }
    found.sort();
    found
}

#[test]
fn no_two_modules_import_each_other_directly_or_in_a_loop() {
    let mut paths = Vec::new();
    rust_files(Path::new("src"), &mut paths);
    paths.sort();
    let files: Vec<(PathBuf, String)> = paths
        .into_iter()
        .filter(|p| p != Path::new("src/main.rs"))
        .map(|p| {
            let source = fs::read_to_string(&p).unwrap();
            (p, source)
        })
        .collect();
    let graph = module_graph(&files);
    // Far fewer edges means the scanner broke (and would pass for want of anything to check).
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(
        edges > 300,
        "found only {edges} imports in src/: the scanner is broken"
    );
    let described: Vec<String> = loops(&graph)
        .iter()
        .map(|members| {
            let ties: Vec<String> = members
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| members.contains(to))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            format!("{}: {}", members.join(", "), ties.join("; "))
        })
        .collect();
    assert!(
        described.is_empty(),
        "modules that import each other (move what both need into a module of its own, or \
         turn one import around):\n{}",
        described.join("\n")
    );
}

#[test]
fn loops_are_found_through_inline_paths_use_groups_and_parents() {
    let file = |path: &str, source: &str| (PathBuf::from(path), source.to_string());
    let files = [
        file(
            "src/lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub mod d;",
        ),
        // a -> b by an inline path, b -> a inside a use group: a loop of two.
        file("src/a/mod.rs", "pub mod x;\nfn f() { super::b::g(); }"),
        file(
            "src/a/x.rs",
            "use crate::a::Y; // crate::d::z in a comment is no import",
        ),
        file("src/b.rs", "use crate::{c::K, a::{self, x::Z}};\nfn g() {}"),
        // c -> d -> c through `super::super` from a child of d: a loop of three files.
        file("src/c.rs", "use crate::d::w::Q;"),
        file("src/d/mod.rs", "pub mod w;\npub use self::w::Q;"),
        file(
            "src/d/w.rs",
            "pub struct Q; fn h() { let _ = \"crate::a\"; super::super::c::K; }\n\
             #[cfg(test)]\nmod tests { use crate::b::g; }",
        ),
    ];
    let graph = module_graph(&files);
    assert_eq!(graph["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(graph["a::x"], BTreeSet::from(["a".to_string()]));
    assert_eq!(
        graph["b"],
        BTreeSet::from(["a".to_string(), "a::x".to_string(), "c".to_string()])
    );
    assert!(
        graph["d"].is_empty(),
        "a parent re-exporting its child is no edge"
    );
    assert_eq!(graph["d::w"], BTreeSet::from(["c".to_string()]));
    assert_eq!(
        loops(&graph),
        [
            vec!["a".to_string(), "a::x".to_string(), "b".to_string()],
            vec!["c".to_string(), "d::w".to_string()],
        ]
    );
}
