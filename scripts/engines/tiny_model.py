"""Make a tiny Llama with random weights and a byte-level BPE tokenizer, for real-engine tests.

    python scripts/engines/tiny_model.py OUT_DIR [--gguf FILE]

No download: the tokenizer is trained on the licence texts every Debian machine has
(/usr/share/common-licenses), the weights are random (seeded). 2,048 tokens, 4 layers, hidden 128,
4 heads, 2 KV heads, 4,096 positions: vLLM's CPU build loads it in seconds. Random weights emit
arbitrary bytes, so some tokens decode to "" (part of a UTF-8 character): exactly the case a load
tester must count right (how many is chance; tests that need them sample a skipped special
token). ``--gguf`` also writes the same weights as a float32 GGUF for llama.cpp.
Run with the vLLM virtualenv's python (torch, transformers, tokenizers, safetensors, gguf).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

VOCAB, LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, CTX = 2048, 4, 128, 256, 4, 2, 4096
RMS_EPS, ROPE_THETA, SEED = 1e-6, 10000.0, 0
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<s>", "</s>", "<unk>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
BOS, EOS, UNK = 0, 1, 2


def corpus() -> list[str]:
    root = Path("/usr/share/common-licenses")
    return [p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file()]


def tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    if tok.get_vocab_size() != VOCAB:
        raise SystemExit(f"the tokenizer has {tok.get_vocab_size()} tokens, not {VOCAB}")
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL[BOS],
        "eos_token": SPECIAL[EOS],
        "unk_token": SPECIAL[UNK],
        "add_bos_token": False,
        "model_max_length": CTX,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    special = {"bos_token": SPECIAL[BOS], "eos_token": SPECIAL[EOS], "unk_token": SPECIAL[UNK]}
    (out / "special_tokens_map.json").write_text(json.dumps(special) + "\n")


def model(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=CTX,
        rms_norm_eps=RMS_EPS,
        rope_theta=ROPE_THETA,
        bos_token_id=BOS,
        eos_token_id=EOS,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(cfg).to(torch.float32).save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": BOS, "eos_token_id": EOS}) + "\n")


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF's rotary layout of q/k rows to GGUF's (what llama.cpp's convert_hf_to_gguf.py does)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_file(model_dir: Path, path: Path) -> None:
    """The model in ``model_dir`` as a float32 GGUF (architecture llama, GPT-2 style byte-level BPE)."""
    import gguf
    from safetensors.numpy import load_file

    tok = json.loads((model_dir / "tokenizer.json").read_text())
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    tokens = [by_id[i] for i in range(VOCAB)]
    kinds = [gguf.TokenType.CONTROL if t in SPECIAL else gguf.TokenType.NORMAL for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(CTX)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_vocab_size(VOCAB)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(kinds)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(EOS)
    w.add_unk_token_id(UNK)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, LAYERS)
    for name, data in sorted(load_file(str(model_dir / "model.safetensors")).items()):
        if name.endswith("q_proj.weight"):
            data = _permute(data, HEADS)
        elif name.endswith("k_proj.weight"):
            data = _permute(data, KV_HEADS)
        new = names.get_name(name, try_suffixes=(".weight",))
        if new is None:
            raise SystemExit(f"no GGUF name for tensor {name}")
        w.add_tensor(new, data.astype("float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory for the Hugging Face files")
    ap.add_argument("--gguf", type=Path, help="also write the model as this GGUF file")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer(args.out)
    model(args.out)
    from tokenizers import Tokenizer  # the load tester sizes prompts with tokenizer.json alone

    if Tokenizer.from_file(str(args.out / "tokenizer.json")).get_vocab_size() != VOCAB:
        raise SystemExit("tokenizer.json does not load on its own")
    if args.gguf:
        args.gguf.parent.mkdir(parents=True, exist_ok=True)
        gguf_file(args.out, args.gguf)
    print(f"tiny model written to {args.out}" + (f" and {args.gguf}" if args.gguf else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
