/* A preloadable library that makes file-system calls fail on demand, for the reliability
 * tests: a read-only directory, a full disk, a failing fsync. Every call on a path that
 * contains DQNTRADER_FAIL_PATH (or on a descriptor opened on such a path) fails with
 * DQNTRADER_FAIL_ERRNO (EROFS, ENOSPC or EIO) once DQNTRADER_FAIL_AFTER matching calls of
 * the kind DQNTRADER_FAIL_OP (open, write or fsync) have succeeded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FD 4096
static char watched[MAX_FD];
static long allowed = -1;

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

static int matches(const char* path) {
  const char* pattern = setting("DQNTRADER_FAIL_PATH");
  return path != NULL && pattern[0] != '\0' && strstr(path, pattern) != NULL;
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
  if (matches(path) && (flags & (O_WRONLY | O_RDWR)) && should_fail("open")) {
    errno = failure_errno();
    return -1;
  }
  const int fd = real(path, flags, mode);
  if (fd >= 0 && fd < MAX_FD)
    watched[fd] = (char)matches(path);
  return fd;
}

ssize_t write(int fd, const void* data, size_t bytes) {
  static ssize_t (*real)(int, const void*, size_t) = NULL;
  if (!real)
    real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (fd >= 0 && fd < MAX_FD && watched[fd] && should_fail("write")) {
    errno = failure_errno();
    return -1;
  }
  return real(fd, data, bytes);
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (!real)
    real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (fd >= 0 && fd < MAX_FD && watched[fd] && should_fail("fsync")) {
    errno = failure_errno();
    return -1;
  }
  return real(fd);
}
