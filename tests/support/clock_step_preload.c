// Preloaded (LD_PRELOAD) into a redis-server by the test harness (RedisServerOptions::clock_step)
// to step its wall clock the way ntp or a restored VM does: clock_gettime(CLOCK_REALTIME and
// CLOCK_REALTIME_COARSE), gettimeofday and time answer the real time plus an offset, while
// CLOCK_MONOTONIC and every other clock are left alone, as a real step leaves them.
//
// The offset (signed 64-bit nanoseconds) is the first 8 bytes of the file named by
// DLOCK_CLOCK_STEP_FILE, mapped shared: the harness maps it too and stores a new offset
// atomically (RedisServer::step_clock), and the next reading of the clock has it. Reading it
// costs one load: no file is read, no lock taken and no memory allocated on the clock's path.
//
// Why not libfaketime: Debian's redis-server uses jemalloc, and libfaketime 0.9.10 resolves
// the real functions lazily with dlsym, whose failure path allocates; jemalloc reads the clock
// while holding a lock of its own, so the allocation deadlocks at start-up (libfaketime issue
// #130). Here the real functions are resolved in a constructor, and raw system calls stand in
// before it has run.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);
typedef int (*gettimeofday_fn)(struct timeval*, void*);

static clock_gettime_fn real_clock_gettime;
static gettimeofday_fn real_gettimeofday;
static const int64_t* offset_ns;  // the mapped file; NULL: no offset

__attribute__((constructor)) static void clock_step_init(void) {
  real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  real_gettimeofday = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
  const char* path = getenv("DLOCK_CLOCK_STEP_FILE");
  if (path == NULL) return;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  void* map = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map != MAP_FAILED) offset_ns = (const int64_t*)map;
}

static int64_t current_offset_ns(void) {
  return offset_ns == NULL ? 0 : __atomic_load_n(offset_ns, __ATOMIC_ACQUIRE);
}

static int real_time(clockid_t id, struct timespec* ts) {
  if (real_clock_gettime != NULL) return real_clock_gettime(id, ts);
  return (int)syscall(SYS_clock_gettime, id, ts);
}

static void shift(struct timespec* ts, int64_t by_ns) {
  const int64_t second = 1000000000;
  int64_t ns = ts->tv_nsec + by_ns % second;
  time_t sec = ts->tv_sec + (time_t)(by_ns / second);
  if (ns < 0) {
    ns += second;
    --sec;
  } else if (ns >= second) {
    ns -= second;
    ++sec;
  }
  ts->tv_sec = sec;
  ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  const int rc = real_time(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    shift(ts, current_offset_ns());
  }
  return rc;
}

int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  const int64_t by = current_offset_ns();
  if (by == 0) {
    if (real_gettimeofday != NULL) return real_gettimeofday(tv, tz);
    return (int)syscall(SYS_gettimeofday, tv, tz);
  }
  struct timespec now;
  if (real_time(CLOCK_REALTIME, &now) != 0) return -1;
  shift(&now, by);
  tv->tv_sec = now.tv_sec;
  tv->tv_usec = now.tv_nsec / 1000;
  if (tz != NULL) {  // obsolete: glibc zeroes it
    struct timezone* zone = (struct timezone*)tz;
    zone->tz_minuteswest = 0;
    zone->tz_dsttime = 0;
  }
  return 0;
}

time_t time(time_t* out) {
  struct timespec now;
  if (real_time(CLOCK_REALTIME, &now) != 0) return (time_t)-1;
  shift(&now, current_offset_ns());
  if (out != NULL) *out = now.tv_sec;
  return now.tv_sec;
}
