#!/usr/bin/env python3
"""Generate the forwarding layer of libiris_nccl.so from an installed NCCL's headers.

    python3 tools/gen_nccl_shim.py <nccl include dir> > build/nccl_shim_gen.h
    python3 tools/gen_nccl_shim.py <nccl include dir> --names   # one exported name a line

Reads <dir>/nccl.h (every host function it declares) and <dir>/nccl_device/*.h (the
host functions of the device API: `NCCL_EXTERN_C __host__ ...`, not the inline ones), and
adds the host pointer functions of NCCL 2.29 that torch 2.14 links against when the
installed headers lack them (EXTRAS below). For each function F it emits into one header,
included twice by nccl/shim.cc:
  - IRIS_NCCL_GEN_DECLS: an id (IRIS_NCCL_FN_F), the pointer type (iris_nccl_fn_F_t),
    IRIS_NCCL_HAVE_F, and the names table the loader resolves lazily from the real NCCL;
  - IRIS_NCCL_GEN_STUBS: the definition of F forwarding to the real library, unless
    nccl/shim.cc serves F itself (SERVED below), and for every F the alias pF, as NCCL's
    own pnccl* profiling names (pF is the same function as F, iris routing included).
--names prints every name the library exports (F and pF), for tests/nccl/cpu_checks.sh.
"""
import glob
import os
import re
import sys

# served by hand in nccl/shim.cc (routing, communicator state, errors)
SERVED = {
    "ncclGetErrorString", "ncclGetLastError",
    "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommInitAll", "ncclCommSplit",
    "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort", "ncclCommRevoke", "ncclCommShrink", "ncclCommGetAsyncError",
    "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclBcast", "ncclAlltoAll",
    "ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd",
    "ncclMemAlloc", "ncclMemFree", "ncclCommWindowRegister", "ncclCommWindowDeregister",
    "ncclGetLsaMultimemDevicePointer", "ncclGetLsaDevicePointer", "ncclGetPeerDevicePointer",
}

# NCCL 2.29's host pointer functions (nccl_device/core.h there); torch 2.14 references them
EXTRAS = [
    ("ncclResult_t", "ncclGetLsaMultimemDevicePointer", ["ncclWindow_t window", "size_t offset", "void** outPtr"]),
    ("ncclResult_t", "ncclGetLsaDevicePointer", ["ncclWindow_t window", "size_t offset", "int lsaRank", "void** outPtr"]),
    ("ncclResult_t", "ncclGetPeerDevicePointer", ["ncclWindow_t window", "size_t offset", "int peer", "void** outPtr"]),
]

QUALIFIERS = {"const", "volatile", "struct", "enum", "unsigned", "signed"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def split_params(params):
    params = " ".join(params.split())
    if params in ("", "void"):
        return []
    return [p.strip() for p in params.split(",")]


def param_type(p):
    """The type of one parameter declaration (its name, if any, removed)."""
    m = re.match(r"^(.*?[\s\*&])([A-Za-z_]\w*)$", p)
    if m:
        head = m.group(1).strip()
        words = [w for w in re.findall(r"[A-Za-z_]\w*", head) if w not in QUALIFIERS]
        if words:  # something besides qualifiers precedes the last word: it is a name
            return head
    return p


def parse(include_dir):
    funcs = {}  # name -> (ret, [param types]); insertion order kept

    def add(ret, name, params):
        if name.startswith("pnccl") or name in funcs:
            return
        ret = " ".join(ret.replace("__host__", " ").replace("NCCL_EXTERN_C", " ").split())
        funcs[name] = (ret, [param_type(p) for p in split_params(params)])

    main = strip_comments(open(os.path.join(include_dir, "nccl.h")).read())
    main = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", main)
    for stmt in main.split(";"):  # one declaration per statement
        m = re.search(r"\b(ncclResult_t|const\s+char\s*\*|void)\s+(p?nccl\w+)\s*\(([^()]*)\)\s*$", stmt)
        if m:
            add(m.group(1), m.group(2), m.group(3))
    for path in sorted(glob.glob(os.path.join(include_dir, "nccl_device", "*.h"))):
        text = strip_comments(open(path).read())
        for stmt in text.split(";"):
            m = re.search(r"NCCL_EXTERN_C\s+__host__\s+([\w\s\*]+?)\s*\b(nccl\w+)\s*\(([^()]*)\)\s*$", stmt)
            if m:
                add(m.group(1), m.group(2), m.group(3))
    extras = []
    for ret, name, params in EXTRAS:
        if name not in funcs:
            funcs[name] = (ret, [param_type(p) for p in params])
            extras.append((ret, name, params))
    return funcs, extras


def missing_value(ret):
    if ret == "ncclResult_t":
        return None
    if ret == "void":
        return ""
    return "%s{}" % ret if "*" not in ret else "(%s)iris_nccl_unavailable_text()" % ret


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gen_nccl_shim.py <nccl include dir> [--names]")
    funcs, extras = parse(sys.argv[1])
    if "ncclAllReduce" not in funcs or "ncclCommInitRank" not in funcs:
        sys.exit("gen_nccl_shim.py: %s/nccl.h declares no ncclAllReduce / ncclCommInitRank: not an NCCL header" % sys.argv[1])
    if sys.argv[2:] == ["--names"]:
        for name in funcs:
            print(name)
            print("p" + name)
        return
    o = []
    w = o.append
    w("/* Generated by tools/gen_nccl_shim.py from %s: do not edit. */" % os.path.abspath(sys.argv[1]))
    w("#if defined(IRIS_NCCL_GEN_DECLS) && !defined(IRIS_NCCL_GEN_DECLS_DONE)")
    w("#define IRIS_NCCL_GEN_DECLS_DONE")
    if extras:
        w("/* NCCL 2.29 host functions the installed headers lack (forwarded when the real library has them) */")
        w('extern "C" {')
        for ret, name, params in extras:
            w("%s %s(%s);" % (ret, name, ", ".join(params)))
        w("}")
    w("enum iris_nccl_fn_id {")
    for name in funcs:
        w("  IRIS_NCCL_FN_%s," % name)
    w("  IRIS_NCCL_FN_COUNT")
    w("};")
    w("static const char *const iris_nccl_fn_names[IRIS_NCCL_FN_COUNT] = {")
    for name in funcs:
        w('  "%s",' % name)
    w("};")
    for name, (ret, types) in funcs.items():
        w("typedef %s (*iris_nccl_fn_%s_t)(%s);" % (ret, name, ", ".join(types)))
        w("#define IRIS_NCCL_HAVE_%s 1" % name)
    w("#define IRIS_NCCL_GEN_FUNCTIONS %d" % len(funcs))
    w("#endif /* IRIS_NCCL_GEN_DECLS */")
    w("")
    w("#if defined(IRIS_NCCL_GEN_STUBS) && !defined(IRIS_NCCL_GEN_STUBS_DONE)")
    w("#define IRIS_NCCL_GEN_STUBS_DONE")
    for name, (ret, types) in funcs.items():
        args = ", ".join("%s a%d" % (t, i) for i, t in enumerate(types))
        names = ", ".join("a%d" % i for i in range(len(types)))
        if name not in SERVED:
            w('extern "C" IRIS_NCCL_EXPORT %s %s(%s) {' % (ret, name, args))
            w("  iris_nccl_fn_%s_t f = (iris_nccl_fn_%s_t)iris_nccl_real_fn(IRIS_NCCL_FN_%s);" % (name, name, name))
            mv = missing_value(ret)
            if mv is None:
                w("  if (!f) return iris_nccl_missing(IRIS_NCCL_FN_%s);" % name)
                w("  return iris_nccl_forwarded(f(%s));" % names)
            elif ret == "void":
                w("  if (f) f(%s);" % names)
            else:
                w("  if (!f) { (void)iris_nccl_missing(IRIS_NCCL_FN_%s); return %s; }" % (name, mv))
                w("  return f(%s);" % names)
            w("}")
        w('extern "C" IRIS_NCCL_EXPORT %s p%s(%s) __attribute__((alias("%s")));' % (ret, name, ", ".join(types), name))
    w("#endif /* IRIS_NCCL_GEN_STUBS */")
    sys.stdout.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
