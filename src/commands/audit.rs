//! `virtwork audit list|show`: query the local audit database.

use crate::cli::AuditCommand;
use crate::config::Config;
use crate::error::{Error, Result};

/// Runs `virtwork audit` against `config.audit.db_path` (a `show` run id is already checked).
pub fn audit(config: &Config, command: &AuditCommand) -> Result<()> {
    let _ = (config, command);
    Err(Error::NotImplemented {
        command: "audit",
        issue: 7,
    })
}
