"""Where a varying shape is made: the DataLoader whose batches take the sizes a family of graphs
varies over, and what to change there.

The collect layer records every loader the program iterated (``meta.json`` info ``loaders``,
:mod:`lazyscope.backends.loaders`): its collate function, the stack that made it, and the sizes
each varying dimension of its batches took. A family of graphs whose varying dimension took
sizes that one of those dimensions took too (at least :data:`MATCH` of them, two at least) has
its shape made by that loader's collate function, not at the line that moves the batch to the
device or calls ``trainer.train()``:

* a collate function of the user's (``collate_fn=pad_batch``): its ``def`` line;
* a library's collator object (Hugging Face ``DataCollatorWithPadding`` given to a ``Trainer``,
  made by the Trainer's own loader): the user's line that builds it (found in the source by the
  caller, :class:`~lazyscope.analyze.findings.SourceLookup`), else the ``data_collator=`` line,
  else the line that made the loader;
* torch's ``default_collate`` or another library function: the line that made the loader.

The fix is the one for that maker: padding the collate function's output to a few lengths,
``pad_to_multiple_of=N`` (N from the sizes seen) or ``padding="max_length"`` for a Hugging Face
collator, with the length-grouped sampler as the installed transformers spells it. Pure
functions: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lazyscope.model import Frame

#: share of a family's varying sizes a loader's dimension must have taken to be its maker
MATCH = 0.6
#: Hugging Face collators that pad to the batch's longest and take ``pad_to_multiple_of``
HF_PADDING_COLLATORS = frozenset({
    "DataCollatorWithPadding", "DataCollatorForTokenClassification", "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask",
    "DataCollatorForMultipleChoice", "DataCollatorWithFlattening", "DataCollatorForPermutationLanguageModeling"})
#: the most shapes pad_to_multiple_of should leave for the sizes seen
MAX_SHAPES = 8


@dataclass
class ShapeMaker:
    """The loader that made a family's varying sizes."""

    collate: dict[str, Any]
    made_at: list[Frame]
    key: str  # the batch tensor ("input_ids", "[0]")
    dim: int
    sizes: list[int]  # the sizes that dimension took
    matched: int  # how many of the family's sizes it took
    batches: int = 0
    #: the user's line to change, once the caller resolved it (a library collator's
    #: construction); None: :meth:`frame` decides from what was recorded
    resolved: Frame | None = field(default=None)

    @property
    def name(self) -> str:
        return str(self.collate.get("name") or "the collate function")

    @property
    def package(self) -> str:
        return str(self.collate.get("package") or "")

    @property
    def version(self) -> str:
        return str(self.collate.get("version") or "")

    @property
    def users_function(self) -> bool:
        """A collate function (or collator class) of the user's own code."""
        return bool(self.collate.get("file")) and not self.collate.get("library", True)

    @property
    def hf_padding(self) -> bool:
        return self.package == "transformers" and self.name.split(".")[-1] in \
            HF_PADDING_COLLATORS

    @property
    def by_trainer(self) -> bool:
        """The loader was made inside transformers (a ``Trainer``'s own): its sampler is set in
        ``TrainingArguments``."""
        return any(f.library and "transformers" in f.file.replace("\\", "/").split("/")
                   for f in self.made_at)

    @property
    def made_by_user(self) -> Frame | None:
        """The user's line that made the loader (the innermost user frame)."""
        return next((f for f in self.made_at if not f.library), None)

    def frame(self) -> Frame | None:
        """The line to change."""
        if self.resolved is not None:
            return self.resolved
        if self.users_function:
            line = self.collate.get("class_line") or self.collate.get("line")
            return Frame(str(self.collate["file"]), int(line or 0), self.name)
        return self.made_by_user


def _frames(raw: Any) -> list[Frame]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, (list, tuple)) and len(item) >= 2:
            file, line = str(item[0]), int(item[1]) if str(item[1]).isdigit() else 0
            fn = str(item[2]) if len(item) > 2 else ""
            library = bool(item[3]) if len(item) > 3 else _looks_library(file)
            out.append(Frame(file, line, fn, library))
    return out


def _looks_library(file: str) -> bool:
    return "site-packages" in file or "dist-packages" in file or file.startswith("<")


def shape_maker(sizes: list[int], loaders: Any) -> ShapeMaker | None:
    """The loader whose batches took the family's varying ``sizes`` (see the module
    docstring), the best match; None when none took enough of them."""
    want = {s for s in sizes if isinstance(s, int)}
    if len(want) < 2 or not isinstance(loaders, list):
        return None
    best: ShapeMaker | None = None
    for rec in loaders:
        if not isinstance(rec, dict):
            continue
        varying = rec.get("varying")
        for key, dims in (varying.items() if isinstance(varying, dict) else []):
            for dim, took in (dims.items() if isinstance(dims, dict) else []):
                got = {s for s in took if isinstance(s, int)} if isinstance(took, list) else set()
                hit = len(want & got)
                if hit < 2 or hit < MATCH * len(want):
                    continue
                if best is None or hit > best.matched or (
                        hit == best.matched and key == "input_ids"):
                    collate = rec.get("collate") if isinstance(rec.get("collate"), dict) else {}
                    best = ShapeMaker(dict(collate or {}), _frames(rec.get("made_at")), str(key),
                                      int(dim) if str(dim).isdigit() else 0, sorted(got), hit,
                                      int(rec.get("batches") or 0))
    return best or _several_tensors(want, loaders)


#: the tensors a maker is named by first, when several vary
_NAMED_FIRST = {"input_ids": 0, "labels": 1}


def _several_tensors(want: set[int], loaders: list[Any]) -> ShapeMaker | None:
    """A loader whose batches vary in several tensors at once (a seq2seq collator pads the
    inputs to the longest source and the labels to the longest target): a family whose graphs
    take both tensors varies over the union of their sizes, which no one of them holds."""
    best: ShapeMaker | None = None
    for rec in loaders:
        varying = rec.get("varying") if isinstance(rec, dict) else None
        if not isinstance(varying, dict):
            continue
        found: list[tuple[int, str, int, set[int]]] = []
        for key, dims in varying.items():
            for dim, took in (dims.items() if isinstance(dims, dict) else []):
                got = {s for s in took if isinstance(s, int)} if isinstance(took, list) else set()
                if want & got:
                    found.append((len(want & got), str(key),
                                  int(dim) if str(dim).isdigit() else 0, got))
        found.sort(key=lambda k: (-k[0], _NAMED_FIRST.get(k[1], len(_NAMED_FIRST)), k[1]))
        union: set[int] = set()
        keys: list[str] = []
        for _, key, _, got in found:  # a tensor named once its sizes add to the others'
            if not (want & got) <= union:
                union |= got
                keys.append(key)
        hit = len(want & union)
        if len(keys) < 2 or hit < 2 or hit < MATCH * len(want) or (
                best is not None and hit <= best.matched):
            continue
        collate = rec.get("collate") if isinstance(rec.get("collate"), dict) else {}
        best = ShapeMaker(dict(collate or {}), _frames(rec.get("made_at")), " and ".join(keys),
                          found[0][2], sorted(union), hit, int(rec.get("batches") or 0))
    return best


def multiple_for(sizes: list[int]) -> int:
    """The ``pad_to_multiple_of`` that leaves at most :data:`MAX_SHAPES` shapes for the sizes
    seen (a power of two from 8)."""
    n = 8
    while n < 4096 and len({math.ceil(s / n) for s in sizes if s > 0}) > MAX_SHAPES:
        n *= 2
    return n


def padded_to_multiple(sizes: list[int]) -> int:
    """The multiple of 8 or more every size is already padded to (``pad_to_multiple_of``), or
    0."""
    g = 0
    for s in sizes:
        g = math.gcd(g, s)
    return g if g >= 8 else 0


def padded_shapes(sizes: list[int], multiple: int) -> list[int]:
    return sorted({math.ceil(s / multiple) * multiple for s in sizes if s > 0})


def group_by_length(version: str) -> str:
    """How the installed transformers asks for a length-grouped sampler."""
    major = version.split(".")[0]
    if major.isdigit() and int(major) >= 5:
        return 'TrainingArguments(train_sampling_strategy="group_by_length")'
    return "TrainingArguments(group_by_length=True)"


#: what a loader's labels say the task is
SEQUENCE_LABELS = "one label a sequence"
TOKEN_LABELS = "one label a token"


def training_loader(loaders: Any) -> dict[str, Any] | None:
    """The loader that feeds the training step: of the loaders a run recorded, the one after
    whose batches backward passes ran (``trained``), else the one that yielded most batches;
    None when none was recorded. An evaluation loader (no backward pass) is never the one
    advice plans for while a training loader was seen."""
    recs = [r for r in loaders if isinstance(r, dict)] if isinstance(loaders, list) else []
    if not recs:
        return None
    return max(recs, key=lambda r: (int(r.get("trained") or 0), int(r.get("batches") or 0)))


def loader_rows(rec: dict[str, Any] | None) -> int | None:
    """The rows of a loader's full batches: the largest first dimension its batches' tensors
    took (a last partial batch is smaller), None when it does not say."""
    if rec is None:
        return None
    rows = [int(shape[0]) for shape in (rec.get("shapes") or {}).values()
            if isinstance(shape, list) and len(shape) >= 2 and isinstance(shape[0], int)]
    for dims in (rec.get("varying") or {}).values():
        took = dims.get("0") if isinstance(dims, dict) else None
        rows += [int(n) for n in took or [] if isinstance(n, int)]
    return max(rows) if rows else None


def data_task(loaders: Any) -> tuple[str, dict[str, Any] | None]:
    """``(task, collator)`` from the loaders a run recorded (:func:`training_loader`):
    :data:`SEQUENCE_LABELS` when its labels are one a row (``labels`` of shape ``(B,)`` beside
    ``input_ids`` ``(B, L)``; a ``(tokens, label)`` batch), :data:`TOKEN_LABELS` when they are as
    long as the ids, "" when it does not say; and its collate function's description (None when
    not recorded), with ``trainer`` (the loader is a Hugging Face Trainer's own), ``rows`` (its
    full batches' rows) and ``loader_at`` (``[file, line]`` of the user's line that made it)."""
    rec = training_loader(loaders)
    if rec is None:
        return "", None
    raw = rec.get("shapes")
    shapes: dict[str, Any] = raw if isinstance(raw, dict) else {}
    ids = shapes.get("input_ids") or shapes.get("[0]")
    labels = shapes.get("labels") or shapes.get("label") or shapes.get("[1]")
    task = ""
    if isinstance(ids, list) and isinstance(labels, list) and len(ids) == 2:
        if len(labels) == 1 and labels[0] == ids[0]:
            task = SEQUENCE_LABELS
        elif labels == ids:
            task = TOKEN_LABELS
    got = rec.get("collate")
    if not isinstance(got, dict) or not got.get("name"):
        return task, None
    made = _frames(rec.get("made_at"))
    user = next((f for f in made if not f.library), None)
    maker = ShapeMaker(dict(got), made, "", 0, [], 0)
    return task, {**got, "trainer": maker.by_trainer, "rows": loader_rows(rec),
                  "loader_at": [user.file, user.line] if user is not None else None}


def more_than_padding(collate: dict[str, Any] | None) -> str:
    """What a library collator does beside padding, in a few words ("" for one that only
    pads, or one of the user's: its job is not known). Advice never replaces such a collator
    (packing rows would drop its masking): it changes its padding."""
    if not collate or collate.get("package") != "transformers":
        return ""
    short = str(collate.get("name", "")).split(".")[-1]
    return COLLATOR_JOBS.get(short, "" if short == "DataCollatorWithPadding" else
                             "what it does to each batch beside padding")


#: what Hugging Face collators do beside padding
COLLATOR_JOBS = {
    "DataCollatorForLanguageModeling": "its masking (or its labels made from the ids, -100 on "
                                       "padding)",
    "DataCollatorForWholeWordMask": "its whole-word masking",
    "DataCollatorForPermutationLanguageModeling": "its permutation masks and targets",
    "DataCollatorForSeq2Seq": "its labels padded with -100 and shifted into "
                              "decoder_input_ids",
    "DataCollatorForTokenClassification": "its labels padded with its label_pad_token_id",
    "DataCollatorForMultipleChoice": "its choices laid out per example",
    "DataCollatorWithFlattening": "its documents flattened into one row with position_ids",
}
