//! The built-in plugins, compiled by the build script and embedded.

include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

/// Names of the built-in plugins, for listings and error messages.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN_PLUGINS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crate_under_plugins_is_embedded() {
        let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
        let mut crates: Vec<String> = std::fs::read_dir(&plugins)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("Cargo.toml").exists())
            .map(|p| {
                let manifest = std::fs::read_to_string(p.join("Cargo.toml")).unwrap();
                let table: toml::Table = toml::from_str(&manifest).unwrap();
                table["package"]["name"].as_str().unwrap().to_string()
            })
            .collect();
        crates.sort();
        let mut embedded: Vec<String> = builtin_names().iter().map(|n| n.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, crates);
    }
}
