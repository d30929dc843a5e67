//! One module per subcommand: glue that turns a Config into a Plan, applies it and reports.
//!
//! [`dispatch`] loads and validates the configuration FIRST for every command that has one, so
//! bad input exits 2 before any command-specific work, then installs logging and runs the
//! command (async commands on a small multi-thread tokio runtime).

pub mod audit;
pub mod cleanup;
pub mod completion;
pub mod run;
pub mod status;
pub mod validate;
pub mod verify;
pub mod version;

use crate::cli::{AuditCommand, Cli, Command};
use crate::config::{CommandFlags, Config, check_run_id};
use crate::error::{Error, Result};

/// Runs the parsed command line. `env` is the process environment as (name, value) pairs.
pub fn dispatch(cli: Cli, env: &[(String, String)]) -> Result<()> {
    let global = cli.global;
    match cli.command {
        Command::Version => version::version(&mut std::io::stdout().lock()),
        Command::Completion { shell } => {
            completion::completion(shell, &mut std::io::stdout().lock())
        }
        Command::Man => completion::man(&mut std::io::stdout().lock()),
        Command::Run(args) => {
            let config = Config::load(&global, &args, env)?;
            start_logging(&config);
            block_on(run::run(&config))
        }
        Command::Cleanup(args) => {
            let config = Config::load_for_cleanup(&global, &args, env)?;
            start_logging(&config);
            block_on(cleanup::cleanup(&config, &args))
        }
        Command::Validate(args) => {
            let config = Config::load_for(&global, CommandFlags::Validate(&args), env)?;
            start_logging(&config);
            // The resolved directory honours --catalog-dir > env > YAML > ~/.virtwork/catalog.
            let args = crate::cli::ValidateArgs {
                catalog_dir: Some(config.catalog_dir.clone()),
                ..args
            };
            validate::run(&args, env, &mut std::io::stdout().lock())
        }
        Command::Status(args) => {
            let config = Config::load_for(&global, CommandFlags::Status(&args), env)?;
            start_logging(&config);
            block_on(status::status(&config, &args))
        }
        Command::Verify(args) => {
            let config = Config::load_for(&global, CommandFlags::GlobalOnly, env)?;
            if let Some(run_id) = &args.run_id {
                check_run_id(run_id, "--run-id")?;
            }
            let settings = verify::resolve_settings(&config, &args)?;
            start_logging(&config);
            block_on(verify::verify(&config, &settings))
        }
        Command::Audit(command) => {
            let config = Config::load_for(&global, CommandFlags::GlobalOnly, env)?;
            if let AuditCommand::Show { run_id } = &command {
                check_run_id(run_id, "audit show <RUN_ID>")?;
            }
            start_logging(&config);
            audit::audit(&config, &command, global.namespace.as_deref())
        }
    }
}

fn start_logging(config: &Config) {
    crate::logging::init(config.log_format, config.verbose);
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

/// Maps a write failure on stdout to an error (a closed pipe is not worth a panic).
pub(crate) fn write_failed(err: std::io::Error) -> Error {
    Error::Io {
        context: "writing to",
        path: "stdout".into(),
        source: err,
    }
}
