//! Where verifine keeps things of the user's: the compiled-code cache, the
//! plugin build directory, keys. One rule for all of them (an override
//! variable, else the XDG directory, else one under the home), so every
//! layer finds the same places.

use std::path::PathBuf;

/// The default code cache: `$VERIFINE_CACHE_DIR`, else `$XDG_CACHE_HOME/verifine/code`,
/// else `~/.cache/verifine/code`; `None` when no home is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    user_path("VERIFINE_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "code")
}

/// `$override_var` when set, else `$xdg_var/verifine/name`, else
/// `~/home_dir/verifine/name`; `None` when no home is known.
pub fn user_path(override_var: &str, xdg_var: &str, home_dir: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os(xdg_var)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_dir)))?;
    Some(base.join("verifine").join(name))
}
