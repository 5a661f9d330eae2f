"""The plain-PyTorch backends: ``eager`` and ``compile`` (torch.compile), CPU or CUDA.

Modules: ``collector`` (collectors and runtimes: steps at ``lazyscope.barrier()``, CUDA syncs),
``dynamo`` (torch.compile's compilations, guard failures and graph breaks from structured
sources) and ``wording`` (the sentences of their reports, plain data).

Importing this package imports nothing: torch is imported by the collectors when they start.
"""
