/* Stand-in libnvidia-ml.so.1: answers the NVML entry points airgap.vllm uses from the fake state,
 * with nvml.h's struct layouts, return codes and init rules (driver not loaded, version mismatch).
 * FAKE_NVML_VERSION (the driver version this "library" belongs to) is fixed at build time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_state.h"

#ifndef FAKE_NVML_VERSION
#error "build with -DFAKE_NVML_VERSION=\"580.65.06\""
#endif

#define EXPORT __attribute__((visibility("default")))

typedef enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct fake_gpu *nvmlDevice_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_STRUCT_VERSION(s, v) (unsigned int)(sizeof(s) | ((v) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* nvmlProcessInfo_v2_t and nvmlProcessInfo_t (v3) share this layout in nvml.h */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFU

static struct fake_state st;
static int init_count;

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_ENABLED: return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Ran out of critical resources, other than memory";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "The requested frequency is not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "The provided version is invalid/unsupported";
    case NVML_ERROR_DEPRECATED: return "The requested functionality has been deprecated";
    case NVML_ERROR_NOT_READY: return "The system is not ready for the request";
    case NVML_ERROR_GPU_NOT_FOUND: return "The GPU was not found";
    case NVML_ERROR_INVALID_STATE: return "The GPU is in an invalid state";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    char err[512];
    int rc;
    (void)flags;
    if (init_count > 0) {
        init_count++;
        return NVML_SUCCESS;
    }
    rc = fake_state_load(&st, err, sizeof(err));
    if (rc == -1)                       /* no state: no kernel driver at all */
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (rc != 0) {
        fprintf(stderr, "fake libnvidia-ml: %s\n", err);
        return NVML_ERROR_UNKNOWN;
    }
    if (st.init_error)
        return (nvmlReturn_t)st.init_error;
    if (!st.kernel_module_version[0])
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (strcmp(st.kernel_module_version, FAKE_NVML_VERSION))
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    init_count = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (init_count <= 0)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

static nvmlReturn_t put_str(char *buf, unsigned int len, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buf, s);
    return NVML_SUCCESS;
}

#define NEED_INIT() do { if (init_count <= 0) return NVML_ERROR_UNINITIALIZED; } while (0)

static int valid_device(nvmlDevice_t d)
{
    return d && d >= &st.gpus[0] && d < &st.gpus[st.ngpus];
}

#define NEED_DEVICE(d) do { NEED_INIT(); if (!valid_device(d)) return NVML_ERROR_INVALID_ARGUMENT; } while (0)

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    NEED_INIT();
    return put_str(version, length, FAKE_NVML_VERSION);
}

static int cuda_version(void)
{
    return st.cuda_driver_version ? st.cuda_driver_version : 12000;
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char buf[96];
    NEED_INIT();
    snprintf(buf, sizeof(buf), "%d.%s", cuda_version() / 1000, FAKE_NVML_VERSION);
    return put_str(version, length, buf);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    NEED_INIT();
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = cuda_version();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    return nvmlSystemGetCudaDriverVersion(v);
}

/* Real NVML reads the name from /proc; the state's name stands in for pids this
 * container cannot see (a process of the simulated host). */
EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    char path[64], buf[FAKE_STR];
    FILE *f;
    unsigned int g, p;
    NEED_INIT();
    if (!name || !length)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
    f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        if (n) {
            strncpy(name, buf, length - 1);
            name[length - 1] = 0;
            return NVML_SUCCESS;
        }
    }
    for (g = 0; g < st.ngpus; g++)
        for (p = 0; p < st.gpus[g].nprocs; p++)
            if (st.gpus[g].procs[p].pid == pid && st.gpus[g].procs[p].name[0]) {
                strncpy(name, st.gpus[g].procs[p].name, length - 1);
                name[length - 1] = 0;
                return NVML_SUCCESS;
            }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    NEED_INIT();
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = st.ngpus;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    NEED_INIT();
    if (!device || index >= st.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &st.gpus[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
    NEED_DEVICE(d);
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = d->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length)
{
    NEED_DEVICE(d);
    return put_str(name, length, d->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length)
{
    NEED_DEVICE(d);
    return put_str(uuid, length, d->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    unsigned int dom = 0, bus = 0, dev = 0, fn = 0;
    NEED_DEVICE(d);
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    sscanf(d->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    pci->domain = dom;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = d->pci_subsystem_id;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", dom & 0xffff, bus, dev, fn);
    snprintf(pci->busId, sizeof(pci->busId), "%.31s", d->pci_bus_id);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    NEED_DEVICE(d);
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    m->total = d->memory_total;
    m->used = d->memory_used;
    m->free = d->memory_total - d->memory_used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    NEED_DEVICE(d);
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    m->total = d->memory_total;
    m->reserved = 0;
    m->used = d->memory_used;
    m->free = d->memory_total - d->memory_used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    NEED_DEVICE(d);
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode)
{
    NEED_DEVICE(d);
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = d->persistence_mode ? 1 : 0;
    return NVML_SUCCESS;
}

/* nvml.h: nvmlGpuFabricInfo_t (v1) and nvmlDeviceGetGpuFabricInfo, Hopper and newer on NVSwitch systems; others
 * NVML_ERROR_NOT_SUPPORTED (nvidia-smi -q prints N/A). */
typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t *info)
{
    NEED_DEVICE(d);
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->fabric_state)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof(*info));
    info->state = (unsigned char)d->fabric_state;
    info->status = NVML_SUCCESS;
    return NVML_SUCCESS;
}

/* nvml.h contract: *count too small -> NVML_ERROR_INSUFFICIENT_SIZE with *count set to what is needed. */
static nvmlReturn_t procs_common(nvmlDevice_t d, unsigned int *count, void *infos, int v1)
{
    unsigned int i;
    NEED_DEVICE(d);
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < d->nprocs) {
        *count = d->nprocs;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (d->nprocs && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < d->nprocs; i++) {
        if (v1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
            p->pid = d->procs[i].pid;
            p->usedGpuMemory = d->procs[i].used_memory;
        } else {
            nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)infos + i;
            p->pid = d->procs[i].pid;
            p->usedGpuMemory = d->procs[i].used_memory;
            p->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
            p->computeInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
        }
    }
    *count = d->nprocs;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i)
{
    return procs_common(d, c, i, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i)
{
    return procs_common(d, c, i, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
    return procs_common(d, c, i, 1);
}
