/* Minimal JSON reader for the fake NVIDIA state (objects, arrays, strings, numbers, null, bools).
 * Small on purpose: a bad state file must give a clear error, never a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "fake_state.h"
#include <unistd.h>

static int pid_alive(unsigned int pid)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/%u", pid);
    return pid > 0 && access(path, F_OK) == 0;
}

/* nvidia-persistenced runs when its pid file names a live process that is the daemon (argv[0] or, for a script, an
 * argument whose basename is nvidia-persistenced) not started with --no-persistence-mode. A killed daemon leaves
 * its pid file behind: the dead pid reads as not running, as on a real host where persistence then ends. */
static int persistenced_running(void)
{
    const char *path = getenv("FAKE_PERSISTENCED_DIR");
    char file[512], buf[4096];
    unsigned int pid = 0;
    int found = 0, off = 0;
    size_t n;
    FILE *f;
    snprintf(file, sizeof(file), "%s/nvidia-persistenced.pid", path && *path ? path : "/var/run/nvidia-persistenced");
    f = fopen(file, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%u", &pid) != 1)
        pid = 0;
    fclose(f);
    if (!pid)
        return 0;
    snprintf(file, sizeof(file), "/proc/%u/cmdline", pid);
    f = fopen(file, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    while ((size_t)off < n) {
        const char *arg = buf + off, *base = strrchr(arg, '/');
        base = base ? base + 1 : arg;
        if (!strcmp(base, "nvidia-persistenced"))
            found = 1;
        if (!strcmp(arg, "--no-persistence-mode"))
            return 0;
        off += (int)strlen(arg) + 1;
    }
    return found;
}

/* nv-fabricmanager runs when a live process's command line is it (argv[0], or argv[1] for a script run by its
 * interpreter); Fabric Manager writes no pid file. While it runs the Hopper GPUs of an NVSwitch system are registered
 * with the NVLink fabric (State Completed); without it they stay Not Started. */
#include <dirent.h>
static int fabricmanager_running(void)
{
    DIR *dir = opendir("/proc");
    struct dirent *e;
    int found = 0;
    if (!dir)
        return 0;
    while (!found && (e = readdir(dir)) != NULL) {
        char file[300], buf[1024];
        size_t n, off = 0;
        int k;
        FILE *f;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(file, sizeof(file), "/proc/%s/cmdline", e->d_name);
        f = fopen(file, "r");
        if (!f)
            continue;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        for (k = 0; k < 2 && off < n; k++) {
            const char *arg = buf + off, *base = strrchr(arg, '/');
            base = base ? base + 1 : arg;
            if (!strcmp(base, "nv-fabricmanager"))
                found = 1;
            off += strlen(arg) + 1;
        }
    }
    closedir(dir);
    return found;
}

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
    enum jtype type;
    double num;
    char *str;             /* J_STR: value; members of J_OBJ: key */
    char *key;
    struct jval *child;    /* first element/member */
    struct jval *next;     /* sibling */
};

struct parser {
    const char *p;
    int depth;
    const char *err;
};

static void skip_ws(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static struct jval *jnew(enum jtype t)
{
    struct jval *v = calloc(1, sizeof(*v));
    if (v)
        v->type = t;
    return v;
}

static void jfree(struct jval *v)
{
    while (v) {
        struct jval *n = v->next;
        jfree(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = n;
    }
}

static char *parse_string(struct parser *ps)
{
    size_t cap = 32, len = 0;
    char *out;
    if (*ps->p != '"') {
        ps->err = "expected string";
        return NULL;
    }
    ps->p++;
    out = malloc(cap);
    if (!out)
        return NULL;
    while (*ps->p && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            c = *ps->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* keep it simple: non-ASCII escapes become '?' */
                if (strlen(ps->p) < 4) { ps->err = "bad \\u escape"; free(out); return NULL; }
                ps->p += 4;
                c = '?';
                break;
            case '"': case '\\': case '/': break;
            default: ps->err = "bad escape"; free(out); return NULL;
            }
        }
        if (len + 2 > cap) {
            char *n;
            cap *= 2;
            n = realloc(out, cap);
            if (!n) { free(out); return NULL; }
            out = n;
        }
        out[len++] = c;
    }
    if (*ps->p != '"') {
        ps->err = "unterminated string";
        free(out);
        return NULL;
    }
    ps->p++;
    out[len] = 0;
    return out;
}

static struct jval *parse_value(struct parser *ps);

static struct jval *parse_container(struct parser *ps, int is_obj)
{
    struct jval *v = jnew(is_obj ? J_OBJ : J_ARR), **tail;
    char close = is_obj ? '}' : ']';
    if (!v)
        return NULL;
    tail = &v->child;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        struct jval *item;
        skip_ws(ps);
        if (is_obj) {
            key = parse_string(ps);
            if (!key) goto fail;
            skip_ws(ps);
            if (*ps->p != ':') { free(key); ps->err = "expected ':'"; goto fail; }
            ps->p++;
        }
        item = parse_value(ps);
        if (!item) { free(key); goto fail; }
        item->key = key;
        *tail = item;
        tail = &item->next;
        skip_ws(ps);
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) { ps->p++; return v; }
        ps->err = is_obj ? "expected ',' or '}'" : "expected ',' or ']'";
        goto fail;
    }
fail:
    jfree(v);
    return NULL;
}

static struct jval *parse_value(struct parser *ps)
{
    struct jval *v;
    skip_ws(ps);
    if (++ps->depth > 32) {
        ps->err = "nesting too deep";
        return NULL;
    }
    switch (*ps->p) {
    case '{': v = parse_container(ps, 1); break;
    case '[': v = parse_container(ps, 0); break;
    case '"':
        v = jnew(J_STR);
        if (v && !(v->str = parse_string(ps))) { jfree(v); v = NULL; }
        break;
    case 'n':
        if (strncmp(ps->p, "null", 4)) { ps->err = "bad literal"; return NULL; }
        ps->p += 4; v = jnew(J_NULL); break;
    case 't':
        if (strncmp(ps->p, "true", 4)) { ps->err = "bad literal"; return NULL; }
        ps->p += 4; v = jnew(J_BOOL); if (v) v->num = 1; break;
    case 'f':
        if (strncmp(ps->p, "false", 5)) { ps->err = "bad literal"; return NULL; }
        ps->p += 5; v = jnew(J_BOOL); break;
    default: {
        char *end;
        double d = strtod(ps->p, &end);
        if (end == ps->p) { ps->err = "unexpected character"; return NULL; }
        ps->p = end;
        v = jnew(J_NUM);
        if (v) v->num = d;
    }
    }
    ps->depth--;
    return v;
}

static struct jval *member(struct jval *obj, const char *key)
{
    struct jval *m;
    if (!obj || obj->type != J_OBJ)
        return NULL;
    for (m = obj->child; m; m = m->next)
        if (m->key && !strcmp(m->key, key))
            return m;
    return NULL;
}

static void copy_str(char *dst, struct jval *v)
{
    dst[0] = 0;
    if (v && v->type == J_STR) {
        strncpy(dst, v->str, FAKE_STR - 1);
        dst[FAKE_STR - 1] = 0;
    }
}

static unsigned long long as_ull(struct jval *v, unsigned long long dflt)
{
    if (!v || v->type == J_NULL)
        return dflt;
    if (v->type == J_NUM || v->type == J_BOOL) {
        if (v->num >= 18446744073709551615.0)  /* NVML_VALUE_NOT_AVAILABLE */
            return ~0ULL;
        return v->num < 0 ? dflt : (unsigned long long)v->num;
    }
    if (v->type == J_STR)   /* "0x26B110DE" style ids */
        return strtoull(v->str, NULL, 0);
    return dflt;
}

int fake_state_load(struct fake_state *st, char *err, int errlen)
{
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f;
    char *buf;
    long n;
    struct parser ps;
    struct jval *root, *gpus, *g;
    int daemon, fm;

    memset(st, 0, sizeof(*st));
    if (!path || !*path)
        path = "/etc/fake-nvidia/state.json";
    f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    buf = malloc(1 << 20);
    if (!buf) { fclose(f); return -2; }
    n = (long)fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = 0;
    ps.p = buf;
    ps.depth = 0;
    ps.err = "out of memory";
    root = parse_value(&ps);
    if (!root || root->type != J_OBJ) {
        snprintf(err, errlen, "%s: invalid JSON near offset %ld: %s", path,
                 (long)(ps.p - buf), root ? "top level is not an object" : ps.err);
        jfree(root);
        free(buf);
        return -2;
    }
    copy_str(st->kernel_module_version, member(root, "kernel_module_version"));
    st->init_error = (int)as_ull(member(root, "init_error"), 0);
    st->cuda_driver_version = (int)as_ull(member(root, "cuda_driver_version"), 0);
    gpus = member(root, "gpus");
    daemon = persistenced_running();
    {
        struct jval *sw = member(root, "nvswitches"), *x;
        st->nvswitches = 0;
        for (x = sw && sw->type == J_ARR ? sw->child : NULL; x; x = x->next)
            st->nvswitches++;
    }
    fm = st->nvswitches && fabricmanager_running();
    for (g = gpus && gpus->type == J_ARR ? gpus->child : NULL; g && st->ngpus < FAKE_MAX_GPUS; g = g->next) {
        struct fake_gpu *gp = &st->gpus[st->ngpus];
        struct jval *cc = member(g, "compute_capability"), *procs, *pr;
        gp->index = (unsigned int)as_ull(member(g, "index"), st->ngpus);
        copy_str(gp->uuid, member(g, "uuid"));
        copy_str(gp->name, member(g, "name"));
        copy_str(gp->pci_bus_id, member(g, "pci_bus_id"));
        gp->pci_device_id = (unsigned int)as_ull(member(g, "pci_device_id"), 0);
        gp->pci_subsystem_id = (unsigned int)as_ull(member(g, "pci_subsystem_id"), 0);
        gp->memory_total = as_ull(member(g, "memory_total"), 0);
        gp->memory_used = as_ull(member(g, "memory_used"), 0);
        if (gp->memory_used > gp->memory_total)
            gp->memory_used = gp->memory_total;
        if (cc && cc->type == J_ARR && cc->child && cc->child->next) {
            gp->cc_major = (int)as_ull(cc->child, 0);
            gp->cc_minor = (int)as_ull(cc->child->next, 0);
        }
        /* The state's value is the mode without the daemon (preflight's scenarios set it); the daemon turns it on. */
        gp->persistence_mode = daemon || (int)as_ull(member(g, "persistence_mode"), 0);
        gp->fabric_state = (!st->nvswitches || gp->cc_major < 9) ? 0 : fm ? 3 : 1;
        procs = member(g, "processes");
        for (pr = procs && procs->type == J_ARR ? procs->child : NULL; pr && gp->nprocs < FAKE_MAX_PROCS; pr = pr->next) {
            struct fake_proc *fp;
            unsigned int pid = (unsigned int)as_ull(member(pr, "pid"), 0);
            /* A GPU container's process (recorded by the runtime hook) holds memory only while it
             * lives, as on a real card: a stopped container's memory is free again. */
            if (member(pr, "runtime_container") && !pid_alive(pid)) {
                unsigned long long gone = as_ull(member(pr, "used_memory"), 0);
                gp->memory_used = gp->memory_used > gone ? gp->memory_used - gone : 0;
                continue;
            }
            fp = &gp->procs[gp->nprocs++];
            fp->pid = pid;
            fp->used_memory = as_ull(member(pr, "used_memory"), 0);
            copy_str(fp->name, member(pr, "name"));
        }
        st->ngpus++;
    }
    st->loaded = 1;
    jfree(root);
    free(buf);
    return 0;
}
