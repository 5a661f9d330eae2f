"""What the Hugging Face test programs share, built in code so that nothing is downloaded: a
word-level tokenizer (``[PAD]`` 0, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``, ``<s>``, ``</s>``,
then ``w0`` .. ``w89``), texts of random lengths, and the pasted-advice hook every program
takes (``--data-collator CODE``: a Python expression evaluated with :mod:`lazyscope.data`'s
names, ``tokenizer``, ``model`` and the program's own ``data_collator`` in scope, as a user
pastes ``lazyscope advise --emit``'s line)."""

import random
from typing import Any

from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

WORDS = [f"w{i}" for i in range(90)]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>"]


def tokenizer(*, padding_side: str = "right", bert: bool = True) -> PreTrainedTokenizerFast:
    """A word tokenizer; ``bert``: ``[CLS] ... [SEP]`` around each text (else ``... </s>``)."""
    vocab = {w: i for i, w in enumerate([*SPECIAL, *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if bert:
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    else:
        backend.post_processor = processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", vocab["</s>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", bos_token="<s>", eos_token="</s>",
        padding_side=padding_side, model_max_length=256)


def texts(n: int, lo: int, hi: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def pasted(code: str | None, default: Any, **scope: Any) -> Any:
    """The collator the program trains with: ``default``, or the pasted expression ``code``
    (see the module docstring)."""
    if not code:
        return default
    import lazyscope.data

    return eval(code, {**vars(lazyscope.data), "data_collator": default, **scope})
