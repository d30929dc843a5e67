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
