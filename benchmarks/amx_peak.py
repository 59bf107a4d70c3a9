"""One core's peak on the x86 tile unit and AVX512-VNNI, measured (not from a data sheet).

Builds benchmarks/native/amx_peak.c (independent accumulators, operands resident: the
instruction throughput) and prints one JSON line per instruction: ops per second (2 per
multiply-accumulate) and the CPU model. Skips, saying why, what the CPU or kernel lacks.

    python benchmarks/amx_peak.py [--seconds S] [--repeat N]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="minimum length of one timed run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per instruction (the median is printed)")
    a = ap.parse_args(argv)
    exe = os.path.join(tempfile.mkdtemp(prefix="accpy-amx-"), "amx_peak")
    flags = ["-O2", "-mamx-tile", "-mamx-int8", "-mamx-bf16", "-mavx512f", "-mavx512bw", "-mavx512vnni"]
    p = subprocess.run(["gcc", *flags, f"-I{os.path.join(ROOT, 'native', 'x86tile')}",
                        os.path.join(HERE, "native", "amx_peak.c"), "-o", exe], capture_output=True, text=True)
    if p.returncode != 0:
        print(json.dumps({"skipped": "gcc cannot build AMX code here", "error": p.stderr[-500:]}))
        return 0
    runs: dict = {}
    for _ in range(a.repeat):
        out = subprocess.run([exe, str(a.seconds)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            op, value = line.split(" ", 1)
            if value.startswith("skipped"):
                runs[op] = value
            else:
                runs.setdefault(op, []).append(float(value))
    for op, v in runs.items():
        rec = {"instruction": op, "cpu": cpu_model(), "threads": 1}
        if isinstance(v, str):
            rec["skipped"] = v[len("skipped "):]
        else:
            med = statistics.median(v)
            rec.update({"tera_ops_per_second": round(med / 1e12, 3), "runs": [round(x / 1e12, 3) for x in v]})
        print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
