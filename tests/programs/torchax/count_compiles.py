"""Run a program untraced and print how many compilations JAX made (its own count: one
``backend_compile_duration`` event each, what ``jax_log_compiles`` logs): ``python
count_compiles.py PROGRAM [ARGS]``."""

import runpy
import sys

import jax.monitoring

count = 0


def listener(event, duration, **kwargs):
    global count
    if event == "/jax/core/compile/backend_compile_duration":
        count += 1


jax.monitoring.register_event_duration_secs_listener(listener)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print(f"jax compiles: {count}")
