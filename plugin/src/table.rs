//! Tables as kubectl prints them.
//!
//! kubectl writes each row as tab-separated cells through Go's
//! `text/tabwriter` with minimum width 6, padding 3 and padding character
//! space (`printers.GetNewTabWriter`): a column is as wide as its widest
//! cell plus 3 spaces, at least 6; the last cell of a line is not padded.
//! Widths count characters, as tabwriter counts runes. Empty values print as
//! `<none>`, as kubectl prints them.

/// kubectl's tabwriter minimum column width, padding included.
const MIN_WIDTH: usize = 6;
/// kubectl's tabwriter padding after each cell.
const PADDING: usize = 3;

/// What kubectl prints for an empty value.
pub const NONE: &str = "<none>";

/// A table: upper-case headers and rows of cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers (upper-cased, as kubectl prints them).
    pub fn new<S: AsRef<str>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table {
            headers: headers
                .into_iter()
                .map(|h| h.as_ref().to_uppercase())
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; an empty cell prints as [`NONE`].
    pub fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|c| if c.is_empty() { NONE.to_owned() } else { c })
            .collect();
        self.rows.push(cells);
    }

    /// The table as kubectl would print it, one line per row, each ending in `\n`.
    pub fn render(&self) -> String {
        let lines: Vec<&Vec<String>> = std::iter::once(&self.headers).chain(&self.rows).collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        // Every cell but a line's last is padded to its column's width.
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                let widest = lines
                    .iter()
                    .filter(|l| c + 1 < l.len())
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0);
                (widest + PADDING).max(MIN_WIDTH)
            })
            .collect();
        let mut out = String::new();
        for line in lines {
            for (c, cell) in line.iter().enumerate() {
                out.push_str(cell);
                if c + 1 < line.len() {
                    let pad = widths[c] - cell.chars().count();
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(c: &[&str]) -> Vec<String> {
        c.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn columns_are_the_widest_cell_plus_three_and_at_least_six() {
        let mut t = Table::new(["name", "ok", "age"]);
        t.row(cells(&["bj-1", "y", "5m"]));
        t.row(cells(&["guangzhou-node-1", "", "12d"]));
        assert_eq!(
            t.render(),
            "NAME               OK       AGE\n\
             bj-1               y        5m\n\
             guangzhou-node-1   <none>   12d\n"
        );
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut t = Table::new(["site", "x"]);
        t.row(cells(&["北京", "1"]));
        assert_eq!(t.render(), "SITE   X\n北京     1\n");
    }
}
