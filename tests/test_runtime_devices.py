"""The device-aware helpers the lessons use on a GPU machine, proven on this CPU-only one by simulating
what torch and onnxruntime report there (the GPU run itself is the device tool's job)."""
from __future__ import annotations

import warnings

import onnxruntime as ort
import pytest
import torch

import grader
from grader import runtime

GPU_ORT = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


CUDA_NO_TF32 = ("CUDAExecutionProvider", {"use_tf32": "0"})


class Session:  # what ort_where reads of an InferenceSession
    def __init__(self, providers):
        self.providers = providers

    def get_providers(self):
        return self.providers


@pytest.mark.parametrize("cuda, available, expect, runs_on, says", [
    (False, ["CPUExecutionProvider"], ["CPUExecutionProvider"], "CPUExecutionProvider", "like every path here"),
    # onnxruntime-gpu on a machine with no GPU
    (False, GPU_ORT, ["CPUExecutionProvider"], "CPUExecutionProvider", "like every path here"),
    # a GPU, the CPU-only wheel
    (True, ["CPUExecutionProvider"], ["CPUExecutionProvider"], "CPUExecutionProvider", "onnxruntime-gpu"),
    (True, GPU_ORT, [CUDA_NO_TF32, "CPUExecutionProvider"], "CUDAExecutionProvider", "runs on the GPU"),
    # a GPU and onnxruntime-gpu whose CUDA libraries do not load: the session falls back to the CPU silently
    (True, GPU_ORT, [CUDA_NO_TF32, "CPUExecutionProvider"], "CPUExecutionProvider", "could not start"),
])
def test_ort_providers_and_where_follow_torch_the_onnxruntime_build_and_the_session(
        monkeypatch, cuda, available, expect, runs_on, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(ort, "get_available_providers", lambda: available)
    providers = grader.ort_providers()
    where = grader.ort_where(Session([runs_on, "CPUExecutionProvider"][: 1 + (runs_on != "CPUExecutionProvider")]))
    assert providers == expect and says in where, (providers, where)


def test_ort_providers_on_this_machine_make_a_working_session(tmp_path):
    providers = grader.ort_providers()
    names = [p if isinstance(p, str) else p[0] for p in providers]
    assert names[-1] == "CPUExecutionProvider" and set(names) <= set(ort.get_available_providers())
    model = torch.nn.Linear(4, 2)
    path = tmp_path / "linear.onnx"
    torch.onnx.export(model, (torch.randn(3, 4),), dynamo=True, verbose=False).save(path)
    session = ort.InferenceSession(str(path), providers=providers)
    assert session.get_providers()[0] == names[0] and grader.ort_where(session)


def test_tf32_advice_is_filtered_as_noise_but_can_be_recorded():
    message = ("TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. "
               "Consider setting `torch.set_float32_matmul_precision('high')` for better performance.")
    with warnings.catch_warnings(record=True) as caught:
        runtime.quiet()
        warnings.warn(message)  # as Inductor words it (torch/_inductor/compile_fx.py)
        assert not caught
        warnings.simplefilter("always")  # what lesson 04's TF32 cell does to show it
        warnings.warn(message)
    assert [str(w.message) for w in caught] == [message]


def test_inductor_still_words_and_caches_its_tf32_advice_as_the_filter_assumes():
    from torch._inductor import compile_fx

    source = open(compile_fx.__file__).read()
    assert "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled" in source
    assert hasattr(compile_fx._warn_tf32_disabled, "cache_clear")  # lesson 04 forgets it was given


def _fake_cgroups(tmp_path, proc_lines, files):
    proc = tmp_path / "cgroup"
    proc.write_text("\n".join(proc_lines) + "\n")
    for rel, text in files.items():
        path = tmp_path / "fs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(proc), str(tmp_path / "fs")


@pytest.mark.parametrize("proc_lines, files, expected", [
    # cgroup v2, quota on the process's own cgroup (systemd-run -p CPUQuota=50%), none at the root
    (["0::/user.slice/run-1.scope"], {"user.slice/run-1.scope/cpu.max": "50000 100000\n",
                                      "user.slice/cpu.max": "max 100000\n"}, "0.5 CPUs of time"),
    # cgroup v2, the tighter quota sits on an ancestor
    (["0::/a/b"], {"a/b/cpu.max": "max 100000\n", "a/cpu.max": "150000 100000\n"}, "1.5 CPUs of time"),
    # a container that mounts its own cgroup as the root: the listed path does not exist below the mount
    (["0::/docker/abc"], {"cpu.max": "200000 100000\n"}, "2 CPUs of time"),
    # cgroup v1, the cpu controller shares a hierarchy with cpuacct
    (["4:memory:/x", "2:cpu,cpuacct:/job7"], {"cpu,cpuacct/job7/cpu.cfs_quota_us": "25000\n",
                                             "cpu,cpuacct/job7/cpu.cfs_period_us": "100000\n",
                                             "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                                             "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, "0.25 CPUs of time"),
    # a controller without a quota, and no controller at all (a v2 root has no cpu.max)
    (["0::/a"], {"a/cpu.max": "max 100000\n"}, "none"),
    (["0::/"], {}, "no cgroup CPU controller visible"),
])
def test_cpu_quota_reads_the_process_own_cgroup(tmp_path, proc_lines, files, expected):
    from grader.runtime import cpu_quota

    assert cpu_quota(*_fake_cgroups(tmp_path, proc_lines, files)) == expected


def test_cpu_quota_without_cgroups(tmp_path):
    from grader.runtime import cpu_quota

    assert cpu_quota(str(tmp_path / "missing"), str(tmp_path)) == "not reported here (no Linux cgroups)"


def test_physical_cores_of_the_affinity_and_of_the_whole_machine(tmp_path):
    """MKL caps OMP_NUM_THREADS at the machine's physical cores whatever the affinity (lesson 00's claim), so
    ``machine=True`` counts every online CPU; the default counts the CPUs this process may run on."""
    import os
    import subprocess
    import sys

    from grader import runtime

    (tmp_path / "online").write_text("0-3,8-9\n")
    assert runtime._online_cpus(str(tmp_path / "online")) == {0, 1, 2, 3, 8, 9}
    if not hasattr(os, "sched_setaffinity"):
        return
    pinned = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
              "from grader.runtime import physical_cores; print(physical_cores(), physical_cores(machine=True))")
    mine, machine = subprocess.run([sys.executable, "-c", pinned], capture_output=True, text=True, check=True).stdout.split()
    assert mine == "1" and int(machine) == runtime.physical_cores(machine=True) >= 1
