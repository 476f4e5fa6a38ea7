"""Symbolic formulas (sympy): the single source of truth of the model.

Modules: ``symbols`` (names, dimensions), ``compute`` (operators), ``comm`` (collectives),
``pipeline`` (schedules), ``memory`` (parameters, memory), ``step`` (assembly), ``codegen``
(compilation to numpy), ``export`` (LaTeX/Python/JSON).
"""
