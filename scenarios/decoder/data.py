"""The decoder's data: host batches of variable-length documents and their device forms."""

from __future__ import annotations

from typing import Any, NamedTuple

PAD_TARGET = -100  # cross-entropy's ignore_index


# ------------------------------------------------------------------------------ the data


class Batch(NamedTuple):
    """Host tensors for one step: token ids, targets, document ids (-1 = padding), positions
    (restarting at 0 in each document); ``packed``: rows may hold several documents."""

    inputs: Any
    targets: Any
    doc_ids: Any
    positions: Any
    lengths: list[int]
    seq_len: int
    packed: bool = False

    @property
    def rows(self) -> int:
        return int(self.inputs.shape[0])


def make_batch(rows: list[list[int]], seq_len: int, vocab: int, gen: Any,
               packed: bool | None = None) -> Batch:
    """Rows of documents (lengths) -> padded tensors; each document gets fresh random tokens.
    ``packed`` defaults to whether some row holds more than one document. Laid out by
    :func:`lazyscope.data.layout_rows`, the collators' own layout."""
    import torch

    from lazyscope.data import layout_rows

    if packed is None:
        packed = any(len(docs) > 1 for docs in rows)
    docs = [[torch.randint(1, vocab, (n,), generator=gen) for n in row] for row in rows]
    out = layout_rows(docs, seq_len, packed=packed)
    return to_batch(out, [n for row in rows for n in row], packed)


def to_batch(collated: dict[str, Any], lengths: list[int], packed: bool) -> Batch:
    """A :mod:`lazyscope.data` collator's output (``document_ids`` included) as a
    :class:`Batch`: next-token targets are the labels shifted by one (-100 where the next token
    is another document's or padding)."""
    import torch

    labels = collated["labels"]
    targets = torch.full_like(labels, PAD_TARGET)
    targets[:, :-1] = labels[:, 1:]
    doc_ids = collated["document_ids"]
    targets[doc_ids < 0] = PAD_TARGET
    return Batch(collated["input_ids"], targets, doc_ids, collated["position_ids"], lengths,
                 int(labels.shape[1]), packed)


class Inputs(NamedTuple):
    """One step's device tensors in the attention variant's layout."""

    inputs: Any
    positions: Any
    targets: Any  # flat (N,) targets for the loss
    mask: Any  # whatever the variant's attend() takes (None, a bool mask, a BlockMask ...)
    seq_len: int  # the length the step computes over (padded length, or the concat row)
    computed: int  # tokens computed


class Staged(NamedTuple):
    """One step's host tensors in an attention variant's layout, before they go to the device
    (made in a ``DataLoader`` worker with ``--workers``; pinned there on CUDA), with what the
    step loop annotates (``lengths``, ``seq_len``, ``rows``) and what the device side needs."""

    tensors: dict[str, Any]
    lengths: list[int]
    seq_len: int
    rows: int
    packed: bool
    computed: int  # tokens computed


def concatenated_staged(batch: Batch) -> Staged:
    """The concatenated layouts' host tensors: every real token in one row (``tokens``,
    ``positions``, ``targets``) and the int32 ``offsets`` (``cu_seqlens``)."""
    tokens, positions, targets, offsets = concatenated(batch)
    total = int(tokens.shape[0])
    return Staged({"tokens": tokens, "positions": positions, "targets": targets,
                   "offsets": offsets}, batch.lengths, batch.seq_len, batch.rows, batch.packed,
                  total)


def document_causal_mask(doc_ids: Any) -> Any:
    """(B, 1, L, L) bool, :func:`lazyscope.data.document_causal_mask`: query i may attend to key
    j iff both are in the same document and j <= i; padding attends only to earlier padding."""
    from lazyscope.data import document_causal_mask as mask

    return mask(doc_ids)


def concatenated(batch: Batch) -> tuple[Any, Any, Any, Any]:
    """The real tokens of a host batch in row-major order (make_batch's document order):
    ``(tokens, positions, targets, offsets)``, offsets the int32 ``cu_seqlens`` (D + 1,)."""
    import torch

    real = batch.doc_ids >= 0
    lengths = torch.tensor(batch.lengths, dtype=torch.int32)
    offsets = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    return batch.inputs[real], batch.positions[real], batch.targets[real], offsets


