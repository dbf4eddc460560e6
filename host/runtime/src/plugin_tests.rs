//! The plugin loader's tests: specs, caches and refusals.
use super::*;

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(name)
}

#[test]
fn compiled_code_is_cached_and_a_corrupt_entry_is_replaced() {
    let cache = scratch("code-cache");
    let runtime = Runtime::with_cache(Limits::default(), Some(cache.to_path_buf())).unwrap();
    let first = runtime.load("weighted-sum").unwrap();
    let entries: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert!(
        entry
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&first.sha256)
    );

    // A second load is served from the cache and behaves the same.
    let second = runtime.load("weighted-sum").unwrap();
    assert_eq!(second.provenance(), first.provenance());

    // A damaged entry is ignored, recompiled and rewritten.
    std::fs::write(entry, b"garbage").unwrap();
    let third = runtime.load("weighted-sum").unwrap();
    assert!(
        third
            .instance()
            .aggregate(&crate::Context::empty(), &[])
            .unwrap()
            .is_empty()
    );
    assert_ne!(std::fs::read(entry).unwrap(), b"garbage");
}

#[test]
fn cache_entries_are_run_only_when_their_tag_verifies() {
    let cache = scratch("code-cache-hostile");
    let runtime = Runtime::with_cache(Limits::default(), Some(cache.to_path_buf())).unwrap();
    let aggregator = runtime.load("weighted-sum").unwrap();
    let rubric = runtime.load("math-answer").unwrap();
    let entry_of = |sha: &str| {
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(sha))
            .unwrap()
    };
    let (aggregator_entry, rubric_entry) = (entry_of(&aggregator.sha256), entry_of(&rubric.sha256));

    // Another plugin's compiled code copied under the aggregator's key:
    // it would run as "weighted-sum". Refused and recompiled instead.
    std::fs::copy(&rubric_entry, &aggregator_entry).unwrap();
    let loaded = runtime.load("weighted-sum").unwrap();
    assert_eq!(loaded.kind(), PluginKind::Aggregator);
    assert!(
        loaded
            .instance()
            .aggregate(&crate::Context::empty(), &[])
            .is_ok()
    );

    // Flipped bytes in the code (the tag kept) are never executed.
    let mut bytes = std::fs::read(&rubric_entry).unwrap();
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&rubric_entry, &bytes).unwrap();
    let loaded = runtime.load("math-answer").unwrap();
    let sample = crate::Sample::new("s", "q", "#### 4").with_reference("#### 4");
    let judged = loaded
        .instance()
        .judge(&crate::Context::empty(), &[sample])
        .unwrap();
    assert!(judged[0].is_ok());
    assert_ne!(std::fs::read(&rubric_entry).unwrap(), bytes, "rewritten");
}

#[test]
#[cfg(unix)]
fn a_cache_directory_others_may_write_to_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let cache = scratch("code-cache-open");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let runtime = Runtime::with_cache(Limits::default(), Some(cache.to_path_buf())).unwrap();
    let plugin = runtime.load("weighted-sum").unwrap();
    assert!(
        plugin
            .instance()
            .aggregate(&crate::Context::empty(), &[])
            .is_ok()
    );
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing cached"
    );
}

#[test]
fn unknown_names_list_the_built_in_plugins() {
    let runtime = Runtime::with_cache(Limits::default(), None).unwrap();
    let err = runtime.load("nope").err().unwrap().to_string();
    assert!(
        err.contains("math-answer") && err.contains("plateau-trigger"),
        "{err}"
    );
}
