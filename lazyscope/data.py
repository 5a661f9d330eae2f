"""Collate functions and batch samplers that give XLA static shapes: the code ``lazyscope
advise --emit`` hands over, and what the built-in scenarios' padding policies run.

XLA compiles one graph per input shape, so a batch padded to its own longest sequence
(``DataCollatorWithPadding``'s default, ``pad_sequence``) recompiles for almost every batch, and
``DataCollatorWithFlattening``'s single ``[1, total_tokens]`` row does too. These keep a few
fixed shapes and little padding:

* :class:`PadToBuckets` pads each batch to the smallest of a few fixed lengths that fits (one
  length: pad to max); ``input_ids``, ``attention_mask`` (1 real, 0 padding) and ``labels``
  (-100 on padding), ``(rows, bucket)``.
* :class:`Bucketed` wraps the program's own collator (a Hugging Face
  ``DataCollatorForLanguageModeling``, ``DataCollatorForSeq2Seq``, a ``collate_fn`` of the
  user's) and pads what it returns to the same few lengths: its masking, labels, label shifting,
  extra fields and batch type are its own; only the padded length changes. For a collator
  whose job is more than padding, this, never a replacement.
* :class:`PackRows` packs a batch's sequences into ``rows`` rows of ``row_len`` tokens
  (best-fit decreasing, :func:`lazyscope.core.padding.pack_rows`): ``input_ids``, ``labels``
  (-100 on each document's first token, as ``DataCollatorWithFlattening`` separates them, and on
  padding), ``position_ids`` restarting at 0 in each document (and in the padding at a row's
  end), optionally ``document_ids`` (-1 on padding) and the document-causal ``attention_mask``
  for SDPA. One shape, ``(rows, row_len)``. The model must keep the documents of a row apart:
  :func:`document_causal_mask` (SDPA: ``True`` = attend), :func:`multihead_attention_mask`
  (``nn.MultiheadAttention``: ``True`` = masked, the opposite), :func:`flex_block_mask`
  (FlexAttention), or a Hugging Face model that finds the documents in ``position_ids``
  (transformers' ``masking_utils``).
* :class:`PackedBatchSampler` chooses which dataset items go into each packed step (it needs
  the items' lengths up front); :class:`PackRows` then places them exactly as it planned.
* :class:`LengthGroupedBatchSampler` forms batches of similar lengths (sorted pools, batch order
  shuffled), so that bucketed batches carry little padding. :func:`lengths_of` reads a
  dataset's lengths for the samplers.

Every collator takes a list of features, each a dict with ``input_ids`` (a list or a 1-D
tensor; ``labels`` optional: a sequence as long as the ids, or one number for the whole sequence,
a classification example; ``label`` is read too), a ``(tokens, label)`` tuple, or the ids
themselves, and returns a dict of ``torch.long`` tensors (``(input_ids, labels)`` for tuples,
as ``for x, y in loader`` unpacks): it is a ``collate_fn`` for a plain
``torch.utils.data.DataLoader`` and a ``data_collator`` for a Hugging Face ``Trainer``. One
label a sequence stays one a row; packing, which puts several documents in a row, needs a label
a token and refuses one a sequence. :func:`collate_for` / :func:`sampler_for` build them for a
:class:`lazyscope.core.padding.Policy` (the advisor's). This module imports torch; ``import
lazyscope`` does not import it.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch

from lazyscope.backends.base import active
from lazyscope.core.padding import (
    GROUP_POOL,
    LOOKAHEAD_STEPS,
    Packer,
    Policy,
    bucket_of,
    group_batches,
    pack_rows,
)
from lazyscope.model.info import DECLARED_BUCKETS

IGNORE_INDEX = -100  # cross-entropy's (and transformers') ignored label
#: a batch longer than PadToBuckets' largest bucket is padded up to a multiple of this
OVERFLOW_MULTIPLE = 8

__all__ = ["Bucketed", "IGNORE_INDEX", "LengthGroupedBatchSampler", "PackRows",
           "PackedBatchSampler",
           "PadToBuckets", "collate_for", "document_causal_mask", "flex_block_mask",
           "layout_rows", "lengths_of", "multihead_attention_mask", "sampler_for"]


def _declare(buckets: Sequence[int]) -> None:
    """Tell the active trace, if any, the lengths this program pads to (``meta.json`` info
    ``declared_buckets``): a family of graphs that only moves between them is bucketing, a
    bounded set, however short the run (a 16-step run meets 7 of 8 buckets, most of them once)."""
    trace_ = active()
    if trace_ is not None:
        trace_.recorder.add_to_info(DECLARED_BUCKETS, buckets)


def lengths_of(dataset: Any, key: str = "input_ids") -> list[int]:
    """Each item's length, in dataset order (what the samplers need up front): ``len`` of the
    item's ``key`` entry when it is a dict; of its first element when it is a tuple (a
    ``(tokens, label)`` pair); else of the item itself (a sequence, a 1-D tensor). A Hugging
    Face ``datasets.Dataset`` is read column-wise (``dataset[key]``), without decoding rows."""
    column = getattr(dataset, "column_names", None)
    if column is not None and key in column:
        return [len(x) for x in dataset[key]]
    return [len(_ids_of(item, key)) for item in dataset]


def _ids_of(item: Any, key: str = "input_ids") -> Any:
    """The token sequence of one dataset item (see :func:`lengths_of`)."""
    if isinstance(item, Mapping):
        return item[key]
    if isinstance(item, tuple) and item:
        return item[0]
    return item


#: a feature's labels: one per token (a sequence as long as the ids), one per sequence (a
#: number: classification), or none
TOKEN, SEQUENCE = "token", "sequence"


def _feature(feature: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(input ids, labels or None) of one feature, as long tensors: the ids 1-D; the labels 1-D
    as long as the ids (one a token) or 0-D (one label for the sequence, given as a number: a
    classification example, ``{"input_ids": ..., "labels": 1}`` or ``(tokens, 1)``)."""
    labels = None
    if isinstance(feature, Mapping):
        if "input_ids" not in feature:
            raise ValueError("a feature dict needs an 'input_ids' entry")
        ids = feature["input_ids"]
        labels = feature.get("labels", feature.get("label"))
    elif isinstance(feature, tuple):
        if not feature:
            raise ValueError("an empty tuple is not a feature")
        ids = feature[0]
        labels = feature[1] if len(feature) > 1 else None
    else:
        ids = feature
    ids_t = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
    if labels is None:
        return ids_t, None
    labels_t = torch.as_tensor(labels, dtype=torch.long)
    if labels_t.dim() == 0:
        return ids_t, labels_t  # one label for the sequence
    labels_t = labels_t.reshape(-1)
    if labels_t.shape != ids_t.shape:
        raise ValueError(f"labels of length {labels_t.numel()} for input_ids of length "
                         f"{ids_t.numel()} (one label a token needs as many labels as ids; "
                         "one label for the sequence is a number)")
    return ids_t, labels_t


class PadToBuckets:
    """Pad each batch to the smallest bucket that holds its longest sequence.

    ``buckets``: the fixed lengths (sorted; ``[max_len]`` pads to max; None pads to the batch's
    longest, as ``DataCollatorWithPadding`` does: a new shape per new length). ``rows``: pad
    the batch dimension to this many rows too (a short last batch keeps the shape; extra rows are
    all padding). A batch with a sequence longer than the last bucket is padded to that length
    rounded up to a multiple of :data:`OVERFLOW_MULTIPLE`, with a warning (a shape of its own:
    pasted advice keeps running on data longer than the run showed); ``truncate`` cuts it to
    the last bucket instead, ``strict`` raises ValueError. Returns ``input_ids``, ``attention_mask``, ``labels``; with
    ``return_document_ids``, also ``document_ids`` (0 on real tokens, -1 on padding) and
    ``position_ids`` (0.. on each row)."""

    def __init__(self, buckets: Sequence[int] | None = None, *, rows: int | None = None,
                 pad_id: int = 0, label_pad_id: int = IGNORE_INDEX, truncate: bool = False,
                 return_document_ids: bool = False, strict: bool = False):
        if buckets is not None:
            buckets = sorted({int(b) for b in buckets})
            if not buckets or buckets[0] < 1:
                raise ValueError(f"buckets must be positive lengths, got {buckets}")
        if rows is not None and rows < 1:
            raise ValueError(f"rows must be at least 1, got {rows}")
        self.buckets = buckets
        if buckets is not None:
            _declare(buckets)
        self.rows = rows
        self.pad_id = pad_id
        self.label_pad_id = label_pad_id
        self.truncate = truncate
        self.strict = strict
        self._overflow: set[int] = set()
        self.return_document_ids = return_document_ids

    def __repr__(self) -> str:
        return f"PadToBuckets({self.buckets}, rows={self.rows})"

    def length_for(self, longest: int) -> int:
        """The padded length of a batch whose longest sequence is ``longest``: the smallest
        bucket that holds it; past the largest bucket, cut to it (``truncate``), refused
        (``strict``), else padded up to a multiple of :data:`OVERFLOW_MULTIPLE` (a shape of its
        own, so a graph of its own: said once per length, in a warning)."""
        if self.buckets is None:
            return longest
        top = self.buckets[-1]
        if longest <= top or self.truncate:
            return bucket_of(longest, self.buckets)
        if self.strict:
            raise ValueError(f"a sequence of length {longest} is longer than the largest bucket "
                             f"{top} (pass truncate=True to cut it)")
        length = -(-longest // OVERFLOW_MULTIPLE) * OVERFLOW_MULTIPLE
        if length not in self._overflow:
            self._overflow.add(length)
            # a length this collator pads to from now on: declared as its buckets are (the
            # batch may run in a loader thread: add_to_info is what the trace records)
            _declare([length])
            warnings.warn(f"PadToBuckets: a sequence of length {longest} is longer than the "
                          f"largest bucket {top}: its batch is padded to {length}, a shape "
                          "(and an XLA graph) of its own; add a bucket, or truncate=True to cut "
                          "it", stacklevel=3)
        return length

    def __call__(self, features: Sequence[Any]) -> Any:
        """A dict (``input_ids``, ``attention_mask``, ``labels`` ...) for dict features or bare
        sequences; for ``(tokens, label)`` tuples, the tuple ``(input_ids, labels)`` a
        ``for x, y in loader`` loop unpacks, as the ``pad_sequence`` collate it replaces gave.
        Labels of one a sequence (classification) stay one a row, ``(rows,)``, -100 on padding
        rows; labels of one a token are padded with the ids."""
        items = [_feature(f) for f in features]
        if not items:
            raise ValueError("an empty batch")
        n = self.rows or len(items)
        if len(items) > n:
            raise ValueError(f"a batch of {len(items)} sequences does not fit {n} rows")
        length = self.length_for(max(1, *(ids.numel() for ids, _ in items)))
        kinds = {None if lab is None else (SEQUENCE if lab.dim() == 0 else TOKEN)
                 for _, lab in items}
        if len(kinds - {None}) > 1:
            raise ValueError("a batch mixes labels of one a token and one a sequence")
        per_sequence = SEQUENCE in kinds
        rows = [(ids[:length], None if lab is None or per_sequence else lab[:length])
                for ids, lab in items]
        out = _lay_out([[item] for item in rows], length, n, self.pad_id, self.label_pad_id,
                       packed=False)
        if per_sequence:
            out["labels"] = torch.full((n,), self.label_pad_id, dtype=torch.long)
            for r, (_, lab) in enumerate(items):
                out["labels"][r] = self.label_pad_id if lab is None else lab
        if features and isinstance(features[0], tuple):
            return out["input_ids"], out["labels"]
        keys = ["input_ids", "attention_mask", "labels"]
        if self.return_document_ids:
            keys += ["document_ids", "position_ids"]
        return {k: out[k] for k in keys}


#: what a tensor a collator returns is padded with, by the end of its key (``labels``,
#: ``decoder_input_ids``): "pad" is the tokenizer's pad id, "label" the label pad id (-100),
#: "type" the tokenizer's pad token type id, "positions" 0, 1, ... (the padding a document of
#: its own, as packed rows keep it); a number is itself
PAD_BY_KEY = (("input_ids", "pad"), ("labels", "label"), ("label", "label"),
              ("attention_mask", 0), ("token_type_ids", "type"), ("special_tokens_mask", 1),
              ("position_ids", "positions"), ("document_ids", -1))


class Bucketed:
    """Pad what ``collator`` returns to the smallest of a few fixed lengths: its padding
    changed, everything else it does kept. The collator runs as it is (a Hugging Face
    ``DataCollatorForLanguageModeling`` still masks, ``DataCollatorForSeq2Seq`` still pads its
    labels with -100 and shifts them into ``decoder_input_ids``, every extra field stays), then
    each sequence tensor of its batch is padded at the end (the start, for a tokenizer that pads
    on the left) from its own length to :class:`PadToBuckets`' length for it: the tensors of one
    length (the inputs; a seq2seq batch's labels, another) to one bucket. The batch keeps its
    type (a ``BatchEncoding`` stays one: ``batch.to(device)`` still works), its keys and its
    rows; apart from the padding it is the collator's batch.

    A sequence tensor is one of 2 or more dimensions whose key ends as one of
    :data:`PAD_BY_KEY` (padded with that value: the collator's tokenizer's pad id, its
    ``label_pad_token_id`` or -100, ...), or an integer tensor as long as one of those (padded
    with 0); ``pad_values={key: value}`` says otherwise, and for a tuple batch (``(tokens,
    labels)``, by position) says what a tensor after the first is padded with (the first is
    the ids; one not said raises ValueError: a wrong label would change what the model
    learns). A tensor whose last two dimensions are both the length (a pairwise mask) is
    padded in both. Floating tensors of other keys (pixels, features) are left as they are.
    ``buckets``, ``truncate``, ``strict``: as :class:`PadToBuckets` (a batch longer than the
    largest bucket is padded to a multiple of 8, with a warning; ``truncate`` cuts it, and so
    cuts tokens of the batch, ``strict`` refuses it)."""

    def __init__(self, collator: Any, buckets: Sequence[int], *, pad_id: int | None = None,
                 label_pad_id: int | None = None,
                 pad_values: Mapping[Any, int] | None = None, side: str | None = None,
                 truncate: bool = False, strict: bool = False):
        if not callable(collator):
            raise TypeError(f"Bucketed wraps a collate function, got {type(collator).__name__}")
        self.collator = collator
        self.lengths = PadToBuckets(buckets, truncate=truncate, strict=strict)
        tokenizer = getattr(collator, "tokenizer", None)
        found = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad_id if pad_id is not None else found if found is not None else 0)
        label = getattr(collator, "label_pad_token_id", None)
        self.label_pad_id = int(label_pad_id if label_pad_id is not None else
                                label if isinstance(label, int) else IGNORE_INDEX)
        self.type_pad_id = int(getattr(tokenizer, "pad_token_type_id", 0) or 0)
        self.side = side or str(getattr(tokenizer, "padding_side", "right") or "right")
        if self.side not in ("right", "left"):
            raise ValueError(f"side must be 'right' or 'left', got {self.side!r}")
        self.pad_values = {str(k): int(v) for k, v in (pad_values or {}).items()}

    def __repr__(self) -> str:
        return f"Bucketed({self.collator!r}, {self.lengths.buckets})"

    def __call__(self, features: Sequence[Any]) -> Any:
        batch = self.collator(features)
        if isinstance(batch, Mapping):
            items = list(batch.items())
        elif isinstance(batch, (tuple, list)):
            items = list(enumerate(batch))
        else:
            items = [(0, batch)]
        padded = self._pad(items, tuple_batch=not isinstance(batch, Mapping))
        if isinstance(batch, Mapping):
            if isinstance(batch, MutableMapping):
                for key, value in padded.items():
                    batch[key] = value
                return batch
            return type(batch)({**batch, **padded}) if padded else batch
        if not isinstance(batch, (tuple, list)):
            return padded.get(0, batch)
        values = [padded.get(i, v) for i, v in enumerate(batch)]
        if hasattr(batch, "_fields"):  # a namedtuple
            return type(batch)(*values)
        return type(batch)(values)

    def _value(self, key: Any, tuple_batch: bool) -> int | str | None:
        """What the tensor at ``key`` is padded with, None when it is not a known sequence."""
        name = str(key)
        if name in self.pad_values:
            return self.pad_values[name]
        if tuple_batch:
            return "pad" if key == 0 else None
        return next((v for end, v in PAD_BY_KEY if name.endswith(end)), None)

    def _pad(self, items: list[tuple[Any, Any]], *, tuple_batch: bool) -> dict[Any, Any]:
        tensors = [(k, v) for k, v in items if isinstance(v, torch.Tensor) and v.dim() >= 2]
        known = {k: self._value(k, tuple_batch) for k, _ in tensors}
        lengths = {int(v.shape[-1]) for k, v in tensors if known[k] is not None}
        out = {}
        for key, t in tensors:
            value = known[key]
            n = int(t.shape[-1])
            if value is None:
                if t.is_floating_point() or n not in lengths:
                    continue  # features, pixels: not a sequence of these lengths
                if tuple_batch:
                    raise ValueError(
                        f"Bucketed: position {key} of the batch is a sequence as long as the "
                        "ids: say what it is padded with, pad_values={" f"{key}: -100" "} for "
                        "labels (no loss on padding), or the collate function's own pad value")
                value = 0
            target = self.lengths.length_for(n)
            if target != n:
                out[key] = self._padded(t, target, value)
        return out

    def _padded(self, t: torch.Tensor, target: int, value: int | str) -> torch.Tensor:
        n = int(t.shape[-1])
        dims = [-1] + ([-2] if t.dim() >= 3 and int(t.shape[-2]) == n else [])
        for dim in dims:
            t = self._pad_dim(t, dim, target, value)
        return t

    def _pad_dim(self, t: torch.Tensor, dim: int, target: int, value: int | str) -> torch.Tensor:
        n = int(t.shape[dim])
        if target < n:  # truncate=True: cut to the largest bucket
            return t.narrow(dim, n - target, target) if self.side == "left" else \
                t.narrow(dim, 0, target)
        shape = list(t.shape)
        shape[dim] = target - n
        if value == "positions" and dim == -1:
            fill = torch.arange(target - n, device=t.device).to(t.dtype).expand(shape)
        else:
            named = {"pad": self.pad_id, "label": self.label_pad_id, "type": self.type_pad_id}
            number = named.get(value, 0) if isinstance(value, str) else value
            fill = torch.full(shape, number, dtype=t.dtype, device=t.device)
        parts = (fill, t) if self.side == "left" else (t, fill)
        return torch.cat(parts, dim=dim)


def layout_rows(rows: Sequence[Sequence[Any]], row_len: int, *, n_rows: int | None = None,
                pad_id: int = 0, label_pad_id: int = IGNORE_INDEX,
                packed: bool = True) -> dict[str, torch.Tensor]:
    """Documents laid out as given: ``rows[r]`` lists the features of row r, back to back from
    position 0, then padding up to ``row_len`` (``n_rows``: pad the batch with empty rows).
    Returns ``input_ids``, ``labels``, ``position_ids``, ``document_ids`` (-1 on padding) and
    ``attention_mask`` (1 on real tokens), ``(rows, row_len)``.

    ``packed`` (several documents a row, :class:`PackRows`): labels -100 on each document's
    first token, positions restart at each document and in the padding. Padded rows (one
    document each, :class:`PadToBuckets`): labels are the ids, positions count along the row.
    The collators call this; use it to lay out rows you chose yourself."""
    items = [[_feature(f) for f in row] for row in rows]
    return _lay_out(items, row_len, n_rows or len(items), pad_id, label_pad_id, packed=packed)


def _lay_out(rows: list[list[tuple[torch.Tensor, torch.Tensor | None]]], row_len: int,
             n_rows: int, pad_id: int, label_pad_id: int, *, packed: bool,
             max_position: int | None = None) -> dict[str, torch.Tensor]:
    if len(rows) > n_rows:
        raise ValueError(f"{len(rows)} rows do not fit a batch of {n_rows}")
    shape = (n_rows, row_len)
    input_ids = torch.full(shape, pad_id, dtype=torch.long)
    labels = torch.full(shape, label_pad_id, dtype=torch.long)
    document_ids = torch.full(shape, -1, dtype=torch.long)
    position_ids = (torch.zeros(shape, dtype=torch.long) if packed
                    else torch.arange(row_len).expand(n_rows, row_len).clone())
    for r, row in enumerate(rows):
        at = 0
        for d, (ids, lab) in enumerate(row):
            if lab is not None and lab.dim() == 0:
                raise ValueError("one label for a whole sequence (classification) cannot be "
                                 "laid out in rows of tokens: packing several documents in a "
                                 "row needs a label for every token")
            n = ids.numel()
            if at + n > row_len:
                raise ValueError(f"row {r}: documents of {[i.numel() for i, _ in row]} tokens "
                                 f"do not fit {row_len}")
            input_ids[r, at:at + n] = ids
            labels[r, at:at + n] = lab if lab is not None else ids
            document_ids[r, at:at + n] = d
            if packed:
                if n:
                    labels[r, at] = label_pad_id
                position_ids[r, at:at + n] = torch.arange(n)
            at += n
        if packed:
            tail = torch.arange(row_len - at)
            position_ids[r, at:] = tail % max_position if max_position else tail
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids,
            "document_ids": document_ids, "attention_mask": (document_ids >= 0).long()}


class PackRows:
    """Pack a batch's sequences into ``rows`` rows of ``row_len`` tokens, best fit decreasing
    (:func:`lazyscope.core.padding.pack_rows`; the items :class:`PackedBatchSampler` chose always fit,
    placed as it planned). Returns ``input_ids``, ``labels`` (-100 on each document's first token
    and on padding: no document predicts from another), ``position_ids`` (0, 1, ... in each
    document and in the padding at a row's end, so a model that reads documents from
    ``position_ids`` sees the padding as a document of its own); with ``return_document_ids``
    also ``document_ids`` (index of the document in its row, -1 on padding); with
    ``return_attention_mask`` the ``(rows, 1, row_len, row_len)`` boolean document-causal mask
    for SDPA (:func:`document_causal_mask`). ``max_position``: the model's number of positions
    when rows are longer than it (the padding's positions then wrap to 0 there). Sequences that
    do not fit raise ValueError."""

    def __init__(self, rows: int, row_len: int, *, pad_id: int = 0,
                 label_pad_id: int = IGNORE_INDEX, return_document_ids: bool = False,
                 return_attention_mask: bool = False, max_position: int | None = None):
        if rows < 1 or row_len < 1:
            raise ValueError(f"rows and row_len must be at least 1, got {rows}x{row_len}")
        self.max_position = max_position
        self.rows = rows
        self.row_len = row_len
        self.pad_id = pad_id
        self.label_pad_id = label_pad_id
        self.return_document_ids = return_document_ids
        self.return_attention_mask = return_attention_mask

    def __repr__(self) -> str:
        return f"PackRows(rows={self.rows}, row_len={self.row_len})"

    def __call__(self, features: Sequence[Any]) -> dict[str, torch.Tensor]:
        items = [_feature(f) for f in features]
        lengths = [ids.numel() for ids, _ in items]
        if any(n < 1 for n in lengths):
            raise ValueError("an empty sequence cannot be packed")
        placed, left = pack_rows(lengths, self.rows, self.row_len)
        if left:
            raise ValueError(
                f"{len(left)} of {len(items)} sequences do not fit {self.rows} rows of "
                f"{self.row_len} tokens: choose the batches with PackedBatchSampler(lengths, "
                f"rows={self.rows}, row_len={self.row_len})")
        out = _lay_out([[items[i] for i in row] for row in placed], self.row_len, self.rows,
                       self.pad_id, self.label_pad_id, packed=True,
                       max_position=self.max_position)
        keys = ["input_ids", "labels", "position_ids"]
        if self.return_document_ids:
            keys.append("document_ids")
        result = {k: out[k] for k in keys}
        if self.return_attention_mask:
            result["attention_mask"] = document_causal_mask(out["document_ids"])
        return result


def document_causal_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """``(B, 1, L, L)`` bool for SDPA's ``attn_mask`` (``True`` = may attend; for
    ``nn.MultiheadAttention``, whose ``True`` means the opposite, :func:`multihead_attention_mask`):
    query i may attend to key j iff both are in the same document and ``j <= i``. Padding (id -1) attends only to earlier padding, so no
    row is empty and no real token sees padding. Works on any device (build it there)."""
    n = document_ids.shape[1]
    same = document_ids[:, :, None] == document_ids[:, None, :]
    tril = torch.ones((n, n), dtype=torch.bool, device=document_ids.device).tril()
    return (same & tril[None])[:, None]


def multihead_attention_mask(document_ids: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B * num_heads, L, L)`` bool for ``torch.nn.MultiheadAttention``'s ``attn_mask``
    (``batch_first`` or not), the same rule as :func:`document_causal_mask` in that module's
    convention, the opposite of SDPA's: ``True`` is a position that may **not** be attended."""
    allowed = document_causal_mask(document_ids)[:, 0]
    return (~allowed).repeat_interleave(num_heads, dim=0)


def flex_block_mask(document_ids: torch.Tensor) -> Any:
    """A FlexAttention ``BlockMask`` with the same rule as :func:`document_causal_mask`, for
    ``torch.nn.attention.flex_attention.flex_attention(q, k, v, block_mask=...)``."""
    from torch.nn.attention.flex_attention import create_block_mask

    docs = document_ids

    def mask_mod(b: Any, h: Any, q: Any, kv: Any) -> Any:
        return (docs[b, q] == docs[b, kv]) & (kv <= q)

    rows, n = docs.shape
    return create_block_mask(mask_mod, rows, None, n, n, device=str(docs.device))


class _Epochs:
    """Shuffling shared by the samplers: a seeded order per epoch (``set_epoch``, as
    ``DistributedSampler``)."""

    def __init__(self, lengths: Sequence[int], shuffle: bool, seed: int):
        self.lengths = [int(n) for n in lengths]
        if any(n < 1 for n in self.lengths):
            raise ValueError("every item needs a length of at least 1")
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self) -> list[int]:
        order = list(range(len(self.lengths)))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order


class PackedBatchSampler(_Epochs):
    """Batches of dataset indices whose sequences pack into ``rows`` rows of ``row_len`` tokens
    (a ``batch_sampler`` for ``DataLoader``, with ``collate_fn=PackRows(rows, row_len)``).

    ``lengths``: each item's length, in dataset order. Items are taken in a (seeded, per epoch)
    shuffled order through :class:`lazyscope.core.padding.Packer` (a look-ahead of ``lookahead``
    steps' worth of tokens, best fit decreasing: the longest pending sequences go first, so
    none waits long); each batch lists its items in the order :class:`PackRows` places them.
    Every item appears exactly once per epoch; ``drop_last`` drops the last, least full batch.
    """

    def __init__(self, lengths: Sequence[int], rows: int, row_len: int, *, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False, lookahead: float = LOOKAHEAD_STEPS):
        super().__init__(lengths, shuffle, seed)
        too_long = [n for n in self.lengths if n > row_len]
        if too_long:
            raise ValueError(f"{len(too_long)} items are longer than a row of {row_len} tokens "
                             f"(the longest: {max(too_long)})")
        self.rows = rows
        self.row_len = row_len
        self.drop_last = drop_last
        self.lookahead = lookahead
        self._plans: dict[tuple[int, int], list[list[int]]] = {}

    def _plan(self) -> list[list[int]]:
        key = (self.seed, self.epoch)
        if key not in self._plans:
            order = self.order()
            packer = Packer((self.lengths[i] for i in order), self.rows, self.row_len,
                            self.lookahead)
            batches = []
            while True:
                try:
                    rows = packer.next_rows()
                except StopIteration:
                    break
                chosen = sorted((sid for row in rows for sid, _ in row),
                                key=lambda s: (-self.lengths[order[s]], s))
                batches.append([order[s] for s in chosen])
            if self.drop_last and batches:
                batches.pop()
            self._plans = {key: batches}
        return self._plans[key]

    def __iter__(self) -> Iterator[list[int]]:
        yield from self._plan()

    def __len__(self) -> int:
        return len(self._plan())

    def efficiency(self) -> float:
        """Real / computed tokens of this epoch's batches."""
        plan = self._plan()
        real = sum(self.lengths[i] for b in plan for i in b)
        return real / (len(plan) * self.rows * self.row_len) if plan else 1.0


class LengthGroupedBatchSampler(_Epochs):
    """Batches of ``batch_size`` items of similar lengths (a ``batch_sampler`` for
    ``DataLoader``): the (seeded, per epoch) shuffled items are cut into pools of ``pool``
    batches, each pool sorted by length and cut into batches, and the batches shuffled
    (:func:`lazyscope.core.padding.group_batches`; Hugging Face's ``group_by_length`` does the same
    with pools of 50). With :class:`PadToBuckets`, most batches fill their bucket. A trailing
    partial batch comes last unless ``drop_last``."""

    def __init__(self, lengths: Sequence[int], batch_size: int, *, shuffle: bool = True,
                 seed: int = 0, pool: int = GROUP_POOL, drop_last: bool = False):
        super().__init__(lengths, shuffle, seed)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.pool = pool
        self.drop_last = drop_last

    def _plan(self) -> list[list[int]]:
        order = self.order()
        rng = random.Random(self.seed * 7919 + self.epoch)
        batches = group_batches([self.lengths[i] for i in order], self.batch_size, rng,
                                self.pool)
        out = [[order[i] for i in b] for b in batches]
        if self.drop_last:
            out = [b for b in out if len(b) == self.batch_size]
        return out

    def __iter__(self) -> Iterator[list[int]]:
        yield from self._plan()

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)


def collate_for(policy: Policy, *, rows: int | None = None, **kwargs: Any) -> Any:
    """The collator that runs ``policy`` (:class:`PackRows` for packed rows, else
    :class:`PadToBuckets`); ``kwargs`` go to it (``pad_id``, ``return_document_ids`` ...)."""
    if policy.packed:
        return PackRows(int(policy.rows or rows or 1), int(policy.row_len or 1), **kwargs)
    if policy.kind == "longest":
        return PadToBuckets(None, rows=rows, **kwargs)
    return PadToBuckets(list(policy.boundaries), rows=rows, **kwargs)


def sampler_for(policy: Policy, lengths: Sequence[int], batch_size: int, *,
                shuffle: bool = True, seed: int = 0) -> Any:
    """The ``batch_sampler`` ``policy`` needs: :class:`PackedBatchSampler` for packed rows,
    :class:`LengthGroupedBatchSampler` for length-grouped batches, None for random batches
    (``DataLoader(batch_size=..., shuffle=True)``)."""
    if policy.packed:
        return PackedBatchSampler(lengths, int(policy.rows or batch_size),
                                  int(policy.row_len or max(lengths)), shuffle=shuffle,
                                  seed=seed)
    if policy.grouped:
        return LengthGroupedBatchSampler(lengths, batch_size, shuffle=shuffle, seed=seed)
    return None
