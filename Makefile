# Compile & Export: `make lab` opens the course, `make test` proves it. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= python3
# The pinned torch is the default; `make test TORCH=2.15.0` (or 2.11.0, or PYTHON=python3.12) builds a
# venv of its own for that version with the rest of the pinned set, and runs the same suite in it.
# Which build: on Linux without an NVIDIA GPU the CPU build from PyTorch's CPU index, with one PyPI's CUDA
# build; TORCH_BUILD=cpu or TORCH_BUILD=cuda chooses (grader/torch_install.py says how it decides).
PINNED_TORCH := $(shell sed -n 's/^torch==//p' constraints.txt)
TORCH ?= $(PINNED_TORCH)
TORCH_BUILD ?= auto
ifeq ($(TORCH)-$(PYTHON),$(PINNED_TORCH)-python3)
VENV := .venv
else
VENV := .venv-torch$(TORCH)-$(notdir $(PYTHON))
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= 2

# Inductor's compiled kernels are cached inside the checkout (ignored): re-runs compile much faster. One
# folder per CPU: on a CPU, Inductor's cache key leaves out the vector instruction set (AVX2, AVX-512, ...),
# so a folder filled on one CPU hits on another and runs code built for the wrong one (wrong values or a
# crash: lesson 02 shows it, upstream/ keeps a reproducer). A checkout moved to another CPU starts afresh.
# grader/inductor_cache.py names the folder (standard library only: it runs before .venv exists).
CPUINFO ?= /proc/cpuinfo
CPU_KEY := $(shell $(PYTHON) grader/inductor_cache.py $(CPUINFO))
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/.cache/inductor-$(CPU_KEY)
# Jupyter prefers the kernel installed in .venv over any user-wide "python3" kernel.
export JUPYTER_PREFER_ENV_PATH := 1
export PYTHONWARNINGS := ignore::DeprecationWarning:jupyter_client.connect

.PHONY: setup deploy site lab test print-cache-dir test-fast test-browser build grade bench-grading clean
setup: $(STAMP)

# Idempotent: the venv is made once; the install reruns only when the pins or the package change.
# torch comes first, pinned and of the chosen build, so nothing later can resolve it to another one.
$(STAMP): constraints.txt pyproject.toml jupyter/overrides.json jupyter/jupyter_server_config.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	sed 's/^torch==.*/torch==$(TORCH)/' constraints.txt > $(VENV)/constraints.txt
	@args="$$($(PYTHON) grader/torch_install.py $(TORCH) $(TORCH_BUILD))" && echo "installing torch: pip install $$args" \
	  && $(PY) -m pip install -q -c $(VENV)/constraints.txt $$args
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e '.[lab,test,browser]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (compile-export)" >/dev/null
	@# JupyterLab's settings for this environment: no news pop-up, no update check
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/
	@# The server encrypts its kernels' sockets (CurveZMQ keys, where the kernel spec supports it, as ipykernel's does):
	@# no "Kernel is running over TCP without encryption" per kernel
	mkdir -p $(VENV)/etc/jupyter && cp jupyter/jupyter_server_config.json $(VENV)/etc/jupyter/
	@touch $(STAMP)

# The optional deployment paths (TVM, ExecuTorch: 36 more packages); `make test` installs
# them, `make lab` offers them. Where a wheel is missing or cannot load, their cells and checks skip.
DEPLOY_STAMP := $(VENV)/.deploy-installed
deploy: $(DEPLOY_STAMP)
$(DEPLOY_STAMP): $(STAMP)
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e '.[deploy]'
	$(PY) -m pip check
	@touch $(DEPLOY_STAMP)

# The reader's edition: a static site of the executed lessons in build/site/ (grader/site.py; Sphinx + myst-nb).
SITE_STAMP := $(VENV)/.site-installed
$(SITE_STAMP): $(STAMP)
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e '.[site]'
	@touch $(SITE_STAMP)
site: $(SITE_STAMP)
	$(PY) -m grader site

# The learner works in work/ (ignored by git): copied from notebooks/ once, never overwritten (grader/workspace.py).
lab: setup
	@test -e $(DEPLOY_STAMP) || echo "Optional: 'make deploy' adds TVM and ExecuTorch for lessons 07-08 (their cells skip without them)."
	$(PY) -m grader work
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) work/

build: setup
	$(PY) -m grader build

# The whole suite: grader unit tests, registry and build checks, two-way truth, and nbval over the
# solutions (--nbval-lax: only cells tagged nbval-check-output, the check cells, compare their output);
# after a solution's last cell its answers are graded from nbval's kernel (conftest.py, FullMarks),
# so each solution is executed once.
# The starters in notebooks/ are executed top to bottom by tests/test_notebooks.py (which fails on any
# cell error and requires every exercise "not attempted"), so nbval does not run them a second time.
# Work is handed out by scope (a module, a notebook, or one notebook run of tests/test_notebooks.py),
# longest first (conftest.py), so the workers finish together.
# The suite's fresh processes start from empty Inductor cache folders on purpose (lesson 02's mega-cache,
# lesson 03's trace, lesson 04's recompile cost and their checks), and in each one Inductor would first
# build and load small test programs to learn which vector instructions (AVX2, AVX-512) work: 10-25 s
# per process on a 2-core machine. TORCHINDUCTOR_VEC_ISA_OK=1 trusts the CPU's own report instead
# (Inductor picks the same instruction set on this machine); the lessons run without it for learners.
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=600 --nbval-sanitize-with tests/nbval-sanitize.cfg
test: export TORCHINDUCTOR_VEC_ISA_OK := 1
test: deploy $(SITE_STAMP)
	$(PY) -m grader build --check
	$(PY) -m pytest -n $(JOBS) --dist loadscope --no-loadscope-reorder --durations=40 $(NBVAL) --ignore=tests/browser tests solutions

# The course in a real browser: JupyterLab 4 driven by Playwright with the system's Chromium (Debian and
# Ubuntu: apt-get install chromium; CHROMIUM=/path overrides), for lessons 00, 01, 04 and 09. .ci/run
# runs it after `make test`. Screenshots of failures go to browser-artifacts/.
test-browser: export TORCHINDUCTOR_VEC_ISA_OK := 1
test-browser: setup $(SITE_STAMP)
	$(PY) -m pytest -p no:xdist -q tests/browser

# Everything but whole-notebook execution.
test-fast: deploy
	$(PY) -m pytest -m "not notebooks and not slow" --ignore=tests/browser tests

grade: setup
	$(PY) -m grader grade $(DIR) --out grades.csv

# What grading costs beyond running, per lesson and for --jobs 2 (a benchmark: keep the machine quiet).
bench-grading: setup
	$(PY) benchmarks/grading_cost.py $(if $(LESSONS),--lessons $(LESSONS)) $(if $(CLASS_LESSONS),--class-lessons $(CLASS_LESSONS))

print-cache-dir:
	@echo $(TORCHINDUCTOR_CACHE_DIR)

clean:
	rm -rf $(VENV) .cache
