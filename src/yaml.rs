//! YAML scalars as the text our value parsers take: the one conversion shared by the
//! configuration file and catalog manifests.

/// The text of a YAML scalar (string, number, boolean, or a tagged one of those); `None` for
/// null, sequences and mappings, which the caller reports in its own terms.
pub fn scalar_text(value: &serde_yaml::Value) -> Option<String> {
    match value {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Tagged(tagged) => scalar_text(&tagged.value),
        serde_yaml::Value::Null
        | serde_yaml::Value::Sequence(_)
        | serde_yaml::Value::Mapping(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_become_text_and_the_rest_does_not() {
        let doc: serde_yaml::Value =
            serde_yaml::from_str("[a, 5, 1.5, true, !tag x, ~, [1], {k: v}]").unwrap();
        let texts: Vec<Option<String>> =
            doc.as_sequence().unwrap().iter().map(scalar_text).collect();
        assert_eq!(
            texts,
            [
                Some("a".into()),
                Some("5".into()),
                Some("1.5".into()),
                Some("true".into()),
                Some("x".into()),
                None,
                None,
                None
            ]
        );
    }
}
