/* Stand-in nvidia-smi: like the real one it dlopens libnvidia-ml.so.1 and prints what NVML says,
 * so a version mismatch or a missing driver shows up exactly as NVML reports it.
 * Supports: default table, -L, -q (its header, each GPU's name, persistence mode and Fabric section), -i/--id,
 * --query-gpu=, --query-compute-apps=, --format=csv[,noheader][,nounits]. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef FAKE_NVML_VERSION
#error "build with -DFAKE_NVML_VERSION"
#endif

typedef int ret_t;
typedef void *dev_t_;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} mem2_t;
typedef struct {
    unsigned long long total, free, used;
} mem1_t;
typedef struct {
    unsigned char clusterUuid[16];
    ret_t status;
    unsigned int cliqueId;
    unsigned char state;
} fabric_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} proc_t;

static void *lib;
#define SYM(name) ((ret_t (*)())sym(#name))
static void *sym(const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        printf("NVIDIA-SMI: NVML function %s not found in libnvidia-ml.so.1\n", name);
        exit(13);
    }
    return f;
}

static const char *(*errstr)(ret_t);

struct gpu {
    dev_t_ h;
    unsigned int index;
    char name[96], uuid[96];
    pci_t pci;
    mem2_t mem;
    int ccmaj, ccmin, persist;
    unsigned int nprocs;
    proc_t procs[64];
};

static struct gpu gpus[64];
static unsigned int ngpus;
static char driver[80];
static int cuda;
static int noheader, nounits;

static void check(ret_t r, const char *what)
{
    if (r) {
        printf("Unable to determine the %s: %s\n", what, errstr(r));
        exit(r == 999 ? 255 : r);
    }
}

static void load(void)
{
    unsigned int i, n;
    ret_t r;
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) {
        printf("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display Driver is properly installed and present in your system.\n"
               "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n");
        exit(12);
    }
    errstr = (const char *(*)(ret_t))sym("nvmlErrorString");
    r = SYM(nvmlInit_v2)();
    if (r == 18) {
        printf("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: %s\n", FAKE_NVML_VERSION);
        exit(18);
    }
    if (r == 9) {
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n\n");
        exit(9);
    }
    if (r) {
        printf("Failed to initialize NVML: %s\n", errstr(r));
        exit(r == 999 ? 255 : r);
    }
    check(SYM(nvmlSystemGetDriverVersion)(driver, 80), "driver version");
    check(SYM(nvmlSystemGetCudaDriverVersion_v2)(&cuda), "CUDA version");
    check(SYM(nvmlDeviceGetCount_v2)(&n), "device count");
    for (i = 0; i < n && i < 64; i++) {
        struct gpu *g = &gpus[ngpus++];
        check(SYM(nvmlDeviceGetHandleByIndex_v2)(i, &g->h), "device handle");
        g->index = i;
        check(SYM(nvmlDeviceGetName)(g->h, g->name, 96), "name");
        check(SYM(nvmlDeviceGetUUID)(g->h, g->uuid, 96), "uuid");
        check(SYM(nvmlDeviceGetPciInfo_v3)(g->h, &g->pci), "PCI info");
        g->mem.version = (unsigned int)(sizeof(mem2_t) | (2U << 24));
        r = SYM(nvmlDeviceGetMemoryInfo_v2)(g->h, &g->mem);
        if (r) {
            mem1_t m1;
            check(SYM(nvmlDeviceGetMemoryInfo)(g->h, &m1), "memory info");
            g->mem.total = m1.total; g->mem.free = m1.free; g->mem.used = m1.used; g->mem.reserved = 0;
        }
        check(SYM(nvmlDeviceGetCudaComputeCapability)(g->h, &g->ccmaj, &g->ccmin), "compute capability");
        check(SYM(nvmlDeviceGetPersistenceMode)(g->h, &g->persist), "persistence mode");
        g->nprocs = 64;
        check(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(g->h, &g->nprocs, g->procs), "compute processes");
    }
}

static int validating;

static void proc_name(unsigned int pid, char *buf, unsigned int len)
{
    if (validating)
        snprintf(buf, len, "-");
    else if (SYM(nvmlSystemGetProcessName)(pid, buf, len))
        snprintf(buf, len, "[Not Found]");
}

static void mib(char *out, size_t len, unsigned long long bytes)
{
    if (bytes == ~0ULL)
        snprintf(out, len, "[N/A]");
    else
        snprintf(out, len, nounits ? "%llu" : "%llu MiB", (bytes + (1ULL << 20) - 1) >> 20); /* rounds up, as the real one */
}

/* One CSV cell for a --query-gpu field; returns the header text or NULL for an unknown field. */
static const char *gpu_field(const char *f, struct gpu *g, char *out, size_t len)
{
    if (!strcmp(f, "index")) { snprintf(out, len, "%u", g->index); return "index"; }
    if (!strcmp(f, "name") || !strcmp(f, "gpu_name")) { snprintf(out, len, "%s", g->name); return "name"; }
    if (!strcmp(f, "uuid") || !strcmp(f, "gpu_uuid")) { snprintf(out, len, "%s", g->uuid); return "uuid"; }
    if (!strcmp(f, "pci.bus_id") || !strcmp(f, "gpu_bus_id")) { snprintf(out, len, "%s", g->pci.busId); return "pci.bus_id"; }
    if (!strcmp(f, "pci.device_id")) { snprintf(out, len, "0x%08X", g->pci.pciDeviceId); return "pci.device_id"; }
    if (!strcmp(f, "pci.sub_device_id")) { snprintf(out, len, "0x%08X", g->pci.pciSubSystemId); return "pci.sub_device_id"; }
    if (!strcmp(f, "pci.domain")) { snprintf(out, len, "0x%04X", g->pci.domain); return "pci.domain"; }
    if (!strcmp(f, "pci.bus")) { snprintf(out, len, "0x%02X", g->pci.bus); return "pci.bus"; }
    if (!strcmp(f, "memory.total")) { mib(out, len, g->mem.total); return "memory.total [MiB]"; }
    if (!strcmp(f, "memory.used")) { mib(out, len, g->mem.used); return "memory.used [MiB]"; }
    if (!strcmp(f, "memory.free")) { mib(out, len, g->mem.free); return "memory.free [MiB]"; }
    if (!strcmp(f, "memory.reserved")) { mib(out, len, g->mem.reserved); return "memory.reserved [MiB]"; }
    if (!strcmp(f, "driver_version")) { snprintf(out, len, "%s", driver); return "driver_version"; }
    if (!strcmp(f, "count")) { snprintf(out, len, "%u", ngpus); return "count"; }
    if (!strcmp(f, "compute_cap")) { snprintf(out, len, "%d.%d", g->ccmaj, g->ccmin); return "compute_cap"; }
    if (!strcmp(f, "persistence_mode")) { snprintf(out, len, "%s", g->persist ? "Enabled" : "Disabled"); return "persistence_mode"; }
    return NULL;
}

static const char *app_field(const char *f, struct gpu *g, proc_t *p, char *out, size_t len)
{
    if (!strcmp(f, "pid")) { snprintf(out, len, "%u", p->pid); return "pid"; }
    if (!strcmp(f, "process_name") || !strcmp(f, "name")) { proc_name(p->pid, out, (unsigned int)len); return "process_name"; }
    if (!strcmp(f, "used_gpu_memory") || !strcmp(f, "used_memory")) { mib(out, len, p->usedGpuMemory); return "used_gpu_memory [MiB]"; }
    if (!strcmp(f, "gpu_uuid")) { snprintf(out, len, "%s", g->uuid); return "gpu_uuid"; }
    if (!strcmp(f, "gpu_name")) { snprintf(out, len, "%s", g->name); return "gpu_name"; }
    if (!strcmp(f, "gpu_bus_id")) { snprintf(out, len, "%s", g->pci.busId); return "gpu_bus_id"; }
    return NULL;
}

static int split(char *s, char **fields, int max)
{
    int n = 0;
    char *t;
    for (t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
        fields[n++] = t;
    return n;
}

static int selected(int id, struct gpu *g)
{
    return id < 0 || (unsigned int)id == g->index;
}

static void query(char *spec, int apps, int id)
{
    char *fields[64], cell[256], line[8192];
    int n = split(spec, fields, 64), k;
    unsigned int i, j;
    struct gpu dummy;
    proc_t dproc;
    memset(&dummy, 0, sizeof(dummy));
    memset(&dproc, 0, sizeof(dproc));
    /* validate all fields first, as the real tool does */
    validating = 1;
    for (k = 0; k < n; k++) {
        const char *h = apps ? app_field(fields[k], &dummy, &dproc, cell, sizeof(cell))
                             : gpu_field(fields[k], &dummy, cell, sizeof(cell));
        if (!h) {
            printf("Field \"%s\" is not a valid field to query.\n\n", fields[k]);
            exit(2);
        }
    }
    validating = 0;
    load();
    if (!noheader) {
        line[0] = 0;
        for (k = 0; k < n; k++) {
            const char *h = apps ? app_field(fields[k], &dummy, &dproc, cell, sizeof(cell))
                                 : gpu_field(fields[k], &dummy, cell, sizeof(cell));
            strcat(line, h);   /* the real tool keeps "[MiB]" in the header even with nounits */
            if (k + 1 < n) strcat(line, ", ");
        }
        printf("%s\n", line);
    }
    for (i = 0; i < ngpus; i++) {
        if (!selected(id, &gpus[i]))
            continue;
        for (j = 0; j < (apps ? gpus[i].nprocs : 1); j++) {
            line[0] = 0;
            for (k = 0; k < n; k++) {
                if (apps)
                    app_field(fields[k], &gpus[i], &gpus[i].procs[j], cell, sizeof(cell));
                else
                    gpu_field(fields[k], &gpus[i], cell, sizeof(cell));
                strncat(line, cell, sizeof(line) - strlen(line) - 3);
                if (k + 1 < n) strcat(line, ", ");
            }
            printf("%s\n", line);
        }
    }
}

/* -q: the real report's shape (580.159.04 on an H200: keys padded so ": " sits at column 55 at every depth), the
 * parts the stand-in knows: the header, each GPU's name, persistence mode and Fabric section (with its Health). */
static void query_all(int id)
{
    static const char *fstate[] = {"N/A", "Not Started", "In Progress", "Completed"};
    static const char *health[] = {"Summary", "Bandwidth", "Route Recovery in progress", "Route Unhealthy",
                                   "Access Timeout Recovery", "Incorrect Configuration", "Partition Assigned"};
    char ts[64];
    time_t now = time(NULL);
    unsigned int i, k;
    load();
    strftime(ts, sizeof(ts), "%a %b %e %H:%M:%S %Y", localtime(&now));
    printf("\n==============NVSMI LOG==============\n\n");
    printf("%-55s: %s\n%-55s: %s\n%-55s: %d.%d\n\n", "Timestamp", ts, "Driver Version", driver, "CUDA Version",
           cuda / 1000, (cuda % 1000) / 10);
    printf("%-55s: %u\n", "Attached GPUs", ngpus);
    for (i = 0; i < ngpus; i++) {
        struct gpu *g = &gpus[i];
        fabric_t f;
        ret_t r;
        int known;
        if (!selected(id, g))
            continue;
        printf("GPU %s\n", g->pci.busId);
        printf("    %-51s: %s\n", "Product Name", g->name);
        printf("    %-51s: %s\n", "Persistence Mode", g->persist ? "Enabled" : "Disabled");
        printf("    %-51s: %s\n", "GPU UUID", g->uuid);
        printf("    Fabric\n");
        memset(&f, 0, sizeof(f));
        r = SYM(nvmlDeviceGetGpuFabricInfo)(g->h, &f);
        known = !r && f.state <= 3;
        printf("        %-47s: %s\n", "State", known ? fstate[f.state] : "N/A");
        printf("        %-47s: %s\n", "Status", known && f.state == 3 ? (f.status ? errstr(f.status) : "Success") : "N/A");
        if (known)
            printf("        %-47s: %u\n        %-47s: 00000000-0000-0000-0000-000000000000\n", "CliqueId", f.cliqueId,
                   "ClusterUUID");
        else
            printf("        %-47s: N/A\n        %-47s: N/A\n", "CliqueId", "ClusterUUID");
        printf("        Health\n");
        for (k = 0; k < sizeof(health) / sizeof(health[0]); k++)
            printf("            %-43s: N/A\n", health[k]);
        printf("    %-51s: %llu MiB\n\n", "FB Memory Usage Total", (g->mem.total + (1ULL << 20) - 1) >> 20);
    }
}

static void table(int id)
{
    const char *bar = "+-----------------------------------------------------------------------------------------+";
    const char *sep = "+-----------------------------------------+------------------------+----------------------+";
    char ts[64], name[64];
    time_t now = time(NULL);
    unsigned int i, j, any = 0;
    load();
    strftime(ts, sizeof(ts), "%a %b %e %H:%M:%S %Y", localtime(&now));
    printf("%s       \n%s\n", ts, bar);
    snprintf(name, sizeof(name), "%d.%d", cuda / 1000, (cuda % 1000) / 10);
    printf("| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-8s |\n", FAKE_NVML_VERSION, driver, name);
    printf("%s\n", sep);
    printf("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n");
    printf("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n");
    printf("|                                         |                        |               MIG M. |\n");
    printf("|=========================================+========================+======================|\n");
    for (i = 0; i < ngpus; i++) {
        struct gpu *g = &gpus[i];
        char memu[64];
        if (!selected(id, g))
            continue;
        if (strlen(g->name) > 23)
            snprintf(name, sizeof(name), "%.23s...", g->name);
        else
            snprintf(name, sizeof(name), "%s", g->name);
        snprintf(memu, sizeof(memu), "%lluMiB / %lluMiB", (g->mem.used + (1ULL << 20) - 1) >> 20, (g->mem.total + (1ULL << 20) - 1) >> 20);
        printf("|%4u  %-31s%-4s|%19s Off |%21s |\n", g->index, name, g->persist ? "On" : "Off", g->pci.busId, "Off");
        printf("| N/A   30C    P8             20W /  300W | %22s |      0%%      Default |\n", memu);
        printf("|                                         |                        |                  N/A |\n");
        printf("%s\n", sep);
    }
    printf("\n%s\n", bar);
    printf("| Processes:                                                                              |\n");
    printf("|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |\n");
    printf("|        ID   ID                                                               Usage      |\n");
    printf("|=========================================================================================|\n");
    for (i = 0; i < ngpus; i++) {
        if (!selected(id, &gpus[i]))
            continue;
        for (j = 0; j < gpus[i].nprocs; j++) {
            char pname[256], usage[32];
            proc_name(gpus[i].procs[j].pid, pname, sizeof(pname));
            if (strlen(pname) > 36)
                memmove(pname + 3, pname + strlen(pname) - 33, 34), memcpy(pname, "...", 3);
            snprintf(usage, sizeof(usage), "%lluMiB", (gpus[i].procs[j].usedGpuMemory + (1ULL << 20) - 1) >> 20);
            printf("|  %3u   N/A  N/A  %14u     C   %-36s %10s |\n", gpus[i].index, gpus[i].procs[j].pid, pname, usage);
            any = 1;
        }
    }
    if (!any)
        printf("|  No running processes found                                                             |\n");
    printf("%s\n", bar);
}

int main(int argc, char **argv)
{
    char *qgpu = NULL, *qapps = NULL;
    int list = 0, id = -1, i, format_given = 0, q = 0;
    for (i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "-L") || !strcmp(a, "--list-gpus")) list = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--query")) q = 1;
        else if (!strncmp(a, "--query-gpu=", 12)) qgpu = a + 12;
        else if (!strncmp(a, "--query-compute-apps=", 21)) qapps = a + 21;
        else if (!strncmp(a, "--format=", 9)) {
            format_given = 1;
            noheader = strstr(a, "noheader") != NULL;
            nounits = strstr(a, "nounits") != NULL;
            if (strncmp(a + 9, "csv", 3)) { printf("Invalid format: %s\n", a + 9); return 2; }
        }
        else if (!strncmp(a, "--id=", 5)) id = atoi(a + 5);
        else if (!strcmp(a, "-i") && i + 1 < argc) id = atoi(argv[++i]);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("NVIDIA System Management Interface -- v%s (airgap-test stand-in)\n", FAKE_NVML_VERSION);
            return 0;
        }
        else {
            printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
            return 2;
        }
    }
    if ((qgpu || qapps) && !format_given) {
        printf("Missing --format argument, e.g. --format=csv\n\n");
        return 2;
    }
    if (qgpu) query(qgpu, 0, id);
    else if (q) query_all(id);
    else if (qapps) query(qapps, 1, id);
    else if (list) {
        unsigned int k;
        load();
        for (k = 0; k < ngpus; k++)
            if (selected(id, &gpus[k]))
                printf("GPU %u: %s (UUID: %s)\n", gpus[k].index, gpus[k].name, gpus[k].uuid);
    } else
        table(id);
    return 0;
}
