"""Hardware descriptions: the frozen :class:`Spec`, the TOML loader and its
checks, the roofline; read early, by the schedulers."""
