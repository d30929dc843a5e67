//! The documentation cannot drift from the code.
//!
//! docs/configuration.md holds generated sections (every flag of every subcommand from the clap
//! definitions, every workload param from the registry's schemas) between
//! `<!-- BEGIN GENERATED name -->` / `<!-- END GENERATED name -->` markers; this test regenerates
//! them and fails on any difference. Regenerate with
//! `VIRTWORK_UPDATE_DOCS=1 cargo test --test docs`. Also checked: every `VIRTWORK_*` variable the
//! configuration reads is documented, the documented YAML example is accepted by the real
//! binary, and every relative link and `src/` path named in docs/ exists.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Arg, ArgAction, CommandFactory};
use virtwork::cli::Cli;
use virtwork::workloads::Registry;
use virtwork::workloads::params::{ParamType, StrRule};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn doc_path(name: &str) -> PathBuf {
    repo().join("docs").join(name)
}

fn read_doc(name: &str) -> String {
    fs::read_to_string(doc_path(name)).unwrap_or_else(|e| panic!("docs/{name}: {e}"))
}

/// Markdown-table-safe single line.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn arg_flag(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!("`<{}>`", arg.get_id().as_str().to_ascii_uppercase()),
    }
}

fn arg_value(arg: &Arg) -> String {
    if matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    ) {
        return "—".into();
    }
    let name = arg
        .get_value_names()
        .and_then(|v| v.first())
        .map(|n| n.to_string())
        .unwrap_or_else(|| arg.get_id().as_str().to_ascii_uppercase());
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    if optional {
        format!("`[={name}]`")
    } else {
        format!("`{name}`")
    }
}

fn arg_help(arg: &Arg) -> String {
    let mut help = arg
        .get_long_help()
        .or_else(|| arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let is_switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(h) => format!("`{}` ({})", v.get_name(), h),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    if !values.is_empty() && !is_switch {
        help.push_str(&format!(" Values: {}.", values.join(", ")));
    }
    if let Some(default) = arg.get_default_values().first() {
        help.push_str(&format!(" [default: {}]", default.to_string_lossy()));
    }
    let aliases: Vec<String> = arg
        .get_visible_aliases()
        .unwrap_or_default()
        .iter()
        .chain(arg.get_all_aliases().unwrap_or_default().iter())
        .map(|a| format!("`--{a}`"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !aliases.is_empty() {
        help.push_str(&format!(" Alias: {}.", aliases.join(", ")));
    }
    cell(&help)
}

fn flag_table(args: &[&Arg]) -> String {
    let mut out = String::from("| Flag | Value | Meaning |\n|---|---|---|\n");
    for arg in args {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            arg_flag(arg),
            arg_value(arg),
            arg_help(arg)
        ));
    }
    out
}

/// Every flag of every subcommand, from the clap definitions.
fn generated_flags() -> String {
    let root = Cli::command();
    let is_help = |a: &&Arg| matches!(a.get_id().as_str(), "help" | "version");
    let globals: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter(|a| !is_help(a))
        .collect();
    let mut out = String::from("### Global flags (every subcommand)\n\n");
    out.push_str(&flag_table(&globals));
    let mut stack: Vec<(String, &clap::Command)> = root
        .get_subcommands()
        .map(|c| (format!("virtwork {}", c.get_name()), c))
        .collect();
    stack.reverse();
    while let Some((path, cmd)) = stack.pop() {
        if cmd.get_name() == "help" {
            continue;
        }
        let own: Vec<&Arg> = cmd
            .get_arguments()
            .filter(|a| !a.is_global_set())
            .filter(|a| !is_help(a))
            .collect();
        out.push_str(&format!("\n### `{path}`\n\n"));
        out.push_str(&cell(
            &cmd.get_about().map(|a| a.to_string()).unwrap_or_default(),
        ));
        out.push_str(".\n\n");
        if own.is_empty() {
            out.push_str("No flags of its own.\n");
        } else {
            out.push_str(&flag_table(&own));
        }
        let mut children: Vec<(String, &clap::Command)> = cmd
            .get_subcommands()
            .map(|c| (format!("{path} {}", c.get_name()), c))
            .collect();
        children.reverse();
        stack.extend(children);
    }
    out
}

fn rule_form(rule: StrRule) -> String {
    rule.describe()
}

fn param_type(kind: ParamType) -> (String, String) {
    match kind {
        ParamType::Int { min, max } => ("integer".into(), format!("{min} to {max}")),
        ParamType::Str(rule) => ("string".into(), rule_form(rule)),
        ParamType::Bool => ("boolean".into(), "`true` or `false`".into()),
        ParamType::List(rule) => (
            "list (`;`-separated)".into(),
            format!("each element: {}", rule_form(rule)),
        ),
        ParamType::Dict(rule) => (
            "dict (`;`-separated `key=value`)".into(),
            format!("each key and value: {}", rule_form(rule)),
        ),
    }
}

fn params_section(registry: &Registry, names: &[String]) -> String {
    let mut out = String::new();
    for name in names {
        let schema = registry.schema(name).unwrap();
        out.push_str(&format!("#### `{name}`\n\n"));
        if schema.is_empty() {
            out.push_str("No params.\n\n");
            continue;
        }
        out.push_str(
            "| Param | Type | Default | Accepted values | Meaning |\n|---|---|---|---|---|\n",
        );
        for def in schema.defs() {
            let (kind, accepted) = param_type(def.kind);
            out.push_str(&format!(
                "| `{}` | {} | `{}` | {} | {} |\n",
                def.key,
                kind,
                def.default,
                cell(&accepted),
                cell(&def.description)
            ));
        }
        out.push('\n');
    }
    out
}

/// Every param of every built-in and shipped catalog entry, from the registry's schemas.
fn generated_params() -> String {
    let catalog_dir = repo().join("catalog");
    let mut entries: Vec<String> = fs::read_dir(&catalog_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    let registry = Registry::with_catalog(&catalog_dir, &entries).unwrap();
    let builtins: Vec<String> = Registry::builtin()
        .names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let mut out = String::from("### Built-in workloads\n\n");
    out.push_str(&params_section(&registry, &builtins));
    out.push_str("### Shipped catalog entries (`catalog/`)\n\n");
    out.push_str(&params_section(&registry, &entries));
    out.trim_end().to_string() + "\n"
}

/// Replaces (or checks) the body of `<!-- BEGIN GENERATED name -->` … `<!-- END GENERATED name -->`.
fn sync_section(doc: &str, name: &str, body: &str, problems: &mut Vec<String>) -> String {
    let begin = format!("<!-- BEGIN GENERATED {name} -->\n");
    let end = format!("<!-- END GENERATED {name} -->");
    let Some(start) = doc.find(&begin) else {
        problems.push(format!("marker {begin:?} missing"));
        return doc.to_string();
    };
    let from = start + begin.len();
    let Some(len) = doc[from..].find(&end) else {
        problems.push(format!("marker {end:?} missing"));
        return doc.to_string();
    };
    let current = &doc[from..from + len];
    let wanted = format!("\n{}\n", body.trim_end());
    if current != wanted {
        let first_diff = current
            .lines()
            .zip(wanted.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("\n  doc:  {a}\n  code: {b}"))
            .unwrap_or_else(|| " (length differs)".into());
        problems.push(format!("section {name} is stale{first_diff}"));
    }
    format!("{}{}{}", &doc[..from], wanted, &doc[from + len..])
}

#[test]
fn configuration_md_generated_sections_match_the_code() {
    let doc = read_doc("configuration.md");
    let mut problems = Vec::new();
    let updated = sync_section(&doc, "flags", &generated_flags(), &mut problems);
    let updated = sync_section(&updated, "params", &generated_params(), &mut problems);
    if std::env::var("VIRTWORK_UPDATE_DOCS").as_deref() == Ok("1") {
        fs::write(doc_path("configuration.md"), &updated).unwrap();
        return;
    }
    assert!(
        problems.is_empty(),
        "docs/configuration.md is out of date ({}); regenerate with \
         VIRTWORK_UPDATE_DOCS=1 cargo test --test docs",
        problems.join("; ")
    );
}

#[test]
fn every_environment_variable_is_documented() {
    let doc = read_doc("configuration.md");
    let keys: Vec<&str> = virtwork::config::env_keys().collect();
    assert!(keys.len() >= 20, "{keys:?}");
    for key in keys {
        assert!(
            doc.contains(&format!("`{key}`")),
            "docs/configuration.md does not document {key}"
        );
    }
    let deployment = read_doc("deployment.md");
    for key in [
        "VIRTWORK_COMMAND",
        "VIRTWORK_ARGS",
        "VIRTWORK_AFTER_RUN",
        "VIRTWORK_BIN",
    ] {
        assert!(
            deployment.contains(&format!("`{key}`")),
            "docs/deployment.md does not document {key}"
        );
    }
}

/// The fenced ```yaml block right after `<!-- yaml-example -->` in configuration.md.
fn yaml_example(doc: &str) -> String {
    let marker = doc
        .find("<!-- yaml-example -->")
        .expect("configuration.md has <!-- yaml-example -->");
    let rest = &doc[marker..];
    let start = rest.find("```yaml\n").expect("yaml block") + "```yaml\n".len();
    let len = rest[start..].find("```").expect("closed yaml block");
    rest[start..start + len].to_string()
}

#[test]
fn the_documented_yaml_example_is_accepted_and_covers_every_key() {
    let doc = read_doc("configuration.md");
    let example = yaml_example(&doc);
    let parsed: serde_yaml::Value = serde_yaml::from_str(&example).expect("example is YAML");
    let top: BTreeSet<String> = parsed
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    // Every env variable has a YAML twin, except aliases and the flag/env-only params.
    for key in virtwork::config::env_keys() {
        let yaml = key
            .trim_start_matches("VIRTWORK_")
            .to_ascii_lowercase()
            .replace('_', "-");
        if matches!(yaml.as_str(), "data-disk-size" | "params") {
            continue;
        }
        assert!(
            top.contains(&yaml),
            "the YAML example lacks `{yaml}` ({key})"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("virtwork.yaml");
    fs::write(&file, &example).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args(["run", "--dry-run", "--no-audit", "--config"])
        .arg(&file)
        .env_clear()
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "virtwork rejects the documented YAML example:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Relative links `](path)` and backticked `src/...`/`tests/...`/`deploy/...` paths in docs/,
/// README.md and the golden-image README name files that exist (paths relative to the repo).
#[test]
fn links_and_paths_in_docs_exist() {
    let mut checked = 0;
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.push(repo().join("README.md"));
    files.push(repo().join("build/golden-image/README.md"));
    for path in files {
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(repo()).unwrap().display().to_string();
        for piece in text.split("](").skip(1) {
            let target = piece.split(')').next().unwrap();
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap();
            assert!(
                path.parent().unwrap().join(file).exists(),
                "{name} links to missing {target}"
            );
            checked += 1;
        }
        for piece in text.split('`').skip(1).step_by(2) {
            let looks_like_path = [
                "src/", "tests/", "deploy/", "build/", "catalog/", "benches/",
            ]
            .iter()
            .any(|p| piece.starts_with(p))
                && !piece.contains(char::is_whitespace)
                && !piece.contains(['*', '<', '{', '$']);
            if looks_like_path {
                assert!(
                    repo().join(piece.trim_end_matches('/')).exists(),
                    "{name} names missing path {piece}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "only {checked} links/paths found in docs/");
}
