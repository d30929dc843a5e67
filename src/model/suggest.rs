//! "Did you mean" hints for unknown names (YAML keys, workloads, params, choices).

/// The closest candidate by Levenshtein distance when it is below `len(input)/2 + 1` (the
/// rule of the Go tool virtwork replaces); ties go to the first candidate in the given order.
pub fn suggest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = input.chars().count() / 2 + 1;
    let mut best: Option<(usize, &'a str)> = None;
    for &candidate in candidates {
        let distance = strsim::levenshtein(input, candidate);
        if distance < limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_follow_the_distance_rule() {
        assert_eq!(
            suggest("cpu-metod", &["cpu-load-percent", "cpu-method"]),
            Some("cpu-method")
        );
        assert_eq!(suggest("zzzz", &["cpu-method"]), None);
        assert_eq!(
            suggest("cpu-core", &["cpu-cores", "cpu-core"]),
            Some("cpu-core")
        );
    }
}
