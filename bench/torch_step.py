"""PyTorch as a competitor for Shoal's engines (driven by bench/torch-child.ts for bench:engine and bench:device).

The same GPT-2 as packages/model (nanoGPT names and shapes: learned position embeddings,
pre-LayerNorm blocks with eps 1e-5, tanh GELU, biases everywhere, the head tied to wte with no
bias), trained with the same step: mean cross-entropy, backward, global-norm clipping, AdamW
with decoupled decay on 2-D tensors only (embeddings and linear weights). Eager PyTorch as most
people run it on a CPU: attention is nanoGPT's explicit masked T×T square (PyTorch 1.13 has no
fused attention), matmuls go to the BLAS PyTorch was linked with. With --device cuda it is PyTorch
as people train on a GPU: F.scaled_dot_product_attention(is_causal=True), fused AdamW, and the
setup's precision: fp32 (TF32 off), tf32, or bf16 (autocast around the forward, TF32 elsewhere).

One long-lived process per thread count, speaking JSON lines on stdin/stdout:

    python3 bench/torch_step.py --threads N [--device cpu|cuda]
    → {"ok": true, "hello": {torch, python, threads, blas, device}}   (or ok false, missingTorch true)
    ← {"op": "setup", config, B, T, tensors, params | paramsFile, batches, train, lr, [precision], [attention]}
      params: base64 little-endian float32 in layout order (paramsFile: the same bytes in a file,
      for models whose base64 would not fit in one JSON line); batches: base64 int32 tokens;
      precision fp32 | tf32 | bf16 (cuda only; fp32 default); attention explicit | sdpa
      (default explicit on cpu, sdpa on cuda)
    → {"ok": true, "parameters": P}
    ← {"op": "run", "steps": N}   N steps, cycling through the batches, optimizer state kept
    → {"ok": true, "ms": [...], "cpuMs": [...], "losses": [...]}   per step: wall, process CPU, loss
      (cuda: per-step times from CUDA events, one synchronisation after the last step, so steps
      queue as in a training loop; cpuMs is the run's process CPU time spread evenly)
    ← {"op": "precision", "precision": P}   the same model and optimizer, from now on in precision P
    → {"ok": true, "precision": P}
    ← {"op": "grads", config, B, T, tensors, params | paramsFile, inputs, targets, gradsFile}
      loss and gradient of one batch in float64 (explicit attention), no optimizer step
    → {"ok": true, "loss": L, "gradsFile": path}   float64 little-endian gradients in layout order
    ← {"op": "flops"}   one more step under the profiler
    → {"ok": true, "flops": F}   FLOPs PyTorch's profiler counted (its matmuls), or null
    ← {"op": "quit"}
Any request that fails answers {"ok": false, "error": "..."} and the process stays up.
"""

import argparse
import base64
import ctypes
import json
import math
import os
import sys
import time


def reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--threads", type=int, required=True)
parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
cli = parser.parse_args()
if cli.threads < 1:
    reply({"ok": False, "error": f"--threads must be at least 1, got {cli.threads}"})
    sys.exit(2)
# Before torch loads: OpenMP (PyTorch's and OpenBLAS-openmp's pool) reads these at start.
os.environ["OMP_NUM_THREADS"] = str(cli.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(cli.threads)

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as error:
    reply({"ok": False, "missingTorch": True, "error": str(error), "executable": sys.executable})
    sys.exit(3)

torch.set_num_threads(cli.threads)
if cli.device == "cuda" and not torch.cuda.is_available():
    reply({"ok": False, "error": f"--device cuda: torch {torch.__version__} sees no CUDA device"})
    sys.exit(4)
DEVICE = torch.device(cli.device)
PRECISIONS = ("fp32", "tf32", "bf16")


def loaded_blas():
    """The BLAS library this process actually mapped (the Debian alternative decides it)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "blas" in os.path.basename(path).lower():
                    return path
    except OSError:
        pass
    return None


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, block_size, sdpa):
        super().__init__()
        self.n_head = NH
        self.sdpa = sdpa
        self.c_attn = nn.Linear(C, 3 * C)  # q, k, v side by side, head h at h·hs in each
        self.c_proj = nn.Linear(C, C)
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.sdpa:  # fused (flash or memory-efficient) causal attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T), the whole square
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH, block_size, sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = CausalSelfAttention(C, NH, block_size, sdpa)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, sdpa=False):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head, block_size, sdpa) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd, eps=1e-5),
            )
        )

    def forward(self, idx, targets):
        B, T = idx.shape
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(T, device=idx.device))
        for block in t.h:
            x = block(x)
        logits = F.linear(t.ln_f(x), t.wte.weight)  # tied head, no bias
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def positive_int(message, key):
    value = message.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def finite_number(message, key):
    value = message.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")
    return float(value)


def decode(text, dtype, count, what):
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a base64 string")
    raw = base64.b64decode(text, validate=True)
    itemsize = torch.tensor([], dtype=dtype).element_size()
    if len(raw) != count * itemsize:
        raise ValueError(f"{what} has {len(raw) // itemsize} values, expected {count}")
    # bytearray: frombuffer wants a writable buffer; .clone() owns the memory. Little-endian (x86, ARM).
    return torch.frombuffer(bytearray(raw), dtype=dtype).clone()


def build_model(n_layer, n_head, n_embd, block_size, vocab, sdpa):
    """The GPT, built where it will run: on a GPU its random init (overwritten by the layout's
    parameters) takes milliseconds instead of seconds on the CPU for a model of 300M parameters."""
    if DEVICE.type == "cuda":
        with DEVICE:  # a torch.device is a context manager for new tensors from PyTorch 2.0
            return GPT(n_layer, n_head, n_embd, block_size, vocab, sdpa=sdpa)
    return GPT(n_layer, n_head, n_embd, block_size, vocab, sdpa=sdpa)


def model_shape(message):
    """(n_layer, n_head, n_embd, block_size, vocab, B, T) of a setup or grads request, checked."""
    config = message.get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{message.get('op')} needs a config object")
    n_layer, n_head, n_embd, block_size, vocab = (
        positive_int(config, key) for key in ("nLayer", "nHead", "nEmbd", "blockSize", "vocabSize")
    )
    if n_embd % n_head:
        raise ValueError(f"nEmbd {n_embd} is not divisible by nHead {n_head}")
    B, T = positive_int(message, "B"), positive_int(message, "T")
    if T > block_size:
        raise ValueError(f"T {T} exceeds blockSize {block_size}")
    return n_layer, n_head, n_embd, block_size, vocab, B, T


def read_file(path, what):
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what} must be a file path")
    with open(path, "rb") as source:
        return bytearray(source.read())


def flat_params(message, total):
    """The float32 parameter vector of a request: base64 `params`, or the raw bytes of `paramsFile`."""
    if "paramsFile" in message:
        raw = read_file(message["paramsFile"], "paramsFile")
        if len(raw) != 4 * total:
            raise ValueError(f"paramsFile has {len(raw) // 4} values, expected {total}")
        return torch.frombuffer(raw, dtype=torch.float32).clone()
    return decode(message.get("params"), torch.float32, total, "params")


def load_params(model, message):
    """Copies the flat vector into the model, tensor by tensor, checking names and shapes."""
    tensors = message.get("tensors")
    if not isinstance(tensors, list):
        raise ValueError("the request needs the layout's tensors: [{name, shape, offset}]")
    named = dict(model.named_parameters())
    total = sum(p.numel() for p in named.values())
    flat = flat_params(message, total)
    seen = set()
    with torch.no_grad():
        for spec in tensors:
            name, shape, offset = spec.get("name"), spec.get("shape"), spec.get("offset")
            target = named.get(name)
            if target is None:
                raise ValueError(f"the PyTorch model has no parameter {name!r}")
            if shape != list(target.shape):
                raise ValueError(f"{name}: layout shape {shape}, PyTorch {list(target.shape)}")
            if not isinstance(offset, int) or offset < 0 or offset + target.numel() > total:
                raise ValueError(f"{name}: offset {offset!r} outside the {total} parameters")
            target.copy_(flat[offset : offset + target.numel()].view(target.shape))
            seen.add(name)
    missing = sorted(set(named) - seen)
    if missing:
        raise ValueError(f"the layout does not cover {missing}")
    return total


def tokens(message, key, B, T, vocab, what):
    values = decode(message.get(key), torch.int32, B * T, f"{what} {key}").long().view(B, T)
    if values.min() < 0 or values.max() >= vocab:
        raise ValueError(f"{what} has tokens outside 0..{vocab - 1}")
    return values.to(DEVICE)


def set_precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "fp32" and DEVICE.type != "cuda":
        raise ValueError(f"precision {precision} needs --device cuda")
    if DEVICE.type == "cuda":
        # TF32 for matmuls and convolutions: off for fp32; on for tf32 and for what bf16's autocast leaves in fp32.
        torch.backends.cuda.matmul.allow_tf32 = precision != "fp32"
        torch.backends.cudnn.allow_tf32 = precision != "fp32"


class Session:
    """One model, optimizer and batch list; replaced by the next setup."""

    def __init__(self, message):
        n_layer, n_head, n_embd, block_size, vocab, B, T = model_shape(message)
        train = message.get("train")
        if not isinstance(train, dict):
            raise ValueError("setup needs a train object")
        beta1, beta2, eps, weight_decay, grad_clip = (
            finite_number(train, key) for key in ("beta1", "beta2", "eps", "weightDecay", "gradClip")
        )
        self.lr = finite_number(message, "lr")
        self.grad_clip = grad_clip
        self.precision = message.get("precision", "fp32")
        set_precision(self.precision)
        attention = message.get("attention", "sdpa" if DEVICE.type == "cuda" else "explicit")
        if attention not in ("explicit", "sdpa"):
            raise ValueError(f"attention must be explicit or sdpa, got {attention!r}")

        torch.manual_seed(0)  # the init is overwritten below; seeded only so nothing varies
        self.model = build_model(n_layer, n_head, n_embd, block_size, vocab, sdpa=attention == "sdpa")
        self.parameters = load_params(self.model, message)

        batches = message.get("batches")
        if not isinstance(batches, list) or not batches:
            raise ValueError("setup needs a non-empty list of batches")
        self.batches = []
        for i, batch in enumerate(batches):
            if not isinstance(batch, dict):
                raise ValueError(f"batch {i} is not an object")
            self.batches.append(tuple(tokens(batch, key, B, T, vocab, f"batch {i}") for key in ("inputs", "targets")))
        self.next_batch = 0

        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.lr,
            betas=(beta1, beta2),
            eps=eps,
            **({"fused": True} if DEVICE.type == "cuda" else {}),
        )

    def step_loss(self):
        """One training step; the loss as a tensor (reading it would wait for the GPU)."""
        inputs, targets = self.batches[self.next_batch]
        self.next_batch = (self.next_batch + 1) % len(self.batches)
        if self.precision == "bf16":
            with torch.autocast(device_type=DEVICE.type, dtype=torch.bfloat16):
                loss = self.model(inputs, targets)
        else:
            loss = self.model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def step(self):
        return self.step_loss().item()

    def run(self, steps):
        if DEVICE.type == "cuda":
            return self.run_cuda(steps)
        ms, cpu_ms, losses = [], [], []
        for _ in range(steps):
            wall, cpu = time.perf_counter(), time.process_time()
            losses.append(self.step())
            cpu_ms.append((time.process_time() - cpu) * 1000)
            ms.append((time.perf_counter() - wall) * 1000)
        return {"ms": ms, "cpuMs": cpu_ms, "losses": losses}

    def run_cuda(self, steps):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        torch.cuda.synchronize()
        wall, cpu = time.perf_counter(), time.process_time()
        events[0].record()
        losses = []
        for i in range(steps):
            losses.append(self.step_loss())
            events[i + 1].record()
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - wall) * 1000
        cpu_ms = (time.process_time() - cpu) * 1000 / steps
        return {
            "ms": [events[i].elapsed_time(events[i + 1]) for i in range(steps)],
            "cpuMs": [cpu_ms] * steps,
            "losses": torch.stack(losses).float().tolist(),
            "wallMs": wall_ms,
        }

    def flops(self):
        """FLOPs of one step as PyTorch's profiler counts them (mm, addmm, bmm: forward and backward)."""
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as prof:
            self.step()
        counted = sum(event.flops or 0 for event in prof.key_averages())
        return counted or None


def gradients(message):
    """Loss and float64 gradients of one batch (no optimizer step), written to gradsFile in layout order."""
    n_layer, n_head, n_embd, block_size, vocab, B, T = model_shape(message)
    path = message.get("gradsFile")
    if not isinstance(path, str) or not path:
        raise ValueError("grads needs a gradsFile path")
    torch.manual_seed(0)
    model = build_model(n_layer, n_head, n_embd, block_size, vocab, sdpa=False)
    total = load_params(model, message)
    model.to(dtype=torch.float64)
    inputs = tokens(message, "inputs", B, T, vocab, "grads")
    targets = tokens(message, "targets", B, T, vocab, "grads")
    loss = model(inputs, targets)
    loss.backward()
    flat = torch.zeros(total, dtype=torch.float64)
    named = dict(model.named_parameters())
    for spec in message["tensors"]:
        offset, target = spec["offset"], named[spec["name"]]
        flat[offset : offset + target.numel()] = target.grad.detach().flatten().cpu()
    with open(path, "wb") as sink:
        # The tensor's own bytes (little-endian float64), without needing numpy.
        sink.write(ctypes.string_at(flat.data_ptr(), flat.numel() * flat.element_size()))
    return {"ok": True, "loss": loss.item(), "gradsFile": path}


def handle(session, message):
    op = message.get("op") if isinstance(message, dict) else None
    if op == "setup":
        session = Session(message)
        return session, {"ok": True, "parameters": session.parameters}
    if op == "grads":
        return session, gradients(message)
    if op in ("run", "flops", "precision") and session is None:
        raise ValueError(f"{op} before setup")
    if op == "run":
        return session, {"ok": True, **session.run(positive_int(message, "steps"))}
    if op == "flops":
        return session, {"ok": True, "flops": session.flops()}
    if op == "precision":
        set_precision(message.get("precision"))
        session.precision = message["precision"]
        return session, {"ok": True, "precision": session.precision}
    raise ValueError(f"unknown op {op!r}: expected setup, run, flops, precision, grads or quit")


def main():
    reply(
        {
            "ok": True,
            "hello": {
                "torch": torch.__version__,
                "python": sys.version.split()[0],
                "executable": sys.executable,
                "threads": torch.get_num_threads(),
                "blas": loaded_blas(),
                "device": torch.cuda.get_device_name(0) if DEVICE.type == "cuda" else "cpu",
            },
        }
    )
    session = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            if isinstance(message, dict) and message.get("op") == "quit":
                return
            if isinstance(message, dict) and message.get("op") == "setup" and session is not None:
                session = None  # the previous model's memory goes before the next one is built
                if DEVICE.type == "cuda":
                    torch.cuda.empty_cache()
            session, answer = handle(session, message)
        except Exception as error:  # one bad request answers with its error; the process stays up
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        reply(answer)


main()
