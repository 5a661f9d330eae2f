"""``lazyscope.data.Bucketed`` around each Hugging Face collator class the installed transformers
has (real classes, a tokenizer built in code, on the CPU): the batch is the collator's own apart
from padding (same type, same keys, every tensor equal up to its original length, the padding
made of the right pad value: the pad id, -100 for labels, 0 for the mask), its lengths are the
buckets', and a tiny model's loss on it is the loss on the collator's batch: what the program
learns does not change."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, models, pre_tokenizers, processors  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from lazyscope.data import IGNORE_INDEX, Bucketed  # noqa: E402

WORDS = [f"w{i}" for i in range(40)]
BUCKETS = [16, 32, 64]


def _tokenizer(side: str = "right") -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "</s>",
                                         *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]",
                                   unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   mask_token="[MASK]", eos_token="</s>", padding_side=side)


def _text(n: int, k: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for i in range(n))


def _features(tok, lengths=(5, 11, 3, 9), **extra):
    out = []
    for k, n in enumerate(lengths):
        item = dict(tok(_text(n, k), return_special_tokens_mask=True))
        for key, make in extra.items():
            item[key] = make(item, k)
        out.append(item)
    return out


def _same_apart_from_padding(plain, bucketed, wrapper: Bucketed) -> None:
    """Every tensor of ``bucketed`` is ``plain``'s up to its original length (at the end, or the
    start for left padding), padded with its key's pad value to a bucket."""
    assert type(bucketed) is type(plain)
    assert list(bucketed.keys()) == list(plain.keys())
    pads = {"input_ids": wrapper.pad_id, "labels": wrapper.label_pad_id, "attention_mask": 0,
            "special_tokens_mask": 1, "token_type_ids": 0, "decoder_input_ids": wrapper.pad_id}
    for key, a in plain.items():
        b = bucketed[key]
        if a.dim() < 2:
            assert torch.equal(a, b), key
            continue
        n, m = a.shape[-1], b.shape[-1]
        assert m in BUCKETS and m >= n, (key, n, m)
        left = wrapper.side == "left"
        kept = b[..., m - n:] if left else b[..., :n]
        pad = b[..., :m - n] if left else b[..., n:]
        assert torch.equal(kept, a), key
        if key in pads:
            assert bool((pad == pads[key]).all()), (key, pad)


def _seeded(collator, features, seed: int = 0):
    torch.manual_seed(seed)
    return collator(features)


def test_data_collator_with_padding_keeps_its_batch_encoding_and_pads_to_a_bucket() -> None:
    tok = _tokenizer()
    collator = transformers.DataCollatorWithPadding(tok)
    wrapper = Bucketed(collator, BUCKETS)
    features = _features(tok)
    plain, bucketed = collator(features), wrapper(features)
    assert type(plain).__name__ == "BatchEncoding"
    _same_apart_from_padding(plain, bucketed, wrapper)
    assert bucketed["input_ids"].shape == (4, 16)
    assert bucketed.to("cpu") is not None  # a BatchEncoding's own method still works


@pytest.mark.parametrize("mlm", [True, False])
def test_language_modeling_keeps_its_masking_and_labels(mlm: bool) -> None:
    """The masked positions, their replacement ids and the labels (-100 everywhere but the
    masked tokens; or the ids, -100 on padding, for mlm=False) are the collator's own."""
    tok = _tokenizer()
    collator = transformers.DataCollatorForLanguageModeling(tok, mlm=mlm, mlm_probability=0.3)
    wrapper = Bucketed(collator, BUCKETS)
    features = _features(tok, lengths=(12, 20, 7, 15))
    plain, bucketed = _seeded(collator, features), _seeded(wrapper, features)
    _same_apart_from_padding(plain, bucketed, wrapper)
    assert bucketed["input_ids"].shape[-1] == 32
    if mlm:
        masked = plain["labels"] != IGNORE_INDEX
        assert masked.any() and not torch.equal(plain["labels"], plain["input_ids"])
    else:
        real = plain["attention_mask"].bool()
        assert torch.equal(plain["labels"][real], plain["input_ids"][real])
    # what a model learns from the batch: the same loss
    config = transformers.BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config).eval()
    keys = ("input_ids", "attention_mask", "labels")
    with torch.no_grad():
        a = model(**{k: plain[k] for k in keys}).loss
        b = model(**{k: bucketed[k] for k in keys}).loss
    assert torch.allclose(a, b, atol=1e-5), (a, b)


def test_seq2seq_pads_inputs_and_labels_to_their_own_buckets_and_keeps_the_shift() -> None:
    tok = _tokenizer()
    config = transformers.T5Config(vocab_size=len(tok), d_model=16, d_ff=32, d_kv=8,
                                   num_layers=1, num_heads=2, pad_token_id=0,
                                   decoder_start_token_id=0, eos_token_id=5)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    collator = transformers.DataCollatorForSeq2Seq(tok, model=model, label_pad_token_id=-100)
    wrapper = Bucketed(collator, BUCKETS)
    features = _features(tok, lengths=(20, 25, 18, 22),
                         labels=lambda item, k: tok(_text(3 + 2 * k, k))["input_ids"])
    for f in features:
        f.pop("special_tokens_mask")
    plain, bucketed = collator(features), wrapper(features)
    assert "decoder_input_ids" in plain
    _same_apart_from_padding(plain, bucketed, wrapper)
    assert bucketed["input_ids"].shape[-1] == 32 and bucketed["labels"].shape[-1] == 16
    with torch.no_grad():
        a, b = model(**plain).loss, model(**bucketed).loss
    assert torch.allclose(a, b, atol=1e-5), (a, b)


def test_token_classification_pads_its_labels_with_its_label_pad_id() -> None:
    tok = _tokenizer()
    collator = transformers.DataCollatorForTokenClassification(tok, label_pad_token_id=-7)
    wrapper = Bucketed(collator, BUCKETS)
    features = _features(tok, labels=lambda item, k: [k % 3] * len(item["input_ids"]))
    plain, bucketed = collator(features), wrapper(features)
    assert wrapper.label_pad_id == -7
    _same_apart_from_padding(plain, bucketed, wrapper)


def test_left_padding_pads_at_the_start() -> None:
    tok = _tokenizer(side="left")
    collator = transformers.DataCollatorWithPadding(tok)
    wrapper = Bucketed(collator, BUCKETS)
    features = _features(tok)
    plain, bucketed = collator(features), wrapper(features)
    assert wrapper.side == "left" and plain["attention_mask"][0, 0] == 0
    _same_apart_from_padding(plain, bucketed, wrapper)


def test_multiple_choice_pads_the_last_dimension_of_its_three_dimensional_batch() -> None:
    tok = _tokenizer()
    collator = transformers.DataCollatorForMultipleChoice(tok)
    wrapper = Bucketed(collator, BUCKETS)
    features = []
    for k in range(3):
        choices = [tok(_text(4 + k + c, c)) for c in range(2)]
        features.append({**{key: [c[key] for c in choices] for key in choices[0]},
                         "labels": k % 2})
    plain, bucketed = collator(features), wrapper(features)
    assert plain["input_ids"].dim() == 3
    _same_apart_from_padding(plain, bucketed, wrapper)


def test_flattening_pads_its_one_row_and_restarts_positions_in_the_padding() -> None:
    collator = getattr(transformers, "DataCollatorWithFlattening", None)
    if collator is None:
        pytest.skip("this transformers has no DataCollatorWithFlattening")
    tok = _tokenizer()
    flat = collator()
    wrapper = Bucketed(flat, BUCKETS)
    features = [{"input_ids": tok(_text(n, n))["input_ids"]} for n in (4, 6, 3)]
    plain, bucketed = flat(features), wrapper(features)
    _same_apart_from_padding(plain, bucketed, wrapper)
    n = plain["input_ids"].shape[-1]
    assert bucketed["input_ids"].shape == (1, 32)
    assert bucketed["position_ids"][0, n:].tolist() == list(range(32 - n))


def test_a_tuple_batch_keeps_its_type_and_says_what_it_cannot_guess() -> None:
    from torch.nn.utils.rnn import pad_sequence

    def pairs(batch):
        return pad_sequence([t for t, _ in batch], batch_first=True), \
            torch.tensor([y for _, y in batch])

    def tokens(batch):
        ids = pad_sequence([t for t, _ in batch], batch_first=True)
        return ids, ids.clone()

    items = [(torch.arange(1, n + 1), n % 2) for n in (3, 7, 5)]
    x, y = Bucketed(pairs, BUCKETS)(items)
    assert x.shape == (3, 16) and torch.equal(x[:, :7], pairs(items)[0]) and y.shape == (3,)
    with pytest.raises(ValueError, match="pad_values"):
        Bucketed(tokens, BUCKETS)(items)
    _, labels = Bucketed(tokens, BUCKETS, pad_values={1: -100})(items)
    assert labels[0, 7:].eq(-100).all()
