"""Where a benchmark ran: printed first, so every table names its machine."""

import os


def cpu_line() -> str:
    """The CPU model, its vector extensions and the core count."""
    model, flags_seen = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags_seen = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    extensions = [
        name
        for name, flag in (
            ("AVX2", "avx2"),
            ("AVX-512", "avx512f"),
            ("AVX512-BF16", "avx512_bf16"),
            ("AMX", "amx_tile"),
        )
        if flag in flags_seen
    ]
    return f"{model}, {os.cpu_count()} cores, {', '.join(extensions) or 'no AVX2'}"
