/* Stand-in for nvidia.ko: an ELF object whose .modinfo section answers modinfo and depmod the way
 * the real module does (version, license, vermagic). It is never loaded: containers share the host kernel. */
#define MODINFO(tag, val) \
    __attribute__((section(".modinfo"), used, aligned(1))) static const char modinfo_##tag[] = #tag "=" val

MODINFO(version, NV_VERSION);
MODINFO(license, "Dual MIT/GPL");
MODINFO(description, "NVIDIA kernel module (test-world stand-in)");
MODINFO(name, "nvidia");
MODINFO(vermagic, KERNEL_UNAME " SMP mod_unload modversions ");
