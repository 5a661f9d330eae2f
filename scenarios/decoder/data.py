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
    ``packed`` defaults to whether some row holds more than one document."""
    import torch

    n = len(rows)
    inputs = torch.zeros((n, seq_len), dtype=torch.long)
    targets = torch.full((n, seq_len), PAD_TARGET, dtype=torch.long)
    doc_ids = torch.full((n, seq_len), -1, dtype=torch.long)
    positions = torch.zeros((n, seq_len), dtype=torch.long)
    lengths = []
    for r, docs in enumerate(rows):
        at = 0
        for d, length in enumerate(docs):
            seq = torch.randint(1, vocab, (length + 1,), generator=gen)
            inputs[r, at:at + length] = seq[:-1]
            targets[r, at:at + length] = seq[1:]
            doc_ids[r, at:at + length] = d
            positions[r, at:at + length] = torch.arange(length)
            at += length
            lengths.append(length)
    if packed is None:
        packed = any(len(docs) > 1 for docs in rows)
    return Batch(inputs, targets, doc_ids, positions, lengths, seq_len, packed)


class Inputs(NamedTuple):
    """One step's device tensors in the attention variant's layout."""

    inputs: Any
    positions: Any
    targets: Any  # flat (N,) targets for the loss
    mask: Any  # whatever the variant's attend() takes (None, a bool mask, a BlockMask ...)
    seq_len: int  # the length the step computes over (padded length, or the concat row)
    computed: int  # tokens computed


def document_causal_mask(doc_ids: Any) -> Any:
    """(B, 1, L, L) bool: query i may attend to key j iff both are in the same document and
    j <= i. Padding (id -1) attends only to earlier padding, so no row is empty and no real
    token sees padding."""
    import torch

    n = doc_ids.shape[1]
    same = doc_ids[:, :, None] == doc_ids[:, None, :]
    tril = torch.ones((n, n), dtype=torch.bool, device=doc_ids.device).tril()
    return (same & tril[None])[:, None]


def concatenated(batch: Batch) -> tuple[Any, Any, Any, Any]:
    """The real tokens of a host batch in row-major order (make_batch's document order):
    ``(tokens, positions, targets, offsets)``, offsets the int32 ``cu_seqlens`` (D + 1,)."""
    import torch

    real = batch.doc_ids >= 0
    lengths = torch.tensor(batch.lengths, dtype=torch.int32)
    offsets = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    return batch.inputs[real], batch.positions[real], batch.targets[real], offsets


