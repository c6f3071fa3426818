/* An LD_PRELOAD shim for tests/transactions.rs: counts the file-system operations that
 * change something below $TS_CRASH_DIR (opens for writing, mkdir, rename, link, unlink,
 * rmdir, fsync, fdatasync, ftruncate) and kills the process with SIGKILL just before the
 * $TS_CRASH_AT-th one. With TS_CRASH_AT=0 it only counts, and keeps the count in
 * $TS_CRASH_COUNT. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long counted;
static char crash_dir[4096], crash_count[4096];
static long crash_at;

/* Read once at load: toolsmith blanks its environment block early (so /proc/PID/environ
 * shows no secret), after which getenv finds nothing. */
__attribute__((constructor)) static void configure(void) {
    const char *d = getenv("TS_CRASH_DIR"), *c = getenv("TS_CRASH_COUNT"), *a = getenv("TS_CRASH_AT");
    if (d) snprintf(crash_dir, sizeof crash_dir, "%s", d);
    if (c) snprintf(crash_count, sizeof crash_count, "%s", c);
    crash_at = a ? atol(a) : 0;
}

static const char *dir(void) {
    return crash_dir[0] ? crash_dir : NULL;
}

static int under(const char *path) {
    const char *d = dir();
    return d && path && strstr(path, d) != NULL;
}

static int fd_under(int fd) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return under(target);
}

static int at_under(int dirfd, const char *path) {
    if (path && path[0] == '/') return under(path);
    if (dirfd == AT_FDCWD) {
        char cwd[4096];
        return getcwd(cwd, sizeof cwd) && under(cwd);
    }
    return fd_under(dirfd);
}

/* The count so far, written at each operation: the process may end with _exit. */
static void report(long n) {
    if (!crash_count[0]) return;
    FILE *file = fopen(crash_count, "w");
    if (file) { fprintf(file, "%ld\n", n); fclose(file); }
}

static void point(int relevant) {
    if (!relevant) return;
    long n = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
    if (crash_at == n) raise(SIGKILL);
    report(n);
}

#define NEXT(name) static __typeof__(name) *real; if (!real) real = dlsym(RTLD_NEXT, #name)

static int writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

int open(const char *path, int flags, ...) {
    va_list args; va_start(args, flags); mode_t mode = va_arg(args, mode_t); va_end(args);
    NEXT(open); point(writes(flags) && under(path)); return real(path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    va_list args; va_start(args, flags); mode_t mode = va_arg(args, mode_t); va_end(args);
    NEXT(open64); point(writes(flags) && under(path)); return real(path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    va_list args; va_start(args, flags); mode_t mode = va_arg(args, mode_t); va_end(args);
    NEXT(openat); point(writes(flags) && at_under(dirfd, path)); return real(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    va_list args; va_start(args, flags); mode_t mode = va_arg(args, mode_t); va_end(args);
    NEXT(openat64); point(writes(flags) && at_under(dirfd, path)); return real(dirfd, path, flags, mode);
}
int mkdir(const char *path, mode_t mode) { NEXT(mkdir); point(under(path)); return real(path, mode); }
int mkdirat(int dirfd, const char *path, mode_t mode) { NEXT(mkdirat); point(at_under(dirfd, path)); return real(dirfd, path, mode); }
int rename(const char *from, const char *to) { NEXT(rename); point(under(from) || under(to)); return real(from, to); }
int renameat(int fromfd, const char *from, int tofd, const char *to) { NEXT(renameat); point(at_under(fromfd, from) || at_under(tofd, to)); return real(fromfd, from, tofd, to); }
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) { NEXT(renameat2); point(at_under(fromfd, from) || at_under(tofd, to)); return real(fromfd, from, tofd, to, flags); }
int link(const char *from, const char *to) { NEXT(link); point(under(to)); return real(from, to); }
int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) { NEXT(linkat); point(at_under(tofd, to)); return real(fromfd, from, tofd, to, flags); }
int unlink(const char *path) { NEXT(unlink); point(under(path)); return real(path); }
int unlinkat(int dirfd, const char *path, int flags) { NEXT(unlinkat); point(at_under(dirfd, path)); return real(dirfd, path, flags); }
int rmdir(const char *path) { NEXT(rmdir); point(under(path)); return real(path); }
int fsync(int fd) { NEXT(fsync); point(fd_under(fd)); return real(fd); }
int fdatasync(int fd) { NEXT(fdatasync); point(fd_under(fd)); return real(fd); }
int ftruncate(int fd, off_t length) { NEXT(ftruncate); point(fd_under(fd)); return real(fd, length); }
