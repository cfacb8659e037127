"""Moves and fills: scalar and vector copies between registers and memory, bf16 and
integer widenings, the packing copies of the integer matmuls, and fills.
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
)
from morello.dtypes import Dtype
from morello.kernels import stream
from morello.kernels.base import (
    BYTES,
    F32,
    L1,
    MEM,
    NOT_RF,
    RL,
    VRF,
    Kernel,
    Reason,
    VecType,
    c_value,
    io_cost,
    rf_or_l1,
    same_contiguous_f32,
    vector_count,
)
from morello.kernels.int8 import pairs_along_k, quad_rows
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec

# --- Move ----------------------------------------------------------------------------

def _assign_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if spec.volume != 1:
        return "not a scalar"
    if not (rf_or_l1(src) and rf_or_l1(dst)):
        return "both operands must be in RF or L1"
    return None  # a Move Spec's dst widens its src (kinds.check_dtypes)


def convert(value: str, src: Dtype, dst: Dtype) -> str:
    """C expression of the scalar ``value`` of dtype ``src`` widened to ``dst``."""
    if src is dst:
        return value
    if src is Dtype.BF16:
        return f"morello_bf16_f32({value})"
    return f"({dst.c_type}){value}"


def _assign_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    w.line(f"{dst.lval()} = {convert(src.lval(), src.spec.dtype, dst.spec.dtype)};")


def _vassign_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    vrf = [t for t in (src, dst) if t.level is Level.VRF]
    if not vrf:
        return "neither operand is in VRF"
    if len(vrf) == 2 and src.vector_size != dst.vector_size:
        return "vector sizes differ"
    mem = [t for t in (src, dst) if t.level is not Level.VRF]
    if mem and mem[0].level is Level.RF:
        return "cannot vector-assign with RF"
    if not (src.contiguous and dst.contiguous) or src.layout != dst.layout:
        return "operands must be contiguous, of one layout"
    if src.dtype is not dst.dtype or src.dtype not in (Dtype.F32, Dtype.S32, Dtype.S16):
        return "one dtype: f32, s32 or s16"
    vs = vrf[0].vector_size
    assert vs is not None
    if spec.volume % vs:
        return "volume is not a multiple of the vector size"
    return None


def _vassign_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    vs = (src.spec.vector_size or dst.spec.vector_size)
    v = vt(src.spec.dtype, vs)
    for j in range(spec.volume // vs):
        if src.spec.level is Level.VRF and dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {src.vec(j)};")
        elif dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {v.load}({_vptr(v, src.ptr(j * vs), True)});")
        else:
            w.line(f"{v.store}({_vptr(v, dst.ptr(j * vs), False)}, {src.vec(j)});")


def _vptr(v: VecType, ptr: str, const: bool) -> str:
    """``ptr`` as the pointer type of ``v``'s loads and stores (integer vectors take
    ``__m256i *``)."""
    if v.dtype.is_float:
        return ptr
    return f"({'const ' if const else ''}{v.c_type} *){ptr}"


def _vcopy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if reason := same_contiguous_f32(src, dst):
        return reason
    if spec.volume % 8:
        return "volume is not a multiple of 8"
    return None


def _vcopy_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    v = vt(Dtype.F32, 8)
    for j in range(0, spec.volume, 8):
        w.line(f"{v.store}({dst.ptr(j)}, {v.load}({src.ptr(j)}));")



def _widen_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.dtype is not Dtype.BF16 or dst.dtype is not Dtype.F32:
        return "widens bf16 to f32 only"
    if src.level is not Level.L1 or not src.contiguous:
        return "src must be contiguous in L1"
    if dst.level is not Level.VRF or not dst.contiguous or dst.layout != src.layout:
        return "dst must be a contiguous VRF tensor of src's layout"
    if dst.vector_size not in (4, 8, 16):
        return "vectors of 4, 8 or 16 floats"
    return None


def _widen_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    vs = dst.spec.vector_size
    for j in range(spec.volume // vs):
        w.line(f"{dst.vec(j)} = morello_bf16x{vs}({src.ptr(j * vs)});")


def _copy_operands_check(src: TensorSpec, dst: TensorSpec) -> Reason:
    """A widening copy's operands: both contiguous in L1, of one layout."""
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if not (src.contiguous and dst.contiguous) or src.layout != dst.layout:
        return "operands must be contiguous, of one layout"
    return None


def _copy_loop_emit(w, src, dst, n: int, step: int, vector: str, scalar: str) -> None:
    """``d[i] = f(s[i])`` over n elements: ``vector`` (a statement of ``i``) per ``step``,
    ``scalar`` for the tail; ``s`` and ``d`` are the operands' typed pointers."""
    with w.block("{"):
        w.line(f"const {src.spec.dtype.c_type} *restrict s = {src.ptr(0)};")
        w.line(f"{dst.spec.dtype.c_type} *restrict d = {dst.ptr(0)};")
        if n >= step:
            with w.block(f"for (long i = 0; i < {n - n % step}; i += {step}) {{"):
                w.line(vector)
        if n % step:
            with w.block(f"for (long i = {n - n % step}; i < {n}; i++) {{"):
                w.line(scalar)


def _widen_copy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.dtype is not Dtype.BF16 or dst.dtype is not Dtype.F32:
        return "widens bf16 to f32 only"
    return _copy_operands_check(src, dst)


def _widen_copy_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    _copy_loop_emit(w, src, dst, spec.volume, 8,
                    "_mm256_storeu_ps(d + i, morello_bf16x8(s + i));",
                    "d[i] = morello_bf16_f32(s[i]);")


# Integer widenings by vector: (source, destination) -> (elements per step, intrinsic).
_INT_WIDEN = {
    (Dtype.U8, Dtype.S16): (16, "_mm256_cvtepu8_epi16"),
    (Dtype.S8, Dtype.S16): (16, "_mm256_cvtepi8_epi16"),
    (Dtype.U8, Dtype.S32): (8, "_mm256_cvtepu8_epi32"),
    (Dtype.S8, Dtype.S32): (8, "_mm256_cvtepi8_epi32"),
    (Dtype.S16, Dtype.S32): (8, "_mm256_cvtepi16_epi32"),
}


def _int_widen_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if (src.dtype, dst.dtype) not in _INT_WIDEN:
        return "widens u8/s8 to s16/s32, or s16 to s32"
    return _copy_operands_check(src, dst)


def _int_widen_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    step, cvt = _INT_WIDEN[src.spec.dtype, dst.spec.dtype]
    load = "_mm_loadu_si128" if step * src.spec.dtype.size == 16 else "_mm_loadl_epi64"
    _copy_loop_emit(w, src, dst, spec.volume, step,
                    f"_mm256_storeu_si256((__m256i *)(d + i), {cvt}({load}((const __m128i *)"
                    "(s + i))));", f"d[i] = ({dst.spec.dtype.c_type})s[i];")


def _int_widen_cost(s: Spec, t: Target) -> int:
    step = _INT_WIDEN[s.operands[0].dtype, s.operands[1].dtype][0]
    return stream.pass_cost(s.volume, t, 2, 1, lanes=step) + io_cost(s, t)


def _quad_pack_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if len(spec.shape) != 3 or spec.shape[0] != 1 or spec.shape[1] != 4 \
            or spec.shape[2] % 8:
        return "needs [1, 4, n] with n a multiple of 8"
    if src.dtype.size != 1 or dst.dtype is not src.dtype:
        return "bytes only"
    if src.level is not Level.L1 or src.contig < 1 or src.stream_dim != 2:
        return "src rows must be contiguous in L1"
    if dst.level is not Level.L1 or not dst.contiguous or not quad_rows(dst):
        return "dst must be contiguous in L1, in a quad of rows"
    return None


def _quad_pack_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    n = spec.shape[2]
    ct = src.spec.dtype.c_type
    with w.block("{"):
        for r in range(4):
            w.line(f"const {ct} *r{r} = {src.ptr_at((0, r, 0)) if r else src.ptr(0)};")
        w.line(f"{ct} *d = {dst.ptr(0)};")
        with w.block(f"for (long j = 0; j < {n}; j += 8) {{"):
            for r in range(4):
                w.line(f"const __m128i x{r} = _mm_loadl_epi64((const __m128i *)(r{r} + j));")
            w.line("const __m128i p01 = _mm_unpacklo_epi8(x0, x1), "
                   "p23 = _mm_unpacklo_epi8(x2, x3);")
            w.line("_mm_storeu_si128((__m128i *)(d + 4 * j), _mm_unpacklo_epi16(p01, p23));")
            w.line("_mm_storeu_si128((__m128i *)(d + 4 * j + 16), "
                   "_mm_unpackhi_epi16(p01, p23));")



def _pair_pack_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if len(spec.shape) != 3 or spec.shape[0] != 1 or spec.shape[1] != 2 \
            or spec.shape[2] % 8:
        return "needs [1, 2, n] with n a multiple of 8"
    if src.dtype not in (Dtype.U8, Dtype.S8) or dst.dtype is not Dtype.S16:
        return "widens u8 or s8 to s16"
    if src.level is not Level.L1 or src.contig < 1 or src.stream_dim != 2:
        return "src rows must be contiguous in L1"
    if dst.level is not Level.L1 or not pairs_along_k(dst):
        return "dst must be in L1, its two rows interleaved"
    return None


def _pair_pack_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    n = spec.shape[2]
    cvt = "_mm256_cvtepu8_epi16" if src.spec.dtype is Dtype.U8 else "_mm256_cvtepi8_epi16"
    with w.block("{"):
        w.line(f"const {src.spec.dtype.c_type} *r0 = {src.ptr(0)};")
        w.line(f"const {src.spec.dtype.c_type} *r1 = {src.ptr_at((0, 1, 0))};")
        w.line(f"int16_t *d = {dst.ptr(0)};")
        with w.block(f"for (long j = 0; j < {n}; j += 8) {{"):
            # Bytes of the two rows interleaved, then widened: 8 columns' pairs.
            w.line("__m128i x = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(r0 + j)), "
                   "_mm_loadl_epi64((const __m128i *)(r1 + j)));")
            w.line(f"_mm256_storeu_si256((__m256i *)(d + 2 * j), {cvt}(x));")


# --- Fill ----------------------------------------------------------------------------


def _memset_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if spec.params[0] != 0.0:
        return "memset fills with zero only"
    if dst.level.counts_registers:
        return "destination is in registers"
    if not dst.contiguous:
        return "destination is not contiguous"
    return None


def _memset_emit(w, spec, ops, vt) -> None:
    (dst,) = ops
    w.line(f"memset({dst.ptr(0)}, 0, {spec.volume * dst.spec.dtype.size});")


def _value_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.volume != 1 or not rf_or_l1(dst):
        return "not a scalar in RF or L1"
    return None


def _value_fill_emit(w, spec, ops, vt) -> None:
    w.line(f"{ops[0].lval()} = {c_value(spec.params[0], ops[0].spec.dtype)};")


def _vector_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level is not Level.VRF or not dst.contiguous:
        return "not a contiguous VRF tensor"
    if dst.dtype is not Dtype.F32 and (dst.dtype is not Dtype.S32 or spec.params[0] != 0):
        return "f32, or s32 zeros"
    return None


def _vector_fill_emit(w, spec, ops, vt) -> None:
    (dst,) = ops
    v = vt(dst.spec.dtype, dst.spec.vector_size)
    value = spec.params[0]
    fill = f"{v.zero}()" if value == 0.0 else f"{v.set1}({c_value(value)})"
    for j in range(vector_count(dst.spec)):
        w.line(f"{dst.vec(j)} = {fill};")


ROWS: tuple[Kernel, ...] = (
    Kernel("Assign", PrimKind.MOVE, _assign_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _assign_emit, "scalar copy",
           scalar=True, levels=(RL, RL)),
    Kernel("VectorAssign", PrimKind.MOVE, _vassign_check,
           lambda s, t: t.costs.vector_move * (
               s.volume // (s.operands[0].vector_size or s.operands[1].vector_size)),
           0, _vassign_emit, "vector loads/stores between VRF and memory", needs_vrf=True,
           levels=(NOT_RF, NOT_RF), dtypes=((Dtype.F32, Dtype.S32, Dtype.S16),) * 2),
    Kernel("VectorWidenBf16", PrimKind.MOVE, _widen_check,
           lambda s, t: 2 * t.costs.vector_move * vector_count(s.operands[1]) + io_cost(s, t), 0,
           _widen_emit, "bf16 in L1 widened into f32 vector registers (zero-extend, shift)",
           needs_vrf=True, levels=(L1, VRF), dtypes=((Dtype.BF16,), F32)),
    Kernel("WidenCopyBf16", PrimKind.MOVE, _widen_copy_check,
           lambda s, t: stream.pass_cost(s.volume, t, 3, 0) + io_cost(s, t), 0, _widen_copy_emit,
           "bf16 widened into an f32 buffer, both contiguous in L1", levels=(L1, L1),
           dtypes=((Dtype.BF16,), F32)),
    Kernel("WidenCopyInt", PrimKind.MOVE, _int_widen_check, _int_widen_cost, 0,
           _int_widen_emit, "u8/s8 widened into an s16 or s32 buffer (s16 into s32), both "
           "contiguous in L1 (vpmovzx/vpmovsx)", levels=(L1, L1),
           dtypes=((*BYTES, Dtype.S16), (Dtype.S16, Dtype.S32))),
    Kernel("QuadPack", PrimKind.MOVE, _quad_pack_check,
           lambda s, t: 6 * t.costs.vector_move * (s.shape[2] // 8) + io_cost(s, t), 0,
           _quad_pack_emit, "four rows of bytes interleaved by column (vpmaddubsw's order)",
           levels=(L1, L1), dtypes=(BYTES, BYTES)),
    Kernel("WidenPairPack", PrimKind.MOVE, _pair_pack_check,
           lambda s, t: 3 * t.costs.vector_move * (s.shape[2] // 8) + io_cost(s, t), 0,
           _pair_pack_emit, "two rows of u8/s8 widened into s16, interleaved (vpmaddwd's "
           "operand order)", levels=(L1, L1), dtypes=(BYTES, (Dtype.S16,))),
    # Not in the reference: packing copies there go element by element.
    Kernel("VectorCopy", PrimKind.MOVE, _vcopy_check,
           lambda s, t: 2 * t.costs.vector_move * (s.volume // 8) + io_cost(s, t), 0, _vcopy_emit,
           "contiguous copy in L1 by vector loads and stores (packing)", levels=(L1, L1),
           dtypes=(F32, F32)),
    # Differs from the reference (cost 1 whatever the size): memset touches every line.
    Kernel("MemsetZero", PrimKind.FILL, _memset_check,
           lambda s, t: t.costs.scalar_op + move_cost(s.operands[0], t), 0, _memset_emit,
           "memset (fills with zero)", levels=(MEM,)),
    Kernel("ValueFill", PrimKind.FILL, _value_fill_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _value_fill_emit, "scalar = value",
           scalar=True, levels=(RL,)),
    Kernel("VectorFill", PrimKind.FILL, _vector_fill_check,
           lambda s, t: vector_count(s.operands[0]) * t.costs.vector_move, 0, _vector_fill_emit,
           "vector registers = value", needs_vrf=True, levels=(VRF,),
           dtypes=((Dtype.F32, Dtype.S32),)),
)
