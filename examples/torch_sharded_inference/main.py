"""The PyTorch twin of examples/sharded_inference: the same safetensors model (--make-model of
the C++ example), the same requests and result lines, the same resumable output; the layers
are torch modules, tensor-parallel through parallelize_module (ColwiseParallel for q, k, v and
the MLP's up projection, RowwiseParallel for the attention output and the down projection) on
torch's backend "spark", CPU tensors.
    sparkrun -n 3 python3 main.py --model m.safetensors --input req.jsonl --output out.jsonl
See docs/examples/torch_sharded_inference.md."""
import argparse
import json
import os
import struct
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import libspark.torch  # noqa: F401  (registers backend "spark")

# Inference draws no random numbers: DTensor's note about random operators on CPU is noise.
warnings.filterwarnings("ignore", message="DTensor random operators")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402

FNV_OFFSET, FNV_PRIME, MASK = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1


def read_safetensors(path):
    """{name: float32 tensor}, metadata; errors name the file."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        meta = header.pop("__metadata__", {})
        tensors = {}
        for name, t in header.items():
            if t["dtype"] != "F32":
                raise ValueError(f"tensor {name} is {t['dtype']}, not F32")
            b, e = t["data_offsets"]
            tensors[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(
                t["shape"])
        cfg = {k: int(meta[k]) for k in ("vocab", "dim", "heads", "ffn", "layers", "blocks")}
    except (struct.error, ValueError, KeyError, RuntimeError) as e:
        raise ValueError(f"{path}: not a model of sharded_inference --make-model ({e})")
    return tensors, cfg


def parse_requests(text, vocab):
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        j = json.loads(line)
        if not isinstance(j, dict) or not isinstance(j.get("prompt"), list) or not j["prompt"]:
            raise ValueError(f'requests line {n}: expected {{"id": ..., "prompt": [token ids, ...]}}')
        if any(not isinstance(t, int) or not 0 <= t < vocab for t in j["prompt"]):
            raise ValueError(f"requests line {n}: a token is not in [0, {vocab})")
        out.append({"id": j.get("id", len(out)), "prompt": j["prompt"]})
    return out


def fnv(h, logits):
    for b in logits.numpy().tobytes():
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def result_line(rid, tokens, h):
    return results_file.dump({"id": rid, "logits_fnv": f"{h:016x}", "tokens": tokens})


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def rope(x, pos, hd):
    """x [B, H, T, hd], pos [B, T]: pairs (i, i+1) turned by pos * 10000^(-i/hd)."""
    inv = torch.pow(torch.tensor(10000.0), -torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos[:, None, :, None].float() * inv
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, w, p, dim, ffn):
        super().__init__()
        lin = lambda name, o, i: nn.Linear(i, o, bias=False).requires_grad_(False)  # noqa: E731
        self.q, self.k, self.v, self.o = (lin(n, dim, dim) for n in "qkvo")
        self.up, self.down = lin("up", ffn, dim), lin("down", dim, ffn)
        for mod, name in ((self.q, "wq"), (self.k, "wk"), (self.v, "wv"), (self.o, "wo"), (self.up, "w_up"),
                          (self.down, "w_down")):
            mod.weight.copy_(w[p + name])
        self.attn_norm, self.mlp_norm = w[p + "attn_norm"], w[p + "mlp_norm"]


class Model:
    """The decoder of examples/inference/model.cpp; KV cache [batch, local heads, length, hd]."""

    def __init__(self, path, mesh):
        w, self.cfg = read_safetensors(path)
        c = self.cfg
        n = mesh.size()
        if c["blocks"] % n or c["heads"] % n:
            raise ValueError(f"model has {c['blocks']} blocks, which {n} ranks cannot share evenly: use a rank "
                             f"count that divides {c['blocks']}")
        self.hd, self.local_heads = c["dim"] // c["heads"], c["heads"] // n
        self.embed, self.final_norm, self.lm_head = w["embed"], w["final_norm"], w["lm_head"]
        self.blocks = []
        for i in range(c["layers"]):
            b = Block(w, f"layers.{i}.", c["dim"], c["ffn"])
            # Whole heads per rank: torch's even split of dim is the C++ example's block split.
            parallelize_module(b, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                         "o": RowwiseParallel(), "up": ColwiseParallel(),
                                         "down": RowwiseParallel()})
            self.blocks.append(b)

    def reset_cache(self, batch, length):
        hl = self.local_heads
        self.cache = [(torch.zeros(batch, hl, length, self.hd), torch.zeros(batch, hl, length, self.hd))
                      for _ in self.blocks]

    @torch.no_grad()
    def forward(self, tokens, pos):
        """tokens, pos [B, T] -> hidden states [B, T, dim]; writes the KV cache at pos."""
        B, T = tokens.shape
        x = self.embed[tokens]
        length = self.cache[0][0].shape[2]
        allowed = torch.arange(length)[None, None, :] <= pos[:, :, None]  # causal, per request
        bi = torch.arange(B)[:, None].expand(B, T)
        for blk, (ck, cv) in zip(self.blocks, self.cache):
            h = rmsnorm(x, blk.attn_norm)
            q, k, v = (m(h).view(B, T, -1, self.hd).transpose(1, 2) for m in (blk.q, blk.k, blk.v))
            q, k = rope(q, pos, self.hd), rope(k, pos, self.hd)
            ck[bi, :, pos] = k.transpose(1, 2)
            cv[bi, :, pos] = v.transpose(1, 2)
            s = (q @ ck.transpose(-1, -2)) * (1.0 / self.hd ** 0.5)
            s = s.masked_fill(~allowed[:, None], float("-inf"))
            a = (torch.softmax(s, dim=-1) @ cv).transpose(1, 2).reshape(B, T, -1)
            x = x + blk.o(a)
            x = x + blk.down(F.silu(blk.up(rmsnorm(x, blk.mlp_norm))))
        return x

    def logits(self, rows):
        return rmsnorm(rows, self.final_norm) @ self.lm_head.T


class Progress:
    """Rank 0's stderr: a bar on a terminal, else a line every `every` s; from the resumed count."""

    def __init__(self, total, start, every, quiet):
        self.total, self.start, self.quiet = total, start, quiet
        self.tty = sys.stderr.isatty()
        self.every = 0.1 if self.tty else every
        self.t0 = self.last = time.monotonic()
        if not quiet:
            self.draw(start, 0, self.t0)

    def update(self, done, tokens):
        now = time.monotonic()
        if self.quiet or (done < self.total and now - self.last < self.every):
            return
        self.last = now
        self.draw(done, tokens, now)

    @staticmethod
    def clock(seconds):
        t = int(seconds + 0.5)
        return f"{t // 3600}:{t // 60 % 60:02d}:{t % 60:02d}"

    def draw(self, done, tokens, now):
        s = max(now - self.t0, 1e-9)
        rate = (done - self.start) / s
        eta = "done" if done == self.total else "?" if rate <= 0 else self.clock((self.total - done) / rate)
        if self.tty:
            fill = 30 * done // max(self.total, 1)
            sys.stderr.write(f"\r[{'#' * fill}{'.' * (30 - fill)}] {done}/{self.total} requests  {tokens / s:.0f} "
                             f"tok/s  ETA {eta}   " + ("\n" if done == self.total else ""))
        else:
            sys.stderr.write(f"progress: {done}/{self.total} requests, {rate:.1f} requests/s, {tokens / s:.0f} "
                             f"tokens/s, ETA {eta}\n")
        sys.stderr.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="safetensors model (sharded_inference --make-model)")
    ap.add_argument("--input", default="-", help='requests, one JSON object per line; - = stdin (rank 0)')
    ap.add_argument("--output", default="-", help="results (JSONL) written by rank 0; - = stdout. A file is "
                    "resumed: an existing one of the same job (FILE.job) keeps its results")
    ap.add_argument("--batch", type=int, default=8, help="requests per batch (default 8)")
    ap.add_argument("--new-tokens", type=int, default=16, help="greedy decode steps per request (default 16)")
    ap.add_argument("--restart-output", action="store_true", help="discard an existing --output and start over "
                    "(a restarted attempt of sparkrun --max-restarts keeps this job's progress)")
    ap.add_argument("--fsync", choices=("batch", "none"), default="batch", help="fdatasync after every batch")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("--progress-every", type=float, default=2.0, help="seconds between progress lines")
    ap.add_argument("--logits", help="also write every logits vector (float32, request by request) to this file "
                    "(rank 0; for comparing runs)")
    a = ap.parse_args()
    if a.batch < 1 or a.new_tokens < 1:
        ap.error("--batch and --new-tokens must be at least 1")
    torch.set_num_threads(1)  # the same bits on every run of a rank count
    dist.init_process_group("spark")
    rank, n = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (n,))
    model = Model(a.model, mesh)
    V = model.cfg["vocab"]
    box = [None]
    if rank == 0:
        box[0] = sys.stdin.buffer.read() if a.input == "-" else open(a.input, "rb").read()
    dist.broadcast_object_list(box, src=0)
    text = box[0]
    requests = parse_requests(text.decode(), V)

    results, start = None, torch.zeros(1, dtype=torch.int64)
    if rank == 0 and a.output != "-":
        try:
            job = {"program": "torch_sharded_inference", "model_sha256": results_file.sha256_file_hex(a.model),
                   "input_sha256": results_file.sha256_hex(text), "requests": len(requests),
                   "new_tokens": a.new_tokens, "reduce": "plain", "ranks": n, "batch": a.batch}
            attempt = int(os.environ.get("SPARK_RESTART_COUNT") or 0)
            existing = "resume" if not a.restart_output else "start_over" if attempt == 0 else "resume_if_same"

            def is_result(i, line):
                try:
                    j = json.loads(line)
                    return (len(j["tokens"]) == a.new_tokens and len(j["logits_fnv"]) == 16 and
                            result_line(requests[i]["id"], j["tokens"], int(j["logits_fnv"], 16)).encode() == line)
                except (ValueError, KeyError, TypeError):
                    return False

            results = results_file.ResultsFile(a.output, job, existing, is_result,
                                               lambda s: print(f"torch_sharded_inference: {s}", file=sys.stderr),
                                               align=a.batch)
            start[0] = results.done
            if results.done:
                print(f"torch_sharded_inference: resuming '{a.output}': {results.done} of {len(requests)} requests "
                      "done", file=sys.stderr)
        except (ValueError, OSError) as e:
            print(f"torch_sharded_inference: error: {e}", file=sys.stderr)
            start[0] = -1
    dist.broadcast(start, src=0)
    if start.item() < 0:
        dist.destroy_process_group()
        return 1 if rank == 0 else 0
    first = start.item()
    logits_out = open(a.logits, "wb") if a.logits and rank == 0 else None
    progress = Progress(len(requests), first, a.progress_every, a.quiet or rank != 0)
    t0, ntok = time.monotonic(), 0
    for b0 in range(first, len(requests), a.batch):
        batch = requests[b0:b0 + a.batch]
        lens = torch.tensor([len(r["prompt"]) for r in batch])
        L = int(lens.max())
        model.reset_cache(len(batch), L + a.new_tokens)
        tokens = torch.zeros(len(batch), L, dtype=torch.int64)
        for i, r in enumerate(batch):
            tokens[i, :len(r["prompt"])] = torch.tensor(r["prompt"])
        pos = torch.arange(L)[None, :].expand(len(batch), L).contiguous()
        x = model.forward(tokens, pos)
        rows = x[torch.arange(len(batch)), lens - 1]
        gen = [[] for _ in batch]
        hashes = [FNV_OFFSET] * len(batch)
        ntok += int(lens.sum())
        for step in range(a.new_tokens):
            logits = model.logits(rows)
            nxt = torch.argmax(logits, dim=-1)  # the first of equal maxima, as the C++ example
            for i in range(len(batch)):
                if rank == 0:
                    hashes[i] = fnv(hashes[i], logits[i])
                gen[i].append(int(nxt[i]))
            if logits_out:
                logits_out.write(logits.numpy().tobytes())
            ntok += len(batch)
            if step + 1 == a.new_tokens:
                break
            x = model.forward(nxt[:, None], (lens + step)[:, None])
            rows = x[:, 0]
        if rank == 0:
            lines = "".join(result_line(r["id"], g, h) + "\n" for r, g, h in zip(batch, gen, hashes))
            if results:
                results.append(lines.encode(), len(batch))
                results.commit(a.fsync == "batch")
            else:
                sys.stdout.write(lines)
                sys.stdout.flush()
            progress.update(b0 + len(batch), ntok)
    if rank == 0:
        t = max(time.monotonic() - t0, 1e-9)
        done_before = f" ({first} more were done before)" if first else ""
        print(f"summary: {len(requests) - first} requests on {n} ranks{done_before} in {t:.3f} s: "
              f"{(len(requests) - first) / t:.1f} requests/s, {ntok / t:.0f} tokens/s with prompts", file=sys.stderr)
    if logits_out:
        logits_out.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
