#!/usr/bin/env python3
"""make asm: compile the collective kernels for sm_90, gfx90a and gfx940, the GEMM kernels
for sm_90a, and the AMD MFMA GEMM kernels (UNVERIFIED core) for gfx90a and gfx940, and write
docs/asm_report.md: registers, spills, shared memory and the width of every global load and
store per kernel and backend. Compile-only; needs nvcc, and hipcc for the AMD parts."""
import os, re, shutil, subprocess, sys, tempfile, textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tools", "asm_kernels.cu")
GEMM_SRC = os.path.join(ROOT, "tools", "asm_gemm_kernels.cu")
MFMA_SRC = os.path.join(ROOT, "tools", "asm_gemm_kernels_mfma.cu")
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
HIPCC = os.environ.get("HIPCC", "hipcc")

def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout.split("\n")
        return dict(zip(names, out))
    except Exception:
        return {n: n for n in names}

def short(name):
    name = re.sub(r"\(.*", "", name).replace("void ", "")
    name = name.replace("iris_bf16", "bf16").replace("__nv_bfloat16", "bf16").replace("(IRIS_COLL_KIND)", "")
    for cfg, alias in GEMM_CFG_NAMES.items():  # GEMM configurations by their typedef names
        name = name.replace(cfg, alias)
    return re.sub(r"\s+>", ">", name)

def first_targ(name):
    """The first template argument of a demangled name ("f<A<1, 2>, int>(...)" -> "A<1, 2>")."""
    i, depth = name.find("<"), 0
    for j in range(i + 1, len(name)):
        c = name[j]
        if c == "<": depth += 1
        elif c == ">" and depth: depth -= 1
        elif c in ",>" and not depth: return name[i + 1:j].strip()
    return ""

def header_typedefs(path, pattern):
    """typedef <type> <name>; lines of a header, as {type (spaced as c++filt prints it): name}."""
    return {re.sub(r"\s*,\s*", ", ", t.strip()): n for t, n in re.findall(r"^typedef\s+(" + pattern + r")\s+(\w+)\s*;", open(path).read(), re.M)}

# the named tile configurations of internal/gemm/core.h, and the one the fused kernel uses
GEMM_CFG_NAMES = header_typedefs(os.path.join(ROOT, "internal/gemm/core.h"), r"iris_gemm(?:_wgmma)?_cfg<[^;]*>")
GEMM_CFG_NAMES.update(header_typedefs(os.path.join(ROOT, "internal/gemm/core_mfma.h"), r"iris_gemm_mfma_cfg<[^;]*>"))
AG_GEMM_CFG = (re.search(r"^typedef\s+(\w+)\s+iris_ag_gemm_cfg\s*;", open(os.path.join(ROOT, "internal/gemm/ag_plan.h")).read(), re.M) or [None, None])[1]

def widths_str(ws):
    return ", ".join(f"{w}B x{c}" for w, c in sorted(ws.items(), reverse=True)) or "-"

def nvidia(tmp, src=SRC, arch="sm_90", defines=()):
    ptx = os.path.join(tmp, f"{os.path.basename(src)}.{arch}.ptx")
    flags = [f"-arch={arch}", "-O2", "-std=c++17", "-I", ROOT] + [f"-D{d}" for d in defines]
    subprocess.run([NVCC] + flags + ["-ptx", src, "-o", ptx], check=True)
    res = subprocess.run([NVCC] + flags + ["-cubin", "-Xptxas", "-v", src, "-o", os.path.join(tmp, f"{os.path.basename(src)}.{arch}.cubin")],
                         capture_output=True, text=True, check=True)
    regs, cur = {}, None
    for line in res.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m: cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur: regs.setdefault(cur, {})["spill"] = f"{m.group(1)}/{m.group(2)} B"
        m = re.search(r"Used (\d+) registers", line)
        if m and cur: regs.setdefault(cur, {})["regs"] = m.group(1)
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and cur: regs.setdefault(cur, {})["stack"] = m.group(1) + " B"
        m = re.search(r"(\d+) bytes smem", line)  # static shared memory (absent: none)
        if m and cur: regs.setdefault(cur, {})["smem"] = int(m.group(1))
    text, kern = open(ptx).read(), {}
    # a kernel's body runs to the next entry or function (not to the first "}" line: inline
    # assembly such as the wgmma core's has braces at the start of a line)
    bounds = list(re.finditer(r"^(?:\.visible\s+|\.weak\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", text, re.M)) + [None]
    for m, nxt in zip(bounds, bounds[1:]):
        if m.group(1) != "entry": continue
        body = text[m.end():nxt.start() if nxt else len(text)]
        # global or generic (no state space) accesses; local, shared, param and const are not memory traffic of interest
        acc = lambda op: [(v, t) for sp, v, t in re.findall(r"\b" + op + r"((?:\.\w+)*?)\.(v[24])?\.?([usbf]\d+)\s", body)
                          if not re.search(r"\.(local|shared|param|const)\b", sp)]
        loads, stores = acc("ld"), acc("st")
        def widths(ops):
            ws = {}
            for vec, t in ops:
                n = int(vec[1]) if vec else 1
                w = n * int(t[1:]) // 8
                ws[w] = ws.get(w, 0) + 1
            return widths_str(ws)
        # asynchronous copies global -> shared (the GEMM core's operand loads), by copy size
        cp = {}
        for w in re.findall(r"\bcp\.async\.c[ag]\.shared(?:::cta)?\.global\S*\s+\[[^\]]*\],\s*\[[^\]]*\],\s*(\d+)", body):
            cp[int(w)] = cp.get(int(w), 0) + 1
        threads = re.search(r"\.(?:maxntid|reqntid)\s+(\d+),\s*(\d+),\s*(\d+)", body)  # __launch_bounds__
        kern[m.group(2)] = {"loads": widths(loads), "stores": widths(stores), "cp_async": widths_str(cp),
                            "threads": int(threads.group(1)) * int(threads.group(2)) * int(threads.group(3)) if threads else None,
                            **regs.get(m.group(2), {})}
    return kern, text

def gemm(tmp):
    """The GEMM kernels of tools/asm_gemm_kernels.cu for sm_90a (as GEMM_NVCCFLAGS), with the
    dynamic shared memory of their configuration (iris_asm_dynamic_smem<Cfg> in the PTX)."""
    kern, text = nvidia(tmp, GEMM_SRC, "sm_90a", [f"IRIS_ASM_AG_GEMM_CFG={AG_GEMM_CFG}"] if AG_GEMM_CFG else [])
    kern = {n: e for n, e in kern.items() if "gemm" in n}  # the collective kernels come along with iris_gemm.h
    dyn = re.findall(r"\.global\s+\.align\s+\d+\s+\.u32\s+(_Z\w*iris_asm_dynamic_smem\w*)\s*=\s*(\d+);", text)
    dm = demangle([n for n, _ in dyn] + list(kern))
    dyn = {re.sub(r"^iris_asm_dynamic_smem<(.*)>$", r"\1", dm[n]).strip(): int(v) for n, v in dyn}
    for n, e in kern.items():
        e["dyn_smem"] = dyn.get(first_targ(dm[n]))
    return kern

def ctas_per_sm(regs, threads, smem):
    """Resident CTAs per SM on H100/H200 by registers and by shared memory: 64 K registers
    in 4 quarters of 16 K, allocated per warp in units of 256 (8 per thread); 228 KB of
    shared memory, 1 KB of it reserved per CTA."""
    if not (regs and threads) or smem is None: return "?"
    per_warp = -(-int(regs) // 8) * 8 * 32
    by_regs = (16384 // per_warp) * 4 // -(-threads // 32)
    by_smem = 228 * 1024 // (smem + 1024)
    return f"{min(by_regs, by_smem)} ({by_regs} by regs, {by_smem} by smem)"

def amd_asm(tmp, src, tag, arch):
    """Device assembly of src for one AMD target (hipcc), as text."""
    s = os.path.join(tmp, f"{tag}_{arch}.s")
    subprocess.run([HIPCC, "-x", "hip", f"--offload-arch={arch}", "-O2", "-I", ROOT, "--cuda-device-only", "-S", src, "-o", s], check=True,
                   stderr=subprocess.DEVNULL)
    return open(s).read()

def amd_widths(code, kind):
    """Global/flat/buffer loads or stores (kind) in AMD assembly, by access width."""
    ws = {}
    for op in re.findall(r"\b(?:global|flat|buffer)_" + kind + r"_(dwordx4|dwordx3|dwordx2|dword|short|ushort|byte|ubyte)\b", code):
        w = {"dwordx4": 16, "dwordx3": 12, "dwordx2": 8, "dword": 4, "short": 2, "ushort": 2, "byte": 1, "ubyte": 1}[op]
        ws[w] = ws.get(w, 0) + 1
    return widths_str(ws)

def amd(tmp, arch):
    text, kern = amd_asm(tmp, SRC, "k", arch), {}
    for m in re.finditer(r"^(_Z\w+):\s*;.*?\n(.*?)s_endpgm", text, re.S | re.M):
        body = m.group(2)
        kern[m.group(1)] = {"loads": amd_widths(body, "load"), "stores": amd_widths(body, "store")}
    for m in re.finditer(r"\.name:\s+(_Z\w+)\s*\n(.*?)(?=\n  - \.|\Z)", text, re.S):
        meta = m.group(2)
        g = lambda k: (re.search(r"\." + k + r":\s+(\d+)", meta) or [None, "?"])[1]
        if m.group(1) in kern:
            kern[m.group(1)].update(vgpr=g("vgpr_count"), sgpr=g("sgpr_count"), spill=f"{g('vgpr_spill_count')} VGPR / {g('sgpr_spill_count')} SGPR")
    return kern

def amd_gemm(tmp, arch):
    """The MFMA GEMM kernels of tools/asm_gemm_kernels_mfma.cu for one AMD target: VGPRs, AGPRs,
    SGPRs, scratch (spills), occupancy (waves per SIMD), MFMA and LDS instruction counts, and
    global access widths, from the ISA and the compiler's per-function comments."""
    text, kern = amd_asm(tmp, MFMA_SRC, "mfma", arch), {}
    for m in re.finditer(r"^(_Z\w*gemm\w+):\s*;.*?\n(.*?)(?=^_Z\w+:|\Z)", text, re.S | re.M):
        body = m.group(2)
        code = body.split("s_endpgm")[0]
        g = lambda k: (re.search(r"^; " + k + r":\s*(\d+)", body, re.M) or [None, "?"])[1]
        lds = {}
        for op in re.findall(r"\b(ds_(?:read|write)\w*)", code):
            lds[op] = lds.get(op, 0) + 1
        kern[m.group(1)] = {"vgpr": g("NumVgprs"), "agpr": g("NumAgprs"), "sgpr": g("NumSgprs"), "scratch": g("ScratchSize"),
                            "occ": g("Occupancy"), "mfma": len(re.findall(r"\bv_mfma_\w+", code)),
                            "lds": ", ".join(f"{k} x{v}" for k, v in sorted(lds.items())) or "-", "loads": amd_widths(code, "load"), "stores": amd_widths(code, "store")}
    return kern

def mfma_smem(name):
    """Dynamic LDS of a kernel from its iris_gemm_mfma_cfg<BM, BN, BK, WM, WN, STAGES> (smem_bytes)."""
    m = re.search(r"iris_gemm_mfma_cfg<(\d+), (\d+), (\d+), (\d+), (\d+), (\d+)>", name)
    if not m: return None
    bm, bn, bk, wm, wn, st = map(int, m.groups())
    return st * (bm + bn) * bk * 2, wm * wn * 64

def mfma_section(mk):
    names = sorted(set(n for k in mk.values() for n in k), key=lambda n: ("iris_ag_gemm_kernel" not in n, n))
    dm = demangle(names)
    out = ["## The AMD GEMM kernels (gfx90a, gfx940; MFMA core, UNVERIFIED)", "",
           para("tools/asm_gemm_kernels_mfma.cu compiles, with `IRIS_GEMM_MFMA_UNVERIFIED`, the fused all-gather + GEMM "
                "kernel as `iris_ag_gemm_create` instantiates it on AMD (bf16 A, B (K x N) and C, `iris_ag_gemm_cfg` = "
                "`iris_gemm_cfg_mfma_large`) and one CTA of the MFMA core alone (`iris_gemm_tile` of internal/gemm/core_mfma.h, "
                "no wait, bf16 bias) for both named configurations and both B layouts (`true`: K x N, transposed into LDS; "
                "`false`: N x K). **These kernels have never been run**: the numbers below are the compiler's, nothing "
                "about speed or correctness on hardware is known."), "",
           "Columns: **VGPR / AGPR / SGPR** per lane (AGPRs: accumulation registers, 0 where the compiler keeps the",
           "accumulators in VGPRs); **scratch**: bytes per lane of spills or stack (0: none); **occupancy**: waves per",
           "SIMD the compiler reports (by registers); **LDS**: dynamic, the configuration's `smem_bytes`; **MFMA**: MFMA",
           "instructions in the code (the main loop's are not unrolled across slabs); **LDS ops** and global",
           "**loads / stores** by instruction and width.", "",
           "| kernel | target | threads | VGPR / AGPR / SGPR | scratch | occupancy | LDS | MFMA | LDS ops | loads | stores |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        for arch, k in mk.items():
            e = k.get(n)
            if not e: continue
            sm = mfma_smem(dm[n])
            out.append(f"| `{short(dm[n])}` | {arch} | {sm[1] if sm else '?'} | {e['vgpr']} / {e['agpr']} / {e['sgpr']} | {e['scratch']} B | "
                       f"{e['occ']} | {str(sm[0] // 1024) + ' KB' if sm else '?'} | {e['mfma']} | {e['lds']} | {e['loads']} | {e['stores']} |")
    out.append("")
    return out

def para(text):
    """A paragraph of the report, wrapped like the hand-written ones."""
    return textwrap.fill(text, 112, break_long_words=False, break_on_hyphens=False)

def spills(sp):
    return bool(re.search(r"[1-9]", sp.split("/")[0]) or re.search(r"/ [1-9]", sp))

def count(widths, w):
    """How many accesses of w bytes a width string ("16B x10, 4B x2") lists."""
    m = re.search(r"\b" + str(w) + r"B x(\d+)", widths)
    return int(m.group(1)) if m else 0

def gemm_section(gk, gnames, dm):
    out = ["## The GEMM kernels (sm_90a, CUDA only)", "",
           "tools/asm_gemm_kernels.cu compiles, for sm_90a as the Makefile's `GEMM_NVCCFLAGS` do (so the wgmma core is the",
           "one compiled), the fused all-gather + GEMM kernel of iris_gemm.h as `iris_ag_gemm_create` instantiates it for",
           f"bf16 A, B (K x N) and C, with its tile configuration `iris_ag_gemm_cfg` (= `{AG_GEMM_CFG or '?'}`), and, to",
           "set it beside, one CTA of the GEMM core alone (`iris_gemm_tile` of internal/gemm/core.h, no wait, bf16 bias) in the",
           "wgmma and the mma.sync configuration of the large tile. The AMD (MFMA) kernels have their own section below:",
           "by default hipcc builds of iris_gemm.h compile no GEMM kernel (the plan API returns IRIS_ERROR_UNSUPPORTED);",
           "only with IRIS_GEMM_MFMA_UNVERIFIED do they.", "",
           "Columns as above, and:",
           "- **threads**: per CTA (`__launch_bounds__`); the register ceiling is 65536 / threads, at most 255: 255 here.",
           "- **smem**: shared memory per CTA, static (ptxas) + dynamic (the configuration's `smem_bytes`, which the",
           "  launch passes).",
           "- **CTAs/SM**: how many CTAs fit on one H100/H200 SM by registers (64 K, allocated per warp in units of 8",
           "  per thread) and by shared memory (228 KB, 1 KB of it reserved per CTA); the smaller one counts.",
           "- **loads**: `ld` only. The GEMM core reads A and B with **cp.async** (global -> shared, 16 bytes each,",
           "  counted apart); its `ld` are the bias. So in the fused kernel the 16-byte `ld` are the fetcher's.",
           "- **stores**: the epilogue's 16-byte stores of C (masked 2-byte stores on the right edge) and, in the fused",
           "  kernel, the fetcher's 16-byte stores into the staging buffer.",
           "- The TMA kernels (`iris_ag_gemm_tma_kernel`, the fused kernel on sm_90a, and `iris_gemm_tma_tiles_kernel`,",
           "  the TMA core alone) load A and B with TMA (`cp.async.bulk.tensor`, not counted here): their 16-byte `ld`",
           "  are the fetchers' (fetcher CTAs or side fetch). Their register count is the kernel's at launch (168 for",
           "  384 threads); the producer warpgroup runs at 40 and the consumers at 232 (setmaxnreg).", "",
           "| kernel | threads | regs | stack | spills | smem (static + dynamic) | CTAs/SM | loads (ld) | cp.async | stores |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for n in gnames:
        e = gk[n]
        st, dy = e.get("smem", 0), e.get("dyn_smem")
        smem = f"{st + dy} B ({st} + {dy})" if dy is not None else f"{st} B + ?"
        ctas = ctas_per_sm(e.get("regs"), e.get("threads"), st + dy if dy is not None else None)
        out.append(f"| `{short(dm[n])}` | {e.get('threads') or '?'} | {e.get('regs', '?')} | {e.get('stack', '?')} | {e.get('spill', '?')} | {smem} "
                   f"| {ctas} | {e['loads']} | {e['cp_async']} | {e['stores']} |")
    out.append("")
    fused = [n for n in gnames if "iris_ag_gemm_kernel" in n]
    if not fused:
        return out
    f = gk[fused[0]]
    # the core alone in the fused kernel's configuration: its 16-byte ld (none expected) are not the fetcher's
    same = [n for n in gnames if n not in fused and first_targ(dm[n]) == first_targ(dm[fused[0]])]
    core = gk[same[0]] if same else {}
    mma = [gk[n] for n in gnames if n not in fused and "iris_gemm_cfg<" in first_targ(dm[n])]
    fetch16 = count(f["loads"], 16) - count(core.get("loads", ""), 16)
    regs = lambda e: e.get("regs", "?")
    nospill = not any(spills(gk[n].get("spill", "")) for n in gnames)
    by_smem = ctas_per_sm(f.get("regs"), f.get("threads"), f.get("smem", 0) + (f.get("dyn_smem") or 0)).split(" by smem")[0].split(", ")[-1]
    kb = ((f.get("dyn_smem") or 0) + f.get("smem", 0)) / 1024
    lb_hint = re.search(r"__launch_bounds__\(\s*Cfg::threads\s*\)\s*iris_ag_gemm_kernel", open(os.path.join(ROOT, "internal/gemm/ag_kernel.h")).read())
    fewer = regs(f).isdigit() and regs(core).isdigit() and int(regs(f)) < int(regs(core))
    out += ["### Reading the GEMM rows", "",
            para(f"**Registers.** The fused kernel uses {regs(f)} per thread, the wgmma core alone {regs(core)}"
                 + (f", the mma.sync core {regs(mma[0])}" if mma else "") + f", all under the ceiling of 255 ({f.get('threads')} threads), "
                 + ("and none spills. " if nospill else "but see the spills in the findings. ")
                 + f"Registers do not limit these kernels: {kb:.0f} KB of shared memory per CTA (the large tile's 4 stages of "
                 "(128 + 256) x 64 bf16 of A and B) already allow " + (f"{by_smem} CTA" if by_smem == "1" else f"{by_smem} CTAs")
                 + " per SM, and 256 threads at up to 255 registers fit in the register file beside it; only a spill would "
                 "cost, as local-memory traffic inside the main loop. The mma.sync core sits near the ceiling because each "
                 "of its 8 warps keeps a 64 x 64 fp32 accumulator tile in registers (128 per thread) plus double-buffered "
                 "ldmatrix fragments of A and B (64 more); the wgmma core keeps as many accumulators per thread (64 x 256 "
                 "per warpgroup of 128 threads) but reads A and B straight from shared memory, without fragments."
                 + (f" The fused kernel's {regs(f)} is below the core alone although it contains the core: that is ptxas's "
                    "choice, not a ceiling it hit" + (" (the fused kernel declares `__launch_bounds__(Cfg::threads)` without "
                    "the minimum of 1 CTA per SM that internal/gemm/core.h documents for kernels around the core, and ptxas "
                    "weighs that hint when it picks the register count)" if lb_hint else "") + ". Without spills it adds no "
                    "memory traffic; whether the GEMM role loses issue slots for it only a GPU can tell (bench_gemm_core "
                    "against the fused path)." if fewer else "")), "",
            para(f"**Stack.** The fused kernel's {f.get('stack', '?')} stack frame is no spill: it is the per-owner pointer "
                 "array (`bases`, up to 16 pointers) of the fetcher's path for a block of A whose rows straddle two "
                 "owners, read once per 16-byte vector there (an L1 hit); the usual one-owner path does not touch it.")
            if f.get("stack", "0 B") != "0 B" else para("**Stack.** No stack frame."), "",
            para(f"**The fetcher's remote loads are {'16 bytes wide' if fetch16 > 0 else 'NOT 16 bytes wide'}.** The fused "
                 f"kernel has {count(f['loads'], 16)} 16-byte `ld`, the core alone {count(core.get('loads', ''), 16)}, so "
                 f"{fetch16} are the fetcher's: `IRIS_GEMM_FETCH_UNROLL` loads in flight per thread on the one-owner path "
                 "(unrolled) plus one on the straddling path, each a uint4 read of a peer's A through `iris_translate`; "
                 "its stores into the staging buffer are as many 16-byte stores, beside the epilogue's. The kernel's other "
                 "`ld` are flags and counters (4 bytes) and the bias (2 bytes). The GEMM role reads A (staged) and B "
                 f"only with 16-byte cp.async ({f['cp_async']})."), ""]
    return out

def main():
    tmp = tempfile.mkdtemp()
    backends = {"sm_90": nvidia(tmp)[0]}
    if shutil.which(HIPCC):
        for arch in ("gfx90a", "gfx940"):
            backends[arch] = amd(tmp, arch)
    gk = gemm(tmp)
    mk = {arch: amd_gemm(tmp, arch) for arch in ("gfx90a", "gfx940")} if shutil.which(HIPCC) else {}
    names = sorted(set(n for k in backends.values() for n in k))
    gnames = sorted(gk, key=lambda n: ("iris_ag_gemm_kernel" not in n, "wgmma" not in n, n))  # fused, then wgmma, then mma.sync
    dm = demangle(names + gnames)
    out = ["# Assembly report: the collective and GEMM kernels per backend", "",
           "Registers, spills and access widths of every collective and GEMM kernel, to catch a code-generation regression without a GPU.", "",
           "Generated by `make asm` (tools/asm_report.py); compile-only. The collective kernels (tools/asm_kernels.cu)",
           "are compiled for sm_90, gfx90a and gfx940; the GEMM kernels (tools/asm_gemm_kernels.cu) for sm_90a only,",
           "see [the GEMM kernels](#the-gemm-kernels-sm_90a-cuda-only); the AMD MFMA GEMM kernels (UNVERIFIED core,",
           "never run) for gfx90a and gfx940, see [the AMD GEMM kernels](#the-amd-gemm-kernels-gfx90a-gfx940-mfma-core-unverified).", "",
           "What the columns mean:",
           "- **regs** (NVIDIA: registers per thread from ptxas; AMD: VGPRs / SGPRs per lane / wave). More registers",
           "  mean fewer resident warps, but the collective kernels run one CTA of 512 threads per SM at most, so",
           "  occupancy is not their limit (the GEMM kernels: see their section); what matters is that nothing spills.",
           "- **stack** (NVIDIA): the per-thread stack frame; non-zero means an array lives in local memory",
           "  (here: the reduce kernel's per-rank source pointers and, for the all-reduce that stores its result into",
           "  every rank, its destination pointers (256 B); the GEMM fetcher's owner pointers; read once per 16-byte vector,",
           "  hits in L1).",
           "- **spills**: bytes (NVIDIA) or registers (AMD) moved to scratch memory. Any spill on a hot loop is a bug.",
           "- **loads / stores**: every global memory instruction in the kernel, by access width (16B = one 128-bit",
           "  access: `ld.global.v4.u32`, generic `ld.v4.u32` or `ld.volatile.global.v4` in PTX, `global_load_dwordx4`",
           "  on AMD; remote pointers come out of address translation as generic ones on NVIDIA, unless the compiler",
           "  can tell they are global). The data paths should be 16 bytes wide; narrower accesses belong to flags,",
           "  tails and misaligned fallbacks.",
           "  NVIDIA counts come from PTX, AMD counts from the final ISA, so unrolling shows up differently.",
           "- Template arguments: element type, kind (0 all-reduce, 1 all-gather, 2 reduce-scatter, 3 all-to-all,",
           "  4 broadcast), op (0 sum) and, for the reduce kernel, the world size it is specialised for. The relay",
           "  broadcast (`iris_coll_relay_kernel`) and the barrier are not templates: they move bytes and flags.", ""]
    findings = []
    for n in names:
        for b, k in backends.items():
            e = k.get(n)
            if not e: continue
            sp = e.get("spill", "")
            if e.get("stack", "0 B") != "0 B":
                findings.append(f"- `{short(dm[n])}` on {b} has a {e['stack']} stack frame (an array in local memory).")
            if spills(sp):
                findings.append(f"- `{short(dm[n])}` on {b} spills: {sp}.")
            for what in ("loads", "stores"):
                if e[what] != "-" and not e[what].startswith("16B"):
                    findings.append(f"- `{short(dm[n])}` on {b}: no 16-byte {what[:-1]}s ({e[what]}).")
    fused = [n for n in gnames if "iris_ag_gemm_kernel" in n]
    for n in gnames:
        e = gk[n]
        if e.get("stack", "0 B") != "0 B":
            findings.append(f"- `{short(dm[n])}` on sm_90a has a {e['stack']} stack frame (an array in local memory).")
        if spills(e.get("spill", "")):
            findings.append(f"- `{short(dm[n])}` on sm_90a spills: {e['spill']}.")
        if "_tma_" in dm[n]:  # operands by TMA (cp.async.bulk.tensor), no cp.async expected
            pass
        elif e["cp_async"] == "-" or not re.fullmatch(r"16B x\d+", e["cp_async"]):
            findings.append(f"- `{short(dm[n])}` on sm_90a: operand copies not all 16-byte cp.async ({e['cp_async']}).")
        if n in fused and not count(e["loads"], 16):
            findings.append(f"- `{short(dm[n])}` on sm_90a: no 16-byte loads, so the fetcher's remote loads are narrower ({e['loads']}).")
    for arch, k in mk.items():
        for n, e in k.items():
            if e["scratch"] not in ("0", "?"):
                findings.append(f"- `{short(demangle([n])[n])}` on {arch} (MFMA, unverified) uses {e['scratch']} B of scratch per lane.")
    out += ["## Findings (computed from the tables)", ""] + (findings or ["- No spills; every kernel has 16-byte data accesses."]) + [""]
    for n in names:
        out.append(f"## `{short(dm[n])}`")
        out.append("")
        out.append("| backend | regs | stack | spills | loads (width x count) | stores (width x count) |")
        out.append("|---|---|---|---|---|---|")
        for b, k in backends.items():
            if n not in k: continue
            e = k[n]
            regs = e.get("regs", f"{e.get('vgpr', '?')} VGPR / {e.get('sgpr', '?')} SGPR")
            out.append(f"| {b} | {regs} | {e.get('stack', '-')} | {e.get('spill', '?')} | {e['loads']} | {e['stores']} |")
        out.append("")
    out += ["## Where the backends differ", "",
            "- The LL line is one 16-byte `st.volatile.global.v4.u32` on NVIDIA (each 8-byte half is single-copy",
            "  atomic there, as NCCL's LL relies on) but two 8-byte atomic stores on AMD, where a 16-byte store is not",
            "  promised to be atomic per half: twice the store instructions for the same bytes. The same holds for the",
            "  two-shot LL all-reduce (`iris_coll_ll2_kernel`): its \"no 16-byte\" findings on AMD are these LL halves.",
            "- NVIDIA polls flags with `ld.acquire.sys` each iteration; AMD polls relaxed and confirms with one acquire,",
            "  because every acquire there invalidates caches (see the codegen checks in tests/codegen).",
            "- Register counts are per thread on NVIDIA and per lane on AMD (wave64); SGPRs hold the per-wave scalars",
            "  (pointers, bases) that NVIDIA keeps in ordinary registers or the constant bank.", ""]
    relay = [n for n in names if "iris_coll_relay_kernel" in n]
    if relay:
        r = relay[0]
        row = lambda b: backends.get(b, {}).get(r, {})
        regs = ", ".join(f"{row(b)['regs'] + ' registers' if 'regs' in row(b) else row(b).get('vgpr', '?') + ' VGPRs'} on {b}" for b in backends if row(b))
        clean = not any(spills(row(b).get("spill", "")) for b in backends if row(b)) and row("sm_90").get("stack", "0 B") == "0 B"
        copy_spills = any(spills(k[n].get("spill", "")) for b in backends if b != "sm_90" for k in [backends[b]] for n in k if "copy_kernel" in n)
        amd_clean = not any(spills(row(b).get("spill", "")) for b in backends if b != "sm_90" and row(b))
        n16 = count(row("sm_90").get("loads", ""), 16)
        out += ["## Reading the relay broadcast row", "",
                para("`iris_coll_relay_kernel` is the broadcast's bandwidth path at 3 or more ranks (`iris_coll_launch_relay`, "
                     f"512 threads per CTA). It uses {regs}; "
                     + ("no backend spills and it has no stack frame: unlike the reduce kernel it keeps no per-rank pointer "
                        "array, since each chunk comes from one rank (the root or the chunk's owner)." if clean else
                        "see the findings for its spills or stack frame.")
                     + (" Unlike the copy kernel it spills no SGPRs on AMD." if copy_spills and amd_clean and len(backends) > 1 else "")
                     + " All its bytes move through `iris_copy_bytes` (`iris_get_bulk`) at three sites: its own chunk from "
                     "the root's send, the other owners' chunks from their recv, and the root's own send -> recv. Each site "
                     "issues four 16-byte loads in flight per thread plus one for the remainder"
                     + (f", hence {n16} 16-byte loads (3 x 5) on every backend" if all(count(row(b).get("loads", ""), 16) == 15 for b in backends)
                        else f" ({n16} 16-byte loads on sm_90)")
                     + " and as many 16-byte stores; the 4-byte and 1-byte accesses are the same copy's fallbacks for "
                     "buffers aligned to 4 bytes or less, the 8-byte ones the 64-bit flags: the barriers' (epoch and the "
                     "call's signature) and the relay's progress flags (epoch << 32 | chunks done)."), ""]
    out += gemm_section(gk, gnames, dm)
    if mk:
        out += mfma_section(mk)
    os.makedirs(os.path.join(ROOT, "docs"), exist_ok=True)
    path = os.path.join(ROOT, "docs", "asm_report.md")
    open(path, "w").write("\n".join(out))
    print(f"wrote {path}: {len(names)} collective kernels, backends {', '.join(backends)}; {len(gnames)} GEMM kernels, sm_90a")

if __name__ == "__main__":
    sys.exit(main())
