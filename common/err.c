#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errmsg[1024];

static void vset(const char *fmt, va_list ap)
{
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
}

int ovt_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    return code;
}

int ovt_fail_errno(int code, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    size_t n = strlen(errmsg);
    snprintf(errmsg + n, sizeof errmsg - n, ": %s", strerror(saved));
    return code;
}

int ovt_fail_wrap(int code, const char *fmt, ...)
{
    char old[sizeof errmsg];
    memcpy(old, errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vset(fmt, ap);
    va_end(ap);
    size_t n = strlen(errmsg);
    if (old[0] != '\0')
        snprintf(errmsg + n, sizeof errmsg - n, ": %s", old);
    return code;
}

const char *ovt_errmsg(void)
{
    return errmsg;
}

const char *ovt_errname(int code)
{
    switch (code) {
    case OVT_OK: return "ok";
    case OVT_EINVAL: return "invalid";
    case OVT_EIO: return "io";
    case OVT_EFORMAT: return "format";
    case OVT_ENOMEM: return "memory";
    case OVT_EFRAUD: return "fraud";
    case OVT_ENUMERIC: return "numeric";
    case OVT_ECRYPTO: return "crypto";
    case OVT_ERPC: return "rpc";
    case OVT_ETIMEOUT: return "timeout";
    case OVT_EREVERT: return "revert";
    case OVT_ENOTFOUND: return "not-found";
    default: return "error";
    }
}

void ovt_err_clear(void)
{
    errmsg[0] = '\0';
}
