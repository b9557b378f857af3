"""The IR: kernels (arrays, statements with isl domains and accesses, one isl
schedule tree), body expressions, quasi-affine indices, dtypes, schedule-tree and
loop-nest helpers, exact dependences, the placement-mark grammar and the MAC-mapping
predicate that schedules and codegen share. It imports nothing of the rest of
polyc (a test checks it)."""

from polyc.ir.kernel import Array, Kernel, Role, Statement, Step

__all__ = ["Array", "Kernel", "Role", "Statement", "Step"]
