/* Host unit tests for iris.h (and the world-size arithmetic of iris_collectives.h): no
 * GPU needed.
 *
 *   make build/host_test && ./build/host_test
 *
 * Every check prints exactly one line, "PASS: <name>" or "FAIL: <name>: <reason>", on
 * stdout; the exit status is 0 iff nothing failed. Multi-rank scenarios fork one
 * process per rank; a child never prints: it reports through its exit code and a
 * shared (mmap) result slot, and the parent prints the check.
 *
 * One program and one unit: the topics are included below, in this order, because they
 * test the implementation's internal (static) functions, which exist only in the unit
 * that defines IRIS_IMPLEMENTATION (tests/host/harness.h). */
#include "harness.h"
#include "rendezvous.c"
#include "launcher.c"
#include "heap.c"
#include "config.c"
#include "tiles.c"
#include "world_size.c"
#include "launch_env.c"
#include "env.c"
#include "jobs.c"
#include "rendezvous_files.c"
#include "life_cycle.c"
#include "faults.c"
#include "multinode.c"
#include "mn_route.c"
#include "teams.c"
#include "plans.c"
#include "bounds.c"

int main(void) {
  long long t0 = now_ms();
  struct timespec ts;
  char name1[160] = "", sockpath[256];
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(55);
  signal(SIGPIPE, SIG_IGN);

  clock_gettime(CLOCK_REALTIME, &ts);
  g_seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17));
  fprintf(stderr, "# host_test: seed %llu\n", (unsigned long long)g_seed);
  g_res = (child_res_t *)mmap(NULL, sizeof *g_res * MAXR, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_res == MAP_FAILED) {
    check(0, "setup shared memory", "mmap: %s", strerror(errno));
    return 1;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/iris-host-test-XXXXXX");
  if (!mkdtemp(g_dir) || chmod(g_dir, 0700) != 0) {
    check(0, "setup private dir", "mkdtemp: %s", strerror(errno));
    return 1;
  }

  test_status_strings();

  /* rendezvous among forked ranks */
  run_success("rendezvous 2 ranks allgather", 2, -1, 0, 0, g_dir, NULL, 0);
  run_success("rendezvous 4 ranks allgather", 4, -1, 0, 0, g_dir, name1, sizeof name1);
  snprintf(sockpath, sizeof sockpath, "%s/%s.sock", g_dir, name1);
  check(access(sockpath, F_OK) != 0 && errno == ENOENT, "rendezvous leaves no socket file", "%s still exists", sockpath);
  run_success("rendezvous 2 ranks 200 collectives", 2, -1, 0, 200, g_dir, NULL, 0);
  run_success("rendezvous 4 ranks 200 collectives", 4, -1, 0, 200, g_dir, NULL, 0);
  run_success("rendezvous late rank 0", 2, 0, 300, 3, g_dir, NULL, 0);
  run_success("rendezvous late rank 3", 4, 3, 300, 3, g_dir, NULL, 0);
  test_world_rendezvous();
  test_world_missing_ranks();
  test_rendezvous_creates_dir();
  test_rendezvous_world1();
  test_rendezvous_missing_rank();
  test_rendezvous_rank1_alone();
  test_rendezvous_mismatch("rendezvous world size mismatch", 2, 3, 1ULL << 30, 1ULL << 30, "world size");
  test_rendezvous_mismatch("rendezvous world size mismatch reversed", 3, 2, 1ULL << 30, 1ULL << 30, "world size");
  test_rendezvous_mismatch("rendezvous heap size mismatch", 2, 2, 1ULL << 30, 1ULL << 31, "heap");
  test_rendezvous_bad_args();
  test_rendezvous_unsafe_dir();
  test_rendezvous_rank_leaves();
  test_rendezvous_big_gather_bounded();
  test_rendezvous_sockets_cloexec();
  test_rendezvous_out_of_step();
  test_node_grouping();
  test_node_env();
  test_tcp_rendezvous();
  test_nccl_loader();
  test_init_virtual_nodes();
  test_host_id_agree();
  test_init_host_id_some_ranks();
  test_init_big_node_cleanup();
  test_mn_route_defaults();
  test_mn_route_parser();
  test_mn_route_agreement();

  /* launcher */
  test_launcher_bad_args();
  test_launcher_bad_grace();
  test_launcher_auto();
  test_launcher_env(name1, sizeof name1);
  test_launcher_rendezvous(name1);
  test_launcher_failed_rank();
  test_launcher_signal();
  test_launcher_timeout(0);
  test_launcher_unkillable();
  test_launcher_timeout(1);
  test_launcher_wait_again();
  test_launcher_wait_lost();
  test_launcher_killed(SIGTERM);
  test_launcher_killed(SIGKILL);

  /* launchers' environments, jobs, directories, protocol */
  test_launch_env_table();
  test_launch_env_init();
  test_launch_env_bringup();
  test_size_parser();
  test_env_strict();
  test_process_token();
  test_pid_namespaces();
  test_rendezvous_dirs();
  test_error_frames();
  test_error_frame_to_rank0();
  test_stale_and_live_sockets();
  test_stalled_hello();
  test_rendezvous_full_backlog();
  test_rendezvous_dir_lock_held();
  test_rendezvous_empty_dir();
  test_rendezvous_accept_fails();
  test_tcp_resolve_bounded();
  test_hello_other_build();
  test_restarted_rank();
  test_jobs_interleavings();

  /* allocator, records, tiles */
  test_alloc_alignment();
  test_alloc_alignment_offset();
  test_alloc_random();
  test_alloc_exhaustion();
  test_alloc_errors();
  test_records();
  test_node_records();
  test_tiles();
  test_world_records();
  test_world_all_reduce_plan();
  test_world_relay_plan();
  test_world_ar_store_plan();
  test_chain_plan();
  test_staged_plan();
  test_staged_choice();
  test_ll_within_cap();
  test_sync_reached();
  test_world_ctas_staging();
  test_faults();
  test_peer_watch();
  test_coll_signature();
  test_moe_grid();
  test_plan_meet();
  test_plan_alloc_fails();
  test_group_mismatched_calls();
  test_team_plans();
  test_team_members();
  test_team_split_args();
  test_team_2d_grid();
  test_team_grid_rule();
  test_team_predefined();

  /* last: these may initialise the CUDA runtime, after which no more forks */
  test_life_cycle();
  test_config();

  remove_tree(g_dir, 0);
  fprintf(stderr, "# host_test: %d passed, %d failed, %lld ms\n", g_pass, g_fail, now_ms() - t0);
  return g_fail ? 1 : 0;
}
