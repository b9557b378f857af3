"""Frontends: programs from other tools into polyc Kernels.

``c`` (``polyc.from_c``) reads ``#pragma scop`` regions of C files; ``c_s2s`` writes
them back scheduled (``polyc compile in.c -o out.c``).
"""
