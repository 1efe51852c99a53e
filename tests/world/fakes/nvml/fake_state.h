/* Stand-in NVIDIA stack: the simulated GPU state shared by libnvidia-ml and nvidia-smi.
 * Read from $FAKE_NVML_STATE or /etc/fake-nvidia/state.json (schema in README.md). */
#ifndef FAKE_STATE_H
#define FAKE_STATE_H

#define FAKE_MAX_GPUS 16
#define FAKE_MAX_PROCS 64
#define FAKE_STR 128

struct fake_proc {
    unsigned int pid;
    unsigned long long used_memory;
    char name[FAKE_STR];
};

struct fake_gpu {
    unsigned int index;
    char uuid[FAKE_STR];
    char name[FAKE_STR];
    char pci_bus_id[FAKE_STR];
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    unsigned long long memory_total;
    unsigned long long memory_used;
    int cc_major, cc_minor;
    int persistence_mode;
    /* NVML's nvmlGpuFabricState_t: 0 not supported (no NVSwitch, or pre-Hopper), 1 not started, 3 completed. */
    int fabric_state;
    unsigned int nprocs;
    struct fake_proc procs[FAKE_MAX_PROCS];
};

struct fake_state {
    int loaded;                 /* 0: state file missing or unreadable */
    char kernel_module_version[FAKE_STR]; /* "" = driver not loaded */
    int init_error;             /* 0 = none */
    int cuda_driver_version;
    unsigned int ngpus;
    unsigned int nvswitches;    /* the state's "nvswitches": an HGX/DGX baseboard */
    struct fake_gpu gpus[FAKE_MAX_GPUS];
};

/* Returns 0 on success, -1 when the file is missing, -2 when it is not valid state JSON. */
int fake_state_load(struct fake_state *st, char *err, int errlen);

#endif
