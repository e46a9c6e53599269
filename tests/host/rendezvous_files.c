/* tests/host/rendezvous_files.c: the rendezvous's files and frames: directories, ERROR frames, stale and live sockets, a hello of another build. */
#include "harness.h"

/* ------------------------------------------------ rendezvous directories -- */
static void test_rendezvous_dirs(void) {
  char dir[160], sub[200], name[80];
  iris_rendezvous_params_t p;
  unique_name(name, sizeof name, "dirs");
  /* owned by someone else: root can make one; anyone else can use / (root's) */
  if (getuid() == 0) {
    snprintf(dir, sizeof dir, "%s/foreign", g_dir);
    if (mkdir(dir, 0700) != 0 || chown(dir, 12345, 12345) != 0) {
      check(0, "rendezvous dir of another user", "cannot prepare %s: %s", dir, strerror(errno));
      return;
    }
  } else {
    snprintf(dir, sizeof dir, "/");
  }
  set_params(&p, name, dir, 0, 2, 1000, 0);
  expect_open("rendezvous dir of another user refused (rank 0)", &p, 0, IRIS_ERROR_PERMISSION);
  check(has(iris_error_detail(), "IRIS_RENDEZVOUS_DIR") && has(iris_error_detail(), "belongs to uid"), "rendezvous dir of another user names IRIS_RENDEZVOUS_DIR",
        "'%s'", iris_error_detail());
  set_params(&p, name, dir, 1, 2, 1000, 0);
  expect_open("rendezvous dir of another user refused (rank 1)", &p, 0, IRIS_ERROR_PERMISSION);
  if (getuid() == 0) rmdir(dir);
  /* a parent that others may write (not sticky) */
  snprintf(dir, sizeof dir, "%s/open2", g_dir);
  snprintf(sub, sizeof sub, "%s/priv", dir);
  if (mkdir(dir, 0777) != 0 || chmod(dir, 0777) != 0) {
    check(0, "rendezvous dir under a world-writable parent refused", "mkdir %s: %s", dir, strerror(errno));
    return;
  }
  set_params(&p, name, sub, 0, 2, 1000, 0);
  expect_open("rendezvous dir under a world-writable parent refused", &p, 0, IRIS_ERROR_PERMISSION);
  check(has(iris_error_detail(), dir) && has(iris_error_detail(), "writable by other users"), "rendezvous dir parent check names the parent", "'%s'",
        iris_error_detail());
  /* ... but a sticky one (like /tmp) is fine */
  chmod(dir, 01777);
  run_success("rendezvous dir under a sticky world-writable parent", 2, -1, 0, 1, sub, NULL, 0);
  remove_tree(dir, 0);
  /* the default: $XDG_RUNTIME_DIR/iris when set */
  snprintf(dir, sizeof dir, "%s/xdg", g_dir);
  snprintf(sub, sizeof sub, "%s/iris", dir);
  if (mkdir(dir, 0700) == 0) {
    struct stat st;
    const char *old = getenv("IRIS_RENDEZVOUS_DIR");
    char saved[256];
    snprintf(saved, sizeof saved, "%s", old ? old : "");
    unsetenv("IRIS_RENDEZVOUS_DIR");
    setenv("XDG_RUNTIME_DIR", dir, 1);
    run_success("rendezvous default dir is $XDG_RUNTIME_DIR/iris", 2, -1, 0, 1, NULL, NULL, 0);
    check(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "rendezvous created $XDG_RUNTIME_DIR/iris 0700", "lstat %s", sub);
    unsetenv("XDG_RUNTIME_DIR");
    if (old) setenv("IRIS_RENDEZVOUS_DIR", saved, 1);
    remove_tree(dir, 0);
  }
}

/* ---------------------------------------------- a peer's ERROR frames -- */
/* A fake rank 0 at <g_dir>/<name>.sock: answers the hello (phase 0), or welcomes and
 * answers the first collective (phase 1), with an ERROR frame of the given status. */
typedef struct fake_arg {
  const char *name;
  int phase, status;
} fake_arg_t;

static int fake_rank0(int rank, void *argp) {
  const fake_arg_t *a = (const fake_arg_t *)argp;
  struct sockaddr_un addr;
  iris_detail_frame_t f;
  iris_detail_hello_t h;
  char buf[256];
  long long dl = now_ms() + 4000;
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fd;
  (void)rank;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%.50s/%.45s.sock", g_dir, a->name);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 4) != 0) return 2;
  fd = accept(lfd, NULL, NULL);
  if (fd < 0 || iris_detail_recv_header(fd, &f, dl) || iris_detail_io(fd, &h, sizeof h, dl, 0)) return 3;
  if (a->phase == 1) {
    if (iris_detail_send_frame(fd, IRIS_DETAIL_WELCOME, 0, 0, 0, NULL, 0, dl)) return 4;
    if (iris_detail_recv_header(fd, &f, dl) || (f.len && f.len < sizeof buf && iris_detail_io(fd, buf, (size_t)f.len, dl, 0))) return 5;
  }
  snprintf(buf, sizeof buf, "all is well (fake, status %d)", a->status);
  iris_detail_send_frame(fd, IRIS_DETAIL_ERROR, 0, a->status, f.seq, buf, strlen(buf) + 1, dl);
  sleep_ms(300);
  close(fd);
  close(lfd);
  unlink(addr.sun_path);
  return 0;
}

static void test_error_frames(void) {
  static const int statuses[] = {0, -5, IRIS_STATUS_COUNT, 99, IRIS_ERROR_MISMATCH};
  int phase, i;
  for (phase = 0; phase < 2; phase++)
    for (i = 0; i < (int)(sizeof statuses / sizeof statuses[0]); i++) {
      char name[80], nm[120];
      fake_arg_t a;
      pid_t pid;
      iris_rendezvous_params_t p;
      iris_rendezvous_t *r = NULL;
      iris_status_t st, want = statuses[i] == IRIS_ERROR_MISMATCH ? IRIS_ERROR_MISMATCH : IRIS_ERROR_SYSTEM;
      unsigned char one = 1, table[2];
      int status = 0;
      unique_name(name, sizeof name, "fake");
      a.name = name, a.phase = phase, a.status = statuses[i];
      fflush(stdout);
      pid = fork();
      if (pid == 0) _exit(fake_rank0(0, &a));
      set_params(&p, name, g_dir, 1, 2, 3000, 1ULL << 30);
      st = iris_rendezvous_open(&p, &r);
      if (phase == 1 && st == IRIS_SUCCESS) {
        st = iris_rendezvous_allgather(r, &one, table, 1);
        iris_rendezvous_close(r);
        r = NULL;
      }
      waitpid(pid, &status, 0);
      snprintf(nm, sizeof nm, "peer ERROR frame with status %d at %s is %s", statuses[i], phase ? "an allgather" : "bring-up",
               want == IRIS_ERROR_SYSTEM ? "a protocol error" : "that error");
      check(st == want && r == NULL && (want != IRIS_ERROR_SYSTEM || has(iris_error_detail(), "protocol error")), nm, "%s: '%s' (fake rank 0 exit %d)",
            sname(st), iris_error_detail(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* Rank 1 fails after bring-up and says so (an ERROR frame where its GATHER was due):
 * rank 0's allgather reports that rank's failure and status, not "out of step". */
static void test_error_frame_to_rank0(void) {
  char name[80];
  pid_t pid;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  unsigned char one = 1, table[2];
  int status = 0;
  unique_name(name, sizeof name, "errto0");
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    static const char msg[] = "rank 1: out of GPU memory (fake)";
    set_params(&p, name, g_dir, 1, 2, 3000, 1ULL << 30);
    if (iris_rendezvous_open(&p, &r) != IRIS_SUCCESS) _exit(2);
    iris_detail_send_frame(r->fds[0], IRIS_DETAIL_ERROR, 1, (int)IRIS_ERROR_OUT_OF_MEMORY, 1, msg, sizeof msg, now_ms() + 2000);
    sleep_ms(300);
    iris_rendezvous_close(r);
    _exit(0);
  }
  set_params(&p, name, g_dir, 0, 2, 3000, 1ULL << 30);
  st = iris_rendezvous_open(&p, &r);
  if (st == IRIS_SUCCESS) {
    st = iris_rendezvous_allgather(r, &one, table, 1);
    iris_rendezvous_close(r);
  }
  waitpid(pid, &status, 0);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && has(iris_error_detail(), "rank 1 failed") && has(iris_error_detail(), "out of GPU memory (fake)"),
        "rank 0: a peer's ERROR frame where a GATHER was due is that peer's failure, not a mismatch", "%s: '%s' (rank 1 exit %d)", sname(st),
        iris_error_detail(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* A rank restarted during bring-up: its first process said hello and was killed, a new
 * process of the same rank connects. Rank 0 takes the new connection in place of the
 * closed one and the world forms (a barrier over it passes). Two live processes that
 * claim one rank still fail every rank at once. */
static pid_t fork_generic(gen_arg_t *a, int rank) {
  pid_t pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid == 0) _exit(child_generic(rank, a));
  return pid;
}
static int child_exit(pid_t pid) {
  int st = 0;
  if (pid <= 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
static void test_restarted_rank(void) {
  char name[80], path[256];
  gen_arg_t a;
  pid_t r0, first, again, r2;
  int c0, c1, c2, c1b;
  long long t0;
  unique_name(name, sizeof name, "restart");
  snprintf(path, sizeof path, "%s/%s.sock", g_dir, name);
  gen_init(&a, name, 3, 6000);
  a.barrier_after = 1;
  r0 = fork_generic(&a, 0);
  first = wait_for_path(path, 3000) ? fork_generic(&a, 1) : -1;
  sleep_ms(300); /* its hello is in; rank 0 waits for rank 2 */
  if (first > 0) kill(first, SIGKILL);
  c1b = child_exit(first);
  again = fork_generic(&a, 1);
  sleep_ms(100);
  r2 = fork_generic(&a, 2);
  c0 = child_exit(r0), c1 = child_exit(again), c2 = child_exit(r2);
  check(first > 0 && c1b == 128 + SIGKILL && c0 == 0 && c1 == 0 && c2 == 0,
        "rendezvous: a rank restarted during bring-up (its first process killed after its hello) takes its place; the world forms",
        "exit codes: first rank 1 %d, rank 0 %d, rank 1 again %d, rank 2 %d (0: open and barrier passed)", c1b, c0, c1, c2);
  /* two live processes of rank 1 */
  unique_name(name, sizeof name, "twolive");
  snprintf(path, sizeof path, "%s/%s.sock", g_dir, name);
  gen_init(&a, name, 3, 6000);
  t0 = now_ms();
  r0 = fork_generic(&a, 0);
  first = wait_for_path(path, 3000) ? fork_generic(&a, 1) : -1;
  sleep_ms(300);
  again = fork_generic(&a, 1);
  c0 = child_exit(r0), c1 = child_exit(first), c1b = child_exit(again);
  check(first > 0 && c0 == IRIS_ERROR_MISMATCH && c1 != 0 && c1b != 0 && now_ms() - t0 < 4000,
        "rendezvous: two live processes claiming one rank fail every rank at once (IRIS_ERROR_MISMATCH at rank 0)",
        "exit codes: rank 0 %s, the two rank 1s %d and %d, after %lld ms", sname((iris_status_t)c0), c1, c1b, now_ms() - t0);
}

/* A hello of another size (another build of iris) is answered with a reason. */
static void test_hello_other_build(void) {
  char name[80], path[256];
  gen_arg_t a;
  pid_t pid;
  iris_detail_frame_t f;
  char junk[24], msg[1100];
  int fd = -1, ok = 0, status = 0;
  long long dl;
  msg[0] = 0;
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "build", 800)) > 0) {
    fd = connect_unix(path, 2000);
    dl = now_ms() + 2000;
    memset(junk, 0, sizeof junk);
    if (fd >= 0 && iris_detail_send_frame(fd, IRIS_DETAIL_HELLO, 1, 0, 0, junk, sizeof junk, dl) == 0 && iris_detail_recv_header(fd, &f, dl) == 0)
      ok = f.type == IRIS_DETAIL_ERROR && f.status == IRIS_ERROR_MISMATCH;
    snprintf(msg, sizeof msg, "%s", iris_error_detail());
  }
  if (fd >= 0) close(fd);
  if (pid > 0) waitpid(pid, &status, 0);
  check(ok && has(msg, "different builds"), "a hello of another size gets a reason", "answer ok %d, message '%s'", ok, msg);
}
