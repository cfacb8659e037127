"""Kernel tables, one per target ISA."""
from morello.kernels.avx2 import KERNELS, Kernel, kernels_for

__all__ = ["KERNELS", "Kernel", "kernels_for"]
