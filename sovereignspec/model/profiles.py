"""Accelerator profiles: built-in defaults from public specs, and lookup by GPU product and target model.

Built-in profiles are rooflines for a reference target, an 8-billion-parameter dense model served in
BF16 (Llama-3.1-8B class: fits every card listed, the RTX 4090 included). Policies override them with
calibrated `stepTime` tables per (product, targetModel). mfu 0.5 / mbu 0.75 are typical achieved
fractions for vLLM decode and prefill; they are deliberately not peak.

Draft cost c_d: an EAGLE/EAGLE-3 head is one decoder layer against the target's 32, but its launches,
LM head and sampling per draft position cost far more than 1/32 in practice: fitting the decision
core's S_real to the published EAGLE-3 speed-up curves (`sovereignspec calibrate`, shipped in
sovereignspec/evidence/profiles/published.yaml; see docs/evidence.md) gives c_d = 0.21 (SGLang, H100),
0.15 (vLLM, RTX 3090) and 0.11 (vLLM EAGLE 3.1) at alpha = 0.75, the posterior quantile this policy
decides on; 0.08-0.35 over alpha = 0.7-0.9, never the 0.04 of the layer count → 0.15, the median.
DeepSeek-style MTP module ≈ 0.05 (not calibrated); a separate ~1B draft model for an 8B target ≈ 1/8 →
0.12; n-gram lookup runs on the CPU → 0. Draft memory: a BF16 EAGLE head for an 8B target is under
1 GiB plus its KV cache; a 1B draft model ~2.5 GiB of weights plus KV (the 70B case needs 2-4 GB for an
EAGLE head, so calibrate per target).
"""

from __future__ import annotations

from collections.abc import Iterable

from sovereignspec.api.speculation_policy import AcceleratorProfile, Roofline, SpeculationPolicySpec

REFERENCE_PARAMS_B = 8.0

DEFAULT_DRAFT_COST = {
    "eagle": 0.15,
    "eagle3": 0.15,
    "mtp": 0.05,
    "medusa": 0.03,
    "mlp_speculator": 0.03,
    "draft_model": 0.12,
    "ngram": 0.0,
}
DEFAULT_DRAFT_MEMORY_MIB = {
    "eagle": 1024.0,
    "eagle3": 1536.0,
    "mtp": 1536.0,
    "medusa": 1024.0,
    "mlp_speculator": 1024.0,
    "draft_model": 4096.0,
    "ngram": 0.0,
}


def _roofline_profile(
    product: str, aliases: list[str], tflops: float, gbs: float, source: str
) -> AcceleratorProfile:
    return AcceleratorProfile(
        product=product,
        aliases=aliases,
        target_model="*",
        roofline=Roofline(peak_tflops=tflops, memory_bandwidth_gbs=gbs, params_b=REFERENCE_PARAMS_B),
        draft_cost=DEFAULT_DRAFT_COST,
        draft_memory_mib=DEFAULT_DRAFT_MEMORY_MIB,
        source=source,
    )


DEFAULT_PROFILES: tuple[AcceleratorProfile, ...] = (
    _roofline_profile(
        "NVIDIA-A100-SXM4-80GB",
        ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB"],
        312.0,
        2039.0,
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM: BF16 tensor 312 TFLOPS dense, "
        "HBM2e 2,039 GB/s",
    ),
    _roofline_profile(
        "NVIDIA-H100-80GB-HBM3",
        ["NVIDIA H100 80GB HBM3", "NVIDIA-H100-SXM5-80GB", "NVIDIA H100-SXM"],
        989.0,
        3350.0,
        "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 tensor 1,979 TFLOPS with sparsity "
        "(989 dense), HBM3 3.35 TB/s",
    ),
    _roofline_profile(
        "NVIDIA-H200",
        ["NVIDIA H200", "NVIDIA-H200-141GB-HBM3e", "NVIDIA H200 141GB HBM3e"],
        989.0,
        4800.0,
        "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 tensor 1,979 TFLOPS with sparsity "
        "(989 dense), HBM3e 4.8 TB/s",
    ),
    _roofline_profile(
        "NVIDIA-GeForce-RTX-4090",
        ["NVIDIA GeForce RTX 4090"],
        165.2,
        1008.0,
        "NVIDIA Ada Lovelace GPU Architecture whitepaper v2.1, Appendix A: RTX 4090 peak BF16 tensor "
        "TFLOPS with FP32 accumulate 165.2 dense, GDDR6X 1,008 GB/s",
    ),
)


def normalize_product(name: str) -> str:
    """Case-insensitive, spaces/underscores → '-', MIG suffix dropped (`...-MIG-1g.10gb`)."""
    n = name.strip().lower().replace(" ", "-").replace("_", "-")
    cut = n.find("-mig-")
    return n[:cut] if cut >= 0 else n


class ProfileBook:
    """Ordered lookup: policy profiles before built-ins; an exact targetModel before the '*' wildcard."""

    def __init__(self, profiles: Iterable[AcceleratorProfile]) -> None:
        self._by_product: dict[str, list[AcceleratorProfile]] = {}
        for p in profiles:
            for name in (p.product, *p.aliases):
                self._by_product.setdefault(normalize_product(name), []).append(p)
        self._cache: dict[tuple[str, str], AcceleratorProfile | None] = {}

    def find(self, product: str | None, target_model: str | None) -> AcceleratorProfile | None:
        if not product:
            return None
        key = (product, target_model or "")
        if key in self._cache:
            return self._cache[key]
        found: AcceleratorProfile | None = None
        candidates = self._by_product.get(normalize_product(product), [])
        for p in candidates:
            if target_model and p.target_model == target_model:
                found = p
                break
        if found is None:
            found = next((p for p in candidates if p.target_model == "*"), None)
        self._cache[key] = found
        return found


def profile_book(policy: SpeculationPolicySpec) -> ProfileBook:
    """The policy's profiles, then the built-in ones when the policy keeps them."""
    return ProfileBook([*policy.accelerator_profiles, *(DEFAULT_PROFILES if policy.builtin_profiles else ())])
