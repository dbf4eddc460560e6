//! What of the system a confined process may read: an allow-list, not
//! "everything world-readable". Run as root (a container, a CI machine),
//! "world-readable" would be everything, `/etc/shadow` and the raw disks
//! included; Landlock holds for root too, so only what is listed here is
//! opened to it.
//!
//! SECURITY.md lists the same paths; change both together.

use super::landlock::Access;
use std::path::{Path, PathBuf};

/// Directories of programs and their libraries: read and run.
const PROGRAM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];

/// Entries of `/etc` that programs need to start, resolve names and speak
/// TLS: the dynamic loader's cache, `alternatives` (the links that name
/// `python3`, `cc`, …), name service and resolver configuration, time zone,
/// CA certificates (not `ssl/private`), locale aliases, MIME and magic
/// tables, and the user and group names (`passwd` and `group` hold no
/// password hashes; `shadow` and `gshadow` do, and are not here). Package
/// manager configuration (`pip.conf`, `npmrc`) may hold index credentials
/// and is not here either.
const ETC_ENTRIES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    "passwd",
    "group",
    "localtime",
    "timezone",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    "locale.alias",
    "locale.conf",
    "mime.types",
    "magic",
    "magic.mime",
    "os-release",
    "debian_version",
    "gitconfig",
    "inputrc",
    "terminfo",
];

/// `/etc` entries by prefix: Python's site configuration
/// (`/etc/python3.11/sitecustomize.py` is what Debian's interpreter
/// imports at start-up).
const ETC_PREFIXES: &[&str] = &["python3"];

/// Devices it may read: the empty, the endless and the random ones.
const READABLE_DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// Devices it may write: the ones that discard (or refuse) what is written.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/full"];

/// What of `/sys` a runtime reads to size its thread pools (CPU lists and
/// cgroup quotas); not the rest (DMI serial numbers, devices).
const SYS_ENTRIES: &[&str] = &["/sys/devices/system/cpu", "/sys/fs/cgroup"];

/// Every system path a confined process may use, with how.
pub fn rules() -> Vec<(PathBuf, Access)> {
    let mut rules: Vec<(PathBuf, Access)> = PROGRAM_DIRS
        .iter()
        .chain(SYS_ENTRIES)
        .chain(READABLE_DEVICES)
        .map(|path| (PathBuf::from(path), Access::ReadAndRun))
        .collect();
    rules.extend(
        WRITABLE_DEVICES
            .iter()
            .map(|path| (PathBuf::from(path), Access::ReadAndWrite)),
    );
    rules.extend(
        etc_entries(Path::new("/etc"))
            .into_iter()
            .map(|path| (path, Access::ReadAndRun)),
    );
    rules
}

/// The allowed entries of `etc` that exist there.
fn etc_entries(etc: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = ETC_ENTRIES.iter().map(|name| etc.join(name)).collect();
    if let Ok(listing) = std::fs::read_dir(etc) {
        for entry in listing.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if ETC_PREFIXES.iter().any(|prefix| name.starts_with(prefix)) {
                entries.push(entry.path());
            }
        }
    }
    entries
}

/// What cargo and rustup need of their homes for an offline build: the
/// proxies in `CARGO_HOME/bin`, the registry's index, downloaded crates and
/// unpacked sources, git checkouts, cargo's configuration (source
/// replacement lives there) and its empty lock files; rustup's toolchains
/// and settings. Not `credentials.toml`, not installed binaries' records,
/// not anything else a user keeps there.
pub fn toolchain_paths(cargo_home: &Path, rustup_home: &Path) -> Vec<PathBuf> {
    let cargo = [
        "bin",
        "registry/index",
        "registry/cache",
        "registry/src",
        "git/checkouts",
        "git/db",
        "config.toml",
        "config",
        ".package-cache",
        ".package-cache-mutate",
        ".global-cache",
    ]
    .map(|entry| cargo_home.join(entry));
    let rustup = ["toolchains", "settings.toml", "update-hashes"].map(|e| rustup_home.join(e));
    cargo.into_iter().chain(rustup).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_secret_of_the_system_or_the_toolchain_is_on_the_lists() {
        let allowed: Vec<PathBuf> = rules().into_iter().map(|(path, _)| path).collect();
        for secret in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssl/private",
            "/etc/ssh",
            "/etc/pip.conf",
            "/etc/npmrc",
            "/dev/sda",
            "/dev/mem",
            "/proc",
            "/root",
            "/home",
            "/opt",
        ] {
            let secret = Path::new(secret);
            assert!(
                !allowed.iter().any(|a| secret.starts_with(a)),
                "{} is reachable",
                secret.display()
            );
        }
        let toolchain = toolchain_paths(Path::new("/c"), Path::new("/r"));
        assert!(!toolchain.iter().any(|p| p.ends_with("credentials.toml")
            || p.ends_with("credentials")
            || p == Path::new("/c")));
    }
}
