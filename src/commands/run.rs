//! `virtwork run`: plan the fleet from the Config, apply it to the cluster, wait and report.

use crate::config::Config;
use crate::error::{Error, Result};

/// Runs `virtwork run` with an already loaded and validated configuration.
pub async fn run(config: &Config) -> Result<()> {
    let _ = config;
    Err(Error::NotImplemented {
        command: "run",
        issue: 4,
    })
}
