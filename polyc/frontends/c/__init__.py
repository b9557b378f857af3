"""The C frontend: ``#pragma scop`` regions (or whole functions) of a C file as
Kernels (``from_c``, ``parse_c``). It makes Kernels and nothing else; writing C
back is :mod:`polyc.integrations.c_source`."""

from polyc.frontends.c.parse import Region, from_c, parse_c

__all__ = ["Region", "from_c", "parse_c"]
