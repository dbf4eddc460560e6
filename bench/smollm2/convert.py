"""transformers' own reading of a GGUF file, saved as a Hugging Face
checkpoint directory (f32 safetensors, tokenizer.json, chat_template.jinja):
the independent reference the parity tests and the TRL benchmark load.

  python bench/smollm2/convert.py MODEL.gguf OUT_DIR
"""

import sys

import torch
import transformers

gguf, out = sys.argv[1], sys.argv[2]
directory, name = gguf.rsplit("/", 1)
tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
config = model.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
# transformers refuses to save a GGUF-backed model; a plain one holding the
# same (dequantized) weights saves.
plain = type(model)(config)
plain.load_state_dict(model.state_dict())
plain.save_pretrained(out)
tokenizer.save_pretrained(out)
