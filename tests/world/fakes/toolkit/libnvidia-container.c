/* Stand-in libnvidia-container.so.1: a real shared object so ldconfig and rpm see an ordinary library. */
const char *nvc_version_string(void) { return VERSION; }
