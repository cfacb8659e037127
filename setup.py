"""Build the compiled core of morello: one module per role (see STYLE.md rule 1).

_graph (interned Specs and form tables), _expand (native action rows), _dp (the DP
recurrence and the bridge to the persistent tables), _persist (writing a search's results
into the pages), _memo (the compressed memo table), _rows (the row algebra of a page's
new boxes), _frozen (a page's stored form), _pages (the tables split into pages loaded on
demand);
they share the containers of _vec.pxd.
"""
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("MORELLO_DEBUG_CYTHON") == "1"
directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": True,
    "initializedcheck": DEBUG,
    "embedsignature": True,
}
flags = ["-O0", "-g"] if DEBUG else ["-O3"]
extensions = [
    Extension(name, [f"morello/{name.split('.')[-1]}.pyx"],
              include_dirs=[np.get_include()], extra_compile_args=flags,
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    for name in ("morello._graph", "morello._expand", "morello._dp", "morello._persist",
                 "morello._memo", "morello._rows", "morello._frozen", "morello._pages")
]
setup(ext_modules=cythonize(extensions, compiler_directives=directives))
