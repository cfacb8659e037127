"""C emission for AVX2 (shipped as ``morello.codegen``): Impl tree -> C source -> .so."""
from morello.codegen.build import CompiledProgram, compile_c
from morello.codegen.emit import emit_c

__all__ = ["CompiledProgram", "compile_c", "emit_c"]
