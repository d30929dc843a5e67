//! Untrusted text made safe for a terminal: the one renderer every human-readable writer
//! passes names, label values and messages from the cluster (an admission webhook's Status
//! message, an object's name, an audit record of either) through before printing them.
//!
//! Owns: escaping control characters (C0 including ESC and DEL, C1), bidirectional overrides
//! and other invisible format characters as `\u{..}`, folding line breaks and tabs into one
//! space so the text stays on one line, and capping its length with an ellipsis. Must not:
//! know where the text came from or what it means; be used for JSON or logs (serde_json and
//! the log formatter escape on their own). Also owns [`to_stderr`], the one way text reaches
//! stderr outside the log formatter: a stderr whose reader went away must not panic.

/// Writes `text` to stderr as it is; a failure (a closed stderr, a pipe whose reader went
/// away: `virtwork ... 2>&1 | head -1`) is ignored, since there is nowhere left to report it
/// and `eprint!` would panic (exit 101) instead of letting the command's exit code stand.
pub fn to_stderr(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Longest table cell shown, in characters.
pub const CELL_CHARS: usize = 256;
/// Longest message from a server shown inside an error line, in characters.
pub const MESSAGE_CHARS: usize = 1024;
/// Longest error line `main` prints, in characters.
pub const LINE_CHARS: usize = 4096;

/// `text` escaped for a terminal and cut to at most `max_chars` characters (the last one an
/// ellipsis when cut). Line breaks and tabs become one space; other control and invisible
/// format characters become `\u{hex}`.
pub fn safe(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut shown = 0usize;
    // Where the output may be cut (after whole pieces) to leave room for the ellipsis.
    let mut cut_at = 0usize;
    let mut last_was_space = false;
    for c in text.chars() {
        let piece = match c {
            '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}' if last_was_space => continue,
            '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}' => " ".to_string(),
            c if needs_escape(c) => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        };
        let width = piece.chars().count();
        if shown + width > max_chars {
            out.truncate(cut_at);
            out.push('…');
            return out;
        }
        if shown + width < max_chars {
            cut_at = out.len() + piece.len();
        }
        last_was_space = piece == " ";
        shown += width;
        out.push_str(&piece);
    }
    out
}

/// Characters a terminal would act on or hide, beyond what JSON escapes anyway (C0 controls
/// but line breaks and tabs are [`needs_escape`]'s too): DEL, C1 controls, bidirectional
/// embeddings, overrides and isolates, zero-width characters and the BOM. The `-o json` and
/// `-o yaml` writers escape these.
pub fn hides(c: char) -> bool {
    needs_escape(c) && !matches!(c, '\n' | '\r' | '\t')
}

/// Characters a terminal would act on or hide instead of showing: controls (C0, DEL, C1),
/// bidirectional embeddings, overrides and isolates, zero-width characters and the BOM.
/// Shared with the HTML escaper, which shows them the same way.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_shown_not_obeyed() {
        assert_eq!(
            safe("a\u{1b}[31mred\u{7}\u{9b}2J", 100),
            "a\\u{1b}[31mred\\u{7}\\u{9b}2J"
        );
        assert_eq!(safe("evil\u{202e}txt.exe", 100), "evil\\u{202e}txt.exe");
        assert_eq!(safe("zero\u{200b}width", 100), "zero\\u{200b}width");
    }

    #[test]
    fn text_stays_on_one_line() {
        assert_eq!(safe("one\r\ntwo\n\nthree\tfour", 100), "one two three four");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(safe("abcdef", 6), "abcdef");
        assert_eq!(safe("abcdefg", 6), "abcde…");
        assert_eq!(safe(&"x".repeat(50_000_000), 10).chars().count(), 10);
        // An escape is never cut in half.
        assert_eq!(safe("abc\u{1b}", 6), "abc…");
        assert_eq!(safe("plain é ü", 100), "plain é ü");
    }
}
