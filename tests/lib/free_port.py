"""free_port(): a TCP port for a Python test's listener (an env rendezvous, a TCPStore), drawn
by the one rule in tests/lib/free_port.sh (from 20000 up to the kernel's ephemeral range, never
inside it: a port the kernel hands out for bind(0) may become another connection's local end
before the test's listener takes it)."""
import os
import subprocess

_RULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "free_port.sh")


def free_port(*exclude):
    """A port no socket uses now; `exclude`: ports already picked. Raises RuntimeError if none."""
    done = subprocess.run(["bash", "-c", '. "$0"; free_port "$@"', _RULE, *map(str, exclude)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise RuntimeError("no free TCP port from 20000 up to the ephemeral range "
                           "(/proc/sys/net/ipv4/ip_local_port_range): " + done.stderr.strip())
    return int(done.stdout)
