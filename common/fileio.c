#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fsync_dir_of(const char *path)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf)
        return ovt_fail(OVT_EINVAL, "path too long: %s", path);
    strcpy(buf, path);
    const char *dir = dirname(buf);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return ovt_fail_errno(OVT_EIO, "cannot open directory %s", dir);
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL)
        return ovt_fail_errno(OVT_EIO, "fsync of directory %s failed", dir);
    return 0;
}

int ovt_write_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
    ovt_span part = {.data = data, .len = len};
    return ovt_write_atomic_parts(path, &part, 1, mode);
}

int ovt_write_atomic_parts(const char *path, const ovt_span *parts, size_t nparts, unsigned mode)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return ovt_fail(OVT_EINVAL, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return ovt_fail_errno(OVT_EIO, "cannot create %s", tmp);
    /* O_CREAT honours the umask; secrets must be exactly 0600 whatever it is. */
    if (fchmod(fd, (mode_t)mode) != 0)
        goto fail_errno;
    for (size_t k = 0; k < nparts; k++) {
        const uint8_t *p = parts[k].data;
        size_t left = parts[k].len;
        while (left > 0) {
            /* at most 64 MB per call: Linux writes at most about 2 GB at once */
            ssize_t w = write(fd, p, left < ((size_t)64 << 20) ? left : ((size_t)64 << 20));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                goto fail_errno;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0)
        goto fail_errno;
    if (close(fd) != 0) {
        fd = -1;
        goto fail_errno;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail_errno;
    return fsync_dir_of(path);

fail_errno:
    {
        int rc = ovt_fail_errno(OVT_EIO, "cannot write %s", path);
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return rc;
    }
}

int ovt_open_regular(const char *path, int *fd_out, struct stat *st)
{
    *fd_out = -1;
    /* Non-blocking open, then fstat: opening a FIFO (or a device) for
     * reading would otherwise block until a writer appears, before the
     * regular-file check could refuse it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return ovt_fail(OVT_ENOTFOUND, "%s does not exist", path);
        return ovt_fail_errno(OVT_EIO, "cannot open %s", path);
    }
    int rc = 0, flags;
    if (fstat(fd, st) != 0)
        rc = ovt_fail_errno(OVT_EIO, "cannot stat %s", path);
    else if (!S_ISREG(st->st_mode))
        rc = ovt_fail(OVT_EINVAL, "%s is not a regular file (a FIFO, device or directory is refused)", path);
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        rc = ovt_fail_errno(OVT_EIO, "cannot read %s", path);
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int ovt_read_file(const char *path, uint8_t **data, size_t *len, size_t max_len)
{
    *data = NULL;
    *len = 0;
    int fd;
    struct stat st;
    int rc = ovt_open_regular(path, &fd, &st);
    if (rc)
        return rc;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        rc = ovt_fail_errno(OVT_EIO, "cannot read %s", path);
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size > (uint64_t)max_len) {
        fclose(f);
        return ovt_fail(OVT_EFORMAT, "%s is %lld bytes, more than the %zu allowed", path,
                        (long long)st.st_size, max_len);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return ovt_fail(OVT_ENOMEM, "out of memory reading %s (%zu bytes)", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return ovt_fail(OVT_EIO, "short read on %s (%zu of %zu bytes)", path, got, size);
    }
    buf[size] = 0;
    *data = buf;
    *len = size;
    return 0;
}

int ovt_mkdirs(const char *path, unsigned mode)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return ovt_fail(OVT_EINVAL, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
                return ovt_fail_errno(OVT_EIO, "cannot create directory %s", buf);
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return ovt_fail(OVT_EIO, "%s exists and is not a directory", path);
    return 0;
}

int ovt_path_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap)
        return ovt_fail(OVT_EINVAL, "path too long: %s/%s", dir, name);
    return 0;
}
