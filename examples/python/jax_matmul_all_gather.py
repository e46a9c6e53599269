"""A sharded matmul followed by iris's all-gather, in one jitted function (JAX, XLA FFI).

    make lib lib-jax
    for r in 0 1; do CUDA_VISIBLE_DEVICES=$r PYTHONPATH=python \
        python3 examples/python/jax_matmul_all_gather.py $r 2 & done; wait

One process per GPU (ranks may share one: give them the same CUDA_VISIBLE_DEVICES and
XLA_PYTHON_CLIENT_PREALLOCATE=false). Rank r holds rows [r*M/W, (r+1)*M/W) of A; every rank
gets the full C = A @ B, checked against numpy.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import iris_gpu.jax as ij


def main(rank, world):
    jax.distributed.initialize(coordinator_address="127.0.0.1:29517", num_processes=world, process_id=rank)
    ctx = ij.Context()  # collective: iris_init over jax's key-value store
    M, N, K = 256 * world, 512, 1024
    a = [np.random.default_rng(r).integers(-4, 5, (M // world, K)).astype(np.float32) / 4 for r in range(world)]
    b = np.random.default_rng(99).integers(-4, 5, (K, N)).astype(np.float32) / 4

    @jax.jit
    def layer(a_shard, w):
        return ij.all_gather(jnp.dot(a_shard.astype(jnp.bfloat16), w.astype(jnp.bfloat16), preferred_element_type=jnp.float32), ctx)

    c = np.asarray(layer(jnp.asarray(a[rank]), jnp.asarray(b)))
    want = np.concatenate(a) @ b
    assert np.array_equal(c, want), float(np.abs(c - want).max())
    if rank == 0:
        print("jax: sharded matmul + iris all_gather over %d ranks matches numpy (C is %d x %d)" % (world, M, N))
    ctx.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
