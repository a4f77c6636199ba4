"""A tiny causal language model whose token mixer is the course's own attention (notebook 12).

``TinyLM`` is token + learned position embeddings, ``n_layers`` pre-norm blocks
(x + mixer(norm(x)), then x + MLP(norm(x))), a final norm and an untied output layer.
Only the mixer changes between runs (``MIXERS``):

* "softmax": ``attention.softmax_attention`` (causal, 1/√d) — the reference;
* "linear": ``attention.linear_attention`` with elu + 1 (its differentiable causal engine);
* "performer": FAVOR+ positive orthogonal features, m = ``performer_features`` (default the head dim,
  so its ledger is the size of elu + 1's), drawn **once** from the model's seed and kept fixed;
* "decay": ``linear_attention`` with a fixed γ per head, RetNet's γ_h = 1 − 2^{−(5+h)} (0.969, 0.984,
  … : memories of ~32, 64, … tokens), with the course's normaliser kept;
* "delta": ``delta.delta_rule_attention`` with β = sigmoid(a linear map of the input), one per
  token and head (d_model·H + H parameters of its own);
* "delta_additive": the eraser ablation — delta's inputs (L2-normalised q and k, no normaliser, the
  same learned β) but an additive write S_t = S_{t−1} + β_t k_t v_tᵀ: delta minus the erase term alone;
* "gla": ``gated.gated_linear_attention`` with one gate per key channel, log α = logsigmoid(x W₁W₂ + b)/16
  through a rank-16 map as GLA does (its τ = 16 keeps early gates near 1), no normaliser, an RMS norm
  per head on the output;
* "gated_delta": the delta rule with a gate per token and head parameterised and initialised as Gated
  DeltaNet (and Mamba-2) do, log α = −exp(A_log)·softplus(W x + dt_bias), A ~ U(0, 16) and softplus(dt_bias)
  log-uniform in [0.001, 0.1] per head, so early gates sit near 1; β as "delta";
* "based": Based's two parts summed (Arora et al. 2024): linear attention with the second-order Taylor
  map of notebook 03b on q and k projected to ``BASED_FEATURES`` dims (positive, so the normaliser stays),
  plus exact softmax attention over the last ``BASED_WINDOW`` tokens (written here as a masked n×n
  softmax: readable, O(n²); a fast form keeps only the band).

``feature_map`` ("elu+1", "identity" or "relu", with mixer "linear" only) swaps φ and divides by the
normaliser φ(q_i)ᵀΣ_{j≤i}φ(k_j) + ``eps`` as it comes, *without* the refusal of a normaliser ≤ 0
that ``attention.linear_attention`` adds; each mixer then keeps the smallest |normaliser| of its
last forward pass in ``smallest_normaliser``. Notebook 09 §4 trains with it to see what signed
maps do to training. ``normaliser=False`` (mixer "linear") drops the denominator altogether and puts
an RMS norm per head on the sums instead, as RetNet and TransNormer do (φ = ``feature_map`` or elu+1):
a signed map such as "identity" is then as valid as a positive one (notebook 13).

Every mixer sees the same input: a short causal depthwise convolution (``conv_size`` taps, 0 turns
it off) over the normalised block input, then the q, k, v projections. Zoology and Based use such
a convolution so that a token can see its left neighbour cheaply: in associative recall the
value's position must know its key. It is applied to every mixer alike, so the comparison stays fair.
"""

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import linear_attention, linear_sums, softmax_attention
from course_lib.delta import delta_rule_attention
from course_lib.feature_maps import elu_plus_one, identity, relu, taylor_features
from course_lib.gated import gated_linear_attention
from course_lib.random_features import PerformerFeatures
from course_lib.validation import check_choice, check_flag, check_int, check_ints

MIXERS = ("softmax", "linear", "performer", "decay", "delta", "delta_additive", "gla", "gated_delta", "based")
GATE_RANK, GATE_TEMPERATURE = 16, 16.0  # GLA's low-rank gate map and its τ
BASED_FEATURES, BASED_WINDOW = 4, 8  # Based's small feature dim (1 + 4 + 16 Taylor features) and its window
FEATURE_MAPS = {"elu+1": elu_plus_one, "identity": identity, "relu": relu}  # for ``feature_map``


def head_decays(n_heads: int) -> torch.Tensor:
    """RetNet's γ_h = 1 − 2^{−(5+h)} for heads h = 0 … H−1 [H] float64: head h keeps ~2^{5+h} tokens."""
    return 1 - 2.0 ** -(torch.arange(n_heads, dtype=torch.float64) + 5)


def window_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Causal softmax attention over keys i − window < j ≤ i: [..., n, dv] (q, k [..., n, d], v [..., n, dv])."""
    n = q.shape[-2]
    offset = torch.arange(n, device=q.device)[:, None] - torch.arange(n, device=q.device)[None, :]  # i − j [n, n]
    outside = (offset < 0) | (offset >= window)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # [..., n, n]
    return scores.masked_fill(outside, -torch.inf).softmax(-1) @ v


def state_bytes(mixer: str, *, d_model: int, n_heads: int, seq_len: int, n_layers: int = 2, conv_size: int = 4,
                performer_features: int | None = None, normaliser: bool = True, bytes_per_number: int = 4) -> int:
    """Bytes a TinyLM carries from token ``seq_len`` to the next (Zoology's and Based's recall–memory axis).

    Per layer: the convolution's last conv_size − 1 inputs (d_model each), and per head: softmax's cache of
    keys and values (2·seq_len·dh, the one state that grows), or a ledger of f × dh numbers plus, where the
    mixer divides by a normaliser, its f running feature sums. f = dh (elu + 1, decay, the delta and gated
    mixers), m (FAVOR+), 1 + d' + d'² (Based's Taylor features; Based adds its window's cache, 2·W·dh).
    """
    check_choice("mixer", mixer, MIXERS)
    check_ints(d_model=d_model, n_heads=n_heads, seq_len=seq_len, n_layers=n_layers, bytes_per_number=bytes_per_number)
    dh = d_model // n_heads
    f = {"performer": performer_features or dh, "based": 1 + BASED_FEATURES + BASED_FEATURES ** 2}.get(mixer, dh)
    divides = mixer in ("performer", "decay", "based") or (mixer == "linear" and normaliser)
    head = {"softmax": 2 * seq_len * dh}.get(mixer, f * dh + divides * f + (mixer == "based") * 2 * BASED_WINDOW * dh)
    return bytes_per_number * n_layers * (max(conv_size - 1, 0) * d_model + n_heads * head)


class Mixer(nn.Module):
    """Causal token mixing by one of ``MIXERS``: [B, T, D] -> [B, T, D], H heads of D/H dims."""

    def __init__(self, d_model: int, n_heads: int, kind: str, *, conv_size: int = 4, seed: int = 0,
                 feature_map: str | None = None, eps: float = 0.0, normaliser: bool = True,
                 performer_features: int | None = None):
        super().__init__()
        check_choice("mixer", kind, MIXERS)
        check_int("performer_features", performer_features, optional=True)
        if performer_features is not None and kind != "performer":
            raise ValueError(f"performer_features sets FAVOR+'s m: it needs mixer 'performer', got {kind!r}")
        self.normalised = check_flag("normaliser", normaliser)
        if not normaliser and kind != "linear":
            raise ValueError(f"normaliser=False drops linear attention's denominator: it needs mixer 'linear', got {kind!r}")
        if feature_map is not None and (kind != "linear" or feature_map not in FEATURE_MAPS):
            raise ValueError(f"feature_map must be None or, with mixer 'linear', one of {tuple(FEATURE_MAPS)}; "
                             f"got {feature_map!r} with mixer {kind!r}")
        if not normaliser:
            feature_map = feature_map or "elu+1"
        self.phi, self.eps = (None if feature_map is None else FEATURE_MAPS[feature_map]), float(eps)
        self.smallest_normaliser: torch.Tensor | None = None  # min |φ(q)ᵀΣφ(k) + eps|, last forward
        if d_model % n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads, got {d_model} and {n_heads}")
        self.kind, self.n_heads, self.head_dim = kind, n_heads, d_model // n_heads
        self.conv = nn.Conv1d(d_model, d_model, conv_size, groups=d_model, padding=conv_size - 1) if conv_size else None
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.beta = nn.Linear(d_model, n_heads) if kind in ("delta", "delta_additive", "gated_delta") else None
        self.gate = {"gla": lambda: nn.Sequential(nn.Linear(d_model, GATE_RANK, bias=False), nn.Linear(GATE_RANK, d_model)),
                     "gated_delta": lambda: nn.Linear(d_model, n_heads, bias=False)}.get(kind, lambda: None)()
        if kind == "gated_delta":  # Gated DeltaNet's A and time step per head (module docstring)
            steps = torch.exp(torch.rand(n_heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))  # [H]
            self.gate_log_a = nn.Parameter(torch.log(16 * torch.rand(n_heads).clamp(min=1e-4)))  # A ~ U(0, 16)
            self.gate_dt_bias = nn.Parameter(steps + torch.log(-torch.expm1(-steps)))  # softplus⁻¹(step)
        self.head_norm = nn.RMSNorm(self.head_dim) if kind == "gla" or not normaliser else None  # no normaliser: a norm
        self.feature_proj = nn.Linear(self.head_dim, 2 * BASED_FEATURES, bias=False) if kind == "based" else None
        if kind == "performer":
            generator = torch.Generator().manual_seed(seed)
            self.features = PerformerFeatures(self.head_dim, performer_features or self.head_dim, generator=generator)
        decays = head_decays(n_heads).float() if kind == "decay" else None  # [H]: broadcasts to [B, H]
        self.register_buffer("gamma", decays, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        if self.conv is not None:
            x = self.conv(x.transpose(1, 2))[..., :T].transpose(1, 2)  # causal: the first T outputs [B, T, D]
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # [B, H, T, dh]
        if not self.normalised:  # the sums alone, then a norm per head (module docstring)
            mixed = self.head_norm(linear_sums(self.phi(q), self.phi(k), v, causal=True, method="auto")[0])
        elif self.phi is not None:  # the plain division, no refusal (module docstring)
            numerator, denominator = linear_sums(self.phi(q), self.phi(k), v, causal=True,
                                                 method="auto")[:2]  # the raw sums [B, H, T, dh], [B, H, T]
            normaliser = denominator + self.eps
            seen = normaliser.detach().abs()  # NaN only where an earlier layer already failed: skipped
            self.smallest_normaliser = seen.masked_fill(seen.isnan(), float("inf")).min()
            mixed = numerator / normaliser.unsqueeze(-1)
        elif self.kind == "softmax":
            mixed = softmax_attention(q, k, v, causal=True)
        elif self.kind == "linear":
            mixed = linear_attention(q, k, v, causal=True)
        elif self.kind == "performer":
            mixed = linear_attention(q, k, v, self.features, causal=True)
        elif self.kind == "decay":
            mixed = linear_attention(q, k, v, causal=True, decay=self.gamma.to(x.dtype))
        elif self.kind == "based":
            project_q, project_k = self.feature_proj.weight.chunk(2)  # [d', dh] each
            q_f, k_f = (x @ w.T / BASED_FEATURES ** 0.25 for x, w in ((q, project_q), (k, project_k)))  # [B, H, T, d']
            taylor = linear_attention(q_f, k_f, v, partial(taylor_features, order=2), causal=True)
            mixed = taylor + window_softmax(q, k, v, BASED_WINDOW)
        elif self.kind == "gla":
            log_gate = F.logsigmoid(self.gate(x)) / GATE_TEMPERATURE  # [B, T, D], <= 0
            log_gate = log_gate.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # [B, H, T, dh]
            mixed = self.head_norm(gated_linear_attention(q, k, v, log_gate))
        elif self.kind == "delta_additive":  # the eraser ablation (module docstring)
            beta = torch.sigmoid(self.beta(x)).transpose(1, 2).unsqueeze(-1)  # [B, H, T, 1]
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
            mixed = linear_sums(q, k, beta * v, causal=True, method="auto")[0]  # the raw sums, no denominator
        else:
            beta = torch.sigmoid(self.beta(x)).transpose(1, 2)  # [B, H, T], in (0, 1)
            log_gate = None if self.gate is None else (  # [B, H, T], <= 0
                -self.gate_log_a.exp() * F.softplus(self.gate(x) + self.gate_dt_bias)).transpose(1, 2)
            mixed = delta_rule_attention(q, k, v, beta, log_decay=log_gate)
        return self.out(mixed.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    """Pre-norm: x + mixer(norm(x)), then x + MLP(norm(x)) with a 4× GELU MLP."""

    def __init__(self, d_model: int, n_heads: int, mixer: str, *, conv_size: int, seed: int, **options):
        super().__init__()
        self.norm_mix, self.norm_mlp = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mixer = Mixer(d_model, n_heads, mixer, conv_size=conv_size, seed=seed, **options)  # feature_map, eps
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mixer(self.norm_mix(x))
        return x + self.mlp(self.norm_mlp(x))


class TinyLM(nn.Module):
    """Tokens [B, T] (T ≤ max_len) -> next-token logits [B, T, vocab_size] (module docstring)."""

    def __init__(self, vocab_size: int, *, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 mixer: str = "softmax", max_len: int = 256, conv_size: int = 4, seed: int = 0,
                 feature_map: str | None = None, eps: float = 0.0, normaliser: bool = True,
                 performer_features: int | None = None):
        super().__init__()
        check_ints(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, max_len=max_len)
        check_int("conv_size", conv_size, at_least=0, meaning="0: no convolution")
        self.max_len, self.mixer = max_len, mixer
        with torch.random.fork_rng(devices=[]):  # the weights are a function of the seed alone
            torch.manual_seed(seed)
            self.embed, self.position = nn.Embedding(vocab_size, d_model), nn.Embedding(max_len, d_model)
            self.blocks = nn.ModuleList(Block(d_model, n_heads, mixer, conv_size=conv_size, seed=seed + layer,
                                              feature_map=feature_map, eps=eps, normaliser=normaliser,
                                              performer_features=performer_features)
                                        for layer in range(n_layers))
            self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, V]; or, given ``at`` (bool [B, T]), only those positions' logits [N, V] (row-major
        order, as ``x[at]``): a task that scores few positions (MQAR) skips the output layer elsewhere."""
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long or tokens.dim() != 2:
            got = f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a long tensor [B, T], got {got}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(f"tokens has T={tokens.shape[1]} positions, more than max_len={self.max_len}")
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)  # [B, T, D]
        for block in self.blocks:
            x = block(x)
        if at is not None:
            if not isinstance(at, torch.Tensor) or at.dtype != torch.bool or at.shape != tokens.shape:
                raise ValueError(f"at must be a bool tensor shaped like tokens {tuple(tokens.shape)}, got "
                                 f"{getattr(at, 'dtype', type(at).__name__)} {tuple(getattr(at, 'shape', ()))}")
            x = x[at]  # [N, D]
        return self.head(self.norm(x))  # [B, T, V] or [N, V]

    def smallest_normaliser(self) -> float:
        """min |φ(q)ᵀΣφ(k) + eps| over every layer, head and token of the last forward (``feature_map`` only);
        NaN normalisers (fed by an earlier layer's NaN) are skipped, inf if every one was NaN."""
        seen = [block.mixer.smallest_normaliser for block in self.blocks]
        if any(s is None for s in seen):
            raise ValueError("smallest_normaliser needs a model built with feature_map=... and one forward pass")
        return float(torch.stack(seen).min())

    def parameter_count(self) -> int:
        """Trainable parameters (the budget every mixer shares, up to the delta rule's β layer)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
