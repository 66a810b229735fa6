"""libzcomm from PyTorch: causal attention over a packed batch of sequences of
different lengths, forward and backward.  torchrun --nproc_per_node 4 quickstart.py"""
import torch
import torch.distributed as dist
import zcomm
import zcomm.torch as zt

dist.init_process_group("gloo")                      # any process group
comm = zcomm.Communicator.from_torch()               # libzcomm on its ranks
cu_seqlens = torch.tensor([0, 700, 1300, 1324, 2048], dtype=torch.int32)
plan = zt.VarlenPlan(cu_seqlens, comm)               # zones, rings, routes
torch.manual_seed(0)                                 # the same model and batch
qkv = torch.nn.Linear(256, 3 * 256)                  # on every rank
x = torch.randn(2048, 256)
lo, hi = plan.loader_range                           # the rows this rank loads
h = plan.dispatch(x[lo:hi])                          # to the attention layout
q, k, v = (t.contiguous() for t in qkv(h).view(-1, 3, 4, 64).unbind(1))
o = zt.varlen_attn(q, k, v, plan)                    # causal ring attention
y = plan.undispatch(o.flatten(1))                    # back to the loader's rows
loss = y.square().sum() / 2048                       # this rank's share
loss.backward()
for p in qkv.parameters():                           # data-parallel gradients
    dist.all_reduce(p.grad)
total = loss.detach().clone()
dist.all_reduce(total)                               # the batch's loss
norm = torch.cat([p.grad.flatten() for p in qkv.parameters()]).norm()
if comm.rank == 0:
    print("loss %.6f grad-norm %.6f on %d ranks" % (total, norm, comm.size))
