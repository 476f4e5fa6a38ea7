"""Symbolic formulas (sympy): the single source of truth of the model.

Modules: ``symbols`` (names, dimensions), ``compute`` (operators), ``comm`` (collectives),
``pipeline`` (schedules), ``memory`` (parameters, memory), ``step`` (assembly), ``codegen``
(compilation to numpy), ``export`` (LaTeX/Python/JSON).
"""
import os as _os

# sympy reads its construction cache's size (SYMPY_CACHE_SIZE, default 1000 entries) once, when it is imported. Nodes
# evicted from a bounded cache are rebuilt as equal-but-distinct objects, and comparing those walks trees exponentially
# larger than the graph: codegen's common-subexpression pass took over ten minutes where it takes seconds unbounded.
# Unbounded unless the caller set it (no effect when sympy was imported first).
_os.environ.setdefault("SYMPY_CACHE_SIZE", "None")
