"""Writes a tiny llama-architecture GGUF model with random weights, for
tests of judge backends that need a real server and no download.

    python3 bench/llama-server/tiny_gguf.py OUT.gguf [--seed N]

Vocabulary: SentencePiece-style (`tokenizer.ggml.model = "llama"`) with
<unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> and a few hundred
word pieces, so any text tokenizes (bytes as the fallback). Two layers,
width 64, grouped-query attention (4 heads, 2 KV heads), f32 weights.
"""

import argparse
import string

import gguf
import numpy as np

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_CTX = 8192
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def vocabulary():
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    words = ["\u2581" + w for w in "YES NO yes no the a is it of and to in".split()]
    words += ["\u2581" + c for c in string.ascii_letters + string.digits]
    words += list(string.ascii_letters + string.digits + string.punctuation)
    words += ["\u2581"]
    for w in words:
        if w not in tokens:
            tokens.append(w)
            types.append(gguf.TokenType.NORMAL)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    return tokens, scores, types


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)
    head_dim = N_EMBD // N_HEAD

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHATML)

    def tensor(name, *shape, scale=0.05):
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    tensor("token_embd.weight", n_vocab, N_EMBD, scale=0.5)
    for i in range(N_LAYER):
        ones(f"blk.{i}.attn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.attn_k.weight", N_HEAD_KV * head_dim, N_EMBD)
        tensor(f"blk.{i}.attn_v.weight", N_HEAD_KV * head_dim, N_EMBD)
        tensor(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        ones(f"blk.{i}.ffn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    ones("output_norm.weight", N_EMBD)
    tensor("output.weight", n_vocab, N_EMBD, scale=0.5)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
