//! `virtwork version`: the version, commit and build date embedded at build time (build.rs).

use std::io::Write;

use crate::error::Result;
use crate::model::OutputFormat;

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git commit, or `(unknown)`.
pub const COMMIT: &str = env!("VIRTWORK_COMMIT");
/// Commit date (or `VIRTWORK_BUILD_DATE`), or `(unknown)`.
pub const BUILD_DATE: &str = env!("VIRTWORK_DATE");

/// Writes the three version lines, or the version document (`--output json|yaml`).
pub fn version(output: OutputFormat, out: &mut dyn Write) -> Result<()> {
    let text = match output {
        OutputFormat::Text => {
            format!("virtwork version {VERSION}\n  commit: {COMMIT}\n  built:  {BUILD_DATE}\n")
        }
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc = serde_json::json!({
                "format_version": 1,
                "command": "version",
                "version": VERSION,
                "commit": COMMIT,
                "built": BUILD_DATE,
            });
            super::document_text(output, &format!("{doc:#}"))?
        }
    };
    super::written(out.write_all(text.as_bytes()))
}
