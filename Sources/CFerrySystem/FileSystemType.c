#include "CFerrySystem.h"

#if defined(__linux__)
#include <sys/vfs.h>

long long ferry_file_system_type(int descriptor) {
    struct statfs info;
    return fstatfs(descriptor, &info) == 0 ? (long long)(unsigned int)info.f_type : -1;
}
#else
long long ferry_file_system_type(int descriptor) {
    (void)descriptor;
    return -1;
}
#endif
