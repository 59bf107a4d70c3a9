"""Automatic schedules against the default plan, hand schedules, MKL / numpy and Halide's autoschedulers.

For every kernel of benchmarks/auto_suite.py and every thread count, one JSON object per line:
  kernel, sizes, threads, gflops {contender: GFLOP/s or null}, skipped {contender: why},
  errors {contender: max relative error against numpy's float64 reference (checked before timing;
  a contender beyond the kernel's tolerance is not timed)}, speedup_vs_default (accpy's best
  autoscheduled plan over the default plan), ratio_vs_halide (accpy's best autoscheduled over
  Halide's best autoscheduler; null without Halide), seconds_autoschedule {model, measured: time
  spent in acc.autoschedule for the whole kernel}, seconds_halide_schedule, auto_notes (stages
  that fell back to the default plan, and why), loadavg.
then one summary line: geometric means of speedup_vs_default, ratio_vs_halide, and of the
autoscheduled plan over the hand schedule and over MKL where those exist.

Contenders, all in this process, taking turns (`_common.interleaved_best`: each one's best median
of `--rounds` rounds): "default" (per stage `nest.create_schedule().create_plan(target)`, one
thread), "auto_model" / "auto_measured" (`acc.autoschedule(stage, args, measure=False / True,
budget_s=--budget / stages, threads=t)`), "hand" (samples/optimized_matmul.py's matmul_plan for
sgemm, samples/conv2d.py's conv2d_plan for conv3x3, samples/int8_matmul.py's product plan for
int8 where the CPU has its path: AMX or AVX-512 VNNI), "mkl" (cblas_sgemm, cblas_gemm_s8u8s32,
C += A @ B, from the mkl wheel), "numpy" (sgemm: A @ B into a preallocated array, OpenBLAS),
"halide_adams2019" / "halide_mullapudi2016" (benchmarks/halide_suite.py: compiled ahead of time
into this process, scheduled for t threads, the runtime's pool set to t). Kernels update their
arrays in place; every contender works on its own copy of the data.

With Halide measured, the script sets GOMP_SPINCOUNT=10000 unless it (or OMP_WAIT_POLICY) is set
(`omp_env` in each line): with libgomp's default spinning (about 300,000 spins before an idle
thread sleeps) and Halide's thread pool in the same process, every two-thread OpenMP kernel
(accpy's and MKL's) collapsed on the 2-core machine this was written on (tiny sgemm: 0.008
GFLOP/s instead of 7.5). OMP_WAIT_POLICY=PASSIVE (threads sleep at once) cures that too, but
then every entry into a parallel loop wakes the threads from sleep: a stencil's 1000 time steps
each pay it (jacobi-2d, 2 threads: 518 ms instead of 287 ms with a short spin).

    python benchmarks/autoschedule.py [--kernels gemm,jacobi-1d] [--threads 1,2] [--budget 20]
                                      [--quick] [--skip-halide] [--repeat 5] [--rounds 2]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import auto_suite as suite  # noqa: E402  (puts samples/ and accpy on the path)

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
import mklblas  # noqa: E402
from _common import Blas, interleaved_best  # noqa: E402


def _copy(data: dict) -> dict:
    return {k: v.copy() for k, v in data.items()}


def _gmean(values) -> float | None:
    vals = [v for v in values if v]
    return round(math.exp(sum(math.log(v) for v in vals) / len(vals)), 3) if vals else None


def auto_plans(kernel, stages, threads: int, measure: bool, budget: float):
    """([plan per stage], notes, seconds): acc.autoschedule per stage; a stage it refuses keeps
    its default plan, noted."""
    plans, notes, t0 = [], [], time.perf_counter()
    for n, (obj, args) in enumerate(stages):
        try:
            plans.append(acc.autoschedule(obj, args, target=acc.Target.HOST, budget_s=budget / len(stages),
                                          measure=measure, threads=threads))
        except Exception as e:  # reported, never hidden: the stage runs its default plan
            notes.append(f"stage {n}: default plan ({type(e).__name__}: {str(e)[:200]})")
            plans.append(suite.default_plan(obj))
    return plans, notes, time.perf_counter() - t0


def hand_plans(kernel, threads: int):
    """([(plan, args)] of the sample's hand schedule for `kernel`, or None), reason when None."""
    s = kernel.sizes
    if kernel.name.startswith("sgemm"):
        import optimized_matmul
        return [optimized_matmul.matmul_plan(s["M"], s["N"], s["K"], threads=threads)], ""
    if kernel.name == "conv3x3":
        import conv2d
        return [conv2d.conv2d_plan(s["H"], s["W"], s["C"], s["K"], threads=threads)], ""
    if kernel.name == "int8_matmul":
        import int8_matmul
        if not (int8_matmul.has_amx() or int8_matmul.has_vector_dot("int8")):
            return None, "the sample's paths need AMX or AVX-512 VNNI (elsewhere: the tile unit's functional model)"
        return [int8_matmul.matmul_plan(s["M"], s["N"], s["K"], "int8", threads)], ""
    return None, "no sample has a hand schedule of this kernel"


def library_calls(kernel, mkl, blas) -> dict:
    """{contender: (set_threads, make(data) -> call)} for MKL / numpy where they compute the kernel
    itself: MKL C += A @ B (sgemm, int8), numpy A @ B into a preallocated array (sgemm)."""
    out = {}
    if kernel.name.startswith("sgemm"):
        if blas.lib is not None:
            out["numpy"] = (blas.set_threads, lambda d: lambda: np.matmul(d["A"], d["B"], out=d["C"]))
        if mkl is not None:
            out["mkl"] = (mkl.set_threads, lambda d: lambda: mkl.sgemm(d["A"], d["B"], d["C"]))
    if kernel.name == "int8_matmul" and mkl is not None:
        out["mkl"] = (mkl.set_threads, lambda d: lambda: mkl.gemm_s8u8s32(d["A"], d["B"], d["C"]))
    return out


class Bench:
    """One kernel: its contenders built, checked and timed (see the module docstring)."""

    def __init__(self, kernel, opts, out_dir, mkl, blas):
        self.k, self.opts, self.out_dir, self.mkl, self.blas = kernel, opts, out_dir, mkl, blas
        self.data0 = kernel.data(np.random.default_rng(0))
        self.want = kernel.reference(self.data0)
        self.calls, self.skipped, self.errors, self.notes, self.seconds = {}, {}, {}, [], {}

    def check(self, name: str, run, results: dict, want=None) -> None:
        """Run once, compare `results` (arrays by name) with `want` (default: the kernel's
        reference); keep the contender if right, else say why it is skipped."""
        run()
        worst, want = 0.0, want or self.want
        for out, got in results.items():
            ref = want[out].astype(np.float64)
            worst = max(worst, float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1.0)))
        self.errors[name] = float(f"{worst:.3g}")
        if worst <= self.k.tolerance:
            self.calls[name] = run
        else:
            self.skipped[name] = f"wrong result (relative error {worst:.2e})"

    def add_accpy(self, name: str, stage_plans: list) -> None:
        """Build `stage_plans` [(plan, args)] as contender `name` (a package of its own, so that
        a plan that does not build is reported, not fatal) and check it."""
        k, pkg = self.k, acc.Package()
        try:
            for n, (plan, args) in enumerate(stage_plans):
                pkg.add(plan, args=args, base_name=suite.c_name(k.name, n, name))
            lib = pkg.build(f"auto_{k.name.replace('-', '_')}_{name}", output_dir=self.out_dir,
                            python_module=False, progress=False)
        except Exception as e:  # reported in the JSON line
            self.skipped[name] = f"does not build: {type(e).__name__}: {str(e)[:300]}"
            return
        fns = [getattr(lib, suite.c_name(k.name, n, name)) for n in range(len(stage_plans))]
        d = _copy(self.data0)
        args = [a for _, a in stage_plans]
        self.check(name, lambda: [f(*[d[x.name] for x in a]) for f, a in zip(fns, args)],
                   {o: d[o] for o in k.outputs})

    def build_accpy(self, threads: list) -> None:
        """The default plans, the autoscheduled ones and the hand ones, built and checked."""
        k = self.k
        self.add_accpy("default", [(suite.default_plan(o), a) for o, a in k.stages()])
        for t in threads:
            if hasattr(acc, "autoschedule"):
                for measure, label in ((False, "auto_model"), (True, "auto_measured")):
                    stages = k.stages()
                    plans, notes, sec = auto_plans(k, stages, t, measure, self.opts.budget)
                    self.notes += [f"{label} t{t} {n}" for n in notes]
                    self.seconds[f"{label}_t{t}"] = round(sec, 2)
                    self.add_accpy(f"{label}_t{t}", [(p, a) for p, (_, a) in zip(plans, stages)])
            hand, why = hand_plans(k, t)
            if hand is None:
                self.skipped["hand"] = why
            else:
                self.add_accpy(f"hand_t{t}", hand)
        if not hasattr(acc, "autoschedule"):
            self.skipped["auto_model"] = self.skipped["auto_measured"] = "acc.autoschedule is missing"

    def build_halide(self, threads: list) -> None:
        """Both autoschedulers' pipelines per thread count, compiled and checked."""
        if self.opts.skip_halide:
            self.skipped["halide"] = "--skip-halide"
            return
        try:
            import halide_suite as hs
        except ImportError as e:
            self.skipped["halide"] = f"halide is not installed ({e}): pip install 'accpy[bench]'"
            return
        builder = hs.BUILDERS.get(self.k.name)
        if builder is None:
            self.skipped["halide"] = "not expressible in Halide (see halide_suite.py)"
            return
        for t in threads:
            for a in hs.AUTOSCHEDULERS:
                name = f"halide_{a.lower()}_t{t}"
                compiled = hs.compile_program(builder(self.k), a, t, self.out_dir,
                                              f"h_{self.k.name.replace('-', '_')}_{a}_t{t}")
                self.seconds[f"halide_{a.lower()}_schedule_t{t}"] = round(compiled.seconds_scheduling, 2)
                run, results = compiled.bind(_copy(self.data0))
                hs.set_threads(t)
                self.check(name, run, results)

    def build_libraries(self) -> None:
        """MKL / numpy calls, checked (numpy's A @ B overwrites C: checked against C's increment)."""
        self._libs = library_calls(self.k, self.mkl, self.blas)
        for name, (set_threads, make) in self._libs.items():
            set_threads(1)
            d = _copy(self.data0)
            run = make(d)
            if name == "numpy":
                self.check(name, run, {"C": d["C"]}, {"C": self.want["C"] - self.data0["C"]})
            else:
                self.check(name, run, {o: d[o] for o in self.k.outputs})

    def measure(self, t: int) -> dict:
        """The JSON line of thread count `t`."""
        contenders = {"default": self.calls.get("default")}
        for name in ("auto_model", "auto_measured", "hand"):
            contenders[name] = self.calls.get(f"{name}_t{t}")
        for lib in ("mkl", "numpy"):
            contenders[lib] = self.calls.get(lib)
            if lib in self._libs:
                self._libs[lib][0](t)
        for a in ("adams2019", "mullapudi2016"):
            contenders[f"halide_{a}"] = self.calls.get(f"halide_{a}_t{t}")
        if any(k.startswith("halide") and v for k, v in contenders.items()):
            import halide_suite as hs
            hs.set_threads(t)
        live = {k: v for k, v in contenders.items() if v is not None}
        slow = max(_one_call(v) for v in live.values())
        repeat = self.opts.repeat if slow < 0.5 else 3
        best = interleaved_best(live, repeat, self.opts.rounds if slow < 2.0 else 1)
        g = {k: (round(self.k.flops / best[k] / 1e9, 3) if k in best else None) for k in contenders}
        auto = max([v for k, v in g.items() if k.startswith("auto") and v] or [0]) or None
        halide = max([v for k, v in g.items() if k.startswith("halide") and v] or [0]) or None
        return {
            "kernel": self.k.name, "sizes": self.k.sizes, "threads": t, "gflops": g,
            "skipped": self.skipped, "errors": self.errors,
            "speedup_vs_default": round(auto / g["default"], 3) if auto and g["default"] else None,
            "ratio_vs_halide": round(auto / halide, 3) if auto and halide else None,
            "auto_vs_hand": round(auto / g["hand"], 3) if auto and g["hand"] else None,
            "auto_vs_mkl": round(auto / g["mkl"], 3) if auto and g["mkl"] else None,
            "seconds": self.seconds, "auto_notes": self.notes, "loadavg": round(os.getloadavg()[0], 2),
            "omp_env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ},
        }


def _one_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default=",".join(suite.KERNELS), help="comma-separated names of auto_suite.KERNELS")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of measurement per kernel (auto_measured)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round: seconds, for tests")
    ap.add_argument("--skip-halide", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.repeat, opts.rounds = 1, 1
    names = [n for n in opts.kernels.split(",") if n]
    for n in names:
        if n not in suite.KERNELS:
            ap.error(f"--kernels: {n!r} is not one of {', '.join(suite.KERNELS)}")
    threads = [int(t) for t in opts.threads.split(",")]
    if not opts.skip_halide:
        # before libgomp loads (the first kernel or MKL): see the module docstring
        if "OMP_WAIT_POLICY" not in os.environ:
            os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    blas = Blas()
    mkl, mkl_missing = mklblas.load()
    out_dir = tempfile.mkdtemp(prefix="accpy_bench_auto_")
    lines = []
    for n in names:
        bench = Bench(suite.kernel(n, tiny=opts.quick), opts, out_dir, mkl, blas)
        if mkl is None:
            bench.skipped["mkl"] = f"not measured: {mkl_missing}"
        bench.build_accpy(threads)
        bench.build_halide(threads)
        bench.build_libraries()
        for t in threads:
            line = bench.measure(t)
            lines.append(line)
            print(json.dumps(line), flush=True)
    print(json.dumps({
        "summary": True, "kernels": len(names), "threads": threads, "quick": opts.quick,
        "geomean_speedup_vs_default": _gmean(x["speedup_vs_default"] for x in lines),
        "geomean_ratio_vs_halide": _gmean(x["ratio_vs_halide"] for x in lines),
        "geomean_auto_vs_hand": _gmean(x["auto_vs_hand"] for x in lines),
        "geomean_auto_vs_mkl": _gmean(x["auto_vs_mkl"] for x in lines),
        "slower_than_default": [(x["kernel"], x["threads"]) for x in lines
                                if x["speedup_vs_default"] is not None and x["speedup_vs_default"] < 1.0],
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
