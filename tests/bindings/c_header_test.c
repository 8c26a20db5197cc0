/* chorus.h compiled as C (C99, -pedantic -Werror) and used as a C framework would: init a job
 * of one rank, register a gradient, allreduce it with a completion callback and user data,
 * wait, check the result, read the error text of bad calls, record a timeline, shut down.
 * Exit status 0 only when every check passed; each failed check prints what it saw. */
#define _POSIX_C_SOURCE 200809L /* unsetenv, mkdtemp */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chorus/chorus.h"

static int failures = 0;

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      ++failures;                                                           \
    }                                                                       \
  } while (0)

/* What the completion callback saw; one per operation, passed as user data. The callback
 * runs on a Chorus thread, possibly just after chorus_wait() returned: the test waits for it on
 * `cv` (with a deadline), as a framework hands the result to its own thread. */
struct completion {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int status;
  int64_t handle;
  char error[256];
  const float* data; /* the gradient buffer, read inside the callback */
  float first;       /* its first element at the time of the callback */
};

static void on_done(int64_t handle, int status, const char* error, void* user_data) {
  struct completion* c = (struct completion*)user_data;
  pthread_mutex_lock(&c->mu);
  c->handle = handle;
  c->status = status;
  c->first = c->data[0];
  if (error) {
    strncpy(c->error, error, sizeof c->error - 1);
    c->error[sizeof c->error - 1] = '\0';
  }
  ++c->calls;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Waits up to `seconds` for the first callback; returns the number of calls seen. */
static int await_callback(struct completion* c, int seconds) {
  struct timespec deadline;
  int calls, rc = 0;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += seconds;
  pthread_mutex_lock(&c->mu);
  while (c->calls == 0 && rc == 0) rc = pthread_cond_timedwait(&c->cv, &c->mu, &deadline);
  calls = c->calls;
  pthread_mutex_unlock(&c->mu);
  return calls;
}

/* No launcher variables may leak in: with none, chorus_init() makes a job of one rank. */
static void clear_launcher_env(void) {
  static const char* const vars[] = {"CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE",
                                     "CHORUS_RENDEZVOUS", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                     "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
                                     "SLURM_NTASKS"};
  size_t i;
  for (i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
}

/* 1 when the file at `path` holds `needle`. */
static int file_contains(const char* path, const char* needle) {
  static char text[1 << 20];
  size_t n;
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return strstr(text, needle) != NULL;
}

static void allreduce_with_callback(void) {
  float grad[6] = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  const float expect[6] = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f}; /* average over one rank */
  int64_t shape[2] = {2, 3};
  struct completion c;
  int64_t id, h;
  int st, i, calls;

  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  c.status = -1;
  c.data = grad;
  id = chorus_register("c.fc1.weight.grad");
  CHECK(id >= 0, "chorus_register: %s", chorus_last_error());
  CHECK(chorus_register("c.fc1.weight.grad") == id, "registering again gives another id");

  h = chorus_enqueue_allreduce(id, grad, shape, 2, CHORUS_FLOAT32, CHORUS_OP_AVERAGE, on_done, &c);
  CHECK(h >= 0, "chorus_enqueue_allreduce: %s", chorus_last_error());
  if (h < 0) return;
  st = chorus_wait(h, 10000);
  CHECK(st == CHORUS_OK, "chorus_wait: %s (%s)", chorus_status_name(st), chorus_error_string(h));
  CHECK(chorus_poll(h) == 1, "chorus_poll after wait");
  CHECK(strcmp(chorus_error_string(h), "") == 0, "error string of a success: '%s'", chorus_error_string(h));
  for (i = 0; i < 6; ++i) CHECK(grad[i] == expect[i], "grad[%d] = %g, expected %g", i, grad[i], expect[i]);
  calls = await_callback(&c, 10);
  CHECK(calls == 1, "callback ran %d times", calls);
  CHECK(c.status == CHORUS_OK, "callback status %d", c.status);
  CHECK(c.handle == h, "callback handle %lld, enqueue gave %lld", (long long)c.handle, (long long)h);
  CHECK(c.error[0] == '\0', "callback error '%s'", c.error);
  CHECK(c.first == expect[0], "callback saw grad[0] = %g", c.first);
  chorus_release(h);
  CHECK(chorus_poll(h) == -1, "poll of a released handle");
  pthread_cond_destroy(&c.cv);
  pthread_mutex_destroy(&c.mu);
}

static void bad_calls_have_error_texts(void) {
  double x = 1.0;
  int64_t shape[1] = {1};
  int64_t bad_shape[1] = {-4};
  int64_t id = chorus_register("c.bad.grad");
  int64_t h;

  CHECK(chorus_register("") == -1, "empty name accepted");
  CHECK(strstr(chorus_last_error(), "empty tensor name") != NULL, "'%s'", chorus_last_error());

  h = chorus_enqueue_allreduce(id, &x, bad_shape, 1, CHORUS_FLOAT64, CHORUS_OP_SUM, NULL, NULL);
  CHECK(h == -1, "negative dimension accepted");
  CHECK(strstr(chorus_last_error(), "'c.bad.grad'") != NULL, "error does not name the tensor: '%s'",
        chorus_last_error());

  h = chorus_enqueue_allreduce(987654, &x, shape, 1, CHORUS_FLOAT64, CHORUS_OP_SUM, NULL, NULL);
  CHECK(h == -1, "unregistered id accepted");
  CHECK(strstr(chorus_last_error(), "987654") != NULL, "'%s'", chorus_last_error());

  h = chorus_enqueue_allreduce(id, &x, shape, 1, (chorus_dtype)42, CHORUS_OP_SUM, NULL, NULL);
  CHECK(h == -1, "dtype 42 accepted");
  CHECK(strstr(chorus_last_error(), "dtype 42") != NULL, "'%s'", chorus_last_error());

  CHECK(chorus_wait(123456789, 0) == CHORUS_ERR_INVALID_ARGUMENT, "wait on an unknown handle");
  CHECK(strstr(chorus_error_string(123456789), "unknown") != NULL, "'%s'", chorus_error_string(123456789));
}

static void timeline(void) {
  char dir[] = "/tmp/chorus-c-header-XXXXXX";
  char path[256];
  char bad[256];
  int64_t id = chorus_register("c.timeline.grad");
  int32_t v[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  int64_t h;
  int st;

  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp failed");
    return;
  }
  snprintf(path, sizeof path, "%s/timeline.json", dir);
  snprintf(bad, sizeof bad, "%s/no/such/dir/timeline.json", dir);

  st = chorus_start_timeline(bad, 0);
  CHECK(st == CHORUS_ERR_CONFIG, "start at a bad path: %s", chorus_status_name(st));
  CHECK(strstr(chorus_last_error(), bad) != NULL, "error does not name the path: '%s'", chorus_last_error());

  st = chorus_start_timeline(path, 1);
  CHECK(st == CHORUS_OK, "chorus_start_timeline: %s", chorus_last_error());
  h = chorus_enqueue_allreduce(id, v, shape, 1, CHORUS_INT32, CHORUS_OP_SUM, NULL, NULL);
  CHECK(h >= 0, "enqueue: %s", chorus_last_error());
  if (h >= 0) {
    CHECK(chorus_wait(h, 10000) == CHORUS_OK, "wait: %s", chorus_error_string(h));
    chorus_release(h);
  }
  st = chorus_stop_timeline();
  CHECK(st == CHORUS_OK, "chorus_stop_timeline: %s", chorus_last_error());
  CHECK(file_contains(path, "\"traceEvents\""), "%s is no Chrome trace", path);
  CHECK(file_contains(path, "c.timeline.grad"), "%s does not name the tensor", path);
  CHECK(chorus_stop_timeline() == CHORUS_OK, "a second stop");
  remove(path);
  rmdir(dir);
}

int main(void) {
  int st;
  clear_launcher_env();
  CHECK(chorus_is_initialized() == 0, "initialized before chorus_init()");
  st = chorus_init();
  CHECK(st == CHORUS_OK, "chorus_init: %s: %s", chorus_status_name(st), chorus_last_error());
  if (st != CHORUS_OK) return 1;
  CHECK(chorus_rank() == 0 && chorus_size() == 1, "rank %d of %d", chorus_rank(), chorus_size());

  allreduce_with_callback();
  bad_calls_have_error_texts();
  timeline();

  chorus_shutdown();
  CHECK(chorus_is_initialized() == 0, "initialized after chorus_shutdown()");
  CHECK(chorus_start_timeline("/tmp/unused.json", 0) == CHORUS_ERR_INVALID_ARGUMENT, "timeline without init");
  CHECK(strstr(chorus_last_error(), "not initialized") != NULL, "'%s'", chorus_last_error());
  if (failures) fprintf(stderr, "c_header_test: %d check(s) failed\n", failures);
  else printf("c_header_test: all checks passed\n");
  return failures ? 1 : 0;
}
