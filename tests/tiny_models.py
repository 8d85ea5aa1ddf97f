"""Tiny randomly initialised transformer models built at test time (no weights can be fetched
here). They exercise our backends' code paths — shapes, prefixes, loading — not quality."""

from __future__ import annotations

from pathlib import Path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "query", "passage", ":"]
VOCAB += list("abcdefghijklmnopqrstuvwxyzäöüß0123456789.,?!-")


def _bert_parts(directory: Path, num_labels: int | None = None):
    import torch
    from transformers import BertConfig, BertTokenizerFast

    torch.manual_seed(0)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
        **({"num_labels": num_labels} if num_labels else {}),
    )
    return tokenizer, config


def build_tiny_sentence_transformer(directory: Path) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertModel

    tokenizer, config = _bert_parts(directory / "hf")
    BertModel(config).save_pretrained(directory / "hf")
    tokenizer.save_pretrained(directory / "hf")
    word = Transformer(str(directory / "hf"), max_seq_length=64)
    pooling = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(directory / "st"))
    return directory / "st"


def build_tiny_cross_encoder(directory: Path) -> Path:
    """A one-logit sequence classifier: what FlagReranker and CrossEncoder both load."""
    from transformers import BertForSequenceClassification

    tokenizer, config = _bert_parts(directory, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
