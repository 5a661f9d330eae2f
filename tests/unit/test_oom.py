"""The out-of-memory parser on real messages from public pytorch/xla, JAX and PyTorch issues
(tests/data/oom/SOURCES.md)."""

from __future__ import annotations

import pytest

from lazyscope.core.numbers import parse_size, parse_size_or_share
from lazyscope.core.oom import parse_out_of_memory, size_bytes
from lazyscope.core.units import nbytes
from tests.conftest import DATA

G, M, K = 1 << 30, 1 << 20, 1 << 10


def load(name: str) -> str:
    return (DATA / "oom" / name).read_text()


def test_compile_time_hbm_with_largest_allocations() -> None:
    oom = parse_out_of_memory(load("xla_compile_hbm_jax.txt"))
    assert oom is not None and (oom.kind, oom.space) == ("compile", "hbm")
    assert (oom.needed, oom.limit, oom.over) == (size_bytes("63.80G"), size_bytes("30.75G"),
                                                 size_bytes("33.05G"))
    (buf,) = oom.buffers
    assert (buf.size, buf.shape, buf.kind, buf.where) == (2 * G, "f32[32,4096,4096]", "HLO temp",
                                                          "attention_module.py:1059")
    assert oom.summary(nbytes) == (
        "XLA compile: the program needs 63.8 GiB of 30.8 GiB hbm (33.0 GiB over); largest "
        "buffers: 2.0 GiB f32[32,4096,4096] (HLO temp, attention_module.py:1059)")


def test_compile_time_short_and_other_spaces() -> None:
    oom = parse_out_of_memory(load("xla_compile_hbm_short.txt"))
    assert oom is not None and oom.over == size_bytes("6.47G") and oom.buffers == []
    smem = parse_out_of_memory(load("xla_compile_smem_torch_xla.txt"))
    assert smem is not None and (smem.space, smem.needed, smem.over) == ("smem", M,
                                                                          round(1.7 * K))
    vmem = parse_out_of_memory(load("xla_compile_vmem_torch_xla.txt"))
    assert vmem is not None and (vmem.kind, vmem.space, vmem.needed) == ("compile", "vmem", None)
    assert [b.size for b in vmem.buffers] == [64 * K, 64 * K]
    assert vmem.buffers[0].where.startswith("reduce-window.4")
    assert vmem.summary(nbytes).startswith("XLA compile: the program does not fit in vmem")


def test_run_time_allocation() -> None:
    oom = parse_out_of_memory(load("xla_runtime_alloc_torch_xla.txt"))
    assert oom is not None and (oom.kind, oom.space) == ("runtime", "hbm")
    assert (oom.needed, oom.free) == (196 * M, size_bytes("134.44M"))
    reserve = parse_out_of_memory(load("xla_runtime_reserve_torch_xla.txt"))
    assert reserve is not None and (reserve.needed, reserve.free, reserve.over) == (
        size_bytes("6.48G"), size_bytes("6.78G"), None)


def test_cuda_both_wordings() -> None:
    new = parse_out_of_memory(load("cuda_new.txt"))
    assert new is not None and new.kind == "cuda"
    assert (new.needed, new.limit, new.free) == (22 * M, size_bytes("23.65 GiB"),
                                                 size_bytes("11.06 MiB"))
    old = parse_out_of_memory(load("cuda_old.txt"))
    assert old is not None and (old.needed, old.limit, old.free) == (
        size_bytes("2.87 GiB"), size_bytes("14.76 GiB"), size_bytes("19.75 MiB"))


def test_not_out_of_memory() -> None:
    assert parse_out_of_memory("RuntimeError: shape mismatch") is None
    assert parse_out_of_memory("") is None


def test_round_trip() -> None:
    oom = parse_out_of_memory(load("xla_compile_hbm_jax.txt"))
    assert oom is not None and type(oom).from_json(oom.to_json()) == oom


@pytest.mark.parametrize(("text", "expected"), [
    ("1MB", (10**6, None)), ("16GiB", (16 * G, None)), ("4096", (4096, None)),
    ("512K", (512 * K, None)), ("80%", (None, 0.8))])
def test_sizes(text: str, expected: tuple[int | None, float | None]) -> None:
    assert parse_size_or_share(text) == expected


@pytest.mark.parametrize("text", ["12x", "-1MB", "", "0%", "150%"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size_or_share(text) if text.endswith("%") else parse_size(text)


@pytest.mark.parametrize("text", [
    "429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Requests' and limit 'Requests per "
    "minute' of service 'storage.googleapis.com'",
    "RESOURCE_EXHAUSTED: rate limit exceeded; retry later",
    "grpc: Resource exhausted: too many requests",
    "RESOURCE_EXHAUSTED: the job's quota of 8 TPUs is used up",
])
def test_a_quota_or_rate_limit_is_not_out_of_memory(text: str) -> None:
    assert parse_out_of_memory(text) is None


def test_resource_exhausted_that_speaks_of_memory_is() -> None:
    oom = parse_out_of_memory("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                              "1.00GiB.")
    assert oom is not None and oom.kind == "runtime"


@pytest.mark.parametrize("text", [
    "RESOURCE_EXHAUSTED: Attempting to allocate " + "9" * 400 + "G. That was not possible. "
    "There are 1.00G free.",
    "CUDA out of memory. Tried to allocate " + "9" * 400 + ".00 GiB. GPU 0 has a total capacity "
    "of 79.15 GiB of which 1.19 MiB is free.",
    "Ran out of memory in memory space hbm. Used " + "9" * 400 + "G of 15.48G hbm.",
])
def test_sizes_no_device_has_are_unknown_not_a_crash(text: str) -> None:
    oom = parse_out_of_memory(text)
    assert oom is not None and oom.needed is None
    assert "not measured" not in oom.summary(nbytes)
