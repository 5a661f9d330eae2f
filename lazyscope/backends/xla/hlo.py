"""Input shapes, op counts and a digest of every graph XLA compiles, from XLA's own HLO dump.

Why this source (torch_xla 2.9, measured in ``benchmarks/overhead.py``):

* ``PT_XLA_DEBUG_LEVEL=1`` names a compilation's cause, graph hash, input *count* and frames,
  but not the inputs' shapes, which is what explains most recompilations.
* ``XLA_FLAGS=--xla_dump_to=DIR`` makes XLA write each module it compiles, *at compile time
  only*: nothing is written at a step that reuses a cached graph, so a steady step costs
  nothing. The first line of ``module_NNNN.<name>.before_optimizations.txt`` is::

      HloModule SyncTensorsGraph.69, buffer_donor={ (0, {}) }, entry_computation_layout=
      {(f32[32]{0}, f32[4,17,32]{2,1,0}, f32[])->(f32[], f32[32]{0})}

  : the dtype and shape of every graph input, in parameter order (the order torch_xla counts
  "Number of Graph Inputs" in), and the buffers donated to outputs.
* The dump has no torch_xla graph hash. torch_xla compiles one module per graph, synchronously,
  right after writing the PT_XLA_DEBUG compilation block, so the n-th compilation block and the
  n-th module belong together; the pairing is checked on the input count and skipped (no
  shapes rather than wrong shapes) when it does not match (``pair_modules``).
* torch_xla's IR dump (``XLA_SAVE_TENSORS_FILE``) has the shapes *and* the hash, but it writes
  the whole IR at every barrier: +30% per step on a 12 ms training step. That cost is why it is
  not used.

XLA's CPU backend also dumps LLVM IR and object files for every kernel (~800 files per compiled
training step of the tiny decoder): on disk that added ~30% to compile time, so lazyscope's own
dump directory is in ``/dev/shm`` when it has room (1.02x, ``benchmarks/hlo_dump_cost.py``).
The collector lists the dump directory only at steps that compiled, keeps each module's
``before_optimizations`` text as ``graphs/<graph hash>.hlo.txt`` in the run (the first
``KEEP_GRAPHS``), and deletes the module's other files when lazyscope chose the directory.

Pure text and file processing: no torch_xla import.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyscope.model import Compile, GraphInput, GraphMemory, Update
from lazyscope.model.ownership import is_library_file, make_frame

SUFFIX = ".before_optimizations.txt"
#: the same module as a proto (``--xla_dump_hlo_as_proto``): its Python stacks
PROTO_SUFFIX = ".before_optimizations.hlo.pb"
#: keep the HLO text of this many graphs per run (a run that recompiles every step would
#: otherwise keep one file per step)
KEEP_GRAPHS = 64
_MODULE_RE = re.compile(r"^module_(?P<num>\d+)\.(?P<name>.+)$")
_LAYOUT = "entry_computation_layout={"
_COMMENT_RE = re.compile(r"/\*.*?\*/")
_ARRAY_RE = re.compile(r"^(?P<dtype>[a-z]+[0-9]*)\[(?P<dims>[^\]]*)\]")
_OP_RE = re.compile(r"^\s*(?:ROOT\s+)?%\S+ = .*?(?<=[\s}\])])(?P<op>[a-z][a-z0-9-]*)\(", re.M)
_DONOR_RE = re.compile(r"buffer_donor=\{(?P<d>[^=]*?)\}(?:,|$)")
#: an instruction's source location (XLA_IR_DEBUG / XLA_HLO_DEBUG metadata)
_META_RE = re.compile(r",?\s*metadata=\{(?P<m>[^{}]*)\}")
_SOURCE_RE = re.compile(r'source_file="(?P<file>[^"]*)" source_line=(?P<line>\d+)')
_PARAM_RE = re.compile(r"^\s*%\S+ = \S+ parameter\((?P<index>\d+)\)")
_NAME_RE = re.compile(r"%[\w.\-]+")
_SCALAR_CONST_RE = re.compile(r"= (?P<dtype>[a-z]+[0-9]*)\[\] constant\((?P<value>[^)]*)\)")
#: an operand's type before its name (``f32[8,32]{1,0} %p0``), as torch_xla's lowering writes it
_OPERAND_TYPE_RE = re.compile(r"([(,]\s*)[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?\s+(?=%)")
#: a constant's value in an instruction (``constant(2.5)``, ``constant({1, 2})``)
_CONST_VALUE_RE = re.compile(r"constant\((?:\{[^}]*\}|[^)]*)\)|epsilon=[-+0-9.e]+")
#: scalars torch_xla bakes into a graph as constants (torch_xla's IsSpecialScalar)
SPECIAL_SCALARS = ("0", "1", "-0", "0.0", "1.0")
#: user lines whose instructions are digested per graph
MAX_LINES = 512
_ALIAS_RE = re.compile(r"input_output_alias=\{(?P<a>.*?)\}(?:, [a-z_]+=|$)")
_ARRAY_ANY_RE = re.compile(r"(?P<dtype>[a-z]+[0-9]*[a-z0-9]*)\[(?P<dims>[^\]]*)\]")
_INSTR_RE = re.compile(r"^\s*(?P<root>ROOT\s+)?%(?P<name>[\w.\-]+) = (?P<rest>.*)$")
#: a donated parameter: ``(1, {})`` in buffer_donor, ``{0}: (1, {}, may-alias)`` in an alias
_DONOR_PARAM_RE = re.compile(r"\((?P<p>\d+),\s*\{")
#: bytes per element of XLA's primitive types
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
               "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
               "f8e4m3fn": 1, "f8e5m2": 1, "s4": 1, "u4": 1}
#: operands followed back from an output to find the input it updates
MAX_UPDATE_DEPTH = 8


@dataclass
class HloModuleInfo:
    """One compiled module: its inputs (dtype, shape) in parameter order, op counts, digest."""
    number: int
    name: str
    #: top-level parameters (a parameter that is a tuple counts once: torch_xla wraps
    #: thousands of inputs into one tuple)
    num_params: int = 0
    inputs: list[tuple[str, list[int]]] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)
    #: sha1 of the module text without its name: equal graphs <=> equal digest
    digest: str = ""
    donors: str = ""
    path: str = ""
    #: parameter index -> (file, line) where it was created or moved to the device
    origins: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: parameter index -> the first user line (file, line) whose instruction takes it
    used: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: (file, line, digest of that user line's instructions), in order of appearance
    lines: list[tuple[str, int, str]] = field(default_factory=list)
    #: special scalar constants baked into the graph, "dtype:value"
    constants: list[str] = field(default_factory=list)
    #: inputs the graph computes new values of (see :func:`parse_updates`)
    updates: list[Update] = field(default_factory=list)
    #: exact bytes of the inputs, the outputs and the donated inputs, from the entry layout
    input_bytes: int = 0
    output_bytes: int = 0
    donated_bytes: int = 0

    def fill(self, payload: Compile) -> None:
        """Put what the module says into a compile event's payload."""
        inputs = []
        for i, (dtype, shape) in enumerate(self.inputs):
            flat = len(self.inputs) == self.num_params
            where = self.origins.get(i) if flat else None
            origin = make_frame(where[0], where[1]) if where else None
            taken = self.used.get(i) if flat else None
            used_at = make_frame(taken[0], taken[1]) if taken else None
            inputs.append(GraphInput(dtype, list(shape),
                                     origin=origin if origin and not origin.library else None,
                                     used_at=used_at if used_at and not used_at.library
                                     else None))
        payload.inputs = inputs
        payload.ops = self.ops
        payload.digest = self.digest
        payload.donors = self.donors or None
        payload.lines = [[f, n, d] for f, n, d in self.lines] or None
        payload.constants = self.constants or None
        payload.updates = self.updates or None
        if payload.memory is not None:
            payload.memory = exact_memory(payload.memory, self)


def _split_top(text: str) -> list[str]:
    """Split ``a, (b, c), d[1,2]{1,0}`` at top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _array(text: str) -> tuple[str, list[int]] | None:
    m = _ARRAY_RE.match(text.strip())
    if m is None:
        return None
    dims = []
    for part in m["dims"].split(","):
        part = part.strip().lstrip("<=")
        if part.isdigit():
            dims.append(int(part))
    return m["dtype"], dims


def _entry_layout(header: str) -> tuple[str, str] | None:
    """The entry computation layout of a module header, split at its parameters' closing
    parenthesis: ``(the parameters, what follows: "->" and the result)``; None without one."""
    start = header.find(_LAYOUT)
    if start < 0:
        return None
    text = _COMMENT_RE.sub("", header[start + len(_LAYOUT):])
    if not text.startswith("("):
        return None
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return text[1:i], text[i + 1:]
    return None


def parse_entry_layout(header: str) -> tuple[int, list[tuple[str, list[int]]]] | None:
    """``(top-level parameter count, flattened (dtype, dims) inputs)`` from a module header."""
    layout = _entry_layout(header)
    if layout is None:
        return None
    params = _split_top(layout[0])
    inputs: list[tuple[str, list[int]]] = []
    for param in params:
        if param.startswith("("):  # a wrapped (tuple) parameter: its elements are the inputs
            inputs.extend(a for a in map(_array, _split_top(param[1:-1])) if a is not None)
        else:
            arr = _array(param)
            if arr is not None:
                inputs.append(arr)
    return len(params), inputs


def _entry_lines(body: str) -> list[str]:
    """The instruction lines of the ENTRY computation."""
    start = body.find("\nENTRY ")
    if start < 0:
        return []
    out = []
    for line in body[start + 1:].splitlines()[1:]:
        if line.startswith("}"):
            break
        out.append(line)
    return out


def _source_locations(body: str, stacks: dict[str, list[tuple[str, int, str]]] | None = None
                      ) -> tuple[dict[int, tuple[str, int]], list[tuple[str, int, str]],
                                 list[str], dict[int, tuple[str, int]]]:
    """Parameter origins, per-user-line instruction digests, special scalar constants of the
    ENTRY computation and, per parameter, the first user line whose instruction takes it (source
    locations exist when IR debug was on while it was traced). ``stacks``
    (:func:`parse_stacks`): each instruction's whole Python stack, so that an instruction a
    library made (``F.interpolate``'s, ``layer_norm``'s) counts at the user's line that called
    the library."""

    origins: dict[int, tuple[str, int]] = {}
    used: dict[int, tuple[str, int]] = {}
    params: dict[str, int] = {}
    digests: dict[tuple[str, int], Any] = {}
    #: the same instructions with the constants' values left out: what a size change alters
    #: and a constant's value does not
    shapes: dict[tuple[str, int], Any] = {}
    constants: Counter[str] = Counter()
    for line in _entry_lines(body):
        meta = _META_RE.search(line)
        source = _SOURCE_RE.search(meta["m"]) if meta else None
        bare = _META_RE.sub("", line)
        const = _SCALAR_CONST_RE.search(bare)
        if const and const["value"] in SPECIAL_SCALARS:
            constants[f"{const['dtype']}:{float(const['value']):g}"] += 1
        param = _PARAM_RE.match(bare)
        if param is not None:
            named = _INSTR_RE.match(bare)
            if named is not None:
                params[named["name"]] = int(param["index"])
        if source is None:
            continue
        where = (source["file"], int(source["line"]))
        if param is not None:
            origins[int(param["index"])] = where
            continue
        if is_library_file(where[0]):
            named = _INSTR_RE.match(bare)
            caller = _user_frame(stacks.get(named["name"], [])) if stacks and named else None
            if caller is None:
                continue
            where = caller
        h = digests.get(where)
        if h is None:
            if len(digests) >= MAX_LINES:
                continue
            h = digests[where] = hashlib.sha1()
            shapes[where] = hashlib.sha1()
        rest = bare.split("=", 1)[-1]
        for operand in _NAME_RE.findall(rest):
            index = params.get(operand[1:])
            if index is not None:
                used.setdefault(index, where)
        # an operand written with its type (torch_xla's own lowering) or without (XLA's dump):
        # the same instruction
        text = _NAME_RE.sub("%", _OPERAND_TYPE_RE.sub(r"\1", rest))
        h.update(text.encode("utf-8"))
        shapes[where].update(_CONST_VALUE_RE.sub("constant()", text).encode("utf-8"))
    # a line's digest: its instructions (10 hex digits), then ":" and the same without the
    # constants' values (6): two graphs whose line differs in the first part only differ there
    # by a constant; in the second too, by a size (an arange's length, an interpolate's output)
    lines = [(f, n, f"{h.hexdigest()[:10]}:{shapes[(f, n)].hexdigest()[:6]}")
             for (f, n), h in digests.items()]
    return origins, lines, sorted(constants.elements()), used


# --------------------------------------------------------------------------- stacks

#: the fields of XLA's HloModuleProto read for its instructions' Python stacks (xla/hlo.proto,
#: xla/xla_data.proto): module.computations (3), .stack_frame_index (17); computation
#: .instructions (2); instruction .name (1), .metadata (7); metadata .stack_frame_id (15);
#: stack_frame_index .file_names (1), .function_names (2), .file_locations (3: file_name_id 1,
#: function_name_id 2, line 3), .stack_frames (4: file_location_id 1, parent_frame_id 2)
_PB_COMPUTATIONS, _PB_FRAME_INDEX = 3, 17
#: innermost-first frames kept per instruction
MAX_STACK = 32


def _varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level ``(field number, value)`` pairs of a protobuf message: an int for a varint,
    bytes for a length-delimited field (fixed-width fields are skipped)."""
    out: list[tuple[int, int | bytes]] = []
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            out.append((number, data[i:i + size]))
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
    return out


def parse_stacks(proto: bytes) -> dict[str, list[tuple[str, int, str]]]:
    """``{instruction name: [(file, line, function), ...] innermost first}`` from an HLO module
    proto (XLA's ``--xla_dump_hlo_as_proto`` file, or torch_xla's
    ``_get_xla_tensors_hlo_proto``): the whole Python stack torch_xla recorded for each IR node
    while its IR debug was on, where the text's metadata has only the innermost frame (a
    library's line, for an op made inside ``F.interpolate``). {} when the proto has no stack
    index or cannot be read."""
    try:
        top = _fields(proto)
        if not any(f == _PB_COMPUTATIONS for f, _ in top):
            # a dumped file is an HloProto: the module is its field 1
            inner = next((v for f, v in top if f == 1 and isinstance(v, bytes)), b"")
            top = _fields(inner) if inner else []
        index = next((v for f, v in top if f == _PB_FRAME_INDEX and isinstance(v, bytes)), b"")
        if not index:
            return {}
        files: list[str] = []
        functions: list[str] = []
        locations: list[tuple[int, int, int]] = []
        frames: list[tuple[int, int]] = []
        for f, v in _fields(index):
            if not isinstance(v, bytes):
                continue
            if f == 1:
                files.append(v.decode("utf-8", "replace"))
            elif f == 2:
                functions.append(v.decode("utf-8", "replace"))
            elif f == 3:
                d = {k: x for k, x in _fields(v) if isinstance(x, int)}
                locations.append((d.get(1, 0), d.get(2, 0), d.get(3, 0)))
            elif f == 4:
                d = {k: x for k, x in _fields(v) if isinstance(x, int)}
                frames.append((d.get(1, 0), d.get(2, 0)))

        def stack(frame_id: int) -> list[tuple[str, int, str]]:
            out = []
            while 0 < frame_id <= len(frames) and len(out) < MAX_STACK:
                loc_id, frame_id = frames[frame_id - 1]
                if 0 < loc_id <= len(locations):
                    fi, fn, line = locations[loc_id - 1]
                    out.append((files[fi - 1] if 0 < fi <= len(files) else "", line,
                                functions[fn - 1] if 0 < fn <= len(functions) else ""))
            return out

        found: dict[str, list[tuple[str, int, str]]] = {}
        for f, comp in top:
            if f != _PB_COMPUTATIONS or not isinstance(comp, bytes):
                continue
            for g, instr in _fields(comp):
                if g != 2 or not isinstance(instr, bytes):
                    continue
                name, meta = "", b""
                for h, v in _fields(instr):
                    if h == 1 and isinstance(v, bytes):
                        name = v.decode("utf-8", "replace")
                    elif h == 7 and isinstance(v, bytes):
                        meta = v
                frame_id = next((v for h, v in _fields(meta) if h == 15 and isinstance(v, int)),
                                0) if meta else 0
                if name and frame_id:
                    found[name] = stack(frame_id)
        return found
    except (ValueError, IndexError):
        return {}


def _user_frame(stack: list[tuple[str, int, str]]) -> tuple[str, int] | None:
    """The innermost frame of ``stack`` that is the user's (not a library's, not lazyscope's)."""
    for file, line, _ in stack:
        if file and not is_library_file(file):
            return file, line
    return None


def exact_memory(memory: GraphMemory, module: HloModuleInfo) -> GraphMemory:
    """XLA's figures with the inputs, outputs and aliased inputs in exact bytes from the
    module's entry layout, each where it agrees with XLA's own figure to the 6 decimals of
    GiB torch_xla prints (XLA may count what the layout does not show, such as a tuple's
    index table: then its figure stays)."""
    def agree(xla: int, exact: int) -> int:
        return exact if f"{xla / (1 << 30):.6f}" == f"{exact / (1 << 30):.6f}" else xla

    return GraphMemory(inputs=agree(memory.inputs, module.input_bytes),
                       outputs=agree(memory.outputs, module.output_bytes),
                       aliased=agree(memory.aliased, module.donated_bytes),
                       intermediates=memory.intermediates, program=memory.program)


def _layout_bytes(text: str) -> int:
    """Bytes of the arrays of a layout (``(f32[2]{0}, (s64[], f32[]))`` or one array)."""
    total = 0
    for part in _ARRAY_ANY_RE.finditer(_COMMENT_RE.sub("", text)):
        dims = [int(d.strip().lstrip("<=")) for d in part["dims"].split(",")
                if d.strip().lstrip("<=").isdigit()]
        total += nbytes(part["dtype"], dims)
    return total


def layout_bytes(header: str, donated: set[int]) -> tuple[int, int, int]:
    """``(input bytes, output bytes, donated input bytes)`` of a module's entry layout."""
    layout = _entry_layout(header)
    if layout is None or not layout[1].startswith("->"):
        return 0, 0, 0
    params = _split_top(layout[0])
    rest = layout[1][2:]
    # the result: up to the layout's closing brace
    depth, stop = 0, len(rest)
    for i, ch in enumerate(rest):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            stop = i
            break
    inputs = [_layout_bytes(p) for p in params]
    return (sum(inputs), _layout_bytes(rest[:stop]),
            sum(b for i, b in enumerate(inputs) if i in donated))


def nbytes(dtype: str, shape: list[int]) -> int:
    """Bytes of a dense array (0 for a dtype XLA does not size this way: tokens, tuples)."""
    n = DTYPE_BYTES.get(dtype, 0)
    for d in shape:
        n *= d
    return n


def parse_updates(body: str, donors: str) -> list[Update]:
    """The inputs the ENTRY computation computes new values of: each non-scalar output is
    followed back through its operands (up to :data:`MAX_UPDATE_DEPTH`) to the nearest
    parameter of its dtype and shape, each parameter paired with at most one output (the
    nearest). ``w - lr * g`` reaches ``w`` in one step, a gradient computed from ``w`` in
    several: the update is the nearer. ``donated``: the parameter's buffer is donated
    (``buffer_donor`` / ``input_output_alias``): torch_xla updates it in place. ``at``: the
    source line (HLO metadata, when IR debug was on) of the output's instruction."""
    instrs: dict[str, tuple[str, list[int], list[str], int | None, tuple[str, int] | None]] = {}
    root = ""
    for line in _entry_lines(body):
        m = _INSTR_RE.match(line)
        if m is None:
            continue
        meta = _META_RE.search(line)
        source = _SOURCE_RE.search(meta["m"]) if meta else None
        rest = _META_RE.sub("", m["rest"])
        arr = _array(rest) if not rest.startswith("(") else None
        param = _PARAM_RE.match(_META_RE.sub("", line))
        operands = [o[1:] for o in _NAME_RE.findall(rest)]
        instrs[m["name"]] = (arr[0] if arr else "", arr[1] if arr else [], operands,
                             int(param["index"]) if param else None,
                             (source["file"], int(source["line"])) if source else None)
        if m["root"]:
            root = m["name"]
    if not root:
        return []
    outputs = instrs[root][2] if instrs[root][0] == "" else [root]
    found: list[tuple[int, int, str]] = []  # (depth, parameter, output instruction)
    for out in dict.fromkeys(outputs):
        dtype, shape, *_ = instrs.get(out, ("", [], [], None, None))
        if not shape or not nbytes(dtype, shape):
            continue
        frontier, seen = [out], {out}
        for depth in range(1, MAX_UPDATE_DEPTH + 1):
            nxt = []
            hit = None
            for name in frontier:
                for op in instrs[name][2]:
                    if op in seen or op not in instrs:
                        continue
                    seen.add(op)
                    o_dtype, o_shape, _, o_param, _ = instrs[op]
                    if o_param is not None and (o_dtype, o_shape) == (dtype, shape):
                        hit = o_param
                        break
                    nxt.append(op)
                if hit is not None:
                    break
            if hit is not None:
                found.append((depth, hit, out))
                break
            frontier = nxt
            if not frontier:
                break
    donated = {int(d["p"]) for d in _DONOR_PARAM_RE.finditer(donors)}
    used_params: set[int] = set()
    used_outputs: set[str] = set()
    updates = []
    for _, param, out in sorted(found):
        if param in used_params or out in used_outputs:
            continue
        used_params.add(param)
        used_outputs.add(out)
        dtype, shape, _, _, where = instrs[out]
        frame = make_frame(where[0], where[1]) if where else None
        updates.append(Update(param, dtype, list(shape), nbytes(dtype, shape), param in donated,
                              frame if frame is not None and not frame.library else None))
    return sorted(updates, key=lambda u: u.input)


def parse_module(text: str, number: int = 0, name: str = "",
                 stacks: dict[str, list[tuple[str, int, str]]] | None = None
                 ) -> HloModuleInfo | None:
    """Parse one ``before_optimizations`` HLO text; None when it has no entry layout.
    ``stacks``: its instructions' Python stacks (:func:`parse_stacks`), when known."""
    header, _, body = text.partition("\n")
    layout = parse_entry_layout(header)
    if layout is None:
        return None
    num_params, inputs = layout
    ops = Counter(m["op"] for m in _OP_RE.finditer(body))
    module_name = header.split()[1].rstrip(",") if len(header.split()) > 1 else ""
    # the digest ignores source locations: the same graph traced with IR debug on and off is
    # the same graph
    canonical = _META_RE.sub("", body)
    canonical = canonical.replace(module_name, "M") if module_name else canonical
    donors = _DONOR_RE.search(header)
    alias = _ALIAS_RE.search(header)
    origins, lines, constants, used = _source_locations(body, stacks)
    donor_text = (donors["d"].strip() if donors else "") or (alias["a"].strip() if alias else "")
    in_bytes, out_bytes, donated_bytes = layout_bytes(
        header, {int(d["p"]) for d in _DONOR_PARAM_RE.finditer(donor_text)})
    return HloModuleInfo(
        number=number, name=name or module_name, num_params=num_params, inputs=inputs,
        ops=dict(sorted(ops.items())),
        digest=hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:16],
        donors=donor_text, origins=origins, used=used, lines=lines, constants=constants,
        updates=parse_updates(body, donor_text),
        input_bytes=in_bytes, output_bytes=out_bytes, donated_bytes=donated_bytes,
    )


def pair_modules(num_inputs: list[int | None], modules: list[HloModuleInfo]
                 ) -> list[HloModuleInfo | None]:
    """Pair compilation blocks (their input counts, in order) with dumped modules (in order).

    The n-th compilation is the n-th module; a module whose parameter count does not match is
    one torch_xla compiled without a compilation block (eager mode, a user computation) and is
    skipped. A compilation with no matching module gets None.
    """
    out: list[HloModuleInfo | None] = []
    queue = list(modules)
    for n in num_inputs:
        match = None
        while queue:
            module = queue.pop(0)
            if n is None or module.num_params == n:
                match = module
                break
        out.append(match)
    return out


class HloDumpReader:
    """Reads the modules XLA dumps into ``directory`` (``--xla_dump_to``) as they appear."""
    def __init__(self, directory: str, *, owned: bool, keep_dir: Path | None = None,
                 keep: int = KEEP_GRAPHS):
        self.directory = directory
        self.owned = owned
        self.keep_dir = keep_dir
        self.keep = keep
        self.kept = 0
        self._seen: set[int] = set()

    def _modules(self) -> dict[int, list[str]]:
        by_number: dict[int, list[str]] = {}
        try:
            names = os.listdir(self.directory)
        except OSError:
            return by_number
        for name in names:
            m = _MODULE_RE.match(name)
            if m is not None:
                by_number.setdefault(int(m["num"]), []).append(name)
        return by_number

    def skip_existing(self) -> None:
        """Ignore modules an earlier trace in this process left."""
        self._seen.update(self._modules())

    def take_new(self) -> list[HloModuleInfo]:
        """The modules compiled since the last call, in compile order; their files are removed
        when lazyscope owns the directory."""
        out = []
        for number, names in sorted(self._modules().items()):
            if number in self._seen:
                if self.owned:  # files XLA wrote after the module was read
                    for name in names:
                        _remove(os.path.join(self.directory, name))
                continue
            main = next((n for n in names if n.endswith(SUFFIX)), None)
            if main is None:
                continue  # XLA is still writing it (or dumps nothing we read)
            self._seen.add(number)
            path = os.path.join(self.directory, main)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            proto = next((n for n in names if n.endswith(PROTO_SUFFIX)), None)
            stacks: dict[str, list[tuple[str, int, str]]] = {}
            if proto is not None:
                try:
                    with open(os.path.join(self.directory, proto), "rb") as fb:
                        stacks = parse_stacks(fb.read())
                except OSError:
                    stacks = {}
            info = parse_module(text, number, main[len(f"module_{number:04d}."):-len(SUFFIX)],
                                stacks)
            if info is not None:
                info.path = path
                out.append(info)
            if self.owned:
                for name in names:
                    if name != main:
                        _remove(os.path.join(self.directory, name))
        return out

    def keep_text(self, info: HloModuleInfo, graph_hash: str) -> str | None:
        """Keep a module's HLO text in the run as ``graphs/<hash>.hlo.txt``; the relative path,
        or None past ``keep`` graphs."""
        if self.keep_dir is None or not info.path or self.kept >= self.keep:
            return None
        name = f"{graph_hash or f'module_{info.number:04d}'}.hlo.txt"
        target = self.keep_dir / name
        try:
            self.keep_dir.mkdir(parents=True, exist_ok=True)
            if self.owned:
                shutil.move(info.path, target)
            else:
                shutil.copyfile(info.path, target)
        except OSError:
            # a full disk: no half-written graph file in the run (a cross-device move can
            # leave an empty one behind)
            with contextlib.suppress(OSError):
                if target.exists() and os.path.exists(info.path) and \
                        target.stat().st_size < os.path.getsize(info.path):
                    target.unlink()
            return None
        self.kept += 1
        return f"{self.keep_dir.name}/{name}"

    def discard(self, info: HloModuleInfo) -> None:
        """Remove a module's text unless it was kept (moved) or the directory is the user's."""
        if self.owned and info.path:
            _remove(info.path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
