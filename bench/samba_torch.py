"""The Samba stack in PyTorch eager fp32, as a PyTorch user would write it (a benchmark baseline, not a profile).

embedding -> per layer Mamba-3 (bench_mamba3.TorchMamba3: chunked prefill, per-token recurrent step) or a
Llama attention block (scaled_dot_product_attention over a preallocated KV cache) -> final RMSNorm -> tied
or untied head. `forward` is the stateless prefill; `prefill` also returns the carried state, and `step`
decodes one token per row from it without re-running any chunk or recomputing cached keys/values.
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mamba3 import TorchMamba3  # noqa: E402
from bench_transformer import TorchBlock  # noqa: E402

F = torch.nn.functional


class TorchMamba3Carried(TorchMamba3):
    """TorchMamba3 plus the recurrent state its chunked prefill ends in, in the layout its `step` reads."""

    @torch.no_grad()
    def end_state(self, x):
        """The state after a fresh prefill of x (B, L, d_model): H_L = sum_t exp(sum_{s>t} A dt_s) *
        (gamma_t + beta'_{t+1}) v_t k_t^T (the chunked fold, taken over the whole sequence at once), the
        angles, and the last token's k and v (its trapezoid term is added by the next step)."""
        w, nh, hd = self.w, self.nh, 64
        bsz, length, _ = x.shape
        z, v, bn, cn, a, dt, sig, rate = self._project(x)
        theta = torch.remainder(torch.cumsum(rate[:, :, None, :] * dt[..., None], dim=1), 2 * torch.pi)
        k = self._rotate(bn[:, :, None, :] + w["B_bias"], theta)  # (B, L, H, N)
        v = v.reshape(bsz, length, nh, hd)
        beta_next = torch.zeros_like(dt)
        beta_next[:, :-1] = (dt * (1 - sig))[:, 1:]
        kscale = k * (dt * sig + beta_next)[..., None]
        # Decay to the end as a difference of running sums, in float64 so 2048 tokens do not cancel.
        cum = torch.cumsum((a * dt).double(), dim=1)
        decay = torch.exp(cum[:, -1:] - cum).float()  # (B, L, H)
        h = torch.einsum("blhp,blhn->bhpn", v * decay[..., None], kscale)
        return {
            "h": h,
            "theta": theta[:, -1].clone(),
            "k": k[:, -1].clone(),
            "v": v[:, -1].clone(),
            "beta_ready": torch.ones(bsz, nh),
        }


class TorchAttention(TorchBlock):
    """bench_transformer's Llama block (its RoPE tables and RMSNorm) for any head counts, attention by
    scaled_dot_product_attention: causal over the whole call in a prefill from position 0, unmasked over
    the cached prefix for a one-token step."""

    def __init__(self, weights, n_heads, n_kv_heads, head_dim, max_positions):
        super().__init__(weights, max_positions=max_positions)
        assert self.cos.shape[-1] == head_dim, "TorchBlock's RoPE tables are built for its head_dim"
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim

    def new_cache(self, batch, max_tokens):
        shape = (batch, self.n_kv_heads, max_tokens, self.head_dim)
        return {"k": torch.zeros(shape), "v": torch.zeros(shape), "len": 0}

    def forward(self, x, cache):
        nh, nkv, hd = self.n_heads, self.n_kv_heads, self.head_dim
        b, length, _ = x.shape
        pos0 = cache["len"]
        assert length == 1 or pos0 == 0, "a multi-token call must start at position 0"
        q, k, v = self.rotated_qkv(x, pos0, nh, nkv, hd)
        total = pos0 + length
        cache["k"][:, :, pos0:total] = k
        cache["v"][:, :, pos0:total] = v
        cache["len"] = total
        keys, values = cache["k"][:, :, :total], cache["v"][:, :, :total]
        if nkv != nh:
            keys = keys.repeat_interleave(nh // nkv, dim=1)
            values = values.repeat_interleave(nh // nkv, dim=1)
        ctx = F.scaled_dot_product_attention(q, keys, values, is_causal=length > 1)
        return self.output(x, ctx.transpose(1, 2).reshape(b, length, nh * hd))


class TorchSamba:
    """The whole stack over a samebits.SambaConfig and a registry-keyed dict of float32 numpy weights."""

    def __init__(self, config, weights, max_positions=4096):
        self.config = config
        self.embed = torch.from_numpy(weights["embed.weight"].copy())
        self.norm_f = torch.from_numpy(weights["norm_f.weight"].copy())
        self.head = self.embed if config.tie_embeddings else torch.from_numpy(weights["lm_head.weight"].copy())
        self.eps = float(config.norm_eps)
        self.layers = []
        for i, kind in enumerate(config.layers):
            prefix = f"layers.{i}."
            block = {n[len(prefix) :]: a for n, a in weights.items() if n.startswith(prefix)}
            if kind == "mamba3":
                self.layers.append(TorchMamba3Carried(block))
            else:
                self.layers.append(
                    TorchAttention(block, config.n_heads, config.n_kv_heads, config.head_dim, max_positions)
                )

    def _head(self, x):
        normed = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.norm_f
        return F.linear(normed, self.head)

    @torch.no_grad()
    def forward(self, ids):
        """Stateless: (B, L) int64 ids -> (B, L, vocab) logits."""
        x = F.embedding(ids, self.embed)
        for layer in self.layers:
            if isinstance(layer, TorchMamba3Carried):
                x = layer.prefill(x)
            else:
                x = layer.forward(x, layer.new_cache(ids.shape[0], ids.shape[1]))
        return self._head(x)

    @torch.no_grad()
    def prefill(self, ids, max_tokens):
        """(logits, state) after a fresh prefill; the attention caches hold max_tokens positions."""
        x = F.embedding(ids, self.embed)
        state = []
        for layer in self.layers:
            if isinstance(layer, TorchMamba3Carried):
                state.append(layer.end_state(x))
                x = layer.prefill(x)
            else:
                cache = layer.new_cache(ids.shape[0], max_tokens)
                x = layer.forward(x, cache)
                state.append(cache)
        return self._head(x), state

    @torch.no_grad()
    def step(self, ids, state):
        """(B,) int64 ids -> (B, vocab) logits; `state` is carried in place."""
        x = F.embedding(ids[:, None], self.embed)
        for layer, cache in zip(self.layers, state):
            x = layer.step(x, cache) if isinstance(layer, TorchMamba3Carried) else layer.forward(x, cache)
        return self._head(x)[:, 0]

    @staticmethod
    def clone_state(state):
        return [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in layer.items()} for layer in state]


def weights_for(config, seed=0):
    """Deterministic float32 weights for every registry tensor: Mamba-3 layers in bench_mamba3's ranges
    (projections uniform in [-1/8, 1/8), norms near one), attention and head matrices N(0, 1/fan_in), the
    embedding N(0, 0.1^2) so the tied head's logits stay O(1)."""
    from bench_mamba3 import weights_for as mamba3_weights

    rng = np.random.default_rng(seed)
    out = {}
    for i, kind in enumerate(config.layers):
        if kind == "mamba3":
            for name, array in mamba3_weights(config.d_model, seed=seed + 1 + i).items():
                out[f"layers.{i}.{name}"] = array
    for name, shape in config.registry():
        if name in out:
            continue
        if name == "embed.weight":
            out[name] = (0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif len(shape) == 1:
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
    return out
