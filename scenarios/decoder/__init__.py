"""GPT-style decoder on variable-length sequences: what each padding policy costs on XLA.

The model is the one of "FlashAttention2 and xFormers on PyTorch" (seeds/000): pre-norm blocks
with a fused qkv projection, GELU MLP, learned positions and an LM head. Sequence lengths are
uniform in 1..max-1 (the article's ``randint(1, MAX_SEQ_LEN)``) or drawn from ``--lengths FILE``;
everything is seeded. Padding policies (``lazyscope.core.padding``, shared with the bucket advisor):

* ``max``       pad every batch to the max length: one static shape, about half of it padding
* ``longest``   pad to the longest sequence of the batch: a new shape, so a new XLA graph, for
                almost every batch
* ``pow2``      pad to the next power of two from 16 (capped at the max length)
* ``bucket:B1,B2,...``  pad to the smallest listed bucket that fits (the max length is added)
* ``bucket:auto``       buckets from lazyscope's exact advisor on this run's own length stream
* ``packed``    sequences packed best-fit into ``batch`` rows of the max length, attention masked
                by document id inside each row, positions restarting per document: one static
                shape and little padding (the XLA-friendly form of flash-attn varlen / xFormers
                BlockDiagonalMask)

    python -m lazyscope_scenarios.decoder --padding longest --steps 10
    lazyscope trace --steps 40 decoder --padding bucket:auto --batching grouped
    lazyscope compare --policies max,longest,pow2,bucket:auto,packed --steps 40 decoder

Attention (``--attention``): every variant computes the same function, a causal decoder, in
training and in evaluation alike: a token attends to itself and to the earlier tokens of its own
document (packed rows and concatenated layouts included), and no real token ever attends to
padding. So their times compare. Each variant is one :class:`Variant` in ``VARIANTS`` holding
its layout, how a host batch becomes its device inputs and mask, its attention call, and why it
is refused on a backend or skipped on this machine:

* ``sdpa``        SDPA with an explicit boolean document-and-causal mask (padded rows)
* ``sdpa-causal`` SDPA ``is_causal=True`` (one document per row: padding sits at the end, so
                  causality hides it); packed rows keep the document-and-causal mask
* ``math``        nanoGPT's explicit attention with the same mask (the reference)
* ``nested``      NestedTensor, jagged layout, SDPA ``is_causal=True`` (one ragged sequence per
                  document)
* ``varlen``      all documents concatenated into one row, ``cu_seqlens``: PyTorch's own
                  ``torch.nn.attention.varlen.varlen_attn`` when the installed torch has it,
                  else ``flash_attn.flash_attn_varlen_func`` (CUDA)
* ``flex``        FlexAttention with a document-and-causal ``BlockMask`` over the padded batch
* ``xformers``    concatenated documents, xFormers ``BlockDiagonalCausalMask`` (CUDA)

``--sdpa-backend math|flash|efficient|cudnn`` runs SDPA inside ``torch.nn.attention.sdpa_kernel``
(the nanoGPT article's kernel choice); ``--vocab`` overrides the preset's vocabulary (GPT-2's
50257 against the padded 50304). A variant the backend cannot lower (XLA lowers only the padded
ones: sdpa, sdpa-causal, math) is refused (exit 2, one line). A variant that is not installed or
cannot run here (needs CUDA; torch 2.9's only jagged SDPA kernel off CUDA rejects
``is_causal=True``, so ``nested`` needs a GPU) is *skipped*: the run ends ``ok`` with zero steps,
``meta.info["skipped"]`` and the note ``skipped: <reason>``; nothing is faked.
"""

from __future__ import annotations

from lazyscope_scenarios.decoder.data import Batch, make_batch
from lazyscope_scenarios.decoder.model import PRESETS, VARIANTS, Preset, Variant, build_model
from lazyscope_scenarios.decoder.run import build_parser, main, parse_args

__all__ = ["PRESETS", "VARIANTS", "Batch", "Preset", "Variant", "build_model", "build_parser",
           "main", "make_batch", "parse_args"]
