"""Which kind of CPU a benchmark ran on, from /proc/cpuinfo (stdlib only).

Timings are only comparable within one CPU kind: the machines here are either
AVX2-only or AVX-512 with bf16 dot products and VNNI (about 4x faster), so
every RESULT line records the model name and the vector flags that decide
which kernels the frameworks pick.
"""

# The flags that change which GEMM kernels oneDNN / MKL / Eigen use.
RELEVANT_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
)


def parse_cpuinfo(text):
    """(model name, sorted relevant flags) of the first processor in a /proc/cpuinfo text."""
    model, flags = "unknown", set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = " ".join(value.split())
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, sorted(f for f in RELEVANT_FLAGS if f in flags)


def kind_label(flags):
    """A short name for the vector ISA: 'amx', 'avx512-bf16', 'avx512', 'avx2' or 'pre-avx2'."""
    flags = set(flags)
    if "amx_bf16" in flags:
        return "amx"
    if "avx512_bf16" in flags:
        return "avx512-bf16"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "pre-avx2"


def cpu_kind(path="/proc/cpuinfo"):
    """{'cpu_model', 'cpu_flags', 'cpu_kind'} for this machine ('unknown' where cpuinfo is unreadable)."""
    try:
        with open(path) as f:
            model, flags = parse_cpuinfo(f.read())
    except OSError:
        model, flags = "unknown", []
    kind = f"{kind_label(flags)} ({model})" if flags else "unknown"
    return {"cpu_model": model, "cpu_flags": flags, "cpu_kind": kind}
