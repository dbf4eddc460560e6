//! The built-in plugins, compiled by the build script and embedded.

include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

/// Names of the built-in plugins, for listings and error messages.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN_PLUGINS.iter().map(|(name, _)| *name).collect()
}
