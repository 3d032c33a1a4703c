"""The real step timer of `calibrate --measure`: vLLM's offline engine (`vllm.LLM`) on a local GPU.

vllm and torch are imported inside functions (through importlib, so the package imports and type-checks
without them). Method, stated in every measured profile's source:

- decode step at batch B: B prompts of `context` random token ids are generated twice, to n1 and to
  n2 output tokens (ignore_eos, so the lengths are exact); both runs share the prefill and the fixed
  per-call cost, so (wall(n2) - wall(n1)) / (n2 - n1) is the wall time of one decode step of B
  tokens, scheduling and output processing included, as in serving;
- prefill step of T tokens over n sequences (n prompts whose lengths sum to T, one output token each, so
  one forward pass): wall(prompts of T tokens) - wall(n prompts of 1 token) + decode step(B = n), i.e.
  the fixed per-call cost is removed with a same-sized call of n tokens whose step time is measured.

Prefix caching is off (a repeated prompt must not be served from cache); `skip_tokenizer_init` means no
tokenizer files are needed, and `load_format="dummy"` means no weights: only the model's config.json.
Every generate call checks that each sequence got exactly its output tokens and, where vLLM exposes
`LLM.get_metrics()`, that nothing was preempted (a batch the KV cache cannot hold is not a step of B).
Known approximations: prefill tokens attend only to their own short prompt (verification tokens attend
to a long context), and the 1-token baseline call runs at context 0 while its decode step ran at
`context`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sovereignspec.evidence.measure import MeasureError, StepShape

METHOD = (
    "decode: wall-time difference of two generate calls (n1, n2 output tokens) per extra step; "
    "prefill: one-step call minus a same-batch 1-token call plus its decode step"
)


class Unavailable(Exception):
    """This machine cannot run the profiler; the message says why and what to do, in one line."""


@dataclass(frozen=True)
class Preflight:
    gpu: str
    vllm_version: str
    torch_version: str


def gpu_present() -> str | None:
    """Name of an NVIDIA GPU on this machine, or None (nvidia-smi missing or listing nothing)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [x.strip() for x in out.stdout.splitlines() if x.strip()]
    return names[0] if out.returncode == 0 and names else None


def preflight() -> Preflight:
    """Check, cheapest first: an NVIDIA GPU (nvidia-smi), vLLM installed, torch seeing CUDA."""
    name = gpu_present()
    if name is None:
        raise Unavailable(
            "calibrate --measure needs an NVIDIA GPU and nvidia-smi found none on this machine; "
            "nothing measured"
        )
    if importlib.util.find_spec("vllm") is None:
        raise Unavailable(
            f"calibrate --measure found GPU {name} but vLLM is not installed in {sys.executable}: "
            "`pip install vllm` (it brings a CUDA build of torch); nothing measured"
        )
    try:
        torch: Any = importlib.import_module("torch")
        cuda = bool(torch.cuda.is_available())
    except ImportError as e:
        raise Unavailable(
            f"calibrate --measure: vLLM is installed but torch does not import ({e}); "
            "reinstall vllm; nothing measured"
        ) from e
    if not cuda:
        raise Unavailable(
            f"calibrate --measure: nvidia-smi lists {name} but torch {torch.__version__} sees no "
            "CUDA device (driver/CUDA mismatch, or CUDA_VISIBLE_DEVICES hides it); "
            "nothing measured"
        )
    return Preflight(
        gpu=str(torch.cuda.get_device_name(0)),
        vllm_version=importlib.metadata.version("vllm"),
        torch_version=str(torch.__version__),
    )


def split_tokens(tokens: int, sequences: int) -> list[int]:
    """`tokens` spread over `sequences` prompts as evenly as possible (lengths differ by at most 1)."""
    q, r = divmod(tokens, sequences)
    return [q + 1] * r + [q] * (sequences - r)


def _preemptions(llm: Any) -> int | None:
    """vLLM's cumulative preemption counter (LLM.get_metrics, vLLM V1), or None where not exposed."""
    get = getattr(llm, "get_metrics", None)
    if get is None:
        return None
    try:
        metrics = get()
    except Exception:  # a version without the in-memory reader: no check, not a failure
        return None
    names = ("vllm:num_preemptions", "vllm:num_preemptions_total")
    values = [int(m.value) for m in metrics if getattr(m, "name", None) in names and hasattr(m, "value")]
    return sum(values) if values else None


class VllmStepTimer:
    """A `StepTimer` over one `vllm.LLM` engine; see the module docstring for the method."""

    def __init__(
        self,
        llm: Any,
        sampling_params: Any,
        *,
        context: int,
        decode_steps: int,
        vocab: int,
        seed: int = 0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._llm = llm
        self._sp = sampling_params
        self._context = context
        self._n1 = 2
        self._n2 = 2 + decode_steps
        self._low, self._high = 10, max(11, min(vocab, 32_000))
        self._rng = np.random.default_rng(seed)
        self._clock = clock
        self._decode: dict[int, float] = {}

    @classmethod
    def start(
        cls,
        model: str,
        *,
        load_format: str,
        dtype: str,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        enforce_eager: bool,
        tensor_parallel_size: int,
        gpu_memory_utilization: float,
        context: int,
        decode_steps: int,
        seed: int = 0,
    ) -> VllmStepTimer:
        """Start the engine (minutes: weights or dummy init, profiling, CUDA graph capture unless eager).

        The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0 unless set): all requests
        of a generate call are queued before its first step, so a prefill call is exactly one step.
        """
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        vllm: Any = importlib.import_module("vllm")
        llm = vllm.LLM(
            model=model,
            load_format=load_format,
            dtype=dtype,
            skip_tokenizer_init=True,
            enable_prefix_caching=False,
            enable_chunked_prefill=True,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            disable_log_stats=False,  # keeps LLM.get_metrics() fed: the preemption check reads it
        )
        vocab = 32_000
        with contextlib.suppress(AttributeError, TypeError, ValueError):  # older/newer engines: keep 32k
            vocab = int(llm.llm_engine.model_config.get_vocab_size())
        return cls(
            llm, vllm.SamplingParams, context=context, decode_steps=decode_steps, vocab=vocab, seed=seed
        )

    def _prompts(self, lengths: list[int]) -> list[dict[str, list[int]]]:
        return [
            {"prompt_token_ids": self._rng.integers(self._low, self._high, size=n).tolist()} for n in lengths
        ]

    def _generate(self, lengths: list[int], max_tokens: int) -> float:
        """Wall seconds of one generate call; checks every sequence got exactly max_tokens, unpreempted."""
        params = self._sp(
            max_tokens=max_tokens, min_tokens=max_tokens, ignore_eos=True, temperature=0.0, detokenize=False
        )
        prompts = self._prompts(lengths)
        before = _preemptions(self._llm)
        t = self._clock()
        outs = self._llm.generate(prompts, params, use_tqdm=False)
        wall = self._clock() - t
        got = [len(o.outputs[0].token_ids) for o in outs]
        if len(got) != len(lengths) or any(g != max_tokens for g in got):
            raise MeasureError(
                f"vLLM returned {len(got)} outputs of lengths {sorted(set(got))}, "
                f"expected {len(lengths)} x {max_tokens}"
            )
        after = _preemptions(self._llm)
        if before is not None and after is not None and after > before:
            raise MeasureError(
                f"vLLM preempted {after - before} request(s): the KV cache does not hold "
                f"{len(lengths)} sequences of {max(lengths) + max_tokens} tokens; lower --context "
                "or the grid"
            )
        return wall

    def _decode_step(self, batch: int) -> float:
        lengths = [self._context] * batch
        w1 = self._generate(lengths, self._n1)
        w2 = self._generate(lengths, self._n2)
        step = (w2 - w1) / (self._n2 - self._n1)
        if step <= 0:
            raise MeasureError(
                f"timing noise exceeds {self._n2 - self._n1} decode steps (difference {w2 - w1:.4f} s)"
            )
        self._decode[batch] = step
        return step

    def _prefill_step(self, shape: StepShape) -> float:
        full = self._generate(split_tokens(shape.tokens, shape.sequences), 1)
        base = self._generate([1] * shape.sequences, 1)
        decode = self._decode.get(shape.sequences)
        if decode is None:
            decode = self._decode_step(shape.sequences)
        step = full - base + decode
        if step <= 0:
            raise MeasureError(
                f"timing noise exceeds the prefill cost (full {full:.4f} s, base {base:.4f} s)"
            )
        return step

    def __call__(self, shape: StepShape) -> float:
        try:
            return self._decode_step(shape.sequences) if shape.kind == "decode" else self._prefill_step(shape)
        except MeasureError:
            raise
        except Exception as e:  # the engine's errors differ by vLLM version (CUDA OOM, engine core died, ...)
            raise MeasureError(
                f"vLLM failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
