"""The torchax backend: PyTorch modules on JAX arrays, compiled by ``jax.jit``.

Modules: ``collector`` (the collector and the runtime scenarios run on; what a step is),
``jit`` (the program's jitted functions: calls, graph ids, inputs in the user's names),
``compiles`` (JAX's compilations from its own events, with the executable's memory) and
``explain`` (JAX's cache-miss explanation, parsed and said in the user's names). Its reports'
sentences are in :mod:`lazyscope.analyze.wording.torchax`.

Importing this package imports nothing: jax and torchax are imported when a trace starts.
"""
