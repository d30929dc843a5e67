//! `virtwork cleanup`: find everything virtwork created by label and delete it.

use crate::cli::CleanupArgs;
use crate::config::Config;
use crate::error::{Error, Result};

/// Runs `virtwork cleanup`; `config` is loaded by `Config::load_for_cleanup` (run id checked).
pub async fn cleanup(config: &Config, args: &CleanupArgs) -> Result<()> {
    let _ = (config, args);
    Err(Error::NotImplemented {
        command: "cleanup",
        issue: 6,
    })
}
