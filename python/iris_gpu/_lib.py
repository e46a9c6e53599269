"""ctypes bindings of libiris.so: loading, ABI checks, errors.

Nothing here needs torch or a GPU. The library is found, in this order, at
  1. $IRIS_LIB (a path to the .so),
  2. build/libiris.so of the repository this package sits in (python/../build),
  3. after a non-editable install (pip install ./python): build/libiris.so of the tree it
     was installed from, then the copy installed with the package,
  4. the dynamic loader's search path (libiris.so).
At load the library's version (iris_get_version) and the size of every C struct this
module mirrors (iris_abi_struct_size) must match; otherwise IrisLibraryError says which.
"""
import ctypes
import ctypes.util
import os
import threading

# The library version this package was written against: major.minor must match.
EXPECTED_VERSION = (0, 2)
MAX_RANKS = 16  # IRIS_MAX_RANKS of the library build (checked through iris_device_ctx_t)

STATUS_NAMES = (
    "IRIS_SUCCESS",
    "IRIS_ERROR_INVALID_ARGUMENT",
    "IRIS_ERROR_INVALID_RANK",
    "IRIS_ERROR_OUT_OF_MEMORY",
    "IRIS_ERROR_NOT_IN_HEAP",
    "IRIS_ERROR_MISMATCH",
    "IRIS_ERROR_TIMEOUT",
    "IRIS_ERROR_GPU",
    "IRIS_ERROR_SYSTEM",
    "IRIS_ERROR_PERMISSION",
    "IRIS_ERROR_DIFFERENT_HOST",
    "IRIS_ERROR_UNSUPPORTED",
    "IRIS_ERROR_BOOTSTRAP",
    "IRIS_ERROR_RANK_FAILED",
    "IRIS_ERROR_PEER_FAILED",
    "IRIS_ERROR_ABORTED",
    "IRIS_ERROR_IN_USE",
)
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_OUT_OF_MEMORY = 3
ERROR_NOT_IN_HEAP = 4
ERROR_UNSUPPORTED = 11


def status_name(status):
    """IRIS_ERROR_... for a status value ("IRIS_STATUS_<n>" for one this package does not know)."""
    if 0 <= status < len(STATUS_NAMES):
        return STATUS_NAMES[status]
    return "IRIS_STATUS_%d" % status


class IrisError(RuntimeError):
    """A call into libiris failed. status: the iris_status_t value; status_name: its name;
    detail: iris_error_detail() read right after the failing call; call: what was called."""

    def __init__(self, status, detail="", call=""):
        self.status = int(status)
        self.status_name = status_name(self.status)
        self.detail = detail or ""
        self.call = call or ""
        super().__init__(self._text())

    def _text(self):
        head = "%s failed: " % self.call if self.call else ""
        text = "%s%s (%d)" % (head, self.status_name, self.status)
        return text + (": " + self.detail if self.detail else "")


class IrisLibraryError(ImportError):
    """libiris.so is missing, or was built from headers this package does not match."""


# ---------------------------------------------------------------- mirrored structs
class BootstrapT(ctypes.Structure):
    _fields_ = [("user", ctypes.c_void_p), ("allgather", ctypes.c_void_p), ("barrier", ctypes.c_void_p)]


# callback types of iris_bootstrap_t
ALLGATHER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
BARRIER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class ConfigT(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("device", ctypes.c_int),
        ("heap_size", ctypes.c_size_t),
        ("rendezvous", ctypes.c_char_p),
        ("rendezvous_dir", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int),
        ("barrier_timeout_ms", ctypes.c_int),
        ("heap_memory", ctypes.c_int),
        ("bootstrap", ctypes.POINTER(BootstrapT)),
        ("rail_comm", ctypes.c_void_p),
    ]

    @classmethod
    def init(cls):
        """IRIS_CONFIG_INIT."""
        return cls(ctypes.sizeof(cls), -1, -1, -1, 0, None, None, 0, 0, 0, None, None)


class DeviceCtxT(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("heap_size", ctypes.c_ulonglong),
        ("bases", ctypes.c_void_p * MAX_RANKS),
        ("fault", ctypes.c_void_p),
        ("local_rank", ctypes.c_int),
        ("local_size", ctypes.c_int),
        ("node", ctypes.c_int),
        ("num_nodes", ctypes.c_int),
    ]


class CollOptsT(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("algo", ctypes.c_int), ("ctas", ctypes.c_int), ("flags", ctypes.c_uint)]

    @classmethod
    def init(cls, algo=0, ctas=0, flags=0):
        """IRIS_COLL_OPTS_INIT, with algo, ctas and flags set."""
        return cls(ctypes.sizeof(cls), algo, ctas, flags)


# the fields iris_ag_gemm_desc_t and iris_gemm_rs_desc_t share, in this order, after
# struct_size and layout / op (test_pure.py checks both structs against the headers)
_GEMM_DESC_FIELDS = [
    ("M", ctypes.c_longlong),
    ("N", ctypes.c_longlong),
    ("K", ctypes.c_longlong),
    ("a_type", ctypes.c_int),
    ("c_type", ctypes.c_int),
    ("b_transposed", ctypes.c_int),
    ("has_bias", ctypes.c_int),
    ("path", ctypes.c_int),
]


class AgGemmDescT(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("layout", ctypes.c_int)] + _GEMM_DESC_FIELDS + [
        ("chunks", ctypes.c_int),
        ("fetch_ctas", ctypes.c_int),
        ("k_group", ctypes.c_int),
        ("stage_a", ctypes.c_int),
        ("trace", ctypes.c_int),
        ("gemm_streams", ctypes.c_int),
    ]

    @classmethod
    def init(cls):
        """IRIS_AG_GEMM_DESC_INIT (a_type and c_type IRIS_BFLOAT16 = 2)."""
        return cls(ctypes.sizeof(cls), 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0)


class GemmRsDescT(ctypes.Structure):
    """iris_gemm_rs_desc_t (iris_gemm_reduce.h)."""

    # op: iris_gemm_reduce_op_t, 0 IRIS_GEMM_REDUCE_SCATTER, 1 IRIS_GEMM_ALL_REDUCE
    _fields_ = [("struct_size", ctypes.c_size_t), ("op", ctypes.c_int)] + _GEMM_DESC_FIELDS + [("exact", ctypes.c_int)]

    @classmethod
    def init(cls):
        """IRIS_GEMM_RS_DESC_INIT (REDUCE_SCATTER, a_type and c_type IRIS_BFLOAT16 = 2, path AUTO, exact 0)."""
        return cls(ctypes.sizeof(cls), 0, 0, 0, 0, 2, 2, 0, 0, 0, 0)



class MoeDescT(ctypes.Structure):
    """iris_moe_desc_t (iris_moe.h). mode: 0 IRIS_MOE_LOW_LATENCY, 1 IRIS_MOE_HIGH_THROUGHPUT."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("mode", ctypes.c_int),
        ("max_tokens", ctypes.c_int),
        ("hidden", ctypes.c_int),
        ("top_k", ctypes.c_int),
        ("num_experts", ctypes.c_int),
        ("dispatch_type", ctypes.c_int),
        ("combine_type", ctypes.c_int),
        ("num_sms", ctypes.c_int),
        ("max_recv_rows", ctypes.c_longlong),
    ]

    @classmethod
    def init(cls):
        """IRIS_MOE_DESC_INIT (low latency, bf16 dispatch and combine = 2)."""
        return cls(ctypes.sizeof(cls), 0, 0, 0, 0, 0, 2, 2, 0, 0)


class MoeRecvT(ctypes.Structure):
    """iris_moe_recv_t (iris_moe.h): where dispatch's results live."""

    _fields_ = [
        ("x", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("src", ctypes.c_void_p),
        ("count", ctypes.c_void_p),
        ("offsets", ctypes.c_void_p),
        ("rows", ctypes.c_longlong),
        ("expert_stride", ctypes.c_longlong),
        ("num_local_experts", ctypes.c_int),
    ]


class RmsnormOptsT(ctypes.Structure):
    """iris_rmsnorm_opts_t (iris_collectives.h). quant: 0 none, 1 fp8 per tensor, 2 fp8 per
    token; algo: 0 auto, 1 fused (one-shot), 2 separate, 3 two-shot, 4 bandwidth."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("quant", ctypes.c_int),
        ("out_fp8", ctypes.c_void_p),
        ("scale", ctypes.c_void_p),
        ("algo", ctypes.c_int),
    ]

    @classmethod
    def init(cls, quant=0, out_fp8=None, scale=None, algo=0):
        """IRIS_RMSNORM_OPTS_INIT, with the fields given."""
        return cls(ctypes.sizeof(cls), quant, out_fp8, scale, algo)
class TeamT(ctypes.Structure):
    """iris_team_t (iris.h): a team of ranks on the context's heap. Plain data; made by
    iris_team_get / iris_team_split, passed by pointer to the *_team calls."""

    _fields_ = [
        ("size", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("start", ctypes.c_int),
        ("stride", ctypes.c_int),
        ("world", ctypes.c_int * MAX_RANKS),
        ("slot", ctypes.c_int),
        ("coll", ctypes.c_int),
        ("sync", ctypes.c_void_p),
        ("fault", ctypes.c_void_p),
        ("serial", ctypes.c_ulonglong),
    ]

    def members(self):
        """The members' world ranks in team order (iris_team_world_rank)."""
        if self.stride > 0:
            return [self.start + i * self.stride for i in range(self.size)]
        return [self.world[i] for i in range(min(self.size, MAX_RANKS))]


TEAM_NONE = -1  # IRIS_TEAM_NONE: the color of a rank that opts out of a split
TEAM_WORLD, TEAM_NODE, TEAM_RAIL = 0, 1, 2  # iris_team_which_t


# C name -> ctypes mirror; every one is checked against iris_abi_struct_size at load.
# The library must know the first four; a struct of OPTIONAL_STRUCTS it does not know
# (size 0) only disables what uses it (Library.unchecked).
STRUCTS = {
    "iris_bootstrap_t": BootstrapT,
    "iris_config_t": ConfigT,
    "iris_device_ctx_t": DeviceCtxT,
    "iris_coll_opts_t": CollOptsT,
    "iris_ag_gemm_desc_t": AgGemmDescT,
    "iris_gemm_rs_desc_t": GemmRsDescT,
    "iris_moe_desc_t": MoeDescT,
    "iris_moe_recv_t": MoeRecvT,
    "iris_rmsnorm_opts_t": RmsnormOptsT,
    "iris_team_t": TeamT,
}
OPTIONAL_STRUCTS = ("iris_ag_gemm_desc_t", "iris_gemm_rs_desc_t", "iris_moe_desc_t", "iris_moe_recv_t", "iris_rmsnorm_opts_t", "iris_team_t")

# ---------------------------------------------------------------- function table
_p = ctypes.c_void_p
_i = ctypes.c_int
_z = ctypes.c_size_t
_s = ctypes.c_char_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_pz = ctypes.POINTER(ctypes.c_size_t)
_pt = ctypes.POINTER(TeamT)
_po = ctypes.POINTER(CollOptsT)
# name: (restype, argtypes). Statuses come back as int.
FUNCTIONS = {
    "iris_get_version": (_i, []),
    "iris_abi_struct_size": (_z, [_s]),
    "iris_init": (_i, [ctypes.POINTER(ConfigT), _pp]),
    "iris_finalize": (_i, [_p]),
    "iris_rank": (_i, [_p]),
    "iris_world_size": (_i, [_p]),
    "iris_local_rank": (_i, [_p]),
    "iris_local_size": (_i, [_p]),
    "iris_node": (_i, [_p]),
    "iris_num_nodes": (_i, [_p]),
    "iris_device_ordinal": (_i, [_p]),
    "iris_heap_size": (_z, [_p]),
    "iris_heap_used": (_z, [_p]),
    "iris_heap_base": (_p, [_p, _i]),
    "iris_device_context": (DeviceCtxT, [_p]),
    "iris_malloc": (_i, [_p, _z, _pp]),
    "iris_malloc_aligned": (_i, [_p, _z, _z, _pp]),
    "iris_calloc": (_i, [_p, _z, _pp]),
    "iris_free": (_i, [_p, _p]),
    "iris_heap_offset": (_i, [_p, _p, _pz]),
    "iris_translate_host": (_i, [_p, _p, _i, _pp]),
    "iris_heap_verify": (_i, [_p]),
    "iris_barrier": (_i, [_p]),
    "iris_allgather_host": (_i, [_p, _p, _p, _z]),
    "iris_status_string": (_s, [_i]),
    "iris_error_detail": (_s, []),
    "iris_get_async_error": (_i, [_p]),
    "iris_abort": (_i, [_p]),
    "iris_collectives_setup": (_i, [_p]),
    "iris_collectives_check": (_i, [_p]),
    "iris_dtype_size": (_z, [_i]),
    "iris_all_reduce_ex": (_i, [_p, _p, _p, _z, _i, _i, _p, ctypes.POINTER(CollOptsT)]),
    "iris_all_gather_ex": (_i, [_p, _p, _p, _z, _i, _p, ctypes.POINTER(CollOptsT)]),
    "iris_reduce_scatter_ex": (_i, [_p, _p, _p, _z, _i, _i, _p, ctypes.POINTER(CollOptsT)]),
    "iris_all_to_all_ex": (_i, [_p, _p, _p, _z, _i, _p, ctypes.POINTER(CollOptsT)]),
    "iris_broadcast_ex": (_i, [_p, _p, _p, _z, _i, _i, _p, ctypes.POINTER(CollOptsT)]),
    "iris_barrier_device": (_i, [_p, _p]),
    "iris_ag_gemm_create": (_i, [_p, ctypes.POINTER(AgGemmDescT), _pp]),
    "iris_ag_gemm_run": (_i, [_p, _p, _p, _p, _p, _p]),
    "iris_ag_gemm_path": (_i, [_p]),
    "iris_gemm_path_name": (_s, [_i]),
    "iris_ag_gemm_engine": (_s, [_p]),
    "iris_ag_gemm_destroy": (_i, [_p]),
    "iris_device_context_from_peers": (_i, [_i, _i, _z, _pp, ctypes.POINTER(DeviceCtxT)]),
}
# functions other issues add; bound when the library has them (Library.absent lists the others)
OPTIONAL_FUNCTIONS = {
    # iris_gemm_reduce.h: GEMM + reduce-scatter / all-reduce
    "iris_gemm_rs_create": (_i, [_p, ctypes.POINTER(GemmRsDescT), _pp]),
    "iris_gemm_rs_run": (_i, [_p, _p, _p, _p, _p, _p]),
    "iris_gemm_rs_run_scaled": (_i, [_p, _p, _p, _p, _p, _p, _p, _p]),
    "iris_gemm_rs_check": (_i, [_p]),
    "iris_gemm_rs_path": (_i, [_p]),
    "iris_gemm_rs_choose_path": (_i, [ctypes.POINTER(GemmRsDescT), _i]),
    "iris_gemm_rs_destroy": (_i, [_p]),
    # iris_gemm.h: fp8 all-gather + GEMM (0.2.0)
    "iris_ag_gemm_run_scaled": (_i, [_p, _p, _p, _p, _p, _p, _p, _p]),
    "iris_ag_gemm_check": (_i, [_p]),
    "iris_ag_gemm_choose_path": (_i, [ctypes.POINTER(AgGemmDescT), _i]),
    # iris_moe.h: expert-parallel dispatch and combine (0.2.0)
    "iris_moe_create": (_i, [_p, ctypes.POINTER(MoeDescT), _pp]),
    "iris_moe_workspace_bytes": (_z, [ctypes.POINTER(MoeDescT), _i]),
    "iris_moe_get_recv": (_i, [_p, ctypes.POINTER(MoeRecvT)]),
    "iris_moe_dispatch": (_i, [_p, _p, _i, _p, _p, _p]),
    "iris_moe_combine": (_i, [_p, _p, _p, _p]),
    "iris_moe_check": (_i, [_p]),
    "iris_moe_destroy": (_i, [_p]),
    # iris_collectives.h: all-reduce + residual add + RMSNorm (+ fp8)
    "iris_all_reduce_rmsnorm_ex": (_i, [_p, _p, _p, _p, _p, _z, _z, ctypes.c_float, _i, _p, ctypes.POINTER(RmsnormOptsT)]),
    # iris.h / iris_collectives.h: teams (splits, and the collectives on a team)
    "iris_team_get": (_i, [_p, _i, _pt]),
    "iris_team_split": (_i, [_p, _pt, _i, _i, _pt]),
    "iris_team_split_strided": (_i, [_p, _pt, _i, _i, _i, _pt]),
    "iris_team_split_2d": (_i, [_p, _pt, _i, _pt, _pt]),
    "iris_team_destroy": (_i, [_p, _pt]),
    "iris_team_check": (_i, [_p, _pt]),
    "iris_all_reduce_team": (_i, [_p, _pt, _p, _p, _z, _i, _i, _p, _po]),
    "iris_all_gather_team": (_i, [_p, _pt, _p, _p, _z, _i, _p, _po]),
    "iris_reduce_scatter_team": (_i, [_p, _pt, _p, _p, _z, _i, _i, _p, _po]),
    "iris_all_to_all_team": (_i, [_p, _pt, _p, _p, _z, _i, _p, _po]),
    "iris_broadcast_team": (_i, [_p, _pt, _p, _p, _z, _i, _i, _p, _po]),
    "iris_barrier_device_team": (_i, [_p, _pt, _p]),
    "iris_team_set_staging": (_i, [_p, _pt, _p, _p, _z]),
}


def check_library(lib, expected_version=EXPECTED_VERSION, structs=None, path="libiris.so"):
    """Refuse (IrisLibraryError) a library whose version's major.minor differs from
    expected_version or whose struct sizes differ from the ctypes mirrors. lib needs only
    iris_get_version() and iris_abi_struct_size(bytes) (tests pass a fake). Returns the
    library's version as (major, minor, patch) and the optional structs it does not know."""
    structs = STRUCTS if structs is None else structs
    v = int(lib.iris_get_version())
    got = (v // 10000, v // 100 % 100, v % 100)
    if got[:2] != tuple(expected_version):
        raise IrisLibraryError(
            "%s is iris %d.%d.%d but this iris_gpu package needs %d.%d.x: rebuild the library (make lib) "
            "or use the package of the same source tree" % ((path,) + got + tuple(expected_version))
        )
    bad, unchecked = [], set()
    for name, cls in sorted(structs.items()):
        size = int(lib.iris_abi_struct_size(name.encode()))
        if size == 0 and name in OPTIONAL_STRUCTS:
            unchecked.add(name)
        elif size != ctypes.sizeof(cls):
            what = "unknown to the library" if size == 0 else "%d bytes in the library" % size
            bad.append("%s is %d bytes here, %s" % (name, ctypes.sizeof(cls), what))
    if bad:
        raise IrisLibraryError(
            "%s does not match this iris_gpu package (built with another IRIS_MAX_RANKS or other headers?): %s"
            % (path, "; ".join(bad))
        )
    return got, unchecked


def candidate_paths():
    """Where load() looks, in order (paths that may not exist)."""
    out = []
    env = os.environ.get("IRIS_LIB")
    if env:
        out.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    for up in ("..", os.path.join("..", "..")):
        out.append(os.path.normpath(os.path.join(here, up, "build", "libiris.so")))
    try:  # written by a non-editable install (python/setup.py)
        from ._where import BUILD_DIR
    except ImportError:
        BUILD_DIR = None
    if BUILD_DIR:
        out.append(os.path.join(BUILD_DIR, "libiris.so"))
        out.append(os.path.join(here, "libiris.so"))
    return out


def bind(lib):
    """Declare restype/argtypes of every function; returns the names of missing optional ones.
    A missing required function raises IrisLibraryError."""
    missing = []
    for name, (res, args) in FUNCTIONS.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype, f.argtypes = res, args
    if missing:
        raise IrisLibraryError("libiris.so lacks %s: rebuild it with make lib" % ", ".join(missing))
    absent = []
    for name, (res, args) in OPTIONAL_FUNCTIONS.items():
        try:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        except AttributeError:
            absent.append(name)
    return absent


_lock = threading.Lock()
_loaded = None


class Library:
    """The loaded, checked library. .lib: the ctypes CDLL; .path; .version (tuple);
    .absent: optional functions this build lacks; .unchecked: optional structs whose size
    the library does not report (what uses them refuses to run)."""

    def __init__(self, lib, path):
        self.lib = lib
        self.path = path
        self.absent = bind(lib)
        self.version, self.unchecked = check_library(lib, path=path)

    def require_struct(self, name):
        """IrisLibraryError if the library could not confirm the layout of struct name."""
        if name in self.unchecked:
            raise IrisLibraryError("%s does not report the size of %s, so its layout cannot be checked: rebuild it with make lib" % (self.path, name))

    def has(self, name):
        return name not in self.absent

    def require_function(self, name):
        """IrisLibraryError if this build lacks the optional function name."""
        if name in self.absent:
            raise IrisLibraryError("%s lacks %s (built from older headers?): rebuild it with make lib" % (self.path, name))

    def detail(self):
        d = self.lib.iris_error_detail()
        return d.decode(errors="replace") if d else ""

    def check(self, status, call):
        """Raise IrisError for a non-zero status, with iris_error_detail()."""
        if status != SUCCESS:
            raise IrisError(status, self.detail(), call)

    def device_context_from_peers(self, rank, world_size, nbytes, peers):
        """iris_device_ctx_t over symmetric memory mapped by someone else (torch's
        symmetric memory, an NCCL window): peers[r] is rank r's buffer as mapped in this
        process (ints), each nbytes long. The memory must stay mapped while kernels use
        the context. Raises IrisError naming the rule a bad argument breaks."""
        peers = [int(p) for p in peers]
        arr = (ctypes.c_void_p * max(len(peers), 1))(*peers)
        if len(peers) != world_size:
            raise IrisError(ERROR_INVALID_ARGUMENT, "%d peer pointers for a world of %d" % (len(peers), world_size), "iris_device_context_from_peers")
        out = DeviceCtxT()
        self.check(self.lib.iris_device_context_from_peers(int(rank), int(world_size), int(nbytes), arr, ctypes.byref(out)), "iris_device_context_from_peers")
        return out


def load(path=None):
    """The process-wide Library (loaded once). Raises IrisLibraryError when no library is
    found, the one found does not load (a truncated or foreign file, a missing dependency),
    or it does not match."""
    global _loaded
    with _lock:
        if _loaded is not None and path is None:
            return _loaded
        tried = []
        env = os.environ.get("IRIS_LIB")
        if not path and env == "":  # set but empty: an error, as every IRIS_* variable (docs/options.md)
            raise IrisLibraryError("IRIS_LIB is set but empty: give it the path of libiris.so, or unset it to search build/libiris.so and the loader path")
        if not path and env and not os.path.exists(env):  # a typo must not load another library
            raise IrisLibraryError("IRIS_LIB=%s: no such file (unset it to search build/libiris.so and the loader path)" % env)
        paths = [path] if path else candidate_paths()
        for p in paths:
            if p and os.path.exists(p):
                try:
                    lib = ctypes.CDLL(p)
                except OSError as e:  # not another candidate: the first one found is the one meant
                    raise IrisLibraryError("%s: %s: rebuild it with `make lib` (or set IRIS_LIB)" % (p, e))
                _loaded = Library(lib, p)
                return _loaded
            tried.append(p)
        if not path:
            name = ctypes.util.find_library("iris") or "libiris.so"
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                tried.append(name + " (loader path)")
            else:
                _loaded = Library(lib, name)
                return _loaded
        raise IrisLibraryError("libiris.so not found (build it with `make lib`, or set IRIS_LIB); tried: " + ", ".join(tried))
