//! Durations on the command line, written as Go writes them (`15s`, `5m`,
//! `1h30m`), so flags read like kube-controller-manager's. A bare number is
//! seconds, for flags that used to take seconds.

use std::time::Duration;

/// A Go-style duration (`0s` allowed); a bare number means seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 15s, 5m, 1h30m)"))
}

/// [`parse_duration`], refusing zero.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_and_bare_seconds() {
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").unwrap_err().contains("examples"));
        assert!(parse_duration("-5s").is_err());
        assert_eq!(
            parse_positive_duration("0s"),
            Err("must be more than zero".into())
        );
    }
}
