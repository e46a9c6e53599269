# iris: header-only; this Makefile only builds tests, examples and benchmarks.
#   make test    every check that this machine can run; ends with "N passed, N failed"
#   make test-gpu  only the GPU part of make test (builds GPU_PROGRAMS first where missing)
#   make gpu-programs  every program the GPU part runs (GPU_PROGRAMS): build here, carry there
#   make test-packaging  only the packaging part of make test (libiris.so, vendoring, CMake)
#   make run     the message-passing example on all local GPUs
#   make bench   remote-memory benchmarks beside the copy engine (GPU machine)
#   make bench-guard  the speed guard: every collective against NCCL through the header and
#                through libiris.so; exits 1 when iris is slower (2+ GPUs; under 3 minutes)
#   make asm     registers, spills, access widths of the collective and GEMM kernels (docs/)
#   make examples
#   make lib     build/libiris.so: every IRIS_API function in one library (lib/iris.cu)
#   make lib-hip build/libiris_hip.so, the same with hipcc (compile check; AMD)
#   make lib-nccl build/libiris_nccl.so: NCCL's API over iris and the real NCCL (docs/nccl_shim.md);
#                make test-nccl: its checks without a GPU; tests/nccl/gpu_shim.sh: with GPUs
#   make test-mfma  build and run the AMD MFMA GEMM core test (needs an MI200/MI300; never
#                run so far: the MFMA core is UNVERIFIED, see internal/gemm/core_mfma.h)
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
HIPCC     ?= hipcc
CC        ?= cc
CXX       ?= c++
MPI_INC   ?= /usr/lib/x86_64-linux-gnu/openmpi/include
MPI_LIB   ?= /usr/lib/x86_64-linux-gnu/openmpi/lib
B         := build

# the public headers and their bodies (internal/): a change to any rebuilds what includes them
HDRS       := $(wildcard iris*.h) $(wildcard internal/*.h internal/*/*.h)
# the GEMM cores (internals): the common core and its NVIDIA (TMA) and AMD (MFMA) specialisations
CORE       := internal/gemm/core.h internal/gemm/core_tma.h internal/core/platform.h internal/core/sys.h iris.h
CORE_MFMA  := internal/gemm/core.h internal/gemm/core_mfma.h
NVCCFLAGS  ?= -O2 -std=c++17 -arch=sm_90 -I.
# programs with the GEMM core (internal/gemm/core.h): sm_90a, so its wgmma core is compiled
GEMM_NVCCFLAGS = $(patsubst -arch=sm_90,-arch=sm_90a,$(NVCCFLAGS))
HIPFLAGS   ?= -O2 -x hip --offload-arch=gfx90a --offload-arch=gfx940 -I.
CWARN      := -Wall -Wextra -Werror -pedantic
CUDA_CFLAGS:= -I$(CUDA_HOME)/include
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lpthread

.PHONY: test test-gpu gpu-programs list-gpu-programs FORCE test-packaging test-mfma run bench bench-guard examples asm lib lib-hip lib-jax lib-nccl test-nccl clean check-c99 check-c99-impl check-c99-hip check-cxx check-include-order check-include-order-nvcc check-posix-order check-internal check-vendor-seam check-nvcc check-hipcc check-hipcc-plain check-hipcc-mfma check-codegen-ptx check-codegen-gfx90a check-codegen-gfx940

test:
	@bash tests/run.sh

# the GPU section of make test only, with binaries built beforehand (e.g. here, then carried)
test-gpu:
	@IRIS_TEST_ONLY=gpu bash tests/run.sh
# the packaging section only: make lib, its exports, the README's vendoring, CMake, pkg-config
test-packaging:
	@IRIS_TEST_ONLY=packaging bash tests/run.sh

# ---------------------------------------------------------------- compile checks
$(B):
	@mkdir -p $(B)
check-c99: | $(B)
	$(CC) -std=c99 $(CWARN) $(CUDA_CFLAGS) -I. -c tests/compile/c99_decl.c -o $(B)/c99_decl.o
check-c99-impl: | $(B)
	$(CC) -std=c99 $(CWARN) $(CUDA_CFLAGS) -I. -c tests/compile/c99_impl.c -o $(B)/c99_impl.o
check-c99-hip: | $(B)
	$(CC) -std=c99 $(CWARN) -DIRIS_USE_HIP -I. -c tests/compile/c99_impl.c -o $(B)/c99_hip.o
check-cxx: | $(B)
	$(CXX) -std=c++11 $(CWARN) $(CUDA_CFLAGS) -I. -x c++ -c tests/compile/c99_impl.c -o $(B)/cxx_impl.o
# include-then-implement (stb's rule): iris.h included, then IRIS_IMPLEMENTATION defined and
# iris.h included again, still gets the implementation: linked (C99), and for every root
# header under nvcc (fp32 SUM collectives, no GEMM core: a short build)
check-include-order: | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(CWARN) $(CUDA_CFLAGS) -I. tests/compile/include_order.c -o $(B)/include_order_c99 $(CUDA_LIBS)
# a strict C99 unit with a system header before iris.h: one #error naming the rule, not a
# wall of undeclared names (the unit must not compile)
check-posix-order: | $(B)
	@out=$$($(CC) -std=c99 $(CUDA_CFLAGS) -I. -c tests/compile/posix_order.c -o $(B)/posix_order.o 2>&1); rc=$$?; \
	n=$$(printf '%s\n' "$$out" | grep -c ': error:'); \
	if [ $$rc -ne 0 ] && [ $$n -eq 1 ] && printf '%s\n' "$$out" | grep -q 'include iris.h before any system header'; then exit 0; fi; \
	printf '%s\n' "$$out" | head -n 20; echo "exit $$rc, $$n errors: want one #error naming the rule"; exit 1
# every internal header compiles alone, including what it uses (nvcc's front end; the C
# ones also as C99 and C++11); the vendor conditionals only in the two vendor layers
check-internal: | $(B)
	bash tests/compile/internal_alone.sh
check-vendor-seam:
	bash tests/compile/vendor_seam.sh
check-include-order-nvcc: $(B)/include_order_nvcc
$(B)/include_order_nvcc: tests/compile/include_order.cu $(HDRS) | $(B)
	$(NVCC) $(CHECK_NVCCFLAGS) $(MOE_SWITCH) -DIRIS_GEMM_NO_CORE $< -o $@ -lcublasLt
# the slow compile checks are files, so that make test can build them beside the test
# programs (both cores busy) and the check itself then finds them done
check-nvcc: $(B)/all_headers_nvcc.o $(B)/max_ranks_6.o $(B)/max_ranks_64.o $(B)/rmsnorm_groups_32.o
# the device API as users call it, every nvcc warning an error (iris_fence<RELAXED> included)
check-nvcc: $(B)/device_api_nvcc.o
$(B)/device_api_nvcc.o: tests/compile/device_api.cu $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -Werror all-warnings -Xcompiler -Wall,-Wextra -c $< -o $@
# Checks that a unit compiles stop at PTX, host and device at -O0 (CHECK_NVCCFLAGS): the
# front ends see every template instantiated and NVVM lowers every kernel, which is what
# can fail there; the machine code of every kernel of the host API is make lib's (sm_90a,
# -O2). On the 2-core VM all_headers.cu takes 263 s of CPU to sm_90 at -O2 (ptxas 60-70 s
# of it at any -O), 24 s this way. Where machine code is the point, the limits ptxas
# checks (registers, shared memory at IRIS_MAX_RANKS 64, 1024-thread CTAs), the objects
# below keep NVCCFLAGS.
CHECK_NVCCFLAGS = -O0 -std=c++17 -arch=compute_90 -code=compute_90 -Xcicc -O0 -I.
$(B)/all_headers_nvcc.o: tests/compile/all_headers.cu $(HDRS) $(CORE) | $(B)
	$(NVCC) $(CHECK_NVCCFLAGS) -Xcompiler -Wall,-Wextra -c $< -o $@
# the collectives with other IRIS_MAX_RANKS values (fp32 SUM only): 6 as a compile check,
# 64 (the largest per-rank arrays) to machine code
MAX_RANKS_FLAGS = $(NVCCFLAGS)
$(B)/max_ranks_6.o: MAX_RANKS_FLAGS = $(CHECK_NVCCFLAGS)
$(B)/max_ranks_%.o: tests/compile/max_ranks.cu $(HDRS) $(CORE) | $(B)
	$(NVCC) $(MAX_RANKS_FLAGS) -Xcompiler -Wall,-Wextra -DIRIS_MAX_RANKS=$* '-DIRIS_COLL_TYPES=(1u<<IRIS_FLOAT32)' '-DIRIS_COLL_OPS=(1u<<IRIS_SUM)' -c $< -o $@
# the fused all-reduce + RMSNorm at its largest IRIS_RMSNORM_MAX_GROUPS (1024-thread CTAs; bf16 SUM only)
$(B)/rmsnorm_groups_%.o: tests/compile/max_ranks.cu $(HDRS) $(CORE) | $(B)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -Wall,-Wextra -DIRIS_RMSNORM_MAX_GROUPS=$* '-DIRIS_COLL_TYPES=(1u<<IRIS_BFLOAT16)' '-DIRIS_COLL_OPS=(1u<<IRIS_SUM)' -c $< -o $@
# Two compiles, side by side under -j. With the UNVERIFIED MFMA GEMM core, which
# instantiates the fused kernel for every A/B type, C type and B layout: to machine code for
# gfx90a and gfx940, the collectives at fp32 SUM (MOE_SWITCH), -Werror. As shipped (no AMD
# GEMM core), every type and op of the collectives: the front end and code generation to
# LLVM IR for each target, and the host side, at -O0. The kernels of the other types are
# the same code with another element type, and the AMDGPU back end takes 410 s of CPU for
# them at -O2 (-O1 nearly as long) on the 2-core VM, 15 s this way; make lib-hip builds
# them all to machine code. -O0 cannot go to machine code: ROCm's device library leaves
# target-dependent intrinsics to -O2's constant folding (gfx90a: "Cannot select: intrinsic
# permlanex16").
check-hipcc: check-hipcc-plain check-hipcc-mfma
check-hipcc-plain: $(B)/all_headers_hip.o
check-hipcc-mfma: $(B)/all_headers_hip_mfma.o
HIP_IR_FLAGS = -O0 -x hip -I. -Wall -Wextra
$(B)/all_headers_hip.o: tests/compile/all_headers.cu $(HDRS) $(CORE) $(CORE_MFMA) | $(B)
	$(HIPCC) $(HIP_IR_FLAGS) --offload-arch=gfx90a --cuda-device-only -emit-llvm -c $< -o $(B)/all_headers_hip.gfx90a.bc
	$(HIPCC) $(HIP_IR_FLAGS) --offload-arch=gfx940 --cuda-device-only -emit-llvm -c $< -o $(B)/all_headers_hip.gfx940.bc
	$(HIPCC) $(HIP_IR_FLAGS) --offload-arch=gfx90a --offload-arch=gfx940 --cuda-host-only -c $< -o $@
$(B)/all_headers_hip_mfma.o: tests/compile/all_headers.cu $(HDRS) $(CORE) $(CORE_MFMA) | $(B)
	$(HIPCC) $(HIPFLAGS) -Wall -Wextra -Werror -DIRIS_GEMM_MFMA_UNVERIFIED $(MOE_SWITCH) -c $< -o $@
check-codegen-ptx check-codegen-gfx90a check-codegen-gfx940: | $(B)
	bash tests/codegen/check.sh $(subst check-codegen-,,$@)

# ---------------------------------------------------------------- test programs
# one program over tests/host/: main.c includes every topic (tests/host/*.c) and the harness
$(B)/host_test: tests/host/main.c $(wildcard tests/host/*.c tests/host/*.h) $(HDRS) | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE -O1 -g $(CWARN) $(CUDA_CFLAGS) -I. $< -o $@ $(CUDA_LIBS)
# init/finalize cycles for valgrind (make test)
$(B)/init_cycles: tests/tools/init_cycles.c $(HDRS) | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE -O1 -g $(CWARN) $(CUDA_CFLAGS) -I. $< -o $@ $(CUDA_LIBS) -ldl
# host-only (no GPU): the fp8 conversions against CUDA's cuda_fp8.h, hence nvcc
$(B)/types_test: tests/types_test.cu tests/coll_values.h tests/test_util.h iris.h iris_collectives.h | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
# per-thread default streams: in the threaded modes several ranks may share one GPU, and
# the legacy default stream would queue one rank's kernel behind another's that waits for it
$(B)/gpu_test: tests/gpu_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -default-stream per-thread $< -o $@
$(B)/gpu_test_debug: tests/gpu_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -default-stream per-thread -DIRIS_DEBUG -DIRIS_WAIT_TIMEOUT_NS=2000000000ULL $< -o $@
# coll_test lowers the chain broadcast's threshold (512 MB) to 16 MB, so that its test
# sizes run the chain as well as the relay
$(B)/coll_test: tests/coll_test.cu tests/test_util.h tests/host_threads.h tests/coll_values.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -DIRIS_COLL_CHAIN_MIN_BYTES=16777216 $< -o $@
# all-reduce + RMSNorm: only the bf16 and fp16 sums it runs are compiled (half the time)
$(B)/fused_test: tests/fused_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) '-DIRIS_COLL_TYPES=(1 << IRIS_FLOAT16 | 1 << IRIS_BFLOAT16)' '-DIRIS_COLL_OPS=(1 << IRIS_SUM)' $< -o $@
# the same with the compile-time switch: fp32 and bf16 SUM only (the rest refused)
$(B)/coll_test_switch: tests/coll_test.cu tests/test_util.h tests/host_threads.h tests/coll_values.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -DIRIS_COLL_CHAIN_MIN_BYTES=16777216 '-DIRIS_COLL_TYPES=(1 << IRIS_FLOAT32 | 1 << IRIS_BFLOAT16)' '-DIRIS_COLL_OPS=(1 << IRIS_SUM)' $< -o $@
# multi-node collectives on one machine (virtual nodes; NCCL loaded at run time, no -lnccl)
$(B)/multinode_test: tests/multinode_test.cu tests/test_util.h tests/coll_values.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
$(B)/bench_multinode: bench/bench_multinode.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@ -lnccl
# the streams, mismatch and fault tests: a default build; make test runs it with
# IRIS_WAIT_TIMEOUT_MS=2000, so a stuck peer shows in seconds through the run-time bound
$(B)/fault_test: tests/fault_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
# teams: splits, the team barrier and device API, team collectives, faults (fp32 SUM compiled)
$(B)/team_test: tests/team_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
$(B)/tile_test: tests/tile_test.cu tests/test_util.h tests/coll_values.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
# -cudart shared: one CUDA runtime for this program and the libiris.so it loads (--lib)
$(B)/bench_coll: bench/bench_coll.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -cudart shared $< -o $@ -lnccl -lcublas -ldl
# teams against NCCL split communicators: bf16 sums only compiled in (all it calls)
$(B)/bench_team: bench/bench_team.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) '-DIRIS_COLL_TYPES=(1u<<IRIS_BFLOAT16)' '-DIRIS_COLL_OPS=(1u<<IRIS_SUM)' $< -o $@ -lnccl
# a one-GPU proxy (ranks as threads of one process) for what the fused all-reduce + RMSNorm adds to the all-reduce
$(B)/proxy_fused: tools/proxy_fused.cu $(HDRS) | $(B)
	$(NVCC) $(subst c++17,c++20,$(NVCCFLAGS)) '-DIRIS_COLL_TYPES=(1u<<IRIS_BFLOAT16)' '-DIRIS_COLL_OPS=(1u<<IRIS_SUM)' $< -o $@
$(B)/bench_tile_a2a: bench/bench_tile_a2a.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
# MoE dispatch / combine (iris_moe.h). Only fp32 SUM of the collectives is compiled in
# (IRIS_COLL_TYPES / IRIS_COLL_OPS): these programs call no other, and the unit builds in
# a fraction of the time.
MOE_SWITCH := '-DIRIS_COLL_TYPES=(1u<<IRIS_FLOAT32)' '-DIRIS_COLL_OPS=(1u<<IRIS_SUM)'
$(B)/moe_test: tests/moe_test.cu tests/test_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $(MOE_SWITCH) $< -o $@
$(B)/bench_moe: bench/bench_moe.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $(MOE_SWITCH) $< -o $@ -lnccl
$(B)/gemm_test: tests/gemm_test.cu tests/test_util.h tests/host_threads.h tests/gemm_values.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lcublasLt
# the same with a 2-s wait bound, for `gemm_test_t2 N stuck` (a stuck peer must cost one
# bound), and fetcher CTAs that start 100 ms late (the GEMM CTAs must fetch for them)
$(B)/gemm_test_t2: tests/gemm_test.cu tests/test_util.h tests/host_threads.h tests/gemm_values.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) -DIRIS_WAIT_TIMEOUT_NS=2000000000ULL -DIRIS_GEMM_FETCHER_DELAY_NS=100000000ULL $< -o $@ -lcublasLt
# GEMM + reduce-scatter / all-reduce (iris_gemm_reduce.h): every path; the fused one needs
# the TMA GEMM core (sm_90a). _nocore: the cuBLASLt paths only (IRIS_GEMM_NO_CORE), a
# shorter compile; its fused cases are skipped.
$(B)/gemm_rs_test: tests/gemm_rs_test.cu tests/test_util.h tests/host_threads.h tests/gemm_values.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lcublasLt
$(B)/gemm_rs_test_t2: tests/gemm_rs_test.cu tests/test_util.h tests/host_threads.h tests/gemm_values.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) -DIRIS_WAIT_TIMEOUT_NS=2000000000ULL $< -o $@ -lcublasLt
$(B)/gemm_rs_test_nocore: tests/gemm_rs_test.cu tests/test_util.h tests/host_threads.h tests/gemm_values.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -DGEMM_RS_TEST_NO_CORE $< -o $@ -lcublasLt
$(B)/bench_gemm_rs: bench/bench_gemm_rs.cu bench/bench_util.h bench/bench_gemm_util.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lnccl -lcublas -lcublasLt
$(B)/gemm_reduce_scatter: examples/gemm_reduce_scatter.cu $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@ -lcublasLt
$(B)/bench_ag_gemm: bench/bench_ag_gemm.cu bench/bench_util.h bench/bench_gemm_util.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lnccl -lcublas -lcublasLt
$(B)/bench_ag_gemm_trace: bench/bench_ag_gemm.cu bench/bench_util.h bench/bench_gemm_util.h $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) -DIRIS_GEMM_TRACE $< -o $@ -lnccl -lcublas -lcublasLt
$(B)/bench_rma: bench/bench_rma.cu bench/bench_util.h $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
$(B)/gemm_core_test: tests/gemm_core_test.cu tests/host_threads.h $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@
# the same test under hipcc: the AMD MFMA core (UNVERIFIED) against float64; make test only
# builds it, and runs it only where an MI200/MI300 is present
$(B)/gemm_core_test_hip: tests/gemm_core_test.cu tests/host_threads.h $(CORE_MFMA) | $(B)
	$(HIPCC) $(HIPFLAGS) -Wall -Wextra -Werror $< -o $@
test-mfma: $(B)/gemm_core_test_hip
	$(B)/gemm_core_test_hip
$(B)/bench_gemm_core: bench/bench_gemm_core.cu bench/bench_util.h $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lcublas -lcublasLt

# ---------------------------------------------------------------- GPU programs, compile proofs
# the programs the GPU section of make test runs, with the flags of their rules above (speed
# is measured with them); make test-gpu builds them first, all at once, where missing or out
# of date. A new GPU test program: its rule above, one line here, its run lines in tests/run.sh
# (and its build/NAME in run.sh's list of proofs, if make test without a GPU is to prove it builds).
GPU_PROGRAMS := \
	$(B)/gpu_test \
	$(B)/gpu_test_debug \
	$(B)/fault_test \
	$(B)/coll_test \
	$(B)/coll_test_switch \
	$(B)/fused_test \
	$(B)/team_test \
	$(B)/tile_test \
	$(B)/gemm_core_test \
	$(B)/gemm_test \
	$(B)/gemm_test_t2 \
	$(B)/gemm_rs_test \
	$(B)/gemm_rs_test_t2 \
	$(B)/moe_test \
	$(B)/multinode_test \
	$(B)/message_passing \
	$(B)/atomic_counter \
	$(B)/local_multi_gpu \
	$(B)/fused_allreduce_rmsnorm \
	$(B)/gemm_all_scatter \
	$(B)/teams_tp_dp \
	$(B)/gemm_reduce_scatter \
	$(B)/nccl_shim_test \
	$(B)/libiris.so
gpu-programs: $(GPU_PROGRAMS)
list-gpu-programs:
	@echo $(GPU_PROGRAMS)
# Compile proofs (make test on a machine without a GPU, which runs none of these programs):
# build/proof/NAME is build/NAME built by its own rule (B=build/proof) with the collectives'
# kernels cut to fp32 SUM (IRIS_COLL_TYPES / IRIS_COLL_OPS, as MOE_SWITCH), stopped at PTX
# (compute_90, the GEMM programs compute_90a) and with host and device at -O0, as
# CHECK_NVCCFLAGS: the program's own code through both front ends and NVVM, and linked. What
# they leave out is compiled elsewhere: every type and op and every device template by
# check-nvcc, machine code for every kernel of the host API by make lib (sm_90a, -O2), the
# tests' own kernels' machine code when make test-gpu builds them. On the 2-core VM -O0
# takes gemm_core_test's proof from 73 to 28 s of CPU (NVVM 53 -> 12 s).
ifeq ($(PROOF),1)
override NVCCFLAGS := $(patsubst -O2,-O0,$(patsubst -arch=sm_90,-arch=compute_90 -code=compute_90,$(NVCCFLAGS))) -Xcicc -O0 $(MOE_SWITCH)
GEMM_NVCCFLAGS = $(patsubst -code=compute_90,-code=compute_90a,$(patsubst -arch=compute_90,-arch=compute_90a,$(NVCCFLAGS)))
endif
$(B)/proof/%: FORCE
	@$(MAKE) --no-print-directory B=$(B)/proof PROOF=1 $@
FORCE:

# ---------------------------------------------------------------- shared library
# one translation unit, -O2; sm_90a code (the wgmma/TMA GEMM cores) and compute_90 PTX,
# which the driver JITs for newer GPUs. The shared CUDA runtime: the application's.
LIB_GENCODE ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
$(B)/libiris.so: lib/iris.cu $(HDRS) $(CORE) | $(B)
	$(NVCC) -O2 -std=c++17 $(LIB_GENCODE) --threads 2 -shared -Xcompiler -fPIC -cudart shared -Xlinker -soname,libiris.so $< -o $@ -lcublasLt
$(B)/libiris_hip.so: lib/iris.cu $(HDRS) $(CORE_MFMA) | $(B)
	$(HIPCC) -O2 -x hip -fPIC -shared --offload-arch=gfx90a --offload-arch=gfx940 $< -o $@
lib: $(B)/libiris.so
lib-hip: $(B)/libiris_hip.so
# libiris_nccl.so (nccl/, docs/nccl_shim.md): NCCL's API with soname libnccl.so.2, iris
# where it is faster, the real NCCL (dlopen) elsewhere. The forwarding layer is generated
# from the installed nccl.h (NCCL_INC); iris's collectives are compiled in (sm_90 code and
# compute_90 PTX), with the CUDA runtime linked statically, as NCCL's own library does.
# nccl.h: CUDA's include folder, else the system's (the GPU image has it in /usr/include)
NCCL_INC ?= $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h) $(CUDA_HOME)/include/nccl.h)))
NCCL_SHIM_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
$(B)/nccl_shim_gen.h: tools/gen_nccl_shim.py $(NCCL_INC)/nccl.h | $(B)
	python3 tools/gen_nccl_shim.py $(NCCL_INC) >$@.tmp && mv $@.tmp $@
$(B)/nccl_shim.o: nccl/shim.cc nccl/route.h nccl/iris_nccl.h $(B)/nccl_shim_gen.h $(HDRS) | $(B)
	$(CXX) -std=c++17 -O2 -fPIC -fvisibility=hidden $(CWARN) -Wno-pedantic -Wno-format-truncation -I. -I$(B) -I$(NCCL_INC) $(CUDA_CFLAGS) -c $< -o $@
$(B)/nccl_iris_impl.o: nccl/iris_impl.cu $(HDRS) | $(B)
	$(NVCC) -O2 -std=c++17 $(NCCL_SHIM_GENCODE) -Xcompiler -fPIC,-fvisibility=hidden -c $< -o $@
$(B)/libiris_nccl.so: $(B)/nccl_shim.o $(B)/nccl_iris_impl.o nccl/exports.map
	$(NVCC) -shared -Xlinker -soname,libnccl.so.2 -Xlinker --version-script=nccl/exports.map -Xlinker --no-undefined $(B)/nccl_shim.o $(B)/nccl_iris_impl.o -o $@ -ldl -lpthread
# a folder holding it as libnccl.so.2 (and libnccl.so), for LD_LIBRARY_PATH and for linking
$(B)/nccl/libnccl.so.2: $(B)/libiris_nccl.so
	@mkdir -p $(B)/nccl && ln -sf ../libiris_nccl.so $(B)/nccl/libnccl.so.2 && ln -sf libnccl.so.2 $(B)/nccl/libnccl.so
lib-nccl: $(B)/libiris_nccl.so $(B)/nccl/libnccl.so.2
# the shim's checks that need no GPU (make test runs them too)
test-nccl:
	@bash tests/nccl/cpu_checks.sh
# the shim on GPUs through NCCL's API (tests/nccl/shim_test.cu), linked against the shim
$(B)/nccl_shim_test: tests/nccl/shim_test.cu nccl/route.h nccl/iris_nccl.h $(HDRS) $(B)/nccl/libnccl.so.2
	$(NVCC) $(NVCCFLAGS) $< -o $@ -L$(B)/nccl -lnccl -Xlinker -rpath,'$$ORIGIN/nccl' -ldl -lpthread
# the XLA FFI handlers (python/jax_ffi/iris_jax.cc) over libiris.so; needs jax (its FFI headers)
JAX_FFI_INC ?= $(shell python3 -c 'import jax.ffi; print(jax.ffi.include_dir())' 2>/dev/null)
$(B)/libiris_jax.so: python/jax_ffi/iris_jax.cc iris.h iris_collectives.h $(B)/libiris.so
	@test -n "$(JAX_FFI_INC)" || { echo "make lib-jax: python3 cannot import jax.ffi (install jax, or set JAX_FFI_INC to its FFI include directory)" >&2; exit 1; }
	$(CXX) -std=c++17 -O2 -shared -fPIC -I. -isystem $(JAX_FFI_INC) $(CUDA_CFLAGS) $< -L$(B) -liris -Wl,-rpath,'$$ORIGIN' -o $@
lib-jax: $(B)/libiris_jax.so

# ---------------------------------------------------------------- examples
EXAMPLES := $(B)/message_passing $(B)/atomic_counter $(B)/local_multi_gpu $(B)/fused_allreduce_rmsnorm $(B)/gemm_all_scatter $(B)/teams_tp_dp
$(B)/gemm_all_scatter: examples/gemm_all_scatter.cu $(HDRS) $(CORE) | $(B)
	$(NVCC) $(GEMM_NVCCFLAGS) $< -o $@ -lcublasLt
$(B)/%: examples/%.cu $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) $< -o $@
$(B)/mpi_bootstrap: examples/mpi_bootstrap.cu $(HDRS) | $(B)
	$(NVCC) $(NVCCFLAGS) -I$(MPI_INC) $< -o $@ -L$(MPI_LIB) -lmpi
examples: $(EXAMPLES)

run: $(B)/message_passing
	$(B)/message_passing

bench: $(B)/bench_rma $(B)/bench_coll $(B)/bench_team $(B)/bench_tile_a2a $(B)/bench_ag_gemm $(B)/bench_gemm_rs $(B)/bench_moe
	NCCL_NVLS_ENABLE=0 $(B)/bench_rma
	NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_coll.csv BENCH_PNG=$(B)/bench_coll.png $(B)/bench_coll
	NCCL_NVLS_ENABLE=0 $(B)/bench_team
	NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_tile_a2a.csv BENCH_PNG=$(B)/bench_tile_a2a.png $(B)/bench_tile_a2a
	NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_ag_gemm.csv $(B)/bench_ag_gemm
	-python3 tools/plot_ag_gemm.py $(B)/bench_ag_gemm.csv $(B)/bench_ag_gemm.png
	NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_gemm_rs.csv $(B)/bench_gemm_rs
	NCCL_NVLS_ENABLE=0 $(B)/bench_moe
	-python3 tools/plot_gemm_rs.py $(B)/bench_gemm_rs.csv $(B)/bench_gemm_rs.png
	@# one GPU: the fused GEMM with its push epilogue against cuBLAS alone (issue target >= 0.95x)
	BENCH_CSV=$(B)/bench_gemm_rs_local.csv $(B)/bench_gemm_rs local
	-python3 tools/plot_gemm_rs.py $(B)/bench_gemm_rs_local.csv $(B)/bench_gemm_rs_local.png
	@# 2 virtual nodes x 2 ranks against NCCL alone on the same layout (needs 2+ GPUs: NCCL refuses two ranks of a host on one)
	-$(MAKE) -s $(B)/bench_multinode && NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 $(B)/bench_multinode 2 2 256M
	@# the Python bindings against torch.distributed / symmetric memory and XLA (skipped without torch / jax)
	-python3 -c 'import torch' 2>/dev/null && $(MAKE) -s lib && NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_torch.csv BENCH_PNG=$(B)/bench_torch.png PYTHONPATH=python python3 python/bench/bench_torch.py
	-python3 -c 'import torch' 2>/dev/null && NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_torch_gemm.csv PYTHONPATH=python python3 python/bench/bench_torch_gemm.py
	-python3 -c 'import jax' 2>/dev/null && $(MAKE) -s lib lib-jax && NCCL_NVLS_ENABLE=0 BENCH_CSV=$(B)/bench_jax.csv PYTHONPATH=python python3 python/bench/bench_jax.py $$(nvidia-smi -L | grep -c '^GPU')

# the speed guard (bench_coll --guard): a few sizes of every collective, graphs, iris through
# both doors against the best of NCCL and NCCL symmetric; exit status 1 on a regression
# the guard twice: buffers on the heap against the best NCCL, then cudaMalloc buffers (the
# staged paths torch, JAX and the NCCL-API library take) against NCCL on the same buffers
bench-guard: $(B)/bench_coll $(B)/libiris.so
	@f=0; NCCL_NVLS_ENABLE=0 $(B)/bench_coll 0 256M --guard --lib=$(B)/libiris.so || f=1; \
	NCCL_NVLS_ENABLE=0 BENCH_OFF_HEAP=1 $(B)/bench_coll 0 256M --guard --lib=$(B)/libiris.so || f=1; exit $$f

# registers, spills and access widths of the collective and GEMM kernels -> docs/asm_report.md
asm:
	NVCC=$(NVCC) HIPCC=$(HIPCC) python3 tools/asm_report.py

clean:
	rm -rf $(B)
