"""The kernel languages: the compute API (tensor expressions) and the imperative
``Program`` builder (loops enclosing statements; the C frontend's target)."""
