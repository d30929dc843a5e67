//! `virtwork validate`: check catalog entries and report OK/WARN/FAIL per entry.

use crate::cli::ValidateArgs;
use crate::config::Config;
use crate::error::{Error, Result};

/// Runs `virtwork validate`; `config.catalog_dir` is the resolved catalog directory.
pub fn validate(config: &Config, args: &ValidateArgs) -> Result<()> {
    let _ = (config, args);
    Err(Error::NotImplemented {
        command: "validate",
        issue: 3,
    })
}
