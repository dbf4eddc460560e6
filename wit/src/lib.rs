//! The contract between the verifine host and its plugins.
//!
//! Each released version lives in a folder of its own (`wit/v0.1/`, later
//! `wit/v0.2/` …) and is frozen: its text never changes once released (a
//! test below holds every released file to a recorded hash). The SDK builds
//! plugins against [`CURRENT_DIR`]; the host implements it and keeps loading
//! components built against older minors of the same major.
//!
//! [`VERSION`] is the one place the current version's number is written; the
//! SDK stamps it into every plugin and the host checks plugins against it.

#![no_std]
#![warn(missing_docs)]

extern crate alloc;

pub mod wire;

/// The current contract version: `package verifine:plugin@VERSION` in
/// [`CURRENT_DIR`].
pub const VERSION: &str = "0.3.0";

/// The folder (under `wit/`) of the current version.
pub const CURRENT_DIR: &str = "v0.3";

/// Released versions: folder, and the FNV-1a 64 hash of each file in it.
/// A released contract is frozen: a change is a new folder, never an edit.
pub const RELEASED: &[(&str, &[(&str, u64)])] = &[
    ("v0.1", &[("verifine.wit", 0x5b73_4b6c_c68d_05e0)]),
    // 0.2 added `ask-judges` (named judges, sampling controls, choices,
    // log-probabilities, usage) to `host`; everything else is 0.1's.
    ("v0.2", &[("verifine.wit", 0x2452_d43b_ce0c_d65d)]),
    // 0.3 added `judge-packed` and `reads` to `rubric-plugin` and
    // `aggregate-packed` to `aggregator-plugin`: a batch crosses the sandbox
    // as one buffer each way.
    ("v0.3", &[("verifine.wit", 0xba36_c499_5e9c_d0fd)]),
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;
    use std::path::Path;

    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    fn wit_dir() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_version_is_the_current_folders_package_line() {
        let text = std::fs::read_to_string(wit_dir().join(CURRENT_DIR).join("verifine.wit"))
            .expect("the current contract folder holds verifine.wit");
        let line = format!("package verifine:plugin@{VERSION};");
        assert!(text.lines().any(|l| l.trim() == line), "expected `{line}`");
        let (major, minor) = {
            let mut parts = VERSION.split('.');
            (parts.next().unwrap(), parts.next().unwrap())
        };
        assert_eq!(CURRENT_DIR, format!("v{major}.{minor}"));
    }

    #[test]
    fn released_contracts_are_frozen() {
        for (folder, files) in RELEASED {
            for (file, hash) in *files {
                let path = wit_dir().join(folder).join(file);
                let bytes = std::fs::read(&path).expect("released contract file");
                assert_eq!(
                    fnv1a(&bytes),
                    *hash,
                    "{} changed after its release; a change needs a new version folder",
                    path.display()
                );
            }
        }
    }

    /// The SDK carries its own copy of the current contract, so the
    /// packaged crate builds plugins without this repository; the copy must
    /// be the contract, byte for byte.
    #[test]
    fn the_sdk_carries_the_current_contract() {
        let contract = wit_dir().join(CURRENT_DIR).join("verifine.wit");
        let copy = wit_dir()
            .join("../plugin-api/wit")
            .join(CURRENT_DIR)
            .join("verifine.wit");
        let (contract_text, copy_text) = (
            std::fs::read(&contract).expect("the contract"),
            std::fs::read(&copy).unwrap_or_default(),
        );
        assert!(
            contract_text == copy_text,
            "{} differs from {}: copy the contract into the SDK (cp {} {})",
            copy.display(),
            contract.display(),
            contract.display(),
            copy.display()
        );
    }
}
