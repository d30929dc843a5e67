//! One module per subcommand: glue that turns a command's settings into a plan, applies it
//! and reports.
//!
//! [`dispatch`] resolves the command's settings FIRST for every command that has them, so bad
//! input exits 2 before any command-specific work, then installs logging and runs the command
//! (async commands on a small multi-thread tokio runtime).

pub mod audit;
pub mod churn;
pub mod cleanup;
pub mod completion;
pub mod disruption;
mod prometheus_reach;
mod prompt;
pub mod report;
pub mod run;
mod run_ids;
pub mod status;
pub mod validate;
pub mod verify;
pub mod version;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::config::{
    AuditSettings, ChurnSettings, CleanupSettings, DisruptionSettings, GlobalSettings,
    ReportSettings, RunSettings, StatusSettings, ValidateSettings, VerifySettings,
};
use crate::error::{Error, Result};
use crate::model::OutputFormat;

/// Runs the parsed command line. `env` is the process environment as (name, value) pairs.
pub fn dispatch(cli: Cli, env: &[(String, String)]) -> Result<()> {
    let global = cli.global;
    match cli.command {
        Command::Version => {
            let output = crate::config::output_format(&global, env)?;
            version::version(output, &mut std::io::stdout().lock())
        }
        Command::Completion { shell } => {
            completion::completion(shell, &mut std::io::stdout().lock())
        }
        Command::Man => completion::man(&mut std::io::stdout().lock()),
        Command::Run(args) => {
            let settings = RunSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(run::run(&settings))
        }
        Command::Cleanup(args) => {
            let settings = CleanupSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(cleanup::cleanup(&settings))
        }
        Command::Validate(args) => {
            let settings = ValidateSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            validate::run(&settings, &mut std::io::stdout().lock())
        }
        Command::Status(args) => {
            let settings = StatusSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(status::status(&settings))
        }
        Command::Verify(args) => {
            let settings = VerifySettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(verify::verify(&settings))
        }
        Command::Disruption(args) => {
            let settings = DisruptionSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(disruption::disruption(&settings))
        }
        Command::Churn(args) => {
            let settings = ChurnSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(churn::churn(&settings))
        }
        Command::Audit(command) => {
            let settings = AuditSettings::resolve(&global, &command, env)?;
            start_logging(&settings.global);
            audit::audit(&settings)
        }
        Command::Report(args) => {
            let settings = ReportSettings::resolve(&global, &args, env)?;
            start_logging(&settings.global);
            block_on(report::report(&settings))
        }
    }
}

fn start_logging(global: &GlobalSettings) {
    crate::logging::init(global.log_format, global.verbose, global.ansi);
    for notice in &global.notices {
        tracing::warn!("{notice}");
    }
}

/// Runs an async command to completion on a two-worker runtime.
fn block_on<F: std::future::Future<Output = Result<()>>>(future: F) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| Error::runtime(format!("cannot start the async runtime: {err}")))?;
    let result = runtime.block_on(future);
    // A request abandoned at its timeout can leave a blocking task behind (a DNS lookup, an
    // exec credential plugin); the command is done, so do not wait for it.
    runtime.shutdown_background();
    result
}

/// The cluster the kubeconfig and context in `access` name, at its rate limit.
pub(crate) async fn connect(
    access: &crate::config::ClusterAccess,
) -> Result<crate::k8s::client::Cluster> {
    crate::k8s::client::connect_from_env(
        &access.kubeconfig,
        access.context.as_deref(),
        access.rate_limit,
    )
    .await
}

/// [`connect`] for a command that only reads: the interrupt policy is installed at once and
/// the returned token, once cancelled, also stops the cluster's requests.
pub(crate) async fn connect_interruptible(
    access: &crate::config::ClusterAccess,
) -> Result<(
    crate::k8s::client::Cluster,
    tokio_util::sync::CancellationToken,
)> {
    let cluster = connect(access).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    cluster.gate.stop_when(&cancel);
    install_interrupt_handler(cancel.clone());
    Ok((cluster, cancel))
}

/// The interrupt policy of every command that talks to the cluster: the first SIGINT or
/// SIGTERM cancels `cancel` (the command starts nothing new, records what it did and exits
/// 130); a second one exits 130 at once.
pub(crate) fn install_interrupt_handler(cancel: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        next_signal(term.as_mut()).await;
        tracing::warn!("interrupt received: stopping (press Ctrl-C again to exit immediately)");
        cancel.cancel();
        next_signal(term.as_mut()).await;
        std::process::exit(130);
    });
}

async fn next_signal(term: Option<&mut tokio::signal::unix::Signal>) {
    match term {
        Some(term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Writes a command's product to stdout. A reader that went away (`virtwork run --dry-run |
/// head -1`) is not an error: nobody wants the rest, and the command's outcome stands.
pub(crate) fn write_stdout(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    written(
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush()),
    )
}

/// The result of writing a command's product: a reader that went away is not an error (the
/// command's own outcome, and so its exit code, stands); any other failure is.
pub(crate) fn written(result: std::io::Result<()>) -> Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(write_failed),
    }
}

/// A command's result document as written to stdout: `json` (one JSON document) as is, or
/// the same document as YAML for `--output yaml` (YAML reads JSON, keeping the field order).
/// Either way a character a terminal would act on or hide (DEL, C1 controls, bidirectional
/// overrides, zero-width characters; [`crate::terminal::hides`]) is written as a `\u` escape,
/// which every JSON and YAML reader turns back into the same character: a name from the
/// cluster cannot reorder what `virtwork status -o json` shows on a terminal.
pub(crate) fn document_text(format: OutputFormat, json: &str) -> Result<String> {
    let mut text = match format {
        // Read from the escaped JSON: YAML refuses DEL and C1 controls written raw.
        OutputFormat::Yaml => serde_yaml::from_str::<serde_yaml::Value>(&escaped_json(json))
            .map(marked_yaml)
            .and_then(|doc| serde_yaml::to_string(&doc))
            .map(|yaml| unmarked_yaml(&yaml))
            .map_err(|e| Error::runtime(format!("rendering the result as YAML: {e}")))?,
        OutputFormat::Json | OutputFormat::Text => escaped_json(json.trim_end()),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Maps a write failure on stdout to an error (a closed pipe is not worth a panic).
pub(crate) fn write_failed(err: std::io::Error) -> Error {
    Error::Io {
        context: "writing to",
        path: "stdout".into(),
        source: err,
    }
}

/// JSON text with every character [`crate::terminal::hides`] written as `\uXXXX`. Outside
/// strings JSON is ASCII, so each such character is inside a string, where the escape means
/// the same character.
/// Writes `doc` to stdout as pretty JSON, as [`document_text`] would render it (hidden
/// characters escaped, one final newline) but without holding the text: `run` of 10,000 VMs
/// writes 8 MB, which as a string was its peak memory.
pub(crate) fn write_json_stdout(doc: &impl serde::Serialize) -> Result<()> {
    let mut out = HiddenEscaped::new(std::io::BufWriter::new(std::io::stdout().lock()));
    written(
        serde_json::to_writer_pretty(&mut out, doc)
            .map_err(std::io::Error::from)
            .and_then(|()| out.finish()),
    )
}

/// A writer that passes UTF-8 text on with each character [`crate::terminal::hides`] written
/// as a `\u` escape (as [`escaped_json`] does), whatever the boundaries of the writes.
struct HiddenEscaped<W: Write> {
    inner: W,
    /// The start of a character whose remaining bytes have not arrived yet.
    partial: Vec<u8>,
}

impl<W: Write> HiddenEscaped<W> {
    fn new(inner: W) -> Self {
        HiddenEscaped {
            inner,
            partial: Vec::new(),
        }
    }

    /// Passes on `text`, escaping the hidden characters.
    fn pass(&mut self, text: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in text.char_indices() {
            if crate::terminal::hides(c) {
                self.inner.write_all(&text.as_bytes()[start..at])?;
                // Every such character is in the Basic Multilingual Plane.
                write!(self.inner, "\\u{:04x}", c as u32)?;
                start = at + c.len_utf8();
            }
        }
        self.inner.write_all(&text.as_bytes()[start..])
    }

    /// The final newline, then everything flushed.
    fn finish(mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.partial);
        self.inner.write_all(&rest)?;
        self.inner.write_all(b"\n")?;
        self.inner.flush()
    }
}

impl<W: Write> Write for HiddenEscaped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.partial);
        bytes.extend_from_slice(buf);
        let (valid, rest) = match std::str::from_utf8(&bytes) {
            Ok(text) => (text, &[][..]),
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                // What serde_json writes is UTF-8: only a character cut by the write's end
                // can be incomplete.
                (std::str::from_utf8(valid).unwrap_or_default(), rest)
            }
        };
        let rest = rest.to_vec();
        self.pass(valid)?;
        self.partial = rest;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn escaped_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if crate::terminal::hides(c) {
            // Every such character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Start and end of the stand-in for a hidden character in YAML: control characters, so the
/// emitter double-quotes the string and writes them as `\x01`/`\x02`, where
/// [`unmarked_yaml`] finds them.
const MARK_OPEN: char = '\u{1}';
const MARK_CLOSE: char = '\u{2}';

/// `doc` with every hidden character of its strings and keys (and the marker characters
/// themselves) replaced by `MARK_OPEN hex MARK_CLOSE`.
fn marked_yaml(doc: serde_yaml::Value) -> serde_yaml::Value {
    use serde_yaml::Value;
    let mark = |s: String| -> String {
        if !s
            .chars()
            .any(|c| crate::terminal::hides(c) || c == MARK_OPEN || c == MARK_CLOSE)
        {
            return s;
        }
        s.chars()
            .map(|c| {
                if crate::terminal::hides(c) || c == MARK_OPEN || c == MARK_CLOSE {
                    format!("{MARK_OPEN}{:04x}{MARK_CLOSE}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    match doc {
        Value::String(s) => Value::String(mark(s)),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(marked_yaml).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(k, v)| (marked_yaml(k), marked_yaml(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The emitted YAML with each marked character written as the `\uXXXX` escape of a
/// double-quoted scalar (where the emitter put it).
fn unmarked_yaml(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    let mut rest = yaml;
    while let Some(at) = rest.find("\\x01") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let hex = after
            .get(..4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        match hex {
            Some(hex) if after[4..].starts_with("\\x02") => {
                out.push_str("\\u");
                out.push_str(hex);
                rest = &after[8..];
            }
            _ => {
                out.push_str("\\x01");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod document_tests {
    use super::*;

    /// Hidden characters leave as escapes and read back as themselves, in JSON and YAML.
    #[test]
    fn hidden_characters_are_escaped_and_read_back_unchanged() {
        let value = serde_json::json!({
            "name": "evil\u{202e}txt.exe",
            "zero\u{200b}width": ["a\u{2066}b", "c\u{feff}", "d\u{85}e\u{7f}", "x\u{1}y\u{2}z"],
            "plain": "vm-0",
        });
        let json = value.to_string();
        let out = document_text(OutputFormat::Json, &json).unwrap();
        assert!(out.contains("evil\\u202etxt.exe"), "{out}");
        assert!(!out.chars().any(crate::terminal::hides), "{out}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            value
        );

        let out = document_text(OutputFormat::Yaml, &json).unwrap();
        assert!(out.contains("\"evil\\u202etxt.exe\""), "{out}");
        assert!(out.contains("plain: vm-0"), "{out}");
        assert!(!out.chars().any(crate::terminal::hides), "{out}");
        assert_eq!(
            serde_yaml::from_str::<serde_json::Value>(&out).unwrap(),
            value
        );
    }

    /// The streamed JSON is what the rendered text would be, however the writes are cut.
    #[test]
    fn streamed_json_escapes_as_the_rendered_text_does() {
        let value = serde_json::json!({
            "name": "evil\u{202e}txt.exe",
            "zero\u{200b}width": ["a\u{2066}b", "é", "d\u{85}e\u{7f}", "x\u{1}y"],
        });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let expected = document_text(OutputFormat::Json, &pretty).unwrap();
        let mut bytes = Vec::new();
        {
            let mut cut = HiddenEscaped::new(&mut bytes);
            // One byte at a time: every multi-byte character arrives cut.
            for b in pretty.as_bytes() {
                cut.write_all(std::slice::from_ref(b)).unwrap();
            }
            cut.finish().unwrap();
        }
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
        let mut streamed = Vec::new();
        let mut w = HiddenEscaped::new(&mut streamed);
        serde_json::to_writer_pretty(&mut w, &value).unwrap();
        w.finish().unwrap();
        assert_eq!(String::from_utf8(streamed).unwrap(), expected);
    }
}
