"""This machine's roofs: the AVX2 FMA peak of one core and its streaming bandwidth.

    python benchmarks/roofline.py

Both are the microbenchmarks ``morello calibrate`` fits its constants to (``cal_fma``: 12
independent accumulator chains, enough to cover the FMA latency on two ports), so the
peak the benchmarks report and the unit of the cost model are the same measurement. The
bandwidth is ``calibrate.stream_read_ns``: vector loads streaming through 128 MiB on huge
pages, as numpy's large arrays are (the kernels' inputs). The script checks in the
disassembly that all 12 vfmadd instructions of the FMA loop survived compilation.
"""
from __future__ import annotations

import re
import subprocess

from morello import calibrate
from morello.memory import AVX2


def fma_count_in_loop(so_path: str) -> int:
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so_path],
                         capture_output=True, text=True).stdout
    body = asm.split("<cal_fma>:")[1].split("\n\n")[0]
    # The loop: the longest straight run of FMAs between two jumps.
    blocks = re.split(r"\n\s*\w+:\s+j\w+ ", body)
    return max(len(re.findall(r"vfmadd\w+ps\s+%ymm", b)) for b in blocks)


def main() -> None:
    lib = calibrate._lib(AVX2)
    kept = fma_count_in_loop(lib._name)
    fma_ns = min(lib.cal_fma(50_000_000) for _ in range(7)) * 1e9
    line_ns = calibrate.stream_read_ns(lib)
    print(f"FMA chains kept in the loop: {kept} of 12")
    print(f"AVX2 FMA peak, one core: {16 / fma_ns:.1f} GFLOP/s")
    print(f"streaming read bandwidth, one core: {64 / line_ns:.1f} GB/s")


if __name__ == "__main__":
    main()
