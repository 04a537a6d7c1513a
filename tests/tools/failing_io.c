/* A preloadable library that makes file-system calls fail, or the process stop, on demand,
 * for the reliability tests.
 *
 * Failing: a read-only directory, a full disk, a failing fsync. Every call on a path that
 * contains DQNTRADER_FAIL_PATH (or on a descriptor opened on such a path) fails with
 * DQNTRADER_FAIL_ERRNO (EROFS, ENOSPC or EIO) once DQNTRADER_FAIL_AFTER matching calls of
 * the kind DQNTRADER_FAIL_OP (open, write or fsync) have succeeded.
 *
 * Stopping: the call of kind DQNTRADER_STOP_OP (open for writing, write, fsync or rename) on
 * a path that contains DQNTRADER_STOP_PATH (or a descriptor opened on one) that follows
 * DQNTRADER_STOP_AFTER such calls raises SIGSTOP before it runs, so that the kill test can
 * kill the process at exactly that point of a write, whatever the machine's speed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 4096
static char watched[MAX_FD], stop_watched[MAX_FD];
static long allowed = -1;
static long stop_countdown = -1;
static int stop_armed = 0;

static const char* setting(const char* name) {
  const char* value = getenv(name);
  return value ? value : "";
}

static int failure_errno(void) {
  const char* e = setting("DQNTRADER_FAIL_ERRNO");
  if (strcmp(e, "EROFS") == 0)
    return EROFS;
  if (strcmp(e, "ENOSPC") == 0)
    return ENOSPC;
  return EIO;
}

/* Whether this matching call of kind op must fail. */
static int should_fail(const char* op) {
  if (strcmp(setting("DQNTRADER_FAIL_OP"), op) != 0)
    return 0;
  if (allowed < 0)
    allowed = atol(setting("DQNTRADER_FAIL_AFTER"));
  if (allowed > 0) {
    --allowed;
    return 0;
  }
  return 1;
}

static int contains(const char* path, const char* variable) {
  const char* pattern = setting(variable);
  return path != NULL && pattern[0] != '\0' && strstr(path, pattern) != NULL;
}

static int matches(const char* path) {
  return contains(path, "DQNTRADER_FAIL_PATH");
}

/* Stops the process (SIGSTOP) at the chosen matching call of kind op, before it runs. */
static void maybe_stop(const char* op) {
  if (strcmp(setting("DQNTRADER_STOP_OP"), op) != 0)
    return;
  if (!stop_armed) {
    stop_armed = 1;
    stop_countdown = atol(setting("DQNTRADER_STOP_AFTER"));
  }
  if (stop_countdown-- == 0)
    raise(SIGSTOP);
}

int open(const char* path, int flags, ...) {
  static int (*real)(const char*, int, ...) = NULL;
  if (!real)
    real = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open");
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list args;
    va_start(args, flags);
    mode = (mode_t)va_arg(args, int);
    va_end(args);
  }
  const int for_writing = (flags & (O_WRONLY | O_RDWR)) != 0;
  if (for_writing && contains(path, "DQNTRADER_STOP_PATH"))
    maybe_stop("open");
  if (matches(path) && for_writing && should_fail("open")) {
    errno = failure_errno();
    return -1;
  }
  const int fd = real(path, flags, mode);
  if (fd >= 0 && fd < MAX_FD) {
    watched[fd] = (char)matches(path);
    stop_watched[fd] = (char)contains(path, "DQNTRADER_STOP_PATH");
  }
  return fd;
}

/* Before a call of kind op on fd: stops the process there or makes the call fail, as asked;
 * nonzero when the call is to fail (errno set). */
static int refused(int fd, const char* op) {
  if (fd >= 0 && fd < MAX_FD && stop_watched[fd])
    maybe_stop(op);
  if (fd >= 0 && fd < MAX_FD && watched[fd] && should_fail(op)) {
    errno = failure_errno();
    return 1;
  }
  return 0;
}

ssize_t write(int fd, const void* data, size_t bytes) {
  static ssize_t (*real)(int, const void*, size_t) = NULL;
  if (!real)
    real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (refused(fd, "write"))
    return -1;
  return real(fd, data, bytes);
}

/* A gathered write is one write. */
ssize_t writev(int fd, const struct iovec* pieces, int count) {
  static ssize_t (*real)(int, const struct iovec*, int) = NULL;
  if (!real)
    real = (ssize_t(*)(int, const struct iovec*, int))dlsym(RTLD_NEXT, "writev");
  if (refused(fd, "write"))
    return -1;
  return real(fd, pieces, count);
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (!real)
    real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (refused(fd, "fsync"))
    return -1;
  return real(fd);
}

/* A closed descriptor is no longer watched: the number may be reused by a descriptor that
 * this library does not see opened (the CUDA driver's, say, which fsyncs its own files). */
int close(int fd) {
  static int (*real)(int) = NULL;
  if (!real)
    real = (int (*)(int))dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd < MAX_FD) {
    watched[fd] = 0;
    stop_watched[fd] = 0;
  }
  return real(fd);
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*) = NULL;
  if (!real)
    real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  if (contains(to, "DQNTRADER_STOP_PATH"))
    maybe_stop("rename");
  return real(from, to);
}
