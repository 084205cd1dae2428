//! Loading the seed examples copied into `tests/fixtures/`.

// Each test file uses a different subset of these helpers.

use std::path::PathBuf;

use serde::de::DeserializeOwned;

/// The fixtures directory of this crate.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture whose file name ends with `-{kind}.yaml` (kind lower-cased), sorted.
pub fn fixtures_of(kind: &str) -> Vec<(String, String)> {
    let suffix = format!("-{}.yaml", kind.to_lowercase());
    let mut out: Vec<(String, String)> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.to_string_lossy().ends_with(&suffix))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("read fixture");
            (name, text)
        })
        .collect();
    out.sort();
    out
}

/// Parses one fixture, naming it on failure.
pub fn parse<T: DeserializeOwned>(name: &str, yaml: &str) -> T {
    serde_saphyr::from_str(yaml).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// Loads the fixture `name`.
pub fn load<T: DeserializeOwned>(name: &str) -> T {
    let text = std::fs::read_to_string(fixtures_dir().join(name)).expect("read fixture");
    parse(name, &text)
}
