"""What this machine's CPU can execute (/proc/cpuinfo), as opposed to what `acc.Target.HOST` may
use: with ACCPY_HOST_MODEL set, HOST poses as a smaller machine and uses fewer features."""
from __future__ import annotations

from pathlib import Path


def cpu_flags() -> set:
    """The flags /proc/cpuinfo lists for the first processor (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def posed_features():
    """The features of the model ACCPY_HOST_MODEL names, or None when the host is not posing."""
    from accpy.targets.host import posed_model

    spec = posed_model()
    return None if spec is None else set(spec.extensions)


def host_flags() -> set:
    """The cpuinfo flags `acc.Target.HOST` may use: the CPU's, less the features a posed model lacks."""
    from accpy.targets.features import FEATURES

    flags, posed = cpu_flags(), posed_features()
    if posed is None:
        return flags

    def kept(flag: str) -> bool:
        feature = "sse3" if flag == "pni" else flag  # cpuinfo's name for SSE3
        return feature not in FEATURES or feature in posed

    return {f for f in flags if kept(f)}
