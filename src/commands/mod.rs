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
pub mod run;
pub mod status;
pub mod validate;
pub mod verify;
pub mod version;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::config::{
    AuditSettings, ChurnSettings, CleanupSettings, DisruptionSettings, GlobalSettings, RunSettings,
    StatusSettings, ValidateSettings, VerifySettings,
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
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(write_failed),
    }
}

/// A command's result document as written to stdout: `json` (one JSON document) as is, or
/// the same document as YAML for `--output yaml` (YAML reads JSON, keeping the field order).
pub(crate) fn document_text(format: OutputFormat, json: &str) -> Result<String> {
    let mut text = match format {
        OutputFormat::Yaml => serde_yaml::from_str::<serde_yaml::Value>(json)
            .and_then(|doc| serde_yaml::to_string(&doc))
            .map_err(|e| Error::runtime(format!("rendering the result as YAML: {e}")))?,
        OutputFormat::Json | OutputFormat::Text => json.trim_end().to_string(),
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
