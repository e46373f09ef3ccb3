#ifndef OVT_COMMON_ERR_H
#define OVT_COMMON_ERR_H

/* One error convention for the whole project: a function returns 0 on
 * success and a negative code on failure, after recording a message that the
 * caller reads with ovt_errmsg(). The message is per thread and describes the
 * most recent failure: what went wrong and, where it helps, what to do.
 * Messages never contain secrets (keys, passwords, seeds of keys). */

enum {
    OVT_OK = 0,
    OVT_EINVAL = -1,    /* bad argument or bad user input */
    OVT_EIO = -2,       /* file or network I/O failed */
    OVT_EFORMAT = -3,   /* malformed file or message */
    OVT_ENOMEM = -4,    /* allocation failed */
    OVT_EFRAUD = -5,    /* a rounding log or claim was proven false */
    OVT_ENUMERIC = -6,  /* non-finite value, diverging step */
    OVT_ECRYPTO = -7,   /* signature, key or MAC check failed */
    OVT_ERPC = -8,      /* JSON-RPC error from a node */
    OVT_ETIMEOUT = -9,  /* deadline passed, node unreachable */
    OVT_EREVERT = -10,  /* a transaction or call reverted */
    OVT_ENOTFOUND = -11 /* a file, key or object does not exist */
};

#if defined(__GNUC__)
#define OVT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define OVT_MUST_USE __attribute__((warn_unused_result))
#else
#define OVT_PRINTF(a, b)
#define OVT_MUST_USE
#endif

/* Records a formatted message and returns code (so `return ovt_fail(...)`). */
int ovt_fail(int code, const char *fmt, ...) OVT_PRINTF(2, 3);

/* Like ovt_fail, with ": strerror(errno)" appended. */
int ovt_fail_errno(int code, const char *fmt, ...) OVT_PRINTF(2, 3);

/* Prefixes the current message with more context: "context: old message".
 * Returns code. */
int ovt_fail_wrap(int code, const char *fmt, ...) OVT_PRINTF(2, 3);

/* The message of the last failure on this thread ("" if none). */
const char *ovt_errmsg(void);

/* A short name for an error code ("format", "io", ...). */
const char *ovt_errname(int code);

void ovt_err_clear(void);

#endif
