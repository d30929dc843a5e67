//! The `--params` / `VIRTWORK_PARAMS` grammar: `workload.key=value` pairs separated by commas.

use std::collections::BTreeMap;

/// Parses `text` into workload -> key -> value. Errors are the Go tool's exact texts, without
/// the source prefix the caller adds. The value may contain `=` but not `,`.
pub fn parse_params(
    text: &str,
) -> std::result::Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let mut parsed: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for pair in text.trim().split(',') {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let Some((workload, rest)) = pair.split_once('.') else {
            return Err(format!(
                "missing workload prefix (expected workload.key=value): {pair:?}"
            ));
        };
        if workload.is_empty() {
            return Err(format!("empty workload name in {pair:?}"));
        }
        let Some((key, value)) = rest.split_once('=') else {
            return Err(format!(
                "missing '=' in param (expected workload.key=value): {pair:?}"
            ));
        };
        if key.is_empty() {
            return Err(format!("empty param key in {pair:?}"));
        }
        parsed
            .entry(workload.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_and_its_error_texts() {
        let parsed =
            parse_params(" cpu.cpu-load-percent=50 , ,disk.runtime=a=b,cpu.cpu-method=all")
                .unwrap();
        assert_eq!(parsed["cpu"]["cpu-load-percent"], "50");
        assert_eq!(parsed["cpu"]["cpu-method"], "all");
        assert_eq!(parsed["disk"]["runtime"], "a=b");
        assert_eq!(
            parse_params("nodot").unwrap_err(),
            r#"missing workload prefix (expected workload.key=value): "nodot""#
        );
        assert_eq!(
            parse_params(".key=v").unwrap_err(),
            r#"empty workload name in ".key=v""#
        );
        assert_eq!(
            parse_params("cpu.key").unwrap_err(),
            r#"missing '=' in param (expected workload.key=value): "cpu.key""#
        );
        assert_eq!(
            parse_params("cpu.=v").unwrap_err(),
            r#"empty param key in "cpu.=v""#
        );
        assert!(parse_params("  ").unwrap().is_empty());
    }
}
