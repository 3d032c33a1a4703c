"""The simulator's scenario file: nodes, GPUs, pods and the knobs of the load model.

Pods come from the file (fast tests) or from the API server (local cluster); the load knobs
(base load per node, request rates, acceptance curves) come from the file in both cases.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

from sovereignspec.api.base import Model


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message says where."""


class AcceptanceCurve(Model):
    """Either i.i.d. per-token acceptance `alpha` (p_i = alpha^i) or explicit p_1..p_n (non-increasing);
    beyond the list, p extends geometrically with the last ratio."""

    alpha: float | None = Field(default=None, gt=0, lt=1)
    per_position: list[float] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> AcceptanceCurve:
        if (self.alpha is None) == (self.per_position is None):
            raise ValueError("give exactly one of alpha or perPosition")
        pp = self.per_position
        if pp is not None and (
            not pp or any(not 0 < p < 1 for p in pp) or any(b > a for a, b in itertools.pairwise(pp))
        ):
            raise ValueError("perPosition must be non-empty, in (0, 1) and non-increasing")
        return self

    def p(self, k: int) -> list[float]:
        """p_1..p_k: probability that positions 1..i are all accepted."""
        if self.alpha is not None:
            return [self.alpha**i for i in range(1, k + 1)]
        pp = list(self.per_position or [])
        ratio = pp[-1] / pp[-2] if len(pp) >= 2 else pp[-1]
        while len(pp) < k:
            pp.append(pp[-1] * ratio)
        return pp[:k]


class ProductProfile(Model):
    """Step time of a reference target model on this accelerator: t(T) = t0 + perToken * T (seconds)."""

    t0: float = Field(gt=0)
    per_token: float = Field(gt=0)
    memory_mib: float = Field(gt=0, alias="memoryMiB")


class MigSpec(Model):
    profile: str = Field(pattern=r"^[0-9]+g\.[0-9]+gb$")
    instances_per_gpu: int = Field(ge=1, le=7)

    @property
    def memory_mib(self) -> float:
        return float(self.profile.split(".")[1].removesuffix("gb")) * 1024


class NodeSpec(Model):
    name: str
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpus: int = Field(default=8, ge=0, le=64)
    base_load: float = Field(default=0.0, ge=0, lt=1, description="Tensor-active of tenants not simulated.")
    noise: float | None = Field(
        default=None, ge=0, le=0.5, description="Tensor-active noise std on this node (None: the scenario's)."
    )
    base_memory_mib: float = Field(default=0.0, ge=0, alias="baseMemoryMiB")
    time_slicing_replicas: int = Field(default=1, ge=1, le=64)
    hostname_label: str = Field(default="Hostname", pattern="^(Hostname|hostname)$")
    mig: MigSpec | None = None


class PodSpec(Model):
    namespace: str
    name: str
    node: str
    gpus: int = Field(default=1, ge=1, le=64)
    model: str | None = None
    request_rate: float | None = Field(default=None, ge=0, description="Requests per second.")
    output_tokens: int | None = Field(default=None, ge=1)
    step_scale: float = Field(default=1.0, gt=0, description="Target size relative to the reference model.")
    annotations: dict[str, str] = {}

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


class Defaults(Model):
    request_rate: float = Field(default=1.0, ge=0)
    output_tokens: int = Field(default=256, ge=1)
    max_num_seqs: int = Field(default=256, ge=1)
    memory_fraction: float = Field(default=0.9, gt=0, le=1)
    model: str = "meta-llama/Llama-3.1-8B-Instruct"


class Override(Model):
    """Force one metric's value on every sample whose labels include `match` (fault injection)."""

    metric: str
    match: dict[str, str] = {}
    value: float


class Scenario(Model):
    seed: int = 0
    tick_seconds: float = Field(default=1.0, gt=0, le=60)
    noise: float = Field(default=0.01, ge=0, le=0.5, description="Std of tensor-active noise per tick.")
    defaults: Defaults = Defaults()
    acceptance: dict[str, AcceptanceCurve] = {}
    method_acceptance: dict[str, AcceptanceCurve] = {
        "eagle3": AcceptanceCurve(alpha=0.8),
        "eagle": AcceptanceCurve(alpha=0.7),
        "mtp": AcceptanceCurve(alpha=0.8),
        "draft_model": AcceptanceCurve(alpha=0.65),
        "ngram": AcceptanceCurve(alpha=0.5),
    }
    draft_cost: dict[str, float] = {
        "eagle3": 0.03,
        "eagle": 0.04,
        "mtp": 0.03,
        "draft_model": 0.08,
        "ngram": 0.0,
    }
    products: dict[str, ProductProfile] = {}
    nodes: list[NodeSpec] = []
    pods: list[PodSpec] = []
    overrides: list[Override] = []

    @model_validator(mode="after")
    def _refs(self) -> Scenario:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        keys = [p.key for p in self.pods]
        if len(set(keys)) != len(keys):
            raise ValueError("pod namespace/name pairs must be unique")
        unknown = sorted({p.node for p in self.pods} - set(names))
        if unknown:
            raise ValueError(f"pods on unknown nodes: {unknown}")
        return self


BUILTIN_PRODUCTS: dict[str, ProductProfile] = {
    "NVIDIA-H100-80GB-HBM3": ProductProfile(t0=0.0060, per_token=(0.140 - 0.0060) / 4096, memory_mib=81559),
    "NVIDIA-H200": ProductProfile(t0=0.0045, per_token=(0.125 - 0.0045) / 4096, memory_mib=143771),
    "NVIDIA-A100-SXM4-80GB": ProductProfile(t0=0.0090, per_token=(0.300 - 0.0090) / 4096, memory_mib=81920),
    "NVIDIA-L40S": ProductProfile(t0=0.0120, per_token=(0.420 - 0.0120) / 4096, memory_mib=46068),
}


def product_profile(scenario: Scenario, product: str) -> ProductProfile:
    return (
        scenario.products.get(product)
        or BUILTIN_PRODUCTS.get(product)
        or BUILTIN_PRODUCTS["NVIDIA-H100-80GB-HBM3"]
    )


def load_scenario(path: str | Path) -> Scenario:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
    try:
        return Scenario.model_validate(data or {})
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
