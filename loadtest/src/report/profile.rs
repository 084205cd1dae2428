//! The proxy's CPU profile during the heaviest churn, where the goal of
//! upstream changes per CPU-second is judged: fetched from its
//! `/debug/pprof/profile` (gzip'd pprof protobuf, kept next to the report
//! for `go tool pprof`) and summarised here — the functions with the most
//! samples on the CPU themselves (self) and on the stack (cumulative).

use std::{
    collections::{HashMap, HashSet},
    io::Read,
    net::SocketAddr,
    time::Duration,
};

use anyhow::{anyhow, Context, Result};
use http_body_util::BodyExt;
use pprof::protos::{Message, Profile};

use crate::client;

/// One function's share of the samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// Its name as the profile has it (demangled, without the hash).
    pub function: String,
    /// Its source file, as the debug info has it.
    pub file: String,
    /// Percent of all samples.
    pub percent: f64,
}

/// What the profile says.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSummary {
    /// The churn rate it was taken at (changes/s).
    pub rate: f64,
    /// How long it sampled.
    pub seconds: u64,
    /// Samples taken (100 a second of CPU).
    pub samples: i64,
    /// Functions by samples on the CPU themselves.
    pub top_self: Vec<Share>,
    /// Functions by samples with them anywhere on the stack (the report keeps sitegrid's own).
    pub top_cumulative: Vec<Share>,
    /// The raw profile's file name next to the report, once written.
    pub file: Option<String>,
}

/// Asks the proxy at `addr` for a `seconds`-long CPU profile; returns its
/// gzip'd protobuf body.
pub async fn fetch(addr: SocketAddr, seconds: u64) -> Result<Vec<u8>> {
    let url = format!("http://{addr}/debug/pprof/profile?seconds={seconds}");
    let limit = Duration::from_secs(seconds + 30);
    let resp = tokio::time::timeout(limit, client().get(url.parse()?))
        .await
        .map_err(|_| anyhow!("GET {url}: no answer within {limit:?}"))??;
    let status = resp.status();
    let body = tokio::time::timeout(limit, resp.into_body().collect())
        .await
        .map_err(|_| anyhow!("GET {url}: body not done within {limit:?}"))??
        .to_bytes();
    if status != 200 {
        return Err(anyhow!(
            "GET {url}: {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(body.to_vec())
}

/// The top `n` functions of the gzip'd pprof profile `gz`, self and
/// cumulative; with the number of samples.
pub fn summarize(gz: &[u8], n: usize) -> Result<(i64, Vec<Share>, Vec<Share>)> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .context("the profile is not gzip")?;
    let profile = Profile::decode(raw.as_slice()).context("the profile is not pprof protobuf")?;
    let string = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| profile.string_table.get(i))
            .map_or("?", String::as_str)
    };
    let functions: HashMap<u64, (&str, &str)> = profile
        .function
        .iter()
        .map(|f| (f.id, (string(f.name), string(f.filename))))
        .collect();
    // Each location's functions, innermost (inlined) first.
    let locations: HashMap<u64, Vec<(&str, &str)>> = profile
        .location
        .iter()
        .map(|l| {
            let names = l
                .line
                .iter()
                .map(|line| {
                    functions
                        .get(&line.function_id)
                        .copied()
                        .unwrap_or(("?", ""))
                })
                .collect();
            (l.id, names)
        })
        .collect();
    let mut total = 0i64;
    let mut own: HashMap<(&str, &str), i64> = HashMap::new();
    let mut cumulative: HashMap<(&str, &str), i64> = HashMap::new();
    for sample in &profile.sample {
        let count = sample.value.first().copied().unwrap_or(0);
        total += count;
        let mut stack = sample
            .location_id
            .iter()
            .flat_map(|id| locations.get(id).into_iter().flatten().copied());
        // Each function once per sample, however often it recurses.
        let mut on_stack = HashSet::new();
        if let Some(leaf) = stack.next() {
            *own.entry(leaf).or_default() += count;
            on_stack.insert(leaf);
        }
        on_stack.extend(stack);
        for name in on_stack {
            *cumulative.entry(name).or_default() += count;
        }
    }
    let top = |m: HashMap<(&str, &str), i64>| {
        let mut v: Vec<((&str, &str), i64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter()
            .take(n)
            .map(|((f, file), c)| Share {
                function: f.to_owned(),
                file: file.to_owned(),
                percent: if total > 0 {
                    c as f64 * 100.0 / total as f64
                } else {
                    0.0
                },
            })
            .collect::<Vec<_>>()
    };
    Ok((total, top(own), top(cumulative)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pprof::protos::{Function, Line, Location, Sample};
    use std::io::Write;

    fn gz(p: &Profile) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&p.encode_to_vec()).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn self_is_the_innermost_function_and_cumulative_counts_each_function_once_per_sample() {
        // Functions 1 main, 2 parse, 3 alloc; location 10 = alloc inlined
        // into parse, 20 = main, 30 = parse.
        let f = |id, name| Function {
            id,
            name,
            filename: 4,
            ..Function::default()
        };
        let loc = |id, fns: &[u64]| Location {
            id,
            line: fns
                .iter()
                .map(|&function_id| Line {
                    function_id,
                    line: 0,
                })
                .collect(),
            ..Location::default()
        };
        let sample = |locs: &[u64], n| Sample {
            location_id: locs.to_vec(),
            value: vec![n],
            ..Sample::default()
        };
        let p = Profile {
            string_table: vec![
                "".into(),
                "main".into(),
                "parse".into(),
                "alloc".into(),
                "src/lib.rs".into(),
            ],
            function: vec![f(1, 1), f(2, 2), f(3, 3)],
            location: vec![loc(10, &[3, 2]), loc(20, &[1]), loc(30, &[2])],
            // 6 samples in alloc (under parse, under main), 3 in parse
            // (recursing: parse under parse), 1 in main.
            sample: vec![
                sample(&[10, 20], 6),
                sample(&[30, 30, 20], 3),
                sample(&[20], 1),
            ],
            ..Profile::default()
        };
        let (total, own, cum) = summarize(&gz(&p), 10).unwrap();
        assert_eq!(total, 10);
        let pct =
            |v: &[Share], name: &str| v.iter().find(|s| s.function == name).map(|s| s.percent);
        assert_eq!(own[0].function, "alloc");
        assert_eq!(own[0].file, "src/lib.rs");
        assert_eq!(pct(&own, "alloc"), Some(60.0));
        assert_eq!(pct(&own, "parse"), Some(30.0));
        assert_eq!(pct(&own, "main"), Some(10.0));
        assert_eq!(pct(&cum, "main"), Some(100.0));
        assert_eq!(pct(&cum, "parse"), Some(90.0), "the recursion counted once");
        assert_eq!(pct(&cum, "alloc"), Some(60.0));
        assert_eq!(summarize(&gz(&p), 1).unwrap().1.len(), 1);
        assert!(summarize(b"not gzip", 5).is_err());
    }
}
