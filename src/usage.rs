//! Command-line usage errors as one line, in the configuration's own words, with credentials
//! never shown.
//!
//! clap parses flags into model types, so a bad value fails inside clap. Its multi-line report
//! is turned into the line a bad variable or YAML key gets: `invalid value "two" for
//! --cpu-cores: expected a whole number of at least 1` (the reason is the model type's
//! [`Invalid`]; a credential type leaves the value out). Every other usage error is clap's
//! text folded into one line, with the values of `--ssh-key`/`--ssh-password` and anything that
//! looks like key material replaced by `<redacted>`: a pasted private key must never be echoed.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::model::{Invalid, looks_secret, suggest};

/// Flags whose values are credentials.
const CREDENTIAL_FLAGS: &[&str] = &["--ssh-key", "--ssh-password"];

/// Shown instead of a credential.
const REDACTED: &str = "<redacted>";

/// Warnings for global flags given on the command line that do nothing for the command
/// (`virtwork status --audit-db x.db`): accepted, since wrappers pass them everywhere, but
/// never silently.
pub fn inert_flag_notices(matches: &clap::ArgMatches) -> Vec<String> {
    let Some(name) = matches.subcommand_name() else {
        return Vec::new();
    };
    // Global values reach the top-level matches wherever they were given.
    crate::cli::inert_global_flags(name)
        .iter()
        .filter(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| {
            format!(
                "--{} does nothing for `virtwork {name}`; remove it",
                id.replace('_', "-")
            )
        })
        .collect()
}

/// The one-line message of a usage error `err` raised while parsing `args` (argv, program
/// name first), without the leading `Error: `.
pub fn one_line(err: &clap::Error, args: &[OsString]) -> String {
    let credentials = credentials(args);
    let message = match err.kind() {
        ErrorKind::ValueValidation => value_validation(err, args),
        ErrorKind::InvalidValue => invalid_choice(err, args),
        _ => None,
    };
    match message {
        Some(message) => redact(&message, &credentials),
        // Redacted before folding: a multi-line value no longer matches once folded.
        None => format!(
            "{} (see --help)",
            folded(&redact(&err.render().to_string(), &credentials))
        ),
    }
}

/// `invalid value "x" for --flag: expected ...`, from the model type's reason.
fn value_validation(err: &clap::Error, args: &[OsString]) -> Option<String> {
    let input = input_name(err, args)?;
    let text = context_string(err, ContextKind::InvalidValue)?;
    let source = std::error::Error::source(err)?;
    Some(match source.downcast_ref::<Invalid>() {
        Some(why) => why.message(&input, text),
        None if CREDENTIAL_FLAGS.contains(&input.as_str()) || looks_secret(text) => {
            format!("invalid value for {input}: {source}")
        }
        None => format!("invalid value {text:?} for {input}: {source}"),
    })
}

/// `invalid value "x" for --flag: expected one of a, b (did you mean "a"?)`.
fn invalid_choice(err: &clap::Error, args: &[OsString]) -> Option<String> {
    let input = input_name(err, args)?;
    let text = context_string(err, ContextKind::InvalidValue)?;
    let ContextValue::Strings(accepted) = err.get(ContextKind::ValidValue)? else {
        return None;
    };
    // "a value is required" comes as an invalid value with nothing accepted: clap says it best.
    if accepted.is_empty() {
        return None;
    }
    let names: Vec<&str> = accepted.iter().map(String::as_str).collect();
    if looks_secret(text) {
        return Some(format!(
            "invalid value for {input}: expected one of {} (the value looks like key material \
             or a token, so it is not shown)",
            names.join(", ")
        ));
    }
    let hint = match suggest(text, &names) {
        Some(name) => format!(" (did you mean {name:?}?)"),
        None => String::new(),
    };
    Some(format!(
        "invalid value {text:?} for {input}: expected one of {}{hint}",
        names.join(", ")
    ))
}

fn context_string(err: &clap::Error, kind: ContextKind) -> Option<&str> {
    match err.get(kind)? {
        ContextValue::String(text) => Some(text),
        _ => None,
    }
}

/// The argument as the user knows it: `--cpu-cores` (clap says `--cpu-cores <N>`), or for a
/// positional the command it belongs to (`audit show <RUN_ID>`).
fn input_name(err: &clap::Error, args: &[OsString]) -> Option<String> {
    let arg = context_string(err, ContextKind::InvalidArg)?;
    if arg.starts_with('-') {
        // `--cpu-cores <N>`, `--dry-run[=<MODE>]`: the flag alone.
        return arg.split([' ', '[', '=']).next().map(str::to_string);
    }
    let path = subcommand_path(args);
    Some(if path.is_empty() {
        arg.to_string()
    } else {
        format!("{} {arg}", path.join(" "))
    })
}

/// The subcommands named in `args`, outermost first.
fn subcommand_path(args: &[OsString]) -> Vec<String> {
    let mut command = crate::cli::command();
    let mut path = Vec::new();
    for arg in args.iter().skip(1) {
        let Some(arg) = arg.to_str() else { continue };
        let Some(sub) = command.find_subcommand(arg).cloned() else {
            continue;
        };
        path.push(arg.to_string());
        command = sub;
    }
    path
}

/// clap's report `rendered` without the usage line and the pointer to `--help`, as one line.
fn folded(rendered: &str) -> String {
    let parts: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with("Usage:")
                && !line.starts_with("For more information")
        })
        .collect();
    let message = parts.join(" ");
    message
        .strip_prefix("error: ")
        .unwrap_or(&message)
        .to_string()
}

/// Every argument that is or may be a credential: the value after (or `=`-joined to) a
/// credential flag, and every word of a PEM block (`-----BEGIN ...` to `... KEY-----`,
/// which an unquoted `$(cat key)` splits into many arguments).
fn credentials(args: &[OsString]) -> Vec<String> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut found = Vec::new();
    let (mut in_pem_block, mut seen_end) = (false, false);
    for (i, arg) in args.iter().enumerate() {
        for flag in CREDENTIAL_FLAGS {
            if let Some(value) = arg
                .strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
            {
                found.push(value.to_string());
            }
            if arg == flag
                && let Some(value) = args.get(i + 1)
            {
                found.push(value.clone());
            }
        }
        if arg.contains("-----BEGIN") {
            (in_pem_block, seen_end) = (true, false);
        }
        if in_pem_block || looks_like_key_material(arg) {
            found.push(arg.clone());
        }
        if in_pem_block {
            seen_end |= arg.contains("-----END");
            // The END marker's last word closes the block.
            in_pem_block = !(seen_end && arg.trim_end().ends_with("-----"));
        }
    }
    found.retain(|value| !value.is_empty());
    found
}

/// `message` (any error about to be printed) with every input that looks like a secret
/// replaced by `<redacted>`: the values of arguments and of `VIRTWORK_*` and `KUBECONFIG`
/// variables that hold key material or a token ([`looks_secret`]), as given, as quoted with
/// escapes, and word by word (lists split them). The last line of defence, whatever the
/// input and whatever message echoes it.
pub fn without_secrets(message: &str, args: &[OsString], env: &[(String, String)]) -> String {
    let arg_values = args.iter().map(|a| {
        let text = a.to_string_lossy().into_owned();
        match text.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => value.to_string(),
            _ => text,
        }
    });
    let env_values = env
        .iter()
        .filter(|(name, _)| name.starts_with("VIRTWORK_") || name == "KUBECONFIG")
        .map(|(_, value)| value.clone());
    let mut secrets: Vec<String> = credentials(args);
    for value in arg_values.chain(env_values).filter(|v| looks_secret(v)) {
        let quoted = format!("{value:?}");
        secrets.push(quoted[1..quoted.len() - 1].to_string());
        secrets.extend(
            value
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|word| word.chars().count() >= 6)
                .map(str::to_string),
        );
        secrets.push(value);
    }
    // Longest first, so a whole value goes before the words inside it.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let mut out = message.to_string();
    for secret in secrets.iter().filter(|s| s.chars().count() >= 6) {
        out = out.replace(secret.as_str(), REDACTED);
    }
    without_pem_blocks(&without_quoted_secrets(&out))
}

/// `message` with every double-quoted span (Rust's escaped quoting, which errors use for what
/// a user gave) that looks like a credential replaced by `<redacted>`: values from files (the
/// `--config` YAML, a catalog entry) are in no argument or variable to match against.
fn without_quoted_secrets(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let body = &rest[open + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            out.push_str(&rest[open..]);
            return out;
        };
        let span = &body[..end];
        if looks_secret(span) {
            out.push_str(REDACTED);
        } else {
            out.push('"');
            out.push_str(span);
            out.push('"');
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `message` with any PEM armour left unquoted cut out, from `-----BEGIN` to the end of its
/// `-----END …-----` line (or to the end of the message).
fn without_pem_blocks(message: &str) -> String {
    let mut out = message.to_string();
    while let Some(begin) = out.find("-----BEGIN") {
        let after = &out[begin..];
        let end = after
            .find("-----END")
            .and_then(|e| {
                let tail = &after[e + 8..];
                tail.find("-----").map(|t| e + 8 + t + 5)
            })
            .unwrap_or(after.len());
        out.replace_range(begin..begin + end, REDACTED);
    }
    out
}

/// Whether `text` holds (part of) a PEM-armoured key or a token (see [`looks_secret`]).
fn looks_like_key_material(text: &str) -> bool {
    looks_secret(text)
}

/// `message` with every credential replaced, quoted spans first (clap quotes values), then
/// any remaining occurrence of a credential long enough not to match ordinary words.
fn redact(message: &str, credentials: &[String]) -> String {
    if credentials.is_empty() {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('\'') {
        let Some(len) = rest[open + 1..].find('\'') else {
            break;
        };
        let span = &rest[open + 1..open + 1 + len];
        out.push_str(&rest[..=open]);
        // clap may echo only part of an argument (a long "flag" is cut at its first '=').
        let partial = |c: &String| span.chars().count() >= 6 && c.contains(span);
        if looks_like_key_material(span)
            || credentials
                .iter()
                .any(|c| span.contains(c.as_str()) || partial(c))
        {
            out.push_str(REDACTED);
        } else {
            out.push_str(span);
        }
        out.push('\'');
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    for credential in credentials {
        if credential.chars().count() >= 6 {
            out = out.replace(credential.as_str(), REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_and_armoured_secrets_from_files_are_cut_from_any_message() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----\n";
        let message = format!(
            "f.yaml: param \"x\" value {key:?}: must be an integer; token \"eyJh.eyJz.c2ln\"; raw {key} end"
        );
        let out = without_secrets(&message, &[], &[]);
        assert_eq!(
            out,
            "f.yaml: param \"x\" value <redacted>: must be an integer; token <redacted>; raw <redacted>\n end"
        );
        // An escaped quote inside a span does not end it.
        assert_eq!(
            without_secrets(r#"a "b\"PRIVATE KEY\"c" d"#, &[], &[]),
            "a <redacted> d"
        );
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn credential_values_are_found_in_every_spelling() {
        let found = credentials(&args(&[
            "virtwork",
            "run",
            "--ssh-password",
            "hunter2",
            "--ssh-key=ssh-ed25519 AAAA",
            "--workloads",
            "cpu",
        ]));
        assert_eq!(found, ["hunter2", "ssh-ed25519 AAAA"]);
    }

    #[test]
    fn an_unquoted_pem_block_is_redacted_word_by_word() {
        let argv = args(&[
            "virtwork",
            "run",
            "-----BEGIN",
            "OPENSSH",
            "PRIVATE",
            "KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAA",
            "-----END",
            "OPENSSH",
            "PRIVATE",
            "KEY-----",
            "--workloads",
            "cpu",
        ]);
        let found = credentials(&argv);
        assert!(
            found.contains(&"b3BlbnNzaC1rZXktdjEAAAAA".to_string()),
            "{found:?}"
        );
        assert!(!found.contains(&"cpu".to_string()), "{found:?}");
        let line = redact(
            "unexpected argument 'b3BlbnNzaC1rZXktdjEAAAAA' found",
            &found,
        );
        assert_eq!(line, "unexpected argument '<redacted>' found");
    }

    #[test]
    fn short_passwords_are_redacted_only_where_quoted() {
        let line = redact(
            "unexpected argument 'ab' found; tip: use '-- ab' (an example)",
            &["ab".to_string()],
        );
        assert_eq!(
            line,
            "unexpected argument '<redacted>' found; tip: use '<redacted>' (an example)"
        );
    }
}
