"""CI tests of iris_gpu: no torch, no GPU. Run: python3 python/tests/test_pure.py
(or pytest). Tests that need build/libiris.so skip, saying SKIP, when it is absent."""
import ctypes
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import iris_gpu  # noqa: E402
from iris_gpu import _lib, _types  # noqa: E402

LIB_PATH = os.environ.get("IRIS_LIB") or os.path.join(ROOT, "build", "libiris.so")
HAVE_LIB = os.path.exists(LIB_PATH)
NO_LIB = "SKIP: %s not built (make lib)" % LIB_PATH


def header_text(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read()


def c_enum(text, typedef):
    """{name: value} of a C enum typedef in a header (implicit values counted)."""
    m = re.search(r"typedef enum \w+ \{([^}]*)\} %s;" % typedef, text, re.S)
    if not m:
        return None
    out, v = {}, -1
    for item in re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S).split(","):
        item = item.strip()
        if not item:
            continue
        name, _, val = item.partition("=")
        v = int(val.strip(), 0) if val.strip() else v + 1
        out[name.strip()] = v
    return out


C_TYPES = {"size_t": ctypes.c_size_t, "int": ctypes.c_int, "long long": ctypes.c_longlong}


def c_struct_fields(text, typedef):
    """[(field, ctypes type)] of a C struct typedef of plain scalar fields, in order (enum
    types are int); None when the header has no such typedef."""
    m = re.search(r"typedef struct \w+ \{([^}]*)\} %s;" % typedef, text, re.S)
    if not m:
        return None
    out = []
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        mt = re.match(r"(size_t|long long|int|iris_\w+_t)\s+(.*)", decl, re.S)
        ctype = C_TYPES.get(mt.group(1), ctypes.c_int)  # iris_*_t here are enums
        out += [(name.strip(), ctype) for name in mt.group(2).split(",")]
    return out


def c_initializer(text, macro, enums):
    """The values of a {...} initializer macro: sizeof(...) as "sizeof", enum names as
    their values (enums: merged {name: value}), numbers as ints."""
    m = re.search(r"#define %s \{([^}]*)\}" % macro, text)
    out = []
    for item in m.group(1).split(","):
        item = item.strip()
        out.append("sizeof" if item.startswith("sizeof") else enums[item] if item in enums else int(item, 0))
    return out


class FakeLib:
    """Stands in for libiris.so in check_library."""

    def __init__(self, version, sizes):
        self.version, self.sizes = version, sizes

    def iris_get_version(self):
        return self.version

    def iris_abi_struct_size(self, name):
        return self.sizes.get(name.decode(), 0)


class FakeDevice:
    def __init__(self, type_, index):
        self.type, self.index = type_, index

    def __str__(self):
        return "%s:%s" % (self.type, self.index)


class FakeTensor:
    def __init__(self, dtype="torch.float32", device=("cuda", 0), contiguous=True, shape=(4,), ptr=0x10000):
        self.dtype, self.device, self._c, self.shape, self.ptr = dtype, FakeDevice(*device), contiguous, shape, ptr

    def is_contiguous(self):
        return self._c

    def stride(self):
        return (2,)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def element_size(self):
        return _types.ITEMSIZE[_types.dtype_name(self.dtype)]

    def data_ptr(self):
        return self.ptr

    def contiguous(self):
        return self if self._c else FakeTensor(self.dtype, (self.device.type, self.device.index), True, self.shape, self.ptr + 0x100000)

    def copy_(self, other):
        self.copied_from = other.ptr


class TestPackage(unittest.TestCase):
    def test_imports_without_torch(self):
        code = "import sys; sys.modules['torch'] = None; import iris_gpu, iris_gpu.torch, iris_gpu._types; print('ok')"
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ok", r.stdout)

    def test_candidate_paths(self):
        old = os.environ.get("IRIS_LIB")
        os.environ["IRIS_LIB"] = "/nowhere/libiris.so"
        try:
            paths = _lib.candidate_paths()
        finally:
            if old is None:
                del os.environ["IRIS_LIB"]
            else:
                os.environ["IRIS_LIB"] = old
        self.assertEqual(paths[0], "/nowhere/libiris.so")
        self.assertIn(os.path.join(ROOT, "build", "libiris.so"), paths)

    def library_with(self, iris_lib):
        """What iris_gpu.library() says in a fresh process with IRIS_LIB=iris_lib."""
        code = "import iris_gpu\ntry:\n    print(iris_gpu.library().path)\nexcept iris_gpu.IrisLibraryError as e:\n    print('refused:', e)"
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), IRIS_LIB=iris_lib)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_iris_lib_set_to_a_missing_file_is_an_error(self):
        # not a silent fall back to build/libiris.so or the loader path
        out = self.library_with("/nowhere/libiris.so")
        self.assertIn("refused:", out)
        self.assertIn("IRIS_LIB=/nowhere/libiris.so", out)

    def test_iris_lib_set_but_empty_is_an_error(self):
        # as every IRIS_* variable: not read as unset (which would search build/ and the loader path)
        out = self.library_with("")
        self.assertIn("refused:", out)
        self.assertIn("IRIS_LIB is set but empty", out)

    def test_missing_library_is_a_clear_error(self):
        with self.assertRaises(iris_gpu.IrisLibraryError) as cm:
            _lib.load("/nowhere/libiris.so")
        self.assertIn("make lib", str(cm.exception))


    def test_unloadable_library_is_a_library_error(self):
        """A file that is not a loadable library (a truncated build) raises IrisLibraryError
        (an ImportError, which callers catch to make iris optional), not OSError."""
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(b"junk")
            f.flush()
            with self.assertRaises(iris_gpu.IrisLibraryError) as cm:
                _lib.load(f.name)
            self.assertIn(f.name, str(cm.exception))
            self.assertIn("make lib", str(cm.exception))
            code = "import iris_gpu\ntry:\n    iris_gpu.library()\nexcept ImportError as e:\n    print('refused:', type(e).__name__)"
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), IRIS_LIB=f.name)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "refused: IrisLibraryError"), r.stderr)


class TestErrors(unittest.TestCase):
    def test_status_names(self):
        self.assertEqual(_lib.status_name(0), "IRIS_SUCCESS")
        self.assertEqual(_lib.status_name(3), "IRIS_ERROR_OUT_OF_MEMORY")
        self.assertEqual(_lib.status_name(99), "IRIS_STATUS_99")

    def test_status_names_match_header(self):
        enum = c_enum(header_text("iris.h"), "iris_status_t")
        self.assertIsNotNone(enum)
        for name, v in enum.items():
            if name != "IRIS_STATUS_COUNT":
                self.assertEqual(_lib.status_name(v), name)

    def test_iris_error_text(self):
        e = iris_gpu.IrisError(7, "rank 1: cudaMalloc failed", "iris_init")
        self.assertEqual(e.status, 7)
        self.assertEqual(e.status_name, "IRIS_ERROR_GPU")
        self.assertEqual(str(e), "iris_init failed: IRIS_ERROR_GPU (7): rank 1: cudaMalloc failed")
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(str(iris_gpu.IrisError(1)), "IRIS_ERROR_INVALID_ARGUMENT (1)")


class TestAbiChecks(unittest.TestCase):
    def good_sizes(self):
        return {n: ctypes.sizeof(c) for n, c in _lib.STRUCTS.items()}

    def test_fake_good_library_passes(self):
        v = _lib.EXPECTED_VERSION
        self.assertEqual(_lib.check_library(FakeLib(v[0] * 10000 + v[1] * 100 + 7, self.good_sizes())), ((v[0], v[1], 7), set()))

    def test_optional_struct_unknown(self):
        sizes = self.good_sizes()
        del sizes["iris_ag_gemm_desc_t"], sizes["iris_gemm_rs_desc_t"]
        v = _lib.EXPECTED_VERSION
        self.assertEqual(_lib.check_library(FakeLib(v[0] * 10000 + v[1] * 100, sizes))[1], {"iris_ag_gemm_desc_t", "iris_gemm_rs_desc_t"})
        sizes["iris_gemm_rs_desc_t"] = 56  # known but of another layout: refused
        with self.assertRaisesRegex(iris_gpu.IrisLibraryError, "iris_gemm_rs_desc_t is 64 bytes here, 56 bytes in the library"):
            _lib.check_library(FakeLib(v[0] * 10000 + v[1] * 100, sizes))

    def test_other_version_refused(self):
        v = _lib.EXPECTED_VERSION
        with self.assertRaises(iris_gpu.IrisLibraryError) as cm:
            _lib.check_library(FakeLib(v[0] * 10000 + (v[1] + 1) * 100, self.good_sizes()))
        self.assertIn("needs %d.%d.x" % v, str(cm.exception))

    def test_struct_mismatch_refused(self):
        sizes = self.good_sizes()
        sizes["iris_device_ctx_t"] += 64  # a library built with IRIS_MAX_RANKS 24
        del sizes["iris_coll_opts_t"]
        with self.assertRaises(iris_gpu.IrisLibraryError) as cm:
            _lib.check_library(FakeLib(_lib.EXPECTED_VERSION[0] * 10000 + _lib.EXPECTED_VERSION[1] * 100, sizes))
        msg = str(cm.exception)
        self.assertIn("iris_device_ctx_t", msg)
        self.assertIn("iris_coll_opts_t is %d bytes here, unknown to the library" % ctypes.sizeof(_lib.CollOptsT), msg)

    def test_struct_sizes_are_the_c_layouts(self):
        # x86-64 LP64: what the C compiler gives for the structs of the headers
        self.assertEqual(ctypes.sizeof(_lib.ConfigT), 80)
        self.assertEqual(ctypes.sizeof(_lib.BootstrapT), 24)
        self.assertEqual(ctypes.sizeof(_lib.DeviceCtxT), 16 + 8 * _lib.MAX_RANKS + 8 + 16)  # + the fault words pointer, the node fields
        self.assertEqual(ctypes.sizeof(_lib.CollOptsT), 24)  # size_t, enum, int, unsigned flags (+4)
        self.assertEqual(ctypes.sizeof(_lib.AgGemmDescT), 88)
        self.assertEqual(ctypes.sizeof(_lib.GemmRsDescT), 64)  # size_t, enum (+4), 3 long long, 5 int (+4)

    def test_gemm_descs_match_header_field_by_field(self):
        for header, typedef, cls in (("iris_gemm.h", "iris_ag_gemm_desc_t", _lib.AgGemmDescT), ("iris_gemm_reduce.h", "iris_gemm_rs_desc_t", _lib.GemmRsDescT)):
            fields = c_struct_fields(header_text(header), typedef)
            self.assertIsNotNone(fields, typedef)
            self.assertEqual([(n, t) for n, t in fields], [(n, t) for n, t in cls._fields_], typedef)

    def test_moe_desc_matches_header(self):
        text = header_text("iris_moe.h")
        fields = c_struct_fields(text, "iris_moe_desc_t")
        self.assertIsNotNone(fields)
        self.assertEqual([(n, t) for n, t in fields], [(n, t) for n, t in _lib.MoeDescT._fields_])
        enums = {}
        for header, typedef in (("iris_collectives.h", "iris_dtype_t"), ("iris_moe.h", "iris_moe_mode_t")):
            enums.update(c_enum(header_text(header), typedef))
        want = c_initializer(text, "IRIS_MOE_DESC_INIT", enums)
        d = _lib.MoeDescT.init()
        got = [getattr(d, n) for n, _ in d._fields_]
        self.assertEqual((want[0], got[0]), ("sizeof", ctypes.sizeof(_lib.MoeDescT)))
        self.assertEqual(got[1:], want[1:])
        self.assertEqual(ctypes.sizeof(_lib.MoeDescT), 48)  # size_t, 8 int, long long
        self.assertEqual(ctypes.sizeof(_lib.MoeRecvT), 64)  # 5 pointers, 2 long long, int (+4)

    def test_rmsnorm_opts_match_header(self):
        """iris_rmsnorm_opts_t: field names in order, the C size (LP64), the initializer."""
        text = header_text("iris_collectives.h")
        m = re.search(r"typedef struct iris_rmsnorm_opts \{([^}]*)\} iris_rmsnorm_opts_t;", text, re.S)
        self.assertIsNotNone(m)
        body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
        names = [re.split(r"[\s*]+", d.strip())[-1] for d in body.split(";") if d.strip()]
        self.assertEqual(names, [n for n, _ in _lib.RmsnormOptsT._fields_])
        self.assertEqual(ctypes.sizeof(_lib.RmsnormOptsT), 40)  # size_t, enum (+4), 2 pointers, enum (+4)
        self.assertIn("#define IRIS_RMSNORM_OPTS_INIT {sizeof(iris_rmsnorm_opts_t), IRIS_QUANT_NONE, NULL, NULL, IRIS_RMSNORM_AUTO}", text)
        o = _lib.RmsnormOptsT.init()
        self.assertEqual((o.struct_size, o.quant, o.out_fp8, o.scale, o.algo), (40, 0, None, None, 0))
        enums = c_enum(text, "iris_quant_t")
        self.assertEqual(enums, {"IRIS_QUANT_NONE": 0, "IRIS_QUANT_FP8_PER_TENSOR": 1, "IRIS_QUANT_FP8_PER_TOKEN": 2})

    def test_gemm_rs_desc_init_matches_macro(self):
        enums = {}
        for header, typedef in (("iris_collectives.h", "iris_dtype_t"), ("internal/gemm/types.h", "iris_gemm_path_t"), ("iris_gemm_reduce.h", "iris_gemm_reduce_op_t")):
            enums.update(c_enum(header_text(header), typedef))
        want = c_initializer(header_text("iris_gemm_reduce.h"), "IRIS_GEMM_RS_DESC_INIT", enums)
        d = _lib.GemmRsDescT.init()
        got = [getattr(d, n) for n, _ in d._fields_]
        self.assertEqual(want[0], "sizeof")
        self.assertEqual(got[0], ctypes.sizeof(_lib.GemmRsDescT))
        self.assertEqual(got[1:], want[1:])

    def test_initializers_match_header_macros(self):
        c = _lib.ConfigT.init()
        self.assertEqual((c.struct_size, c.rank, c.world_size, c.device, c.heap_size), (80, -1, -1, -1, 0))
        self.assertFalse(c.bootstrap)
        o = _lib.CollOptsT.init()
        self.assertEqual((o.struct_size, o.algo, o.ctas, o.flags), (24, 0, 0, 0))


@unittest.skipUnless(HAVE_LIB, NO_LIB)
class TestLibrary(unittest.TestCase):
    def setUp(self):
        self.L = _lib.load(LIB_PATH)

    def test_loads_and_checks(self):
        self.assertEqual(self.L.version[:2], _lib.EXPECTED_VERSION)
        for name, cls in _lib.STRUCTS.items():
            self.assertEqual(self.L.lib.iris_abi_struct_size(name.encode()), ctypes.sizeof(cls), name)
        self.assertEqual(self.L.lib.iris_abi_struct_size(b"no_such_t"), 0)

    def test_team_functions_bound(self):
        """The team calls the torch layer needs are in the library, and iris_team_t is the
        ctypes mirror's size (checked at load too)."""
        for name in ("iris_team_get", "iris_team_split", "iris_team_destroy", "iris_team_check", "iris_all_reduce_team", "iris_all_gather_team",
                     "iris_reduce_scatter_team", "iris_all_to_all_team", "iris_broadcast_team", "iris_barrier_device_team", "iris_team_set_staging"):
            self.assertTrue(self.L.has(name), name)
        self.assertEqual(self.L.lib.iris_abi_struct_size(b"iris_team_t"), ctypes.sizeof(_lib.TeamT))
        self.assertNotIn("iris_team_t", self.L.unchecked)

    def test_dtype_sizes_agree(self):
        for name, code in _types.DTYPES.items():
            got = self.L.lib.iris_dtype_size(code)
            if got == 0 and code >= 5:
                print("SKIP: python: library dtype %s: not in this build yet (the byte/fp8 types come from iris_collectives.h)" % name)
                continue
            self.assertEqual(got, _types.ITEMSIZE[name], name)

    def test_gemm_rs_functions_and_desc(self):
        """The GEMM + reduce functions are bound; iris_gemm_rs_choose_path (no GPU) reads the
        description through the ctypes mirror: path field, and AUTO per world size and rows
        per rank (unfused below 256; all-reduce through iris_all_reduce: 512)."""
        for name in _lib.OPTIONAL_FUNCTIONS:
            if name.startswith("iris_gemm_rs_"):
                self.assertTrue(self.L.has(name), name)
        L = self.L.lib
        d = _lib.GemmRsDescT.init()
        d.M, d.N, d.K = 64, 64, 64
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 1), _types.GEMM_PATHS["unfused"])
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 4), _types.GEMM_PATHS["unfused"])  # 16 rows per rank
        d.M = 256 * 4
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 4), _types.GEMM_PATHS["pipelined"])
        d.op = 1  # all-reduce through iris_all_reduce (no bias, output-type partials): unfused to 512 rows per rank
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 4), _types.GEMM_PATHS["unfused"])
        d.M = 512 * 4
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 4), _types.GEMM_PATHS["pipelined"])
        d.M, d.has_bias = 256 * 4, 1  # with a bias: the barrier + pull, pipelined from 256 again
        self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 4), _types.GEMM_PATHS["pipelined"])
        d.op, d.has_bias, d.M = 0, 0, 64
        # all-gather + GEMM: unfused below 256 rows per rank, and with A in rows below 512 for
        # a GEMM under 2^35 FLOP (2MNK); else pipelined
        if self.L.has("iris_ag_gemm_choose_path"):
            g = _lib.AgGemmDescT.init()
            for W, M, N, K, layout, want in ((4, 128, 8192, 8192, 0, "unfused"), (4, 1024, 1792, 4096, 0, "unfused"),
                                             (4, 1024, 3584, 8192, 0, "pipelined"), (4, 1024, 1792, 4096, 1, "pipelined"),
                                             (4, 2048, 1792, 4096, 0, "pipelined"), (2, 1024, 1792, 4096, 0, "pipelined"),
                                             (1, 64, 64, 64, 0, "pipelined")):
                g.M, g.N, g.K, g.layout = M, N, K, layout
                self.assertEqual(L.iris_ag_gemm_choose_path(ctypes.byref(g), W), _types.GEMM_PATHS[want], (W, M, N, K, layout))
        for path, v in _types.GEMM_PATHS.items():
            d.path = v
            if path != "auto":
                self.assertEqual(L.iris_gemm_rs_choose_path(ctypes.byref(d), 2), v, path)
            self.assertEqual(L.iris_gemm_path_name(v).decode().replace("-", "_"), path)
        self.assertEqual(L.iris_gemm_rs_path(None), 0)
        self.assertEqual(L.iris_gemm_rs_destroy(None), 0)
        self.assertEqual(L.iris_gemm_rs_check(None), _lib.ERROR_INVALID_ARGUMENT)

    def test_gemm_rs_null_arguments(self):
        """create / run / run_scaled through their prototypes: refused before any GPU call."""
        L = self.L.lib
        d, g = _lib.GemmRsDescT.init(), ctypes.c_void_p(0x1234)
        for call, text in ((lambda: L.iris_gemm_rs_create(None, ctypes.byref(d), ctypes.byref(g)), "NULL argument"),
                           (lambda: L.iris_gemm_rs_run(None, None, None, None, None, None), "NULL plan"),
                           (lambda: L.iris_gemm_rs_run_scaled(None, None, None, None, None, None, None, None), "NULL plan")):
            st = call()  # the detail is read right after the call
            self.assertEqual(st, _lib.ERROR_INVALID_ARGUMENT)
            with self.assertRaisesRegex(iris_gpu.IrisError, text):
                self.L.check(st, "iris_gemm_rs_*")

    def test_status_strings(self):
        for v, name in enumerate(_lib.STATUS_NAMES):
            self.assertTrue(self.L.lib.iris_status_string(v))

    def test_failing_call_raises_with_detail(self):
        # rank 5 of 2: refused before any GPU call, so this works on machines without one
        cfg = _lib.ConfigT.init()
        cfg.rank, cfg.world_size = 5, 2
        h = ctypes.c_void_p()
        st = self.L.lib.iris_init(ctypes.byref(cfg), ctypes.byref(h))
        self.assertNotEqual(st, 0)
        with self.assertRaises(iris_gpu.IrisError) as cm:
            self.L.check(st, "iris_init")
        self.assertTrue(cm.exception.detail, "iris_error_detail() was empty")
        self.assertIn("iris_init failed: IRIS_ERROR_", str(cm.exception))
        self.assertFalse(h.value)

    def test_device_context_from_peers(self):
        # local bookkeeping, no GPU call: any addresses do for the rules and the layout
        peers = [0x7F0000000000 + r * (1 << 30) for r in range(3)]
        d = self.L.device_context_from_peers(1, 3, 4096, peers)
        self.assertEqual((d.rank, d.world_size, d.heap_size, d.local_rank, d.local_size, d.node, d.num_nodes), (1, 3, 4096, 1, 3, 0, 1))
        self.assertEqual([d.bases[r] for r in range(3)], peers)
        self.assertFalse(d.fault)
        for args, status, words in [((3, 3, 4096, peers), _lib.STATUS_NAMES.index("IRIS_ERROR_INVALID_RANK"), "outside"),
                                    ((0, 3, 0, peers), _lib.ERROR_INVALID_ARGUMENT, "bytes"),
                                    ((1, 3, 4096, [peers[0], 0, peers[2]]), _lib.ERROR_INVALID_ARGUMENT, "own buffer"),
                                    ((0, 2, 4096, peers), _lib.ERROR_INVALID_ARGUMENT, "peer pointers")]:
            with self.assertRaises(iris_gpu.IrisError) as cm:
                self.L.device_context_from_peers(*args)
            self.assertEqual(cm.exception.status, status, str(cm.exception))
            self.assertIn(words, str(cm.exception))


class TestTypes(unittest.TestCase):
    def test_env_switch_is_strict(self):
        name = "IRIS_TEST_SWITCH_VARIABLE"
        old = os.environ.pop(name, None)
        try:
            self.assertIs(_types.env_switch(name, True), True)  # unset: the default
            self.assertIs(_types.env_switch(name, False), False)
            for v, want in (("0", False), ("1", True)):
                os.environ[name] = v
                self.assertIs(_types.env_switch(name, not want), want)
            for bad in ("", "off", "true", "yes", " 1", "1 ", "2", "-1"):
                os.environ[name] = bad
                with self.assertRaises(ValueError) as e:
                    _types.env_switch(name, True)
                self.assertIn(name, str(e.exception))
        finally:
            os.environ.pop(name, None)
            if old is not None:
                os.environ[name] = old

    def test_dtype_table_matches_header(self):
        enum = c_enum(header_text("iris_collectives.h"), "iris_dtype_t")
        names = {"IRIS_FLOAT32": "float32", "IRIS_FLOAT16": "float16", "IRIS_BFLOAT16": "bfloat16", "IRIS_INT32": "int32", "IRIS_INT64": "int64",
                 "IRIS_UINT8": "uint8", "IRIS_FLOAT8_E4M3": "float8_e4m3fn", "IRIS_FLOAT8_E5M2": "float8_e5m2"}
        for cname, v in enum.items():
            if cname in names:
                self.assertEqual(_types.DTYPES[names[cname]], v, cname)
        if "IRIS_UINT8" not in enum:
            print("SKIP: python: dtype values of uint8/fp8: iris_collectives.h has no byte/fp8 types yet (5, 6, 7 are from the plan)")

    def test_redop_table_matches_header(self):
        enum = c_enum(header_text("iris_collectives.h"), "iris_redop_t")
        for cname, v in enum.items():
            if cname != "IRIS_REDOP_COUNT":
                self.assertEqual(_types.REDOPS[cname[5:].lower()], v, cname)
        algos = c_enum(header_text("iris_collectives.h"), "iris_algo_t")
        for cname, v in algos.items():
            self.assertEqual(_types.ALGOS[cname[10:].lower()], v, cname)

    def test_dtype_mapping(self):
        self.assertEqual(_types.iris_dtype("torch.bfloat16"), 2)
        self.assertEqual(_types.iris_dtype("float8_e5m2"), 7)
        with self.assertRaises(TypeError) as cm:
            _types.iris_dtype("torch.complex64", "all_reduce: input")
        self.assertIn("complex64", str(cm.exception))
        self.assertIn("all_reduce: input", str(cm.exception))

    def test_redop_mapping(self):
        self.assertEqual(_types.iris_redop("max", "torch.int32"), 2)
        self.assertEqual(_types.iris_redop("AVG", "torch.bfloat16"), 3)
        with self.assertRaises(TypeError):
            _types.iris_redop("avg", "torch.int64")
        with self.assertRaises(ValueError):
            _types.iris_redop("prod", "torch.float32")

    def test_check_tensor(self):
        self.assertEqual(_types.check_tensor(FakeTensor("torch.float16"), "x", 0), 1)
        with self.assertRaisesRegex(ValueError, "x is on cuda:1 but this iris context runs on cuda:0"):
            _types.check_tensor(FakeTensor(device=("cuda", 1)), "x", 0)
        with self.assertRaisesRegex(ValueError, "on cpu"):
            _types.check_tensor(FakeTensor(device=("cpu", None)), "x", 0)
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            _types.check_tensor(FakeTensor(contiguous=False), "x", 0)
        with self.assertRaisesRegex(TypeError, "dtype float16 but float32 is expected"):
            _types.check_tensor(FakeTensor("torch.float16"), "out", 0, "torch.float32")
        with self.assertRaisesRegex(TypeError, "not supported"):
            _types.check_tensor(FakeTensor("torch.bool"), "x", 0)

    def test_coll_count(self):
        self.assertEqual(_types.coll_count("all_reduce", 10, 10, 4), 10)
        self.assertEqual(_types.coll_count("all_gather", 10, 40, 4), 10)
        self.assertEqual(_types.coll_count("reduce_scatter", 40, 10, 4), 10)
        self.assertEqual(_types.coll_count("all_to_all", 12, 12, 4), 3)
        self.assertEqual(_types.coll_count("broadcast", 0, 0, 4), 0)
        for args, pat in ((("all_reduce", 10, 11, 4), "must be equal"), (("all_gather", 10, 39, 4), "world_size \\(4\\) x input"),
                          (("reduce_scatter", 39, 10, 4), "world_size \\(4\\) x output"), (("all_to_all", 10, 10, 4), "multiple of world_size"),
                          (("gather", 1, 1, 1), "unknown")):
            with self.assertRaisesRegex(ValueError, pat):
                _types.coll_count(*args)

    def test_shapes_along_dims(self):
        self.assertEqual(_types.gather_shape((2, 3, 5), 4, 1), (2, 12, 5))
        self.assertEqual(_types.gather_shape((2, 3), 3, -1), (2, 9))
        self.assertEqual(_types.scatter_shape((2, 8), 4, 1), (2, 2))
        with self.assertRaisesRegex(ValueError, "not a multiple"):
            _types.scatter_shape((2, 6), 4, 1)
        with self.assertRaisesRegex(ValueError, "out of range"):
            _types.gather_shape((2, 6), 4, 2)
        with self.assertRaisesRegex(ValueError, "0-d"):
            _types.gather_shape((), 4, 0)

    def test_root_and_heap_bytes(self):
        self.assertEqual(_types.check_root(3, 4), 3)
        for bad in (4, -1, "0"):
            with self.assertRaisesRegex(ValueError, "root"):
                _types.check_root(bad, 4)
        self.assertEqual(_types.heap_bytes((3, 5), "torch.bfloat16"), 30)
        self.assertEqual(_types.heap_bytes((0,), "torch.float32"), 1)
        with self.assertRaises(ValueError):
            _types.heap_bytes((-1, 2), "torch.float32")
        with self.assertRaisesRegex(ValueError, "more than any heap"):  # 2^64 bytes: not cut to 0 by ctypes
            _types.heap_bytes((1 << 32, 1 << 30), "torch.float32")
        with self.assertRaises(TypeError):
            _types.heap_bytes((2,), "torch.complex128")

    def test_ag_gemm_shapes(self):
        self.assertEqual(_types.ag_gemm_shapes("rows", 64, 32, 16, 4, False), ((16, 16), (16, 32), (64, 32)))
        self.assertEqual(_types.ag_gemm_shapes("cols", 64, 32, 64, 4, True), ((64, 16), (32, 64), (64, 32)))
        for args in (("rows", 63, 32, 16, 4, False), ("cols", 64, 32, 16, 4, False), ("rows", 64, 30, 16, 4, False), ("diag", 64, 32, 16, 4, False)):
            with self.assertRaises(ValueError):
                _types.ag_gemm_shapes(*args)


class TestGemmReduceLogic(unittest.TestCase):
    """The GEMM + reduce plan's shape rules and argument checks, without torch (fake tensors)."""

    def test_enums_match_header(self):
        self.assertEqual(c_enum(header_text("iris_gemm_reduce.h"), "iris_gemm_reduce_op_t"),
                         {"IRIS_GEMM_" + k.upper(): v for k, v in _types.GEMM_REDUCE_OPS.items()})
        paths = c_enum(header_text("internal/gemm/types.h"), "iris_gemm_path_t")
        self.assertEqual({k: v for k, v in paths.items() if k != "IRIS_GEMM_PATH_COUNT"}, {"IRIS_GEMM_PATH_" + k.upper(): v for k, v in _types.GEMM_PATHS.items()})

    def test_shapes(self):
        f = _types.gemm_rs_shapes
        self.assertEqual(f("reduce_scatter", 12, 16, 48, 3, False), ((12, 16), (16, 16), (4, 16)))
        self.assertEqual(f("all_reduce", 12, 16, 48, 3, True), ((12, 16), (16, 16), (12, 16)))
        self.assertEqual(f("all_reduce", 2, 24, 16, 2, True), ((2, 8), (24, 8), (2, 24)))
        self.assertEqual(f("reduce_scatter", 4, 8, 64, 2, True, "torch.float8_e4m3fn"), ((4, 32), (8, 32), (2, 8)))
        for args, text in ((("reduce_scatter", 13, 16, 48, 3, False), "M \\(13\\) must be a multiple of world_size 3"),
                           (("all_reduce", 13, 16, 48, 3, False), "M \\(13\\)"),
                           (("reduce_scatter", 12, 16, 36, 3, False), "K \\(36\\) must be a multiple of 8 x world_size 3"),
                           (("reduce_scatter", 12, 16, 50, 2, False), "K \\(50\\)"),
                           (("reduce_scatter", 12, 12, 48, 3, False), "N \\(12\\) must be a multiple of 8"),
                           (("reduce_scatter", 0, 16, 48, 3, False), "positive"),
                           (("reduce_scatter", 4, 8, 48, 2, True, "float8_e4m3fn"), "fp8 inputs need K/world_size \\(24\\)"),
                           (("scatter", 12, 16, 48, 3, False), "op 'scatter'")):
            with self.assertRaisesRegex(ValueError, text):
                f(*args)

    def plan(self, op="reduce_scatter", dtype="torch.bfloat16", out_dtype="torch.float32", b_transposed=True, bias=True):
        """A GemmReduce with its attributes set as __init__ sets them (no library, no torch)."""
        from iris_gpu import torch as it

        class Ctx:
            device = 0

        g = it.GemmReduce.__new__(it.GemmReduce)
        g.ctx, g.op, g.dtype, g.out_dtype, g.b_transposed, g.has_bias = Ctx(), op, dtype, out_dtype, b_transposed, bias
        g.fp8 = _types.dtype_name(dtype) == "float8_e4m3fn"
        g.a_shape, g.b_shape, g.c_shape = _types.gemm_rs_shapes(op, 8, 16, 32, 2, b_transposed, dtype)
        return g

    def test_check_accepts_the_plan_shapes(self):
        g = self.plan()
        a, b = FakeTensor("torch.bfloat16", shape=(8, 16)), FakeTensor("torch.bfloat16", shape=(16, 16))
        out, bias = FakeTensor("torch.float32", shape=(4, 16)), FakeTensor("torch.float32", shape=(16,))
        g.check_args(a, b, bias, None, None, out)
        g.check_args(a, b, bias, None, None)
        f8 = self.plan(dtype="torch.float8_e4m3fn", bias=False)
        s1 = FakeTensor("torch.float32", shape=(1,))
        f8.check_args(FakeTensor("torch.float8_e4m3fn", shape=(8, 16)), FakeTensor("torch.float8_e4m3fn", shape=(16, 16)), None, s1, FakeTensor("torch.float32", shape=()))

    def test_check_refusals(self):
        g = self.plan()
        a, b = FakeTensor("torch.bfloat16", shape=(8, 16)), FakeTensor("torch.bfloat16", shape=(16, 16))
        out, bias = FakeTensor("torch.float32", shape=(4, 16)), FakeTensor("torch.float32", shape=(16,))
        s1 = FakeTensor("torch.float32", shape=(1,))
        gk = self.plan(b_transposed=False, bias=False)
        bk = FakeTensor("torch.bfloat16", shape=(16, 16))
        cases = [
            ((FakeTensor("torch.bfloat16", shape=(8, 16), device=("cpu", None)), b, bias, None, None, out), ValueError, "gemm_reduce_scatter: a is on cpu"),
            ((a, FakeTensor("torch.bfloat16", shape=(16, 16), device=("cuda", 1)), bias, None, None, out), ValueError, "b is on cuda:1"),
            ((FakeTensor("torch.bfloat16", shape=(8, 16), contiguous=False), b, bias, None, None, out), ValueError, "a is not contiguous"),
            ((FakeTensor("torch.float16", shape=(8, 16)), b, bias, None, None, out), TypeError, "a has dtype float16 but bfloat16"),
            ((FakeTensor("torch.bfloat16", shape=(16, 8)), b, bias, None, None, out), ValueError, "a has shape \\(16, 8\\), the plan needs \\(8, 16\\)"),
            ((a, FakeTensor("torch.bfloat16", shape=(16, 32)), bias, None, None, out), ValueError, "b has shape .* \\(the plan has b_transposed=True\\)"),
            ((a, b, bias, None, None, FakeTensor("torch.float32", shape=(8, 16))), ValueError, "out has shape \\(8, 16\\), the plan needs \\(4, 16\\)"),
            ((a, b, bias, None, None, FakeTensor("torch.bfloat16", shape=(4, 16))), TypeError, "out has dtype bfloat16 but float32"),
            ((a, b, None, None, None, out), ValueError, "made with bias=True but bias is None"),
            ((a, b, FakeTensor("torch.float32", shape=(8,)), None, None, out), ValueError, "bias has shape \\(8,\\)"),
            ((a, b, FakeTensor("torch.bfloat16", shape=(16,)), None, None, out), TypeError, "bias has dtype bfloat16"),
            ((a, b, bias, s1, None, out), ValueError, "apply to fp8 inputs only"),
            ((a, b, bias, None, s1, out), ValueError, "apply to fp8 inputs only"),
        ]
        for args, exc, text in cases:
            with self.assertRaisesRegex(exc, text):
                g.check_args(*args)
        with self.assertRaisesRegex(ValueError, "made with bias=False but bias is given"):
            gk.check_args(a, bk, bias, None, None)
        f8 = self.plan(dtype="torch.float8_e4m3fn", bias=False)
        a8, b8 = FakeTensor("torch.float8_e4m3fn", shape=(8, 16)), FakeTensor("torch.float8_e4m3fn", shape=(16, 16))
        for args, exc, text in (((a8, b8, None, None, s1), ValueError, "fp8 plan needs a_scale and b_scale"),
                                ((a8, b8, None, s1, None), ValueError, "fp8 plan needs a_scale and b_scale"),
                                ((a8, b8, None, s1, FakeTensor("torch.float16", shape=(1,))), TypeError, "b_scale has dtype float16"),
                                ((a8, b8, None, FakeTensor("torch.float32", shape=(2,)), s1), ValueError, "a_scale has shape \\(2,\\)"),
                                ((a8, b8, None, FakeTensor("torch.float32", shape=(1,), device=("cpu", None)), s1), ValueError, "a_scale is on cpu")):
            with self.assertRaisesRegex(exc, text):
                f8.check_args(*args)


class TestJaxTestHelpers(unittest.TestCase):
    def test_command_buffer_detection(self):
        sys.path.insert(0, HERE)
        from test_jax_gpu import custom_call_in_command_buffer as f

        hlo = """HloModule jit_f

%command_buffer (p0: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  ROOT %cc = f32[8]{0} custom-call(%p0), custom_call_target="iris_all_reduce", api_version=API_VERSION_TYPED_FFI
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %call = f32[8]{0} call(%x), to_apply=%command_buffer
}
"""
        self.assertTrue(f(hlo, "iris_all_reduce"))
        self.assertFalse(f(hlo.replace("%command_buffer", "%fused"), "iris_all_reduce"))
        self.assertFalse(f(hlo, "iris_all_gather"))


class TestTorchModuleLogic(unittest.TestCase):
    """Pieces of iris_gpu.torch that run without torch."""

    def launches(self, *calls):
        """Run iris_gpu.torch._launch against a stand-in context of rank 2 of 4 on cuda:0
        that records what it would pass to the C collectives."""
        from iris_gpu import torch as it

        class Ctx:
            world_size, rank, device = 4, 2, 0

            def __init__(self):
                self.calls = []

            def _run(self, *args):
                self.calls.append(args)

        c = Ctx()
        it._CONTEXTS[-7] = c
        try:
            for kind, x, out, extra, inplace in calls:
                it._launch(kind, x, out, -7, extra, inplace)
        finally:
            del it._CONTEXTS[-7]
        return c.calls

    def test_launch_layouts(self):
        x = FakeTensor(shape=(40,), ptr=0x1000)
        out = FakeTensor(shape=(40,), ptr=0x9000)
        small = FakeTensor(shape=(10,), ptr=0x5000)
        calls = self.launches(
            ("all_reduce", x, out, "max", False),
            ("all_reduce", x, None, "sum", True),
            ("all_gather", small, out, None, False),
            ("all_gather", x, None, None, True),  # rank 2's block of 10 floats is sent
            ("reduce_scatter", x, small, "avg", False),
            ("reduce_scatter", x, None, "sum", True),  # the result lands in block 2
            ("all_to_all", x, out, None, False),
            ("broadcast", x, None, 3, True),
        )
        self.assertEqual(calls, [
            ("all_reduce", 0x1000, 0x9000, 40, 0, 2),
            ("all_reduce", 0x1000, 0x1000, 40, 0, 0),
            ("all_gather", 0x5000, 0x9000, 10, 0, None),
            ("all_gather", 0x1000 + 80, 0x1000, 10, 0, None),
            ("reduce_scatter", 0x1000, 0x5000, 10, 0, 3),
            ("reduce_scatter", 0x1000, 0x1000 + 80, 10, 0, 0),
            ("all_to_all", 0x1000, 0x9000, 10, 0, None),
            ("broadcast", 0x1000, 0x1000, 40, 0, 3),
        ])

    def test_launch_defined_overlaps(self):
        """Out-of-place calls whose buffers overlap as the library defines (the same buffer,
        NCCL's in-place layouts at rank 2 of 4) go through; adjacent buffers too."""
        buf = FakeTensor(shape=(40,), ptr=0x1000)
        calls = self.launches(
            ("all_reduce", buf, FakeTensor(shape=(40,), ptr=0x1000), "sum", False),
            ("all_gather", FakeTensor(shape=(10,), ptr=0x1000 + 80), buf, None, False),
            ("reduce_scatter", buf, FakeTensor(shape=(10,), ptr=0x1000 + 80), "sum", False),
            ("all_reduce", buf, FakeTensor(shape=(40,), ptr=0x1000 + 160), "sum", False),
        )
        self.assertEqual([c[:3] for c in calls], [("all_reduce", 0x1000, 0x1000), ("all_gather", 0x1050, 0x1000), ("reduce_scatter", 0x1000, 0x1050),
                                                  ("all_reduce", 0x1000, 0x10A0)])

    def test_launch_relayouts(self):
        """A layout the compiler chose (not contiguous) goes through a contiguous copy."""
        x = FakeTensor(shape=(40,), contiguous=False, ptr=0x1000)
        out = FakeTensor(shape=(40,), contiguous=False, ptr=0x9000)
        calls = self.launches(("all_reduce", x, None, "sum", True), ("all_reduce", x, out, "sum", False))
        self.assertEqual(calls, [("all_reduce", 0x101000, 0x101000, 40, 0, 0), ("all_reduce", 0x101000, 0x109000, 40, 0, 0)])
        self.assertEqual((x.copied_from, out.copied_from), (0x101000, 0x109000))

    def test_launch_refusals(self):
        x = FakeTensor(shape=(40,))
        bad = [
            (("all_reduce", x, FakeTensor(shape=(41,)), "sum", False), ValueError, "must be equal"),
            (("all_reduce", x, FakeTensor("torch.float16", shape=(40,)), "sum", False), TypeError, "output has dtype float16"),
            (("all_reduce", FakeTensor("torch.int32", shape=(40,)), None, "avg", True), TypeError, "avg"),
            (("all_reduce", FakeTensor(device=("cuda", 1)), None, "sum", True), ValueError, "cuda:1"),
            (("all_gather", FakeTensor(shape=(42,)), None, None, True), ValueError, "multiple of world_size 4"),
            (("all_to_all", FakeTensor(shape=(42,)), None, None, True), ValueError, "multiple of world_size"),
            (("broadcast", x, None, 4, True), ValueError, "root 4"),
            (("reduce_scatter", x, FakeTensor(shape=(11,)), "sum", False), ValueError, "world_size \\(4\\) x output"),
            # an output overlapping the input in no defined layout (rank 2 of 4: NCCL's is 80 bytes in)
            (("all_gather", FakeTensor(shape=(10,), ptr=0x1000 + 40), FakeTensor(shape=(40,), ptr=0x1000), None, False), ValueError, "overlaps"),
            (("all_reduce", FakeTensor(shape=(40,), ptr=0x1000), FakeTensor(shape=(40,), ptr=0x1004), "sum", False), ValueError, "overlaps"),
            (("reduce_scatter", FakeTensor(shape=(40,), ptr=0x1000), FakeTensor(shape=(10,), ptr=0x1000 + 4), "sum", False), ValueError, "overlaps"),
        ]
        for call, exc, text in bad:
            with self.assertRaisesRegex(exc, text):
                self.launches(call)

    def dim_calls(self, fn):
        """fn(ops, ctx, T) against a stand-in context of 2 ranks, with ops' _invoke and
        _in_step recorded (T: a FakeTensor with dim and movedim). Returns (what fn
        returned or raised, the op calls, the takes part)."""
        from unittest import mock

        from iris_gpu.torch import context, ops

        class T(FakeTensor):
            def dim(self):
                return len(self.shape)

            def movedim(self, a, b):
                s = list(self.shape)
                s.insert(b, s.pop(a))
                return T(self.dtype, (self.device.type, self.device.index), self._c, tuple(s), self.ptr)

        class Ctx:
            _iris_target, closed, id, world_size, rank, device = True, False, -8, 2, 0, 0

        calls, took = [], []

        def invoke(name, x, *rest):
            calls.append((name, tuple(x.shape)))
            return T(shape=x.shape)

        context._CONTEXTS[-8] = Ctx()
        try:
            with mock.patch.object(ops, "_invoke", invoke), mock.patch.object(ops, "_in_step", lambda e, kind, *a, **k: took.append(kind)):
                try:
                    r = fn(ops, Ctx(), T)
                except Exception as e:
                    r = e
        finally:
            del context._CONTEXTS[-8]
        return r, calls, took

    def test_refused_along_other_dims_take_part(self):
        """A non-contiguous input refused along any dim takes part (docs/python.md), as
        along dim 0: the peers wait for the call otherwise."""
        for name in ("all_gather", "reduce_scatter"):
            for d in (0, 1, -1):
                r, calls, took = self.dim_calls(lambda ops, c, T: getattr(ops, name)(T(shape=(4, 4), contiguous=False), c, dim=d))
                self.assertIsInstance(r, ValueError, (name, d))
                self.assertIn("not contiguous", str(r))
                self.assertEqual((calls, took), ([], [name]), (name, d))
        r, calls, took = self.dim_calls(lambda ops, c, T: ops.all_gather(T(shape=(3, 4)), c, dim=1))  # a good call: no take part
        self.assertEqual((tuple(r.shape), calls, took), ((3, 4), [("all_gather", (4, 3))], []))

    def test_gemm_run_refused_in_python_takes_part(self):
        """A GEMM plan run refused in Python (a non-contiguous operand, the other op's
        function) still takes part with one run the library refuses (plan.refused_run),
        and the error says so; while capturing nothing runs (no peer waits)."""
        import types
        from unittest import mock

        from iris_gpu.torch import ops, plans

        ns = types.SimpleNamespace
        capturing = [False]
        torch = ns(Tensor=FakeTensor, compiler=ns(is_compiling=lambda: False), utils=ns(_python_dispatch=ns(_get_current_dispatch_mode=lambda: None)),
                   cuda=ns(is_available=lambda: True, is_current_stream_capturing=lambda: capturing[0]))
        runs = []
        plan = object.__new__(plans.GemmReduce)
        plan._g, plan.op, plan.refused_run = 1, "reduce_scatter", lambda: runs.append(1) or True
        a, b = FakeTensor(shape=(4, 4), contiguous=False), FakeTensor(shape=(4, 4))
        with mock.patch.object(ops, "_torch_mod", lambda: torch), mock.patch.object(ops, "_invoke", lambda *a: self.fail("no run after a refusal")):
            for fn, text in ((lambda: ops.gemm_reduce_scatter(a, b, plan), "not contiguous"), (lambda: ops.gemm_all_reduce(b, b, plan), "made for op")):
                for cap in (False, True):
                    capturing[0], runs[:] = cap, []
                    with self.assertRaises(ValueError) as cm:
                        fn()
                    self.assertIn(text, str(cm.exception))
                    self.assertEqual(len(runs), 0 if cap else 1, (text, cap))
                    self.assertEqual("took part as a call the library refuses" in str(cm.exception), not cap, str(cm.exception))

    def test_dim_out_of_range_refused(self):
        """A dim outside [-x.dim(), x.dim()) is refused, as torch.cat refuses it (it wrapped
        onto another dim); no call of its own, and the refusal takes part (_in_step): refused
        on one rank only, the peers' call must not wait for it."""
        for name, shape, d in (("all_gather", (3, 4), 2), ("all_gather", (3, 4), 5), ("all_gather", (3, 4), -3),
                               ("reduce_scatter", (4, 4), 2), ("reduce_scatter", (4, 4), -3), ("all_gather", (), 1)):
            r, calls, took = self.dim_calls(lambda ops, c, T: getattr(ops, name)(T(shape=shape), c, dim=d))
            self.assertIsInstance(r, ValueError, (name, shape, d))
            self.assertRegex(str(r), "^%s: dim %d is out of range" % (name, d))
            self.assertEqual((calls, took), ([], [name]))
        r, calls, took = self.dim_calls(lambda ops, c, T: ops.reduce_scatter(T(shape=(3, 4)), c, dim=-1))  # in range: dim 1
        self.assertEqual((calls, took), ([("reduce_scatter", (4, 3))], []))
        r, calls, took = self.dim_calls(lambda ops, c, T: ops.all_gather(T(shape=()), c, dim=-1))  # a 0-d x: dim 0 or -1
        self.assertEqual(calls, [("all_gather", ())])

    def test_invoke_bumps_every_mutated_tensor(self):
        """Run directly (plain eager), an op bumps the version counter of every tensor it
        mutates, as the dispatcher does from mutates_args: moe_dispatch's five receive
        buffers (autograd then sees a saved recv_x overwritten by the next dispatch)."""
        import types
        from unittest import mock

        from iris_gpu.torch import ops

        bumped = []
        ns = types.SimpleNamespace
        torch = ns(Tensor=FakeTensor, compiler=ns(is_compiling=lambda: False), utils=ns(_python_dispatch=ns(_get_current_dispatch_mode=lambda: None)),
                   autograd=ns(graph=ns(increment_version=bumped.append)))
        t = [FakeTensor(ptr=0x1000 * (i + 1)) for i in range(8)]
        impls = dict.fromkeys(("moe_dispatch", "all_reduce_out", "all_reduce_inplace", "all_reduce"), lambda *a: None)
        with mock.patch.object(ops, "_torch_mod", lambda: torch), mock.patch.object(ops, "_DIRECT", True), mock.patch.dict(ops._IMPLS, impls):
            for name, args, want in (("moe_dispatch", t + [-1], t[3:8]), ("all_reduce_out", t[:2] + [-1, "sum"], [t[1]]),
                                     ("all_reduce_inplace", t[:1] + [-1, "sum"], [t[0]]), ("all_reduce", t[:1] + [-1, "sum"], [])):
                del bumped[:]
                ops._invoke(name, *args)
                self.assertEqual(bumped, want, name)

    def test_malformed_compile_ordered_defines_no_op(self):
        """IRIS_GPU_COMPILE_ORDERED is read before any op is defined: a malformed value
        defines none, so the next call (the variable fixed) registers them all (torch
        refuses a second definition of an op). A stand-in torch records the definitions."""
        code = "\n".join([
            "import os, sys, types",
            "defined = []",
            "class Op:",
            "    def register_fake(self, f): pass",
            "def custom_op(name, fn, mutates_args, schema):",
            "    if name in defined: raise RuntimeError('%s defined twice' % name)",
            "    defined.append(name)",
            "    return Op()",
            "torch = types.ModuleType('torch')",
            "torch.library = types.SimpleNamespace(custom_op=custom_op)",
            "sys.modules['torch'] = torch",
            "from iris_gpu.torch.context import _torch_mod",
            "os.environ['IRIS_GPU_COMPILE_ORDERED'] = 'off'",
            "try:",
            "    _torch_mod()",
            "except ValueError as e:",
            "    print('refused', len(defined), 'IRIS_GPU_COMPILE_ORDERED' in str(e))",
            "os.environ['IRIS_GPU_COMPILE_ORDERED'] = '0'",
            "print('then', _torch_mod() is torch, len(defined))",
        ])
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        env.pop("IRIS_GPU_DISPATCH", None)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n")[0], "refused 0 True")
        self.assertRegex(r.stdout.split("\n")[1], "^then True [1-9][0-9]*$")

    def test_store_bootstrap_over_a_dict(self):
        from iris_gpu import _host

        class DictStore:
            def __init__(self):
                self.d = {}

            def set(self, k, v):
                self.d[k] = v if isinstance(v, bytes) else v.encode()

            def get(self, k):
                return self.d[k]

            def wait(self, keys, timeout):
                missing = [k for k in keys if k not in self.d]
                if missing:
                    raise RuntimeError("timeout waiting for %s" % missing)

            def delete_key(self, k):
                del self.d[k]

        st = DictStore()
        b = _host.StoreBootstrap(st, 0, 1)
        send = ctypes.create_string_buffer(b"abcd", 4)
        recv = ctypes.create_string_buffer(4)
        self.assertEqual(b._allgather(None, ctypes.addressof(send), ctypes.addressof(recv), 4), 0)
        self.assertEqual(recv.raw, b"abcd")
        self.assertEqual(b._barrier(None), 0)
        self.assertEqual(sorted(st.d), ["2/0"])  # key of step 1 deleted once step 2 was read
        b.world = 2  # rank 1 never comes: the callback returns non-zero and keeps the error
        self.assertEqual(b._barrier(None), 1)
        self.assertIn("3/1", str(b.error))
        b.store = None
        self.assertEqual(b._allgather(None, ctypes.addressof(send), ctypes.addressof(recv), 4), 1)
        self.assertIsInstance(b.error, AttributeError)

    def test_dlpack_capsule(self):
        from iris_gpu import torch as it

        owner = object()
        cap = it._dl_capsule(0x7F0000001000, 4096, 3, owner)
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        m = it._DLManagedTensor.from_address(get(cap, b"dltensor"))
        t = m.dl_tensor
        self.assertEqual((t.data, t.device.device_type, t.device.device_id, t.ndim, t.shape[0]), (0x7F0000001000, 2, 3, 1, 4096))
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes, bool(t.strides), t.byte_offset), (1, 8, 1, False, 0))
        self.assertIs(it._dl_keep[ctypes.addressof(m)][2], owner)
        m.deleter(ctypes.pointer(m))  # what the consumer calls when its tensor dies
        self.assertNotIn(ctypes.addressof(m), it._dl_keep)
        del cap  # (a consumer renames the capsule; still named, its destructor would pop the next struct's key if that one reused the address)
        cap = it._dl_capsule(0x7F0000001000, 4096, 3, owner)  # never consumed (from_dlpack raised): its destructor releases owner
        addr = get(cap, b"dltensor")
        self.assertIn(addr, it._dl_keep)
        del cap
        self.assertNotIn(addr, it._dl_keep)

    def test_out_shapes(self):
        from iris_gpu import torch as it

        self.assertEqual(it._out_shape("all_gather", (3, 2), 4), (12, 2))
        self.assertEqual(it._out_shape("all_gather", (), 4), (4,))
        self.assertEqual(it._out_shape("reduce_scatter", (8, 2), 4), (2, 2))
        self.assertEqual(it._out_shape("all_to_all", (8, 2), 4), (8, 2))

    def test_torch_package_names(self):
        """iris_gpu.torch, a subpackage, still offers every name the single module had that
        users and the GPU tests reach (it.IrisError among them), without torch."""
        import iris_gpu
        from iris_gpu import torch as it

        self.assertIs(it.IrisError, iris_gpu.IrisError)
        for name in ("Context", "AgGemm", "GemmReduce", "Moe", "CustomAllreduce", "all_reduce", "all_reduce_", "all_gather", "all_gather_",
                     "reduce_scatter", "reduce_scatter_", "all_to_all", "all_to_all_", "broadcast", "broadcast_", "barrier", "ag_gemm",
                     "gemm_reduce", "gemm_reduce_scatter", "gemm_all_reduce", "moe_dispatch", "moe_combine", "launch",
                     "device_context_from_symm_mem", "MOE_MODES", "_lib", "_types", "_host", "Team", "new_group",
                     "new_subgroups_by_enumeration", "team_split"):
            self.assertTrue(hasattr(it, name), name)

    def test_closed_context_ids(self):
        from iris_gpu import torch as it

        with self.assertRaisesRegex(RuntimeError, "closed or was never created"):
            it._ctx(12345)
        with self.assertRaisesRegex(TypeError, "Context"):
            it._ctx_id(object())


class TestTeams(unittest.TestCase):
    """The torch subgroup -> team mapping, without torch or a GPU."""

    def test_split_args_pairs_and_strided(self):
        world = [0, 1, 2, 3]
        for me, want in ((0, (0, 0, (0, 1))), (1, (0, 1, (0, 1))), (2, (2, 0, (2, 3))), (3, (2, 1, (2, 3)))):
            self.assertEqual(_types.team_split_args([[0, 1], [2, 3]], world, me), want)
        for me, want in ((0, (0, 0, (0, 2))), (1, (1, 0, (1, 3))), (2, (0, 1, (0, 2))), (3, (1, 1, (1, 3)))):
            self.assertEqual(_types.team_split_args([[0, 2], [1, 3]], world, me), want)
        # the groups' order does not change any rank's color or key
        self.assertEqual(_types.team_split_args([[2, 3], [0, 1]], world, 3), (2, 1, (2, 3)))

    def test_team_staging_areas(self):
        """The torch and JAX splits' two heap areas (_host.TeamStaging), over a fake heap:
        raised to the least size, none for 0, the first area given back when the second
        cannot be had (the error naming what to pass), both given back by free()."""
        from iris_gpu import _host

        class Heap:
            def __init__(self, fail_at=None):
                self.next, self.calls, self.freed, self.fail_at = 4096, 0, [], fail_at
                self.lib = self

            def iris_malloc(self, h, n, pref):
                self.calls += 1
                if self.calls == self.fail_at:
                    return 2  # IRIS_ERROR_OUT_OF_MEMORY
                pref._obj.value, self.next = self.next, self.next + n
                return 0

            def iris_free(self, h, p):
                self.freed.append(p.value)
                return 0

            def detail(self):
                return "heap full"

        class Ctx:
            def __init__(self, heap):
                self._lib, self._h, self.rank = heap, 7, 3

            def _handle(self):
                return self._h

        heap = Heap()
        st = _host.TeamStaging(Ctx(heap), 100)
        self.assertEqual((st.nbytes, st.ptr_in, st.ptr_out), (_host.STAGING_MIN, 4096, 4096 + _host.STAGING_MIN))
        self.assertEqual(st.free(Ctx(heap)), 0)
        self.assertEqual(heap.freed, [4096, 4096 + _host.STAGING_MIN])
        none = Heap()
        self.assertEqual((_host.TeamStaging(Ctx(none), 0).ptr_in, none.calls), (None, 0))
        full = Heap(fail_at=2)
        with self.assertRaisesRegex(_lib.IrisError, "staging_bytes=0") as cm:
            _host.TeamStaging(Ctx(full), 1 << 20)
        self.assertIn("rank 3", str(cm.exception))
        self.assertEqual(full.freed, [4096])

    def test_team_split_helper(self):
        """_host.team_split (the torch and JAX splits), over a fake library: the areas before
        the split, before_split() between, the areas kept in ctx._stagings; a split refused
        gives the areas back and raises IrisError naming the rank, color and key."""
        from iris_gpu import _host

        class Lib:
            def __init__(self, split_st):
                self.split_st, self.log, self.lib, self.next = split_st, [], self, 4096

            def check(self, st, call):
                _lib.Library.check(self, st, call)

            def detail(self):
                return "no table slot (fake)"

            def iris_team_get(self, h, which, pref):
                self.log.append("get")
                return 0

            def iris_malloc(self, h, n, pref):
                self.log.append("malloc")
                pref._obj.value, self.next = self.next, self.next + n
                return 0

            def iris_free(self, h, p):
                self.log.append("free")
                return 0

            def iris_team_split(self, h, world, color, key, out):
                self.log.append("split %d %d" % (color, key))
                return self.split_st

        class Ctx:
            def __init__(self, lib):
                self._lib, self._h, self.rank, self._stagings = lib, 7, 2, []

            def _handle(self):
                return self._h

        ok = Ctx(Lib(0))
        out, staging = _host.team_split(ok, 1, 0, 4096, lambda: ok._lib.log.append("between"))
        self.assertEqual(ok._lib.log, ["get", "malloc", "malloc", "between", "split 1 0"])
        self.assertEqual((ok._stagings, staging.nbytes), ([staging], 4096))
        none = Ctx(Lib(0))
        _host.team_split(none, -1, 0, 0)
        self.assertEqual((none._lib.log, none._stagings), (["get", "split -1 0"], []))
        bad = Ctx(Lib(2))
        with self.assertRaisesRegex(_lib.IrisError, "no table slot") as cm:
            _host.team_split(bad, 3, 1, 4096)
        self.assertIn("rank 2, color 3, key 1", str(cm.exception))
        self.assertEqual((bad._lib.log[-2:], bad._stagings), (["free", "free"], []))

    def test_split_args_opt_out_and_team_order(self):
        self.assertEqual(_types.team_split_args([[0, 1]], [0, 1, 2, 3], 2), (_types.TEAM_NONE, 0, None))
        self.assertEqual(_types.team_split_args([[3, 1]], [0, 1, 2, 3], 1), (1, 1, (3, 1)))  # a group's own order: team rank = position
        # a context over a subgroup: colors are context ranks, members global ranks
        self.assertEqual(_types.team_split_args([[5, 7]], [2, 3, 5, 7], 7), (2, 1, (5, 7)))
        self.assertEqual(_types.TEAM_NONE, _lib.TEAM_NONE)

    def test_split_args_refusals(self):
        world = [0, 1, 2, 3]
        for groups, me, text in (([[0, 1], [1, 2]], 0, "rank 1 is in group \\[0, 1\\] and in group \\[1, 2\\]"), ([[0, 0]], 0, "rank 0 is in group"),
                                 ([[]], 0, "group 0 is empty"), ([[0, 4]], 0, "rank 4 of group \\[0, 4\\] is not a rank of this context"),
                                 ([list(range(17))], 0, "at most 16"), ([[0, 1]], 9, "rank 9 is not a rank of this context")):
            with self.assertRaisesRegex(ValueError, text):
                _types.team_split_args(groups, list(range(17)) if "16" in text else world, me)

    def test_parse_bytes(self):
        self.assertEqual([_types.parse_bytes(v) for v in ("16777216", "16M", "512k", "1G", 4096)], [16 << 20, 16 << 20, 512 << 10, 1 << 30, 4096])
        with self.assertRaisesRegex(ValueError, "not a byte count"):
            _types.parse_bytes("16 MB")
        # the library's grammar (serving's sizes too), strictly: no spaces, set but empty refused
        self.assertEqual([_types.parse_bytes(v) for v in ("16MiB", "16MB", "1T", "512B", "2g")], [16 << 20, 16 << 20, 1 << 40, 512, 2 << 30])
        for bad in (" 16M", "16M ", "", "-1", "1.5M", "16Mi"):
            with self.assertRaisesRegex(ValueError, "^" + re.escape("IRIS_TEAM_STAGING %r is not a byte count" % bad)):
                _types.parse_bytes(bad, "IRIS_TEAM_STAGING")

    def test_team_struct(self):
        t = _lib.TeamT()
        self.assertEqual(ctypes.sizeof(t), 4 * 4 + 4 * _lib.MAX_RANKS + 2 * 4 + 3 * 8)  # 112 at IRIS_MAX_RANKS 16
        t.size, t.start, t.stride = 3, 1, 2
        self.assertEqual(t.members(), [1, 3, 5])
        t.stride = 0
        t.world[0], t.world[1], t.world[2] = 3, 0, 2
        self.assertEqual(t.members(), [3, 0, 2])
        names = [n for n, _ in _lib.TeamT._fields_]
        body = re.search(r"typedef struct iris_team \{(.*?)\} iris_team_t;", header_text("iris.h"), re.S).group(1)
        decl = [re.sub(r"\[.*\]", "", d.split()[-1]).lstrip("*") for d in re.sub(r"/\*.*?\*/", "", body, flags=re.S).split(";") if d.strip()]
        fields = [f for d in decl for f in [d]]
        self.assertEqual(names, ["size", "rank", "start", "stride", "world", "slot", "coll", "sync", "fault", "serial"])
        self.assertEqual(len(fields), 9)  # "int start, stride;" is one declaration of two
        self.assertIn("iris_team_split", _lib.OPTIONAL_FUNCTIONS)

    def test_group_lists(self):
        from iris_gpu.torch.team import split_groups

        self.assertEqual(split_groups([[1, 0], [3, 2]]), [(0, 1), (2, 3)])  # sorted, as dist.new_group sorts
        self.assertEqual(split_groups([2, 0]), [(0, 2)])
        self.assertEqual(split_groups(range(2)), [(0, 1)])

    def fake_ctx(self, rank, world=4, ranks=None):
        from iris_gpu import torch as it

        class Fake:
            _iris_target = True
            closed = False

            def __init__(self):
                self.rank, self.world_size, self._ranks, self._team_of, self.splits = rank, world, ranks or list(range(world)), {}, []

            def team_split(self, color, key, staging_bytes=None):
                self.splits.append((color, key))
                if color < 0:
                    return None

                class T:
                    closed = False
                return T()

        Fake.team = it.Context.team
        Fake.team_for = it.Context.team_for
        return Fake()

    def test_context_team_and_team_for(self):
        for rank in range(4):
            c = self.fake_ctx(rank)
            t = c.team([[0, 2], [1, 3]])
            self.assertEqual(c.splits, [(rank % 2, rank // 2)])
            self.assertIs(c.team_for([rank % 2, rank % 2 + 2]), t)
            self.assertIs(c.team_for([3, 2, 1, 0]), c)  # the whole context: the context itself
            with self.assertRaisesRegex(ValueError, "not a member"):
                c.team_for([(rank + 1) % 4])
            with self.assertRaisesRegex(RuntimeError, "no team for the group .* ctx.team"):
                c.team_for(sorted({rank, (rank + 1) % 4}))
        c = self.fake_ctx(2)
        self.assertIsNone(c.team([0, 1]))  # outside the group: opts out, still splits
        self.assertEqual(c.splits, [(_types.TEAM_NONE, 0)])

    def test_group_needs_a_context(self):
        from iris_gpu import torch as it

        c = self.fake_ctx(0)
        with self.assertRaisesRegex(TypeError, "group= needs an iris_gpu.torch.Context"):
            it.all_reduce(FakeTensor("torch.float32", shape=(4,)), c, group=[0, 1])


class TestServingSlot(unittest.TestCase):
    """CustomAllreduce's pieces that run without torch."""

    def test_takes_vllm_keywords(self):
        import inspect

        from iris_gpu.torch import CustomAllreduce

        sig = inspect.signature(CustomAllreduce.__init__)
        sig.bind(None, "group", 0, symm_mem_enabled=True)  # vLLM's CudaCommunicator passes it by keyword
        sig.bind(None, group="group", device=0, max_size=1 << 20, symm_mem_enabled=False, a_later_keyword=1)

    def test_fused_op_declines_on_a_team(self):
        from iris_gpu.torch import CustomAllreduce

        class Ctx:
            closed = False

        class Team:
            closed = False

        ca = object.__new__(CustomAllreduce)
        ca.disabled, ca.ctx, ca._target = False, Ctx(), Team()
        x = FakeTensor("torch.bfloat16", shape=(2, 64))
        self.assertFalse(ca.should_fused_add_rms_norm(x))  # before looking at x: the op runs over whole contexts
        self.assertIsNone(ca.fused_add_rms_norm(x, x, x, 1e-6))

    def test_all_reduce_rmsnorm_refuses_a_team(self):
        from iris_gpu import torch as it

        class Team:
            _iris_target = True
            closed = False

        x = FakeTensor("torch.bfloat16", shape=(2, 64))
        with self.assertRaisesRegex(TypeError, "runs over an iris_gpu.torch.Context, not a Team"):
            it.all_reduce_rmsnorm(x, x, x, Team())


    def test_all_reduce_rmsnorm_in_place_only_for_x(self):
        """out= at x's address is in place only when it is x (its shape and dtype): a part
        of x, or x as another dtype, goes to the out-of-place op, whose checks refuse it."""
        from unittest import mock

        from iris_gpu.torch import ops

        names = []
        x = FakeTensor("torch.bfloat16", shape=(2, 64), ptr=0x1000)
        r, w = FakeTensor("torch.bfloat16", shape=(2, 64), ptr=0x9000), FakeTensor("torch.bfloat16", shape=(64,), ptr=0x5000)
        with mock.patch.object(ops, "_invoke", lambda name, *a: names.append(name)), mock.patch.object(ops, "_DIRECT", False):
            for out, name in ((x, "all_reduce_rmsnorm_inplace"), (FakeTensor("torch.bfloat16", shape=(2, 64), ptr=0x1000), "all_reduce_rmsnorm_inplace"),
                              (FakeTensor("torch.float16", shape=(2, 64), ptr=0x1000), "all_reduce_rmsnorm_out"),
                              (FakeTensor("torch.bfloat16", shape=(1, 64), ptr=0x1000), "all_reduce_rmsnorm_out"),
                              (FakeTensor("torch.bfloat16", shape=(128,), ptr=0x1000), "all_reduce_rmsnorm_out")):
                del names[:]
                got = ops._all_reduce_rmsnorm(None, x, r, w, -1, 1e-6, out, 0, None, None, "auto")
                self.assertEqual(names, [name], (out.dtype, out.shape))
                self.assertIs(got, x if name.endswith("inplace") else out)


class TestHeapBlockFrees(unittest.TestCase):
    """A heap tensor's block, dropped in any thread (the garbage collector's), is freed by
    the context's next call, in drop order, never from __del__ itself."""

    def context(self, calls):
        from iris_gpu.torch.context import Context

        ctx = object.__new__(Context)
        ctx.closed, ctx._h, ctx._live, ctx._pending_frees = False, 7, 0, []

        class L:
            pass

        ctx._lib = L()
        ctx._lib.lib = L()
        ctx._lib.lib.iris_free = lambda h, p: calls.append((h, p.value)) or 0
        return ctx

    def test_dropped_blocks_are_freed_by_the_next_call_in_order(self):
        import threading

        from iris_gpu.torch.context import _HeapBlock

        calls = []
        ctx = self.context(calls)
        blocks = [_HeapBlock(ctx, 4096 * (i + 1)) for i in range(3)]
        ctx._live = 3
        del blocks[1]  # dropped here
        t = threading.Thread(target=lambda: blocks.pop(0))  # and in another thread
        t.start()
        t.join()
        self.assertEqual(calls, [])  # nothing freed behind the context's back
        self.assertEqual(ctx._handle(), 7)
        self.assertEqual(calls, [(7, 8192), (7, 4096)])  # drop order
        self.assertEqual(ctx._live, 1)
        self.assertEqual(ctx._handle(), 7)
        self.assertEqual(len(calls), 2)  # nothing twice

    def test_watchdog_calls_free_nothing(self):
        """async_error and abort (any thread) leave the queue to the context's own thread:
        a free there would race its iris_malloc and change its heap layout."""
        import threading

        from iris_gpu.torch.context import _HeapBlock

        calls = []
        ctx = self.context(calls)
        ctx.rank = 0
        ctx._lib.lib.iris_get_async_error = lambda h: 0
        ctx._lib.lib.iris_abort = lambda h: 0
        b = _HeapBlock(ctx, 4096)
        ctx._live = 1
        del b
        t = threading.Thread(target=lambda: (ctx.async_error(), ctx.abort()))
        t.start()
        t.join()
        self.assertEqual(calls, [])
        self.assertEqual(ctx._pending_frees, [4096])
        self.assertEqual(ctx._handle(), 7)
        self.assertEqual(calls, [(7, 4096)])

    def test_a_refused_free_raises_after_the_queue_is_drained(self):
        """A block the library will not take (this rank's heap now unlike its peers') is an
        IrisError naming iris_free; the other blocks are still handed back, in order."""
        from iris_gpu._lib import IrisError
        from iris_gpu.torch.context import _HeapBlock

        calls = []
        ctx = self.context(calls)
        ctx.rank = 0
        ctx._lib.lib.iris_free = lambda h, p: calls.append((h, p.value)) or (4 if p.value == 4096 else 0)  # IRIS_ERROR_NOT_IN_HEAP
        ctx._lib.detail = lambda: "pointer outside the symmetric heap"
        blocks = [_HeapBlock(ctx, 4096 * (i + 1)) for i in range(2)]
        ctx._live = 2
        blocks.pop(0)  # dropped in this order
        blocks.pop(0)
        with self.assertRaises(IrisError) as cm:
            ctx._handle()
        self.assertEqual(cm.exception.status, 4)
        self.assertIn("iris_free", str(cm.exception))
        self.assertEqual(calls, [(7, 4096), (7, 8192)])
        self.assertEqual(ctx._pending_frees, [])
        self.assertEqual(ctx._handle(), 7)  # reported once

    def test_closed_context_frees_nothing(self):
        from iris_gpu.torch.context import _HeapBlock

        calls = []
        ctx = self.context(calls)
        b = _HeapBlock(ctx, 4096)
        ctx.closed = True
        del b
        self.assertEqual(ctx._pending_frees, [])
        with self.assertRaisesRegex(RuntimeError, "closed"):
            ctx._handle()
        self.assertEqual(calls, [])


if __name__ == "__main__":
    import _report

    _report.main(sys.modules[__name__], "python:")
