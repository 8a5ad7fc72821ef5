"""Tiny real models of each architecture (random weights, a trained BPE tokenizer), built from a config."""
from __future__ import annotations

from pathlib import Path

CORPUS = (
    "The quick brown fox jumps over the lazy dog. Paris is the capital of France. "
    "De snelle bruine vos springt over de luie hond. Amsterdam is de hoofdstad van Nederland. "
    "def add(a, b):\n    return a + b\n"
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000. Emoji: 🙂 🚀 and ümlauts: äöü ß. 日本語のテキスト。"
) * 4

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)


def make_tokenizer_dir(folder: Path, extra_tokens: dict[str, bool] | None = None) -> int:
    """Train a small byte-level BPE tokenizer and save it as a HF fast tokenizer; returns its vocab size.

    extra_tokens: {text: special} added tokens after the trained vocabulary (special False: a user-defined one).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator([CORPUS], trainer)
    for text, special in (extra_tokens or {}).items():
        (tok.add_special_tokens if special else tok.add_tokens)([AddedToken(text, special=special, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(str(folder))
    return tok.get_vocab_size()


def make_checkpoint(folder: Path, arch: str, seed: int = 0, extra_tokens: dict[str, bool] | None = None, **overrides) -> Path:
    """A random-weight HF checkpoint (config + safetensors + tokenizer) of the given architecture."""
    import torch
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen2Config

    folder.mkdir(parents=True, exist_ok=True)
    vocab = make_tokenizer_dir(folder, extra_tokens)
    common = dict(TINY, vocab_size=vocab, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    common.update(overrides)
    if arch == "llama":
        cfg = LlamaConfig(**common, tie_word_embeddings=True)
    elif arch == "qwen2":
        cfg = Qwen2Config(**common, tie_word_embeddings=False)
    elif arch == "gemma3":
        cfg = Gemma3TextConfig(
            **{**common, "num_hidden_layers": 3, "num_key_value_heads": 1}, head_dim=32, query_pre_attn_scalar=32,
            sliding_window=8, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        )
    else:
        raise ValueError(arch)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # make norms non-trivial so a wrong norm formula shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(-0.5, 0.5) if arch == "gemma3" else p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0, 0.1)
    model.save_pretrained(str(folder))
    return folder


def make_sentence_transformer(root: Path) -> Path:
    """A 2-layer, 32-wide BERT with a word-piece vocabulary, saved as a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *".,?!-'", *letters, *("##" + c for c in letters),
             "the", "een", "de", "archive", "archief", "code", "is", "het", "van", "probe", "sentence"]
    hf = root / "hf"
    hf.mkdir(parents=True)
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(hf / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(hf)
    tok.save_pretrained(hf)
    word = models.Transformer(str(hf), max_seq_length=64)
    st = SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), "mean")], device="cpu")
    out = root / "usb" / "tiny-multilingual"
    st.save(str(out))
    return out
