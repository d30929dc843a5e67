//! Plain-text tables: left-aligned columns two spaces apart, the last column unpadded so no
//! line ends in whitespace. Owns the one renderer `status`, `verify` and `audit` print their
//! tables with. Every cell passes [`crate::terminal::safe`]: cells hold names and messages from
//! the cluster. Must not: know what the rows mean.

use crate::terminal::{CELL_CHARS, safe};

/// `header` then `rows`, each line prefixed with `indent`; widths count characters.
pub fn columns<R: AsRef<[String]>>(header: &[&str], rows: &[R], indent: &str) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.as_ref()
                .iter()
                .map(|cell| safe(cell, CELL_CHARS))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = indent.to_string();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_without_trailing_spaces() {
        let rows = vec![
            vec!["long-cell".to_string(), "x".to_string()],
            vec!["s".to_string(), String::new()],
        ];
        assert_eq!(
            columns(&["A", "BB"], &rows, ""),
            "A          BB\nlong-cell  x\ns\n"
        );
        assert_eq!(
            columns(&["A", "B"], &[["é".to_string(), "1".to_string()]], "  "),
            "  A  B\n  é  1\n"
        );
    }

    #[test]
    fn cells_from_the_cluster_cannot_drive_the_terminal() {
        let rows = [["vm\u{1b}]0;owned\u{7}\nnext".to_string()]];
        assert_eq!(
            columns(&["NAME"], &rows, ""),
            "NAME\nvm\\u{1b}]0;owned\\u{7} next\n"
        );
    }
}
