"""iris from PyTorch: bring-up over torch.distributed, heap tensors, collectives as
torch.library custom ops (namespace "iris"), and CustomAllreduce for serving engines.

torch is imported on first use, so `import iris_gpu.torch` works without it.

    import torch, torch.distributed as dist
    import iris_gpu.torch as it
    dist.init_process_group("gloo")                 # or nccl; or only torchrun's env
    ctx = it.Context()                              # collective; rank/world/device from dist
    x = ctx.empty((4096,), torch.bfloat16)          # zero-copy view of the symmetric heap
    it.all_reduce_(x, ctx)                          # in place, on torch.cuda.current_stream()
    y = it.all_gather(torch.randn(8, 16, device="cuda"), ctx, dim=1)
    plan = ctx.gemm_reduce_plan("reduce_scatter", M, N, K, b_transposed=True)  # collective
    c = it.gemm_reduce_scatter(a_shard, w_shard, plan)  # this rank's M/W rows of sum_r A_r @ B_r
    plan.close()                                    # collective
    ctx.team([[0, 1], [2, 3]])                      # every rank: a team per TP group (one split)
    it.all_reduce(x, ctx, group=tp)                 # tp = dist.new_group([0, 1]) on ranks 0, 1
    ctx.close()                                     # collective

Every collective is collective: all ranks call it with the same shapes, dtype, op and
root, in the same order. Tensors must be contiguous CUDA tensors on the context's device;
they may live on the heap (fast path) or anywhere (the library stages them through the
heap). See docs/python.md.

The package's modules: context (Context, the registry of contexts), dlpack (capsules over
iris-owned memory), plans (AgGemm, GemmReduce, Moe), ops (the custom ops and the
functions that call them), serving (CustomAllreduce), team (Team: a torch.distributed
subgroup as an iris team). Every name is importable from here.
"""
from .. import _host, _lib, _types  # noqa: F401 (as the single module had them)
from .._lib import IrisError  # noqa: F401
from .dlpack import _DLDataType, _DLDevice, _DLManagedTensor, _DLTensor, _DL_DELETER, _device_bytes, _dl_capsule, _dl_delete, _dl_keep  # noqa: F401
from .context import Context, _CONTEXTS, _HeapBlock, _ctx, _ctx_id, _device_index, _ids, _prefix_counts, _register_lock, _torch_mod  # noqa: F401
from .plans import AgGemm, GemmReduce, MOE_MODES, Moe, _PLANS, _plan, _scale_args  # noqa: F401
from .ops import _DIRECT, _IMPLS, _KINDS, _OUT_ARG, _along, _contiguous, _extra, _fake_check, _gemm_reduce_as, _invoke, _keep_program_order, _launch, _out_shape, _plain_eager, _register_ops, _spawned, ag_gemm, all_gather, all_gather_, all_reduce, all_reduce_, all_reduce_rmsnorm, all_to_all, all_to_all_, barrier, broadcast, broadcast_, device_context_from_symm_mem, gemm_all_reduce, gemm_reduce, gemm_reduce_scatter, launch, moe_combine, moe_dispatch, reduce_scatter, reduce_scatter_  # noqa: F401
from .serving import CustomAllreduce  # noqa: F401
from .team import Team, new_group, new_subgroups_by_enumeration, team_split  # noqa: F401
