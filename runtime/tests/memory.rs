//! Freed memory given back to the system (`sitegrid_runtime::memory`). A
//! file of its own: its test is the only one in its process, so no other
//! test's allocations move the resident size it reads.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn memory_freed_by_other_threads_is_given_back_to_the_system() {
    use sitegrid_runtime::memory::{free_bytes, resident_bytes, trim};

    // A burst as an attack leaves it: many small blocks allocated on threads
    // of their own (their own arenas), then freed while one block per thread
    // stays, so no heap can shrink from its top alone.
    const THREADS: usize = 4;
    const BLOCKS: usize = 20_000;
    const FREED: u64 = (THREADS * (BLOCKS - 1) * 1000) as u64;
    let held: Vec<Vec<u8>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut blocks: Vec<Vec<u8>> =
                        (0..BLOCKS).map(|i| vec![i as u8; 1000]).collect();
                    let last = blocks.pop().unwrap_or_default();
                    drop(blocks);
                    last
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let anon = || resident_bytes().expect("RssAnon");
    let free = free_bytes().expect("glibc tells what it holds free");
    assert!(
        free >= FREED / 2,
        "the freed blocks are held by the allocator: {free} bytes free of {FREED} freed"
    );
    let before = anon();
    assert!(trim(), "the allocator gave something back");
    let after = anon();
    assert!(
        before.saturating_sub(after) >= FREED / 2,
        "at least half of what was freed went back: RssAnon {before} -> {after} bytes"
    );
    assert_eq!(held.len(), THREADS);
}

/// The workspace denies unsafe code; `memory.rs` alone allows it, for its two
/// glibc calls. A new exception is a decision, not a line slipped in.
#[test]
fn unsafe_code_is_allowed_in_the_memory_module_only() {
    fn walk(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir)
            .expect("readable source tree")
            .flatten()
        {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && !name.to_string_lossy().starts_with('.') {
                    walk(&path, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|s| s.contains(concat!("allow(", "unsafe_code)")))
            {
                found.push(path);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    walk(&root, &mut found);
    let found: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
        .collect();
    assert_eq!(found, ["runtime/src/memory.rs"]);
}
