"""bench/peers' CPU-kind record: timings are grouped by it, so it must read /proc/cpuinfo right."""

import importlib.util

from paths import REPO

# Loaded from its file: bench/peers is a set of scripts (for other virtualenvs), not a package.
spec = importlib.util.spec_from_file_location("cpu_kind", REPO / "bench" / "peers" / "cpu_kind.py")
cpu_kind = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_kind)

ZEN5 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC  9B45
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512dq avx512_bf16 avx512vbmi avx512_vnni avx_vnni sha_ni

processor\t: 1
model name\t: something else
flags\t\t: fpu sse2
"""
AVX2_ONLY = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx fma avx2 bmi2\n"
SAPPHIRE_RAPIDS = "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


def test_parse_reads_the_first_processor_and_keeps_only_the_kernel_relevant_flags():
    model, flags = cpu_kind.parse_cpuinfo(ZEN5)
    assert model == "AMD EPYC 9B45"
    assert flags == ["avx2", "avx512_bf16", "avx512_vnni", "avx512f", "avx_vnni", "fma"]


def test_kind_labels_tell_the_machines_apart():
    labels = [cpu_kind.kind_label(cpu_kind.parse_cpuinfo(text)[1]) for text in (ZEN5, AVX2_ONLY, SAPPHIRE_RAPIDS)]
    assert labels == ["avx512-bf16", "avx2", "amx"]
    assert cpu_kind.kind_label(["avx512f", "avx2"]) == "avx512"
    assert cpu_kind.kind_label(["sse2"]) == "pre-avx2"


def test_record_for_a_file(tmp_path):
    (tmp_path / "cpuinfo").write_text(AVX2_ONLY)
    record = cpu_kind.cpu_kind(str(tmp_path / "cpuinfo"))
    assert record == {"cpu_model": "AMD EPYC", "cpu_flags": ["avx2", "fma"], "cpu_kind": "avx2 (AMD EPYC)"}
    assert cpu_kind.cpu_kind(str(tmp_path / "missing"))["cpu_kind"] == "unknown"
