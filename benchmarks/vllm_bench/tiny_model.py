"""Write the config-only tiny Llama the CPU recordings serve (../shared/docs/vllm-cpu.md):
config.json plus a word-level tokenizer ("t<id>" words) so that `vllm bench serve` can build
prompts as token ids and the server can stream text. Weights are dummy (--load-format
dummy). Standard library + `tokenizers` (vLLM's venv has it).

    python tiny_model.py DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CONFIG = {  # 4 layers, hidden 512, 8 heads, 8 KV heads, intermediate 2048, vocab 32000, bf16
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 32000, "hidden_act": "silu",
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2,
}
SPECIAL = ["<unk>", "<s>", "</s>"]


def write_model(folder: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=2))
    vocab = {w: i for i, w in enumerate(SPECIAL)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL), CONFIG["vocab_size"])})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(SPECIAL)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>",
        "eos_token": "</s>", "model_max_length": CONFIG["max_position_embeddings"],
        "add_bos_token": False, "add_eos_token": False}, indent=2))
    return folder


if __name__ == "__main__":
    print(write_model(Path(sys.argv[1])))
