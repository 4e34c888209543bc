"""Drives one python-label test: runs real jobs under sparkrun (or by hand) and checks them.
    run_case.py CASE SPARKRUN
Prints PASS, or FAIL: <why>; exits 77 (skip) with the reason when the torch backend is not built."""
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from free_port import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
case, sparkrun = sys.argv[1], sys.argv[2]



def run_store_ranks(code, port, env_of_rank, hung):
    """Two ranks running `code` RANK PORT (a TCPStore on PORT): their processes (ended) and
    outputs; fail(hung) and kill both when one does not end within 60 s."""
    procs = [subprocess.Popen([PY, "-c", code, str(r), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env_of_rank(r))
             for r in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=60)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            fail(hung)
    return procs, outs

def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def need_torch():
    """The torch backend's cases are registered only where it is built: it must import."""
    try:
        import torch  # noqa: F401
        from libspark import _c10d  # noqa: F401
    except ImportError as e:
        fail(f"the torch backend was built but does not import: {e}")


def need_torch_module():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: no torch in this interpreter (apt-get install python3-torch)")
        sys.exit(77)


def run(cmd, env=None, timeout=120):
    """Runs cmd in its own process group; returns (rc, output, seconds)."""
    full_env = dict(os.environ, **(env or {}))
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=full_env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        print(out)
        fail(f"{' '.join(cmd)} hung (> {timeout} s)")
    took = time.monotonic() - start
    print(f"$ {' '.join(cmd)}  -> exit {p.returncode} after {took:.2f} s\n{out}", flush=True)
    return p.returncode, out, took


def job(n, script, *args, env=None, timeout=120):
    return run([sparkrun, "-n", str(n), PY, os.path.join(HERE, script), *args], env, timeout)


def expect_ok(n, out, rc):
    if rc != 0:
        fail(f"the job exited {rc}")
    for r in range(n):
        if f"rank {r} ok" not in out:
            fail(f"rank {r} did not finish")


def leftovers(marker):
    got = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [pid for pid in got if int(pid) != os.getpid()]


def pip_route():
    """docs/python.md's first route: pip install --no-build-isolation ./python in a venv with
    the system's torch, then a 2-rank job with the venv's interpreter and nothing on
    PYTHONPATH: the installed package and its backend must be the ones that run."""
    src = os.environ["TEST_SOURCE_DIR"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.path.isdir(os.environ.get("TEST_CCACHE_DIR", "")):  # scripts/debian13-build's cache
        env["CCACHE_DIR"] = os.environ["TEST_CCACHE_DIR"]
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        rc, out, _ = run([PY, "-m", "venv", "--system-site-packages", venv], timeout=120)
        if rc != 0:
            fail("python3 -m venv failed (Debian: apt-get install python3-venv)")
        vpy = os.path.join(venv, "bin", "python")
        # The same compile flags as scripts/debian13-build's, so that its ccache serves what
        # was compiled there.
        flags = "-O2 -g0 -DNDEBUG"
        cmd = [vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q",
               "-C", "cmake.build-type=RelWithDebInfo",
               "-C", f"cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO={flags}",
               "-C", f"cmake.define.CMAKE_C_FLAGS_RELWITHDEBINFO={flags}",
               "-C", "cmake.define.CMAKE_UNITY_BUILD=ON",
               "-C", f"build-dir={tmp}/build", "-C", "cmake.define.SPARK_ENABLE_TORCH=ON",
               os.path.join(src, "python")]
        p = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=840)
        print(f"$ {' '.join(cmd)} -> exit {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        if p.returncode != 0:
            fail("pip install --no-build-isolation ./python failed")
        p = subprocess.run([vpy, "-c", "import libspark, libspark.torch, torch; "
                            "print(libspark.__file__); print(torch.__version__)"],
                           env=env, cwd=tmp, capture_output=True, text=True, timeout=120)
        print(p.stdout + p.stderr)
        if p.returncode != 0 or not p.stdout.startswith(venv):
            fail("the venv's python does not import the installed libspark from the venv")
        job_env = dict(env, GLOO_SOCKET_IFNAME="lo")
        p = subprocess.run([sparkrun, "-n", "2", vpy, os.path.join(HERE, "torch_ops.py")],
                           env=job_env, cwd=tmp, capture_output=True, text=True, timeout=180)
        print(p.stdout + p.stderr)
        expect_ok(2, p.stdout + p.stderr, p.returncode)


if case.startswith("collectives"):
    for n in (1, 2, 3):
        rc, out, _ = job(n, "collectives.py", timeout=300)
        expect_ok(n, out, rc)
elif case == "bad_input":
    rc, out, _ = job(2, "bad_input.py", env={"SPARK_ON_FAILURE": "raise",
                                             "SPARKNET_ROCE_TIMEOUT_MS": "2000"})
    expect_ok(2, out, rc)
elif case == "store_init":
    need_torch_module()
    code = (
        "import sys, datetime, numpy as np, torch.distributed as dist, libspark\n"
        "r, port = int(sys.argv[1]), int(sys.argv[2])\n"
        # use_libuv=False where torch has the argument (2.4+): a torch built without libuv
        # (Debian's) refuses the default.
        "try:\n"
        "    s = dist.TCPStore('127.0.0.1', port, 2, r == 0, datetime.timedelta(seconds=30), use_libuv=False)\n"
        "except TypeError:\n"
        "    s = dist.TCPStore('127.0.0.1', port, 2, r == 0, datetime.timedelta(seconds=30))\n"
        "c = libspark.init(store=dist.PrefixStore('a', s), rank=r, size=2)\n"
        "d = libspark.init(store=dist.PrefixStore('b', s), rank=r, size=2)\n"
        "x = np.full(5, r + 1.0); c.allreduce(x); y = np.full(3, 2.0); d.allreduce(y)\n"
        "assert list(x) == [3.0] * 5 and list(y) == [4.0] * 3, (x, y)\n"
        "c.close(); d.barrier(); d.close(); print(f'rank {r} ok', flush=True)\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMIX", "SPARK_RANK", "SPARK_SIZE"))}
    procs, outs = run_store_ranks(code, port, lambda r: env, "init over a TCPStore hung")
    print("\n".join(outs))
    if any(p.returncode for p in procs):
        fail("a rank failed")
    expect_ok(2, "".join(outs), 0)
elif case == "store_settings_differ":
    # The store bootstrap (torch's TCPStore) gets the same settings check as PMIx: rank 1 alone
    # has SPARK_TCP_LANES=4; both ranks fail in seconds naming it, with either failure policy
    # (abort: rank 0 reports the line and ends, rank 1 raises it; raise: both raise it).
    need_torch_module()
    code = (
        "import sys, time, datetime, torch.distributed as dist, libspark\n"
        "r, port = int(sys.argv[1]), int(sys.argv[2])\n"
        # use_libuv=False where torch has the argument (2.4+): a torch built without libuv
        # (Debian's) refuses the default.
        "try:\n"
        "    s = dist.TCPStore('127.0.0.1', port, 2, r == 0, datetime.timedelta(seconds=30), use_libuv=False)\n"
        "except TypeError:\n"
        "    s = dist.TCPStore('127.0.0.1', port, 2, r == 0, datetime.timedelta(seconds=30))\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    libspark.init(store=s, rank=r, size=2)\n"
        "except Exception as e:\n"
        "    print(f'rank {r} raised after {time.monotonic() - t0:.2f} s: {e}', flush=True)\n"
        "    sys.exit(3)\n"
        "print(f'rank {r} ok', flush=True)\n")
    want = ("settings differ between ranks: SPARK_TCP_LANES=2 on rank 0, 4 on rank 1 (give every "
            "rank the same value, e.g. with -x SPARK_TCP_LANES=4)")
    for policy in ("abort", "raise"):
        port = free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PMIX", "SPARK_RANK", "SPARK_SIZE", "SPARK_TCP_LANES"))}
        env.update(SPARK_TRANSPORT="tcp", SPARK_ON_FAILURE=policy)
        start = time.monotonic()
        procs, outs = run_store_ranks(
            code, port, lambda r: dict(env, **({"SPARK_TCP_LANES": "4"} if r == 1 else {})),
            f"{policy}: init over a TCPStore with different settings hung")
        took = time.monotonic() - start
        print(f"--- {policy}: exits {[p.returncode for p in procs]} after {took:.2f} s")
        print("\n".join(outs))
        if any(p.returncode == 0 for p in procs):
            fail(f"{policy}: a rank went on although the settings differ")
        # From init to the error (Python and torch take seconds to start on a loaded machine).
        for secs in re.findall(r"raised after ([0-9.]+) s", "".join(outs)):
            if float(secs) > 10:
                fail(f"{policy}: init took {secs} s to fail (a timeout, not the check)")
        if policy == "raise" and any(not re.search(f"rank {r} raised after [0-9.]+ s: " + re.escape(want), outs[r]) for r in range(2)):
            fail("raise: not every rank raised the one line naming SPARK_TCP_LANES")
        if policy == "abort" and want not in outs[0]:
            fail("abort: rank 0 did not report the line naming SPARK_TCP_LANES")
        if policy == "abort" and not re.search("rank 1 raised after [0-9.]+ s: " + re.escape(want), outs[1]):
            fail("abort: rank 1 did not fail with the same line")
elif case.startswith("torch_ops"):
    need_torch()
    n = int(case.rsplit("_", 1)[1])
    rc, out, _ = job(n, "torch_ops.py")
    expect_ok(n, out, rc)
elif case == "torch_train":
    need_torch()
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        weights = {}
        for backend in ("spark", "gloo"):
            rc, out, _ = job(3, "torch_train.py", backend, f"{tmp}/{backend}")
            expect_ok(3, out, rc)
            weights[backend] = [torch.load(f"{tmp}/{backend}.{r}") for r in range(3)]
        for r in (1, 2):
            for a, b in zip(weights["spark"][0], weights["spark"][r]):
                if not torch.equal(a, b):
                    fail(f"backend spark: rank {r}'s weights differ from rank 0's")
        for a, b in zip(weights["spark"][0], weights["gloo"][0]):
            if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
                fail(f"spark and gloo weights differ by {(a - b).abs().max().item()}")
        print("weights: spark identical on 3 ranks; spark vs gloo max difference",
              max((a - b).abs().max().item() for a, b in zip(weights["spark"][0], weights["gloo"][0])))
elif case in ("torch_fault_stop", "torch_fault_kill"):
    need_torch()
    mode = case.rsplit("_", 1)[1]
    timeout_ms = 1000 if mode == "stop" else 20000
    rc, out, took = job(3, "torch_fault.py", mode,
                        env={"SPARKNET_ROCE_TIMEOUT_MS": str(timeout_ms)}, timeout=90)
    ended = time.time()
    if rc == 0:
        fail("sparkrun exited 0 although rank 1 was " + mode + "ped")
    if "FAIL:" in out:
        fail("a rank went on after the failure")
    m = re.search(r"rank 1: (?:stop|kill) now at ([0-9.]+)", out)
    if not m:
        fail("rank 1 never reached the point where it " + mode + "s itself")
    after = ended - float(m.group(1))  # from the stop/kill to the end of the job
    print(f"the job ended {after:.2f} s after rank 1 was {mode}ped")
    if mode == "stop":
        # Each survivor's record: "... no data from rank 1 ..." and sparkrun's group abort.
        if not re.search(r"rank [02]: allreduce seq \d+ step \d+: no data from rank 1 .*after \d+ ms \(timeout 1000 ms\)", out):
            fail("no failure record naming the stopped rank 1 and the timeout")
        if after > 1.0 + 6.0:  # timeout + margin (kill grace 2 s, a loaded 2-core machine)
            fail(f"the survivors took {after:.1f} s to end the job (timeout 1 s)")
    elif after > 6.0:
        fail(f"a killed rank took {after:.1f} s to end the job (timeout is 20 s: it must not wait for it)")
    time.sleep(0.5)
    left = leftovers(os.path.join(HERE, "torch_fault.py") + " " + mode)
    if left:
        subprocess.run(["kill", "-9", *left])
        fail(f"ranks left running: {left}")
elif case == "torch_backend_not_built":
    why = subprocess.run([PY, os.path.join(os.environ["TEST_SOURCE_DIR"], "python", "torch_paths.py")],
                 capture_output=True, text=True)
    version = re.search(r"^version=(.*)$", why.stdout, re.M)
    print("SKIP: the torch backend is not built here: it needs torch >= 2.1 in "
          f"{PY} (found: {version.group(1) if version else 'no torch'}); its cases run in the "
          "Debian 13 root (debian13.python, label torch2)")
    sys.exit(77)
elif case == "torch2_collectives":
    need_torch()
    for n in (1, 2, 3):
        rc, out, _ = job(n, "torch2_collectives.py", env={"GLOO_SOCKET_IFNAME": "lo"}, timeout=180)
        expect_ok(n, out, rc)
elif case == "torch2_mesh":
    need_torch()
    for n in (2, 3):
        rc, out, _ = job(n, "torch2_mesh.py", env={"GLOO_SOCKET_IFNAME": "lo"})
        expect_ok(n, out, rc)
elif case == "torch2_async":
    need_torch()
    # torch's timeout= when SPARKNET_ROCE_TIMEOUT_MS is unset; the variable wins when set.
    os.environ.pop("SPARKNET_ROCE_TIMEOUT_MS", None)
    for extra, want in (({}, "10000"), ({"SPARKNET_ROCE_TIMEOUT_MS": "4000"}, "4000")):
        rc, out, _ = job(2, "torch2_async.py", "overlap", env=dict(extra, EXPECT_TIMEOUT_MS=want))
        expect_ok(2, out, rc)
    rc, out, took = job(2, "torch2_async.py", "failure", env={"SPARK_ON_FAILURE": "raise"})
    expect_ok(2, out, rc)
    if "wait() raised: rank 0: allreduce seq" not in out:
        fail("rank 0's wait() did not raise the record")
elif case == "torch2_hooks":
    need_torch()
    for n in (2, 3):
        rc, out, _ = job(n, "torch2_hooks.py", env={"SPARKNET_ROCE_TIMEOUT_MS": "10000"}, timeout=120)
        expect_ok(n, out, rc)
elif case == "torch2_pip":
    need_torch()
    pip_route()
elif case == "split":
    # Sub-communicators (split.py): semantics, then a stopped peer inside one ends the job with
    # a record naming the communicator, within its 500 ms timeout + margin; nothing left.
    rc, out, _ = job(3, "split.py", env={"SPARKNET_ROCE_TIMEOUT_MS": "20000"}, timeout=60)
    ended = time.time()
    for r in range(3):
        if f"rank {r} ok" not in out:
            fail(f"rank {r} did not pass the sub-communicator checks")
    if rc == 0 or "FAIL:" in out:
        fail(f"the job went on after the failure (exit {rc})")
    m = re.search(r"rank 2: stop now at ([0-9.]+)", out)
    if not m:
        fail("rank 2 never stopped itself")
    rec = (r"sparkrun: rank 0 aborted: rank 0: allreduce seq \d+ step \d+: no data from rank 2 "
           r".*\(timeout 500 ms\) \[comm 5 \(color 0, size 2\)\]$")
    if not re.search(rec, out, re.M):
        fail("no record naming the stopped rank 2 and the sub-communicator 'comm 5 (color 0, size 2)'")
    after = ended - float(m.group(1))
    print(f"the job ended {after:.2f} s after rank 2 stopped")
    if after > 0.5 + 6.0:  # timeout + margin (kill grace, a loaded 2-core machine)
        fail(f"the job took {after:.1f} s to end (the sub's timeout is 0.5 s)")
    time.sleep(0.5)
    left = leftovers(os.path.join(HERE, "split.py"))
    if left:
        subprocess.run(["kill", "-9", *left])
        fail(f"ranks left running: {left}")
elif case == "engine":
    need_torch()
    rc, out, _ = job(2, "engine_adapter.py")
    expect_ok(2, out, rc)
elif case == "gpu_allreduce":
    need_torch()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: torch has no usable CUDA here (Debian's torch is a CPU build, or no GPU): "
              "the device path of comm.allreduce needs a CUDA torch and a GPU")
        sys.exit(77)
    rc, out, _ = job(2, "gpu_allreduce.py")
    expect_ok(2, out, rc)
else:
    fail(f"unknown case {case}")
print("PASS")
