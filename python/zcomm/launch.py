"""Ranks on this machine without a launcher: fork `size` processes, each
with ZC_RANK, ZC_SIZE, ZC_MASTER_ADDR/PORT and a ZC_NODE_ID that makes
`nodes` emulated nodes, and run fn(comm) in each.  For tests and examples;
a real job uses torchrun, mpirun or srun and Communicator.from_env()."""
import multiprocessing
import os
import socket
import traceback


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(fn, rank, size, nodes, port, queue):
    os.environ.update({"ZC_RANK": str(rank), "ZC_SIZE": str(size),
                       "ZC_MASTER_ADDR": "127.0.0.1", "ZC_MASTER_PORT": str(port),
                       "ZC_NODE_ID": "node%d-of-%d" % (rank * nodes // size, port)})
    try:
        try:
            import torch
            torch.set_num_threads(1)  # OpenMP does not survive fork with threads
        except ImportError:
            pass
        from .comm import Communicator
        with Communicator.from_env() as comm:
            queue.put((rank, True, fn(comm)))
    except BaseException:
        queue.put((rank, False, traceback.format_exc()))


def run_forked(fn, size, nodes=1, timeout=300):
    """[(ok, fn's result or the traceback)] by rank; a rank that did not
    answer within `timeout` seconds is (False, "no answer") and killed."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(fn, r, size, nodes, port, queue))
             for r in range(size)]
    for p in procs:
        p.start()
    results = [(False, "no answer")] * size
    try:
        for _ in range(size):
            rank, ok, value = queue.get(timeout=timeout)
            results[rank] = (ok, value)
    except Exception:  # queue.Empty: the missing ranks keep "no answer"
        pass
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    return results
