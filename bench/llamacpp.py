"""llama.cpp decoding the bundled SmolLM2-135M GGUF: the speed anchor `talkline bench spec --reference llama-cpp` puts
beside the embedded engine, on the same prompt tokens in the same run.

llama-cpp-python is not a dependency (it compiles llama.cpp for a few minutes):
`pip install llama-cpp-python==0.3.36` brings it. It decodes the GGUF as packaged (4-bit Q4_1 weights, no adapter),
so its replies differ from the tuned model's; only its speed is compared.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from importlib import metadata

from models.assets import smollm2_gguf

INSTALL = "pip install llama-cpp-python==0.3.36"


class ReferenceUnavailable(RuntimeError):
    """The reference cannot run here; the message says what to install."""


class LlamaCppReference:
    """Greedy decoding with llama.cpp on `threads` threads; every prompt starts from an empty KV cache."""

    def __init__(self, threads: int, stop_ids: Iterable[int], n_ctx: int = 4096) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ReferenceUnavailable(f"the llama.cpp reference needs llama-cpp-python: {INSTALL}") from e
        self.gguf = smollm2_gguf()
        self.llm = Llama(model_path=str(self.gguf), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
        self.stop_ids = set(stop_ids) | {self.llm.token_eos()}
        self.name = f"llama.cpp (llama-cpp-python {metadata.version('llama-cpp-python')}), {self.gguf.name}"

    def timed(self, prompt: list[int], max_new: int) -> tuple[list[int], float, float]:
        """(tokens, seconds to the first token, decode seconds after it) for a cold prompt, as `bench.spec.timed`."""
        self.llm.reset()
        tokens: list[int] = []
        t0 = time.perf_counter()
        ttft = None
        for token in self.llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0):
            ttft = time.perf_counter() - t0 if ttft is None else ttft
            if token in self.stop_ids:
                break
            tokens.append(token)
            if len(tokens) >= max_new:
                break
        ttft = ttft or 0.0
        return tokens, ttft, time.perf_counter() - t0 - ttft
