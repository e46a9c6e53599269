"""Element types, reductions, shapes and argument checks: pure Python (no torch, no GPU).

Tensors are duck-typed: a check needs .dtype (str() of it names the type, e.g.
"torch.bfloat16"), .device (.type, .index), .is_contiguous(), .shape, .numel(),
.element_size(). The torch module passes torch tensors; the tests pass stand-ins.
"""

import os
import re

# iris_dtype_t (iris_collectives.h); the last three come with the byte/fp8 types
DTYPES = {
    "float32": 0,
    "float16": 1,
    "bfloat16": 2,
    "int32": 3,
    "int64": 4,
    "uint8": 5,
    "float8_e4m3fn": 6,
    "float8_e5m2": 7,
}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
FLOATING = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")

# iris_redop_t; avg (IRIS_AVG) divides the sum by the world size
REDOPS = {"sum": 0, "min": 1, "max": 2, "avg": 3}
# iris_algo_t
ALGOS = {"auto": 0, "latency": 1, "bandwidth": 2, "two_shot_ll": 3, "one_shot_ll": 4, "one_shot_armed": 5}
# iris_gemm_layout_t
GEMM_LAYOUTS = {"rows": 0, "cols": 1}
GEMM_PATHS = {"auto": 0, "pipelined": 1, "fused": 2, "unfused": 3, "kernel_unfused": 4}


def dtype_name(dtype):
    """"bfloat16" for torch.bfloat16 (or the string "bfloat16")."""
    s = str(dtype)
    return s[6:] if s.startswith("torch.") else s


def iris_dtype(dtype, what="tensor"):
    """The iris_dtype_t value of a dtype; TypeError naming the supported ones otherwise."""
    name = dtype_name(dtype)
    if name not in DTYPES:
        raise TypeError("%s: dtype %s is not supported by iris (supported: %s)" % (what, name, ", ".join(DTYPES)))
    return DTYPES[name]


def iris_redop(op, dtype, what="all_reduce"):
    """The iris_redop_t value of "sum"/"min"/"max"/"avg"; avg needs a floating type."""
    key = str(op).lower()
    if key not in REDOPS:
        raise ValueError("%s: op %r is not one of %s" % (what, op, ", ".join(REDOPS)))
    if key == "avg" and dtype_name(dtype) not in FLOATING:
        raise TypeError("%s: op 'avg' needs a floating dtype, got %s" % (what, dtype_name(dtype)))
    return REDOPS[key]


def iris_algo(algo):
    key = str(algo).lower()
    if key not in ALGOS:
        raise ValueError("algo %r is not one of %s" % (algo, ", ".join(ALGOS)))
    return ALGOS[key]


def check_contiguous(t, what):
    """Raise ValueError naming t if it is not contiguous; returns t."""
    if not t.is_contiguous():
        raise ValueError("%s is not contiguous (shape %s, strides %s): call .contiguous() first" % (what, tuple(t.shape), tuple(t.stride())))
    return t


def check_tensor(t, what, device_index, dtype=None, contiguous=True):
    """Raise if t is not a tensor of a supported type on CUDA device device_index (and of
    dtype, when given; and contiguous, unless contiguous=False). Returns the iris_dtype_t."""
    dev = t.device
    if getattr(dev, "type", None) != "cuda" or dev.index != device_index:
        raise ValueError("%s is on %s but this iris context runs on cuda:%d" % (what, dev, device_index))
    if dtype is not None and dtype_name(t.dtype) != dtype_name(dtype):
        raise TypeError("%s has dtype %s but %s is expected" % (what, dtype_name(t.dtype), dtype_name(dtype)))
    code = iris_dtype(t.dtype, what)
    if contiguous:
        check_contiguous(t, what)
    return code


def check_overlap(kind, send, send_bytes, recv, recv_bytes, rank_offset):
    """Refuse (ValueError) an input and an output whose bytes overlap in a layout the
    library does not define (iris_collectives.h, Rules): only send == recv, and NCCL's
    in-place layouts (all_gather: send = recv + rank * count; reduce_scatter: recv = send
    + rank * count; rank_offset: rank * count in bytes) are defined."""
    if send + send_bytes <= recv or recv + recv_bytes <= send or send == recv:
        return
    if kind == "all_gather" and send == recv + rank_offset:
        return
    if kind == "reduce_scatter" and recv == send + rank_offset:
        return
    raise ValueError(
        "%s: the output overlaps the input in a layout the library does not define (only the same buffer, or NCCL's in-place %s)"
        % (kind, "layout: input = output + rank * count" if kind == "all_gather" else "layout: output = input + rank * count" if kind == "reduce_scatter" else "layouts")
    )


def coll_count(kind, in_numel, out_numel, world):
    """The per-rank element count that the C call takes, from the input and output sizes,
    or ValueError saying how they should relate.
      all_reduce, broadcast: out == in; all_gather: out == world * in;
      reduce_scatter: in == world * out; all_to_all: out == in, a multiple of world."""
    if kind in ("all_reduce", "broadcast"):
        if out_numel != in_numel:
            raise ValueError("%s: output has %d elements but input has %d; they must be equal" % (kind, out_numel, in_numel))
        return in_numel
    if kind == "all_gather":
        if out_numel != world * in_numel:
            raise ValueError("all_gather: output has %d elements but needs world_size (%d) x input (%d) = %d" % (out_numel, world, in_numel, world * in_numel))
        return in_numel
    if kind == "reduce_scatter":
        if in_numel != world * out_numel:
            raise ValueError("reduce_scatter: input has %d elements but needs world_size (%d) x output (%d) = %d" % (in_numel, world, out_numel, world * out_numel))
        return out_numel
    if kind == "all_to_all":
        if out_numel != in_numel:
            raise ValueError("all_to_all: output has %d elements but input has %d; they must be equal" % (out_numel, in_numel))
        if in_numel % world:
            raise ValueError("all_to_all: %d elements is not a multiple of world_size %d" % (in_numel, world))
        return in_numel // world
    raise ValueError("unknown collective %r" % (kind,))


def _dim(dim, ndim, what):
    if ndim == 0:
        raise ValueError("%s: a 0-d tensor has no dim to gather or scatter along" % what)
    if not -ndim <= dim < ndim:
        raise ValueError("%s: dim %d is out of range for a %d-d tensor" % (what, dim, ndim))
    return dim % ndim


def gather_shape(shape, world, dim=0):
    """Shape of all_gather along dim: shape[dim] * world."""
    shape = list(shape)
    d = _dim(dim, len(shape), "all_gather")
    shape[d] *= world
    return tuple(shape)


def scatter_shape(shape, world, dim=0):
    """Shape of reduce_scatter along dim: shape[dim] / world (which must divide)."""
    shape = list(shape)
    d = _dim(dim, len(shape), "reduce_scatter")
    if shape[d] % world:
        raise ValueError("reduce_scatter: size %d of dim %d is not a multiple of world_size %d" % (shape[d], d, world))
    shape[d] //= world
    return tuple(shape)


def check_root(root, world):
    if not isinstance(root, int) or not 0 <= root < world:
        raise ValueError("broadcast: root %r is not a rank in [0, %d)" % (root, world))
    return root


def heap_bytes(shape, dtype):
    """Bytes of a heap tensor (at least 1, as iris_malloc needs); ValueError on a negative dim."""
    n = 1
    for s in shape:
        if int(s) < 0:
            raise ValueError("heap tensor: negative dimension in shape %s" % (tuple(shape),))
        n *= int(s)
    iris_dtype(dtype, "heap tensor")
    nbytes = n * ITEMSIZE[dtype_name(dtype)]
    if nbytes >= 1 << 63:  # ctypes would cut it to 64 bits: a small block under a huge shape
        raise ValueError("heap tensor: shape %s of %s is %d bytes, more than any heap" % (tuple(shape), dtype_name(dtype), nbytes))
    return max(nbytes, 1)


def ag_gemm_shapes(layout, M, N, K, world, b_transposed):
    """(a_shard shape, b shape, c shape) of the all-gather + GEMM, or ValueError naming the rule."""
    if layout not in GEMM_LAYOUTS:
        raise ValueError("ag_gemm: layout %r is not one of %s" % (layout, ", ".join(GEMM_LAYOUTS)))
    if min(M, N, K) <= 0:
        raise ValueError("ag_gemm: M, N, K must be positive, got %d, %d, %d" % (M, N, K))
    if layout == "rows":
        if M % world:
            raise ValueError("ag_gemm: layout 'rows' needs M (%d) to be a multiple of world_size %d" % (M, world))
        a = (M // world, K)
    else:
        if K % world or (K // world) % 8:
            raise ValueError("ag_gemm: layout 'cols' needs K (%d) to be a multiple of 8 x world_size %d" % (K, world))
        a = (M, K // world)
    if K % 8 or N % 8:
        raise ValueError("ag_gemm: K (%d) and N (%d) must be multiples of 8" % (K, N))
    return a, ((N, K) if b_transposed else (K, N)), (M, N)


# iris_gemm_reduce_op_t (iris_gemm_reduce.h)
GEMM_REDUCE_OPS = {"reduce_scatter": 0, "all_reduce": 1}
GEMM_RS_IN = ("bfloat16", "float16", "float8_e4m3fn")  # A and B (fp8: with per-tensor scales)
GEMM_RS_OUT = ("bfloat16", "float16", "float32")  # C and bias


def gemm_rs_shapes(op, M, N, K, world, b_transposed, dtype="bfloat16"):
    """(a shape, b shape, c shape) of rank r's GEMM + reduce-scatter / all-reduce, or
    ValueError naming the rule (iris_gemm_reduce.h): A_r is M x K/W; B_r K/W x N (N x K/W
    with b_transposed); C (M/W) x N for reduce_scatter, M x N for all_reduce."""
    if op not in GEMM_REDUCE_OPS:
        raise ValueError("gemm_reduce: op %r is not one of %s" % (op, ", ".join(GEMM_REDUCE_OPS)))
    if min(M, N, K) <= 0:
        raise ValueError("gemm_reduce: M, N, K must be positive, got %d, %d, %d" % (M, N, K))
    if M % world:
        raise ValueError("gemm_reduce: M (%d) must be a multiple of world_size %d (rank r owns rows [r*M/W, (r+1)*M/W))" % (M, world))
    if K % world or (K // world) % 8:
        raise ValueError("gemm_reduce: K (%d) must be a multiple of 8 x world_size %d (each rank holds K/W columns of A, 16-byte rows)" % (K, world))
    if N % 8:
        raise ValueError("gemm_reduce: N (%d) must be a multiple of 8" % N)
    kl = K // world
    if dtype_name(dtype) == "float8_e4m3fn" and kl % 16:
        raise ValueError("gemm_reduce: fp8 inputs need K/world_size (%d) to be a multiple of 16" % kl)
    c = (M // world, N) if op == "reduce_scatter" else (M, N)
    return (M, kl), ((N, kl) if b_transposed else (kl, N)), c


# ------------------------------------------------------------------ teams
TEAM_NONE = -1  # IRIS_TEAM_NONE: the color of a rank outside every group of a split
MAX_TEAM_RANKS = 16  # IRIS_MAX_RANKS: the most members a team has


def team_groups(groups, ctx_ranks):
    """Check a split's groups: each a sequence of global ranks in team order (a process
    group's order, dist.get_process_group_ranks), none empty, pairwise disjoint, every rank
    one of ctx_ranks (the context's world: ctx_ranks[i] is context rank i's global rank).
    Returns them as tuples; ValueError naming the rule a group breaks."""
    ctx_ranks = [int(r) for r in ctx_ranks]
    out, seen = [], {}
    for i, g in enumerate(groups):
        g = tuple(int(r) for r in g)
        if not g:
            raise ValueError("team groups: group %d is empty" % i)
        if len(g) > MAX_TEAM_RANKS:
            raise ValueError("team groups: group %s has %d ranks; a team has at most %d (IRIS_MAX_RANKS)" % (list(g), len(g), MAX_TEAM_RANKS))
        for r in g:
            if r not in ctx_ranks:
                raise ValueError("team groups: rank %d of group %s is not a rank of this context (its ranks: %s)" % (r, list(g), ctx_ranks))
            if r in seen:
                first = list(g) if seen[r] == i else list(out[seen[r]])
                raise ValueError("team groups: rank %d is in group %s and in group %s; a split's groups are disjoint (split again for overlapping groups)"
                                 % (r, first, list(g)))
            seen[r] = i
        out.append(g)
    return out


def team_split_args(groups, ctx_ranks, me):
    """The MPI-style split that makes one team of each group, for global rank me:
    (color, key, group). color: the smallest context rank in me's group (so the groups'
    colors differ and every member computes the same one), key: me's position in its group
    (team rank = that position), group: the tuple of me's group; (TEAM_NONE, 0, None) when
    me is in none of them (it opts out, and still takes part in the split). groups as
    team_groups takes them."""
    groups = team_groups(groups, ctx_ranks)
    ctx_ranks = [int(r) for r in ctx_ranks]
    if int(me) not in ctx_ranks:
        raise ValueError("team groups: rank %d is not a rank of this context (its ranks: %s)" % (me, ctx_ranks))
    for g in groups:
        if int(me) in g:
            return min(ctx_ranks.index(r) for r in g), g.index(int(me)), g
    return TEAM_NONE, 0, None


def env_switch(name, default):
    """A 0 / 1 variable of the environment, by docs/options.md's rule: unset -> default;
    "0" -> False, "1" -> True; anything else, empty included ("off", "true", " 1") ->
    ValueError naming the variable and its value, never the default."""
    v = os.environ.get(name)
    if v is None:
        return default
    if v in ("0", "1"):
        return v == "1"
    raise ValueError("%s=%r: set it to 0 or 1, or unset it for the default (%d)" % (name, v, int(default)))


_SIZE = re.compile(r"^([0-9]+)(?:([KkMmGgTt])(?:iB|B)?|B)?$")  # the library's grammar (iris_detail_parse_size_var)


def parse_bytes(text, what="size"):
    """Bytes from a size as the library reads it: "16777216", "512K", "16M", "16MiB", "1G",
    "1T", "512B" (powers of 1024); no spaces. ValueError naming what otherwise (empty too)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError("%s %r is not a byte count (e.g. 16777216, 512K, 16M, 16MiB, 1G)" % (what, text))
    return int(m.group(1)) << {None: 0, "k": 10, "m": 20, "g": 30, "t": 40}[m.group(2) and m.group(2).lower()]

