"""C emission for AVX2 (shipped as ``morello.codegen``): Impl tree -> C source -> .so."""
from morello.codegen.build import CompiledKernel, compile_c
from morello.codegen.emit import emit_c

__all__ = ["CompiledKernel", "compile_c", "emit_c"]
