"""C emission for AVX2 (shipped as ``morello.codegen``): Impl tree -> C source -> .so."""
from morello.codegen.build import CompiledProgram, compile_c
from morello.codegen.emit import check_name, emit_c, emit_header

__all__ = ["CompiledProgram", "check_name", "compile_c", "emit_c", "emit_header"]
