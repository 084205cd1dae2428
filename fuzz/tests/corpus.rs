//! Every committed input through its target: the seed corpus (so a target
//! that stops building or panics on a seed fails here, not only under AFL)
//! and the regressions (each a crash AFL found, kept fixed).

use std::path::Path;

#[test]
fn every_corpus_and_regression_input_runs_through_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in sitegrid_fuzz::TARGETS {
        let mut ran = 0;
        for folder in ["corpus", "regressions"] {
            let dir = root.join(folder).join(name);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.expect("a readable directory entry").path();
                if !path.is_file() || path.file_name().is_some_and(|n| n == "README.md") {
                    continue;
                }
                let data = std::fs::read(&path).expect("a readable corpus file");
                eprintln!("{name}: {}", path.display());
                target(&data);
                ran += 1;
            }
        }
        assert!(ran > 0, "no corpus for target {name}");
    }
}
