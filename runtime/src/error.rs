//! The one line a binary prints when it cannot start.

/// `err` and its causes as one line (YAML errors come with a multi-line
/// snippet), prefixed with the program's name: what a start-up failure prints.
pub fn error_line(program: &str, err: &anyhow::Error) -> String {
    let text = format!("{err:#}");
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!("{program}: {}", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_joins_causes_and_snippets() {
        let err = anyhow::anyhow!("line one\n\n  line two")
            .context("--kubeconfig /x: invalid kubeconfig");
        assert_eq!(
            error_line("prog", &err),
            "prog: --kubeconfig /x: invalid kubeconfig: line one line two"
        );
    }
}
