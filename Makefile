# `make run` and `make test` work on a fresh machine: the first call creates .venv/
# and installs the project into it; the stamp file keeps later calls from reinstalling.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The HTML report's tests render it in headless Chromium, a Debian package: installed
# here when missing and we are root (as CI is); otherwise the tests say what to install.
CHROMIUM = $(shell command -v chromium || command -v chromium-browser)
CHROMIUM_FLAGS = --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars

.PHONY: run test lint bench clean browser screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# PyTorch's CPU build first, pinned: the `torch` extra's range then installs nothing
	# more (unpinned, pip would fetch a CUDA build of several GB).
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Ends by saying how to call gradcheck from this shell, whatever the run's exit code.
run: $(STAMP)
	@$(BIN)/gradcheck run cases/; status=$$?; \
	echo; echo "gradcheck is installed in $(VENV)/: call it as $(BIN)/gradcheck ..., or"; \
	echo "run 'source $(BIN)/activate' first, then gradcheck ... (gradcheck --help)"; \
	exit $$status

# One pytest-xdist worker per core: the tests keep to their own temporary folders.
test: $(STAMP) browser
	$(BIN)/python -m pytest -n auto

browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "make: the HTML report's tests need Chromium (Debian: apt-get install chromium)" >&2; fi

# The README's picture: the seed report as gradcheck writes it, drawn by Chromium.
screenshot: $(STAMP) browser
	$(BIN)/gradcheck run cases/seed.yaml --engine examples/seed_engine.py \
		--output $(VENV)/seed-report.html >/dev/null || test $$? = 1
	profile=$$(mktemp -d) && $(or $(CHROMIUM),chromium) $(CHROMIUM_FLAGS) \
		--user-data-dir=$$profile --window-size=1280,1640 --screenshot=docs/seed-report.png \
		file://$(CURDIR)/$(VENV)/seed-report.html 2>/dev/null; status=$$?; rm -rf $$profile; \
		exit $$status

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

bench: $(STAMP)
	$(BIN)/python bench/run_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache build src/*.egg-info
