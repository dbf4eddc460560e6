#!/usr/bin/env bash
# The crates whose features (and so compiled copies) differ between CI's
# test build and the builds of the CLI and the Python extension that follow
# it; each line is a crate compiled twice. Empty output is the goal, kept by
# host/workspace-hack/Cargo.toml (cargo-hakari's output: `cargo hakari
# generate`). Builds what is not built yet, with CI's settings.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
units() {
    jq -r 'select(.reason == "compiler-artifact" and .target.kind[0] != "custom-build")
        | "\(.package_id | sub(".*#"; "")) \(.target.kind | join(",")) [\(.features | join(","))]"' | sort -u
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo test --workspace --no-run --message-format=json 2>/dev/null | units >"$dir/test"
for package in verifine verifine-python; do
    cargo build -p "$package" --message-format=json 2>/dev/null | units >"$dir/$package"
    comm -13 "$dir/test" "$dir/$package" | grep -v "^$package " | while read -r crate kind features; do
        # A crate the test build lacks (pyo3) is the package's own.
        grep -q "^$crate $kind " "$dir/test" || continue
        echo "$package: $crate ($kind) $features; the test build has $(grep "^$crate $kind " "$dir/test" | cut -d' ' -f3 | tr '\n' ' ')"
    done
done
