# Two commands do all the set-up on a fresh machine:
#   make demo   runs the main job end to end on the built-in defaults (writes runs/demo/)
#   make test   runs the default test suite (heavier tests: make test-slow)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH_PIN := torch==2.13.0

.PHONY: demo test test-slow test-other-kernels bench venv clean mutation test-engines docs notebooks lint

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The pinned CPU build of torch first, when none is present: a plain `torch`
	# requirement would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e ".[llm,dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fgrpo-llm demo --out runs/demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

test-slow: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m slow

# The theory tests as on a CPU of the other family: on an AVX-512 machine with numpy's AVX-512
# dispatch off (np.exp then rounds as on an AVX2 CPU), elsewhere as they are. No result may
# depend on which (docs/simulator.md, "The engines' contract").
NPY_AVX512 := AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR X86_V4
test-other-kernels: $(STAMP)
	if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  NPY_DISABLE_CPU_FEATURES="$(NPY_AVX512)" $(PY) -m pytest -q -p no:cacheprovider tests/theory; \
	else echo "no AVX-512 here: numpy has one dispatch"; $(PY) -m pytest -q -p no:cacheprovider tests/theory; fi

# The engines' integration tests (docs/engines.md), each engine in its own environment (verl pins
# transformers < 5.11, TRL takes the newest), both with the CPU torch build held by the constraints file.
ENGINE_PIN := constraints/torch-cpu.txt
ENGINE_VENVS := .venv-verl .venv-trl

.venv-%/.installed: pyproject.toml $(ENGINE_PIN)
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip
	.venv-$*/bin/python -c "import torch" 2>/dev/null || .venv-$*/bin/python -m pip install -q -c $(ENGINE_PIN) $(TORCH_PIN)
	.venv-$*/bin/python -m pip install -q -c $(ENGINE_PIN) -e ".[llm,$*]" "pytest>=8" "hypothesis>=6.100"
	touch $@

test-engines: $(addsuffix /.installed,$(ENGINE_VENVS))
	.venv-verl/bin/python -m pytest -q -p no:cacheprovider tests/engines/test_records.py tests/engines/test_verl.py
	.venv-trl/bin/python -m pytest -q -p no:cacheprovider tests/engines/test_trl.py

# Mutation testing of the method's math: config in pyproject.toml [tool.mutmut], notes in
# mutation/README.md. Not part of `make test` (tens of minutes on 2 cores). Ends with the
# per-module kill rates, the survivors judged equivalent (mutation/equivalent.md), the wall time.
mutation: $(STAMP)
	rm -rf mutants
	@start=$$(date +%s); \
	$(VENV)/bin/mutmut run --max-children 2 > mutation.log 2>&1; run=$$?; \
	tail -c 300 mutation.log | tr '\r' '\n' | tail -n 2; \
	$(PY) mutation/report.py; report=$$?; \
	echo "wall time: $$(( $$(date +%s) - start )) s (mutmut log: mutation.log)"; \
	test $$run -eq 0 && test $$report -eq 0

# The API reference, generated from the docstrings (pdoc); a pdoc warning fails the build.
docs: $(STAMP)
	$(PY) docs/build_api.py

# Rebuild every notebook from its builder and execute it, keeping the figures in the committed
# .ipynb (notebooks 04 and 05 read runs/demo and runs/maze_study when they exist).
notebooks: $(STAMP)
	$(PY) notebooks/execute.py

# Lint (pyflakes, pycodestyle, import order, bugbear, pyupgrade; lines <= 100) and the layout
# ruff format writes; settings in pyproject.toml [tool.ruff].
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(ENGINE_VENVS) runs results
