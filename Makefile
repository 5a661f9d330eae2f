# The README's two commands live here: `make demo` and `make test`.
# Both create .venv/ in the repo root when missing and install lazyscope into it with the
# xla, torchax and test extras (torch==2.9.0, torch_xla==2.9.0, torchax==0.0.13 with
# jax==0.10.2, TensorBoard's profile plugin, pytest ...).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lazyscope-installed

.PHONY: venv demo test test-fast lint bench clean chromium

# torch_xla 2.9.0's wheel carries an older copy of torchax (it imports flax, which nothing
# installs); pip may unpack it over torchax 0.0.13's files, so torchax is reinstalled last.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[xla,torchax,test]'
	$(PY) -m pip install -q --force-reinstall --no-deps 'torchax==0.0.13'
	touch $(STAMP)

venv: $(STAMP)

# The main job: trace the LazyTensor blog's dynamic graph and print its report.
demo: venv
	$(VENV)/bin/lazyscope trace --steps 30 --out runs/demo --force lazytensor-dynamic --mode dynamic

# The whole test suite (real torch_xla on the CPU). The HTML report test drives Debian's
# chromium (headless): installed here when missing. Two workers, a test file each at a time
# (its session fixtures stay in one worker): most of the suite's time is fresh processes
# importing torch_xla (~9 s each here), which run side by side.
test: venv chromium
	$(PY) -m pytest -q -n 2 --dist loadfile

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	command -v chromium >/dev/null || ($(SUDO) apt-get update && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y chromium)

test-fast: venv
	$(PY) -m pytest -q -m "not slow"

# ruff on everything; mypy --strict on the model, the analysis and the renderers ([tool.mypy]).
lint: venv
	$(VENV)/bin/ruff check lazyscope scenarios tests benchmarks
	$(VENV)/bin/mypy

# Measured comparisons (minutes of CPU; not part of the tests; run on a quiet machine): the cost
# of tracing (in one process, with its interval: default, live alerts, --out gs://) on a ~6 ms
# step (host and XLA:CPU sharing the 2 cores) and a ~26-29 ms one, the barrier's parts, the stack
# sampler's, report/check at 10^4..10^6 steps and start-up, a 64-host pod from the bucket, the HLO dump's
# cost, padding policies. benchmarks/RESULTS.md quotes their output.
bench: venv
	$(PY) benchmarks/overhead.py --reps 2 --steps 120 --ab-pairs 400 --ab-steps 40
	$(PY) benchmarks/overhead.py --reps 0 --hidden 1024 --batch 256 --ab-pairs 150 --ab-steps 20
	$(PY) benchmarks/overhead.py --reps 0 --pin --ab-pairs 300 --ab-steps 40
	$(PY) benchmarks/barrier_cost.py --steps 400
	$(PY) benchmarks/sampler_cost.py --rounds 100
	$(PY) benchmarks/scale.py
	$(PY) benchmarks/pod_scale.py
	$(PY) benchmarks/hlo_dump_cost.py --reps 3 --steps 12
	$(PY) benchmarks/compare_policies.py --out runs/bench-compare

clean:
	rm -rf runs .pytest_cache
