"""Inductor's FX graph cache key leaves out the CPU's vector ISA: code generated for AVX-512 is reused
under AVX2 and computes wrong values.

What it shows (torch 2.13.0+cpu, Linux x86_64; found on 2.13.0, not checked on other versions).
On a CPU, `FxGraphHashDetails` (torch/_inductor/codecache.py) hashes `torch_key()`,
`CacheBase.get_system()` (on a machine without CUDA/ROCm: the hash of `{}`), the Inductor config and the
thread count, but not the vector ISA that `torch._inductor.cpu_vec_isa.pick_vec_isa()` chose. That ISA
shapes the generated C++ (the vector loop's step: 16 floats for AVX-512, 8 for AVX2). When a cached
entry is loaded, its source is built with the *local* ISA's flags (`CppCodeCache.load_async`, codecache.py ~3710,
`pick_vec_isa()`), so 16-lane source is built with 8-lane `at::vec::Vectorized<float>`.

The script runs three fresh processes, one thread each, that compile `relu(x * 2 + 1) * sigmoid(x)` on
1,000 floats and compare with eager:
  1. "save":  the host's own ISA, an empty cache folder A (writes the FX graph cache entry);
  2. "load":  ATEN_CPU_CAPABILITY=avx2, which makes pick_vec_isa() choose as an AVX2-only CPU would
              (cpu_vec_isa.py, get_isa_from_cpu_capability), on the same folder A;
  3. "fresh": ATEN_CPU_CAPABILITY=avx2 on folder A with the FX graph cache off
              (TORCHINDUCTOR_FX_GRAPH_CACHE=0): the control, what AVX2 code should compute.
The same happens with a cache folder shared between machines (NFS, a container image, a CI cache)
and with the mega-cache (torch.compiler.save_cache_artifacts / load_cache_artifacts).

Expected: process 2 misses the FX graph cache (or hits code that is right for AVX2) and matches eager,
          like process 3.
Actual (x86_64 with AVX-512, VNNI and AMX, pick_vec_isa() = 'avx512 avx512_vnni amx_tile', torch 2.13.0+cpu,
          Python 3.11.7): process 2 HITS, its vector loop steps by 16, and 383 to 409 of the 1000 elements
          differ from eager in three runs (a few NaN among them); process 3 steps by 8 and matches.
With --reverse (process 1 under ATEN_CPU_CAPABILITY=avx2, process 2 with the host's AVX-512): process 2
          reuses the 8-lane entry, builds it with 16-lane vectors and dies with SIGABRT: "corrupted
          size vs. prev_size" or "malloc_consolidate(): invalid chunk size" (two runs; 49 s in all).

Needs an x86 CPU where pick_vec_isa() picks an AVX-512 ISA; elsewhere it says so and exits 0.
Exit status: 1 when the bug shows (a hit with wrong values, or with --reverse a crash), 0 otherwise.
Three small compiles: about 45 s of CPU time (a first process also builds the ISA probe's test programs).
"""
import json
import os
import subprocess
import sys
import tempfile

CHILD = r'''
import json, re, sys
import torch
from torch._dynamo.utils import counters
from torch._inductor import cpu_vec_isa
from torch._inductor.utils import run_and_get_code

torch.set_num_threads(1)  # the thread count is in the key: keep it equal


def f(x):
    return torch.relu(x * 2 + 1) * x.sigmoid()


x = torch.randn(1000, generator=torch.Generator().manual_seed(0))
out, (code, *_) = run_and_get_code(torch.compile(f), x)
print(json.dumps({
    "isa": str(cpu_vec_isa.pick_vec_isa()),
    "hit": counters["inductor"]["fxgraph_cache_hit"],
    "miss": counters["inductor"]["fxgraph_cache_miss"],
    "vector_steps": sorted(set(re.findall(r"\+=\s*static_cast<int64_t>\((\d+)L?\)", code))),
    "wrong": int((~torch.isclose(out, f(x))).sum()),
    "nan": int(out.isnan().sum()),
}))
'''


def run(label, folder, isa=None, fx_graph_cache=True):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": folder, "TORCHINDUCTOR_FX_GRAPH_CACHE": str(int(fx_graph_cache))}
    env.pop("ATEN_CPU_CAPABILITY", None)
    if isa:
        env["ATEN_CPU_CAPABILITY"] = isa
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        print(f"{label}: the process failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return None
    report = json.loads(done.stdout.splitlines()[-1])
    print(f"{label:<6} picked {report['isa']!r:<30} FX graph cache hit {report['hit']} miss {report['miss']}, "
          f"vector loop steps {report['vector_steps']}, elements differing from eager: {report['wrong']} of 1000 "
          f"({report['nan']} NaN)")
    return report


def main():
    import torch
    from torch._inductor import cpu_vec_isa

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    host = str(cpu_vec_isa.pick_vec_isa())
    if "avx512" not in host or "avx2" not in [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]:
        print(f"this host picks {host!r}: the reproducer needs an x86 CPU that picks AVX-512; nothing to show")
        return 0
    reverse = "--reverse" in sys.argv[1:]
    saving, loading = ("avx2", None) if reverse else (None, "avx2")
    with tempfile.TemporaryDirectory() as folder:
        run("save", folder, saving)
        loaded = run("load", folder, loading)
        run("fresh", folder, loading, fx_graph_cache=False)
    if reverse and loaded is None:
        print("BUG: the entry written under AVX2 was reused where AVX-512 is picked, and the process crashed")
        return 1
    if loaded and loaded["hit"] and loaded["wrong"]:
        print(f"BUG: the entry written under {'AVX2' if reverse else 'AVX-512'} was reused under "
              f"{'AVX-512' if reverse else 'AVX2'} and computed wrong values")
        return 1
    print("no wrong values: the bug does not show here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
