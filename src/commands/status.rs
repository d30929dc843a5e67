//! `virtwork status`: the runs present on the cluster and the phases of their VMs.

use crate::cli::StatusArgs;
use crate::config::Config;
use crate::error::{Error, Result};

/// Runs `virtwork status` (`args.run_id`, when given, is already checked to be a UUID).
pub async fn status(config: &Config, args: &StatusArgs) -> Result<()> {
    let _ = (config, args);
    Err(Error::NotImplemented {
        command: "status",
        issue: 6,
    })
}
